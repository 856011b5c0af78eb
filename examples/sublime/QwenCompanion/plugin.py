"""Qwen Companion for Sublime Text 4: makes each window a Qwen Code IDE companion.

One companion (MCP server + lock file) per window, fed with the window's
folders and its file views; Qwen Code's proposed edits open as scratch views
(Accept / Reject); ``Qwen Companion: Terminal Environment`` gives the
``export QWEN_CODE_IDE_SERVER_PORT=...`` lines, and Terminus terminals get
them automatically.

Threading: the companion's open-diff / close-diff / log callables run on a
library thread. They only record state, read buffer text (Sublime's API is
thread-safe) and hand every UI change to the main thread with
``sublime.set_timeout``; they never wait for the main thread, which may be
closing the companion at that moment.

Runs in the Python 3.8 plugin host (see ``.python-version``); the
``qwen_companion`` binding is pure Python over ctypes, found as explained in
README.md (importable already, ``binding_path`` setting, vendored under
``vendor/``, or the repository's ``bindings/python`` in a development
checkout).
"""

import os
import sys
import threading

import sublime
import sublime_plugin

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
SETTINGS_FILE = "QwenCompanion.sublime-settings"

# View settings of a proposed-diff view.
DIFF_PATH = "qwen_companion_diff_path"  # the file the diff proposes to change
IS_DIFF = "qwen_companion_is_diff"  # true: key bindings' context
DIFF_WINDOW = "qwen_companion_window"  # id of the window whose companion owns it

LOG_PREFIX = "Qwen Companion: "

#: How often (ms) windows are checked for folder changes, renamed files and
#: closed windows: Sublime Text has no event for a folder added through a
#: dialog, so events are backed by this light poll.
POLL_MS = 2000

#: Selected text read per caret move is capped a little above what Qwen Code
#: keeps (16384 UTF-16 units), so a huge selection is never copied whole; the
#: library still sees it is too long and marks it "... [TRUNCATED]".
MAX_SELECTION_CHARS = 16400

_lock = threading.RLock()
_companions = {}  # window id -> WindowCompanion
_qc = None  # the imported qwen_companion module
_poll_generation = [0]


def log(message):
    print(LOG_PREFIX + message)


def settings():
    return sublime.load_settings(SETTINGS_FILE)


# --------------------------------------------------------------------------
# the binding


def _binding_dirs():
    dirs = []
    configured = settings().get("binding_path")
    if configured:
        dirs.append(os.path.expanduser(configured))
    dirs.append(os.path.join(PACKAGE_DIR, "vendor"))
    # Development checkout: the package folder is (a symlink to)
    # <repo>/examples/sublime/QwenCompanion.
    real = os.path.dirname(os.path.realpath(__file__))
    dirs.append(os.path.normpath(os.path.join(real, "..", "..", "..", "bindings", "python")))
    return dirs


def import_binding():
    """Imports ``qwen_companion``: already importable (e.g. a Package Control
    dependency), else from ``binding_path``, ``vendor/`` or the repository."""
    global _qc
    if _qc is not None:
        return _qc
    try:
        import qwen_companion  # noqa: F401
    except ImportError:
        for d in _binding_dirs():
            if os.path.isdir(os.path.join(d, "qwen_companion")):
                if d not in sys.path:
                    sys.path.insert(0, d)
                break
        import qwen_companion  # raises ImportError with the standard message
    _qc = sys.modules["qwen_companion"]
    return _qc


# --------------------------------------------------------------------------
# helpers


def file_path(view):
    """The path of a view backed by a regular file on disk, else None."""
    if view is None or not view.is_valid():
        return None
    if view.settings().get(IS_DIFF):
        return None
    name = view.file_name()
    if name and os.path.isfile(name):
        return name
    return None


def selected_text(view, regions):
    """The selected text of ``regions`` (joined by newlines), capped."""
    parts = []
    left = MAX_SELECTION_CHARS
    for r in regions:
        if r.empty():
            continue
        if left <= 0:
            break
        end = min(r.end(), r.begin() + left)
        parts.append(view.substr(sublime.Region(r.begin(), end)))
        left -= end - r.begin() + 1
    return "\n".join(parts)


def window_by_id(window_id):
    for w in sublime.windows():
        if w.id() == window_id:
            return w
    return None


def view_text(view):
    return view.substr(sublime.Region(0, view.size()))


def read_file(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except (OSError, IOError):
        return ""


def close_view(view):
    if view is None or not view.is_valid():
        return
    view.set_scratch(True)  # never ask to save a proposal
    if hasattr(view, "close"):
        view.close()
    else:  # Sublime Text 3
        window = view.window()
        if window is not None:
            window.focus_view(view)
            window.run_command("close_file")


class DiffState(object):
    """One proposed diff, shared by the library thread and the UI thread
    (always under WindowCompanion.diff_lock)."""

    def __init__(self, path, proposed):
        self.path = path
        self.proposed = proposed
        self.crlf = "\r\n" in proposed
        self.view = None  # the scratch view, once the UI thread made it


class WindowCompanion(object):
    """The companion of one window plus the window's editor state."""

    def __init__(self, window):
        qc = import_binding()
        s = settings()
        self.window_id = window.id()
        self.folders = list(window.folders())
        self.diff_lock = threading.Lock()
        self.diffs = {}  # path -> DiffState
        self.tracked = {}  # view id -> path last reported for it
        self.active = None  # path reported as focused
        config = {}
        lock_dir = s.get("lock_dir")
        if lock_dir:
            config["lock_dir"] = os.path.expanduser(lock_dir)
        for key in ("debounce_ms", "max_wait_ms"):
            if s.get(key) is not None:
                config[key] = s.get(key)
        self.log_level = int(s.get("log_level", qc.LOG_WARN))
        self.companion = qc.Companion(
            workspace_roots=self.folders,
            ide_name=s.get("ide_name") or "Sublime Text",
            ide_id=s.get("ide_id") or "sublime-text",
            open_diff=self._on_open_diff,
            close_diff=self._on_close_diff,
            log=self._on_log,
            log_level=max(1, min(5, self.log_level)),
            library=s.get("library_path") or None,
            **config
        )

    # -- library thread -------------------------------------------------

    def _on_log(self, level, message):
        if level <= self.log_level:
            log(message)

    def _on_open_diff(self, path, new_content):
        """Library thread: record the proposal; the UI thread shows it."""
        if window_by_id(self.window_id) is None:
            raise _qc.RefuseDiff("the Sublime Text window is closed")
        with self.diff_lock:
            state = self.diffs.get(path)
            if state is None:
                state = self.diffs[path] = DiffState(path, new_content)
            else:  # a new proposal for a file whose diff is still open
                state.proposed = new_content
                state.crlf = "\r\n" in new_content
        sublime.set_timeout(lambda: self.show_diff(path), 0)

    def _on_close_diff(self, path):
        """Library thread: the CLI closes the diff; answer with the buffer text."""
        with self.diff_lock:
            state = self.diffs.pop(path, None)
        if state is None:
            return None
        view = state.view
        text = state.proposed
        if view is not None and view.is_valid():
            text = self._final_text(view, state)  # reading is thread-safe
        sublime.set_timeout(lambda: close_view(view), 0)
        return text

    # -- UI thread ------------------------------------------------------

    def window(self):
        return window_by_id(self.window_id)

    def close(self):
        with self.diff_lock:
            views = [d.view for d in self.diffs.values()]
            self.diffs.clear()
        self.companion.close()
        for v in views:
            close_view(v)

    def refresh_roots(self, window=None):
        window = window or self.window()
        if window is None:
            return
        folders = list(window.folders())
        if folders != self.folders:
            self.companion.set_workspace_roots(folders)
            self.folders = folders
            log("workspace folders: {}".format(", ".join(folders) or "(none)"))

    def show_diff(self, path):
        with self.diff_lock:
            state = self.diffs.get(path)
            if state is None:  # already closed by the CLI
                return
            proposed, crlf, view = state.proposed, state.crlf, state.view
        window = self.window()
        if window is None:
            self._forget_diff(path)
            self._report("diff_closed", path)
            return
        if view is None or not view.is_valid():
            view = window.new_file()
            view.set_scratch(True)
            view.settings().set(IS_DIFF, True)
            view.settings().set(DIFF_PATH, path)
            view.settings().set(DIFF_WINDOW, self.window_id)
            view.set_name("Proposed: " + os.path.basename(path))
            if hasattr(sublime, "find_syntax_for_file"):
                syntax = sublime.find_syntax_for_file(path)
                if syntax is not None:
                    view.assign_syntax(syntax)
        text = proposed.replace("\r\n", "\n") if crlf else proposed
        view.run_command("qwen_companion_set_content", {"text": text})
        if crlf:
            view.set_line_endings("windows")
        if hasattr(view, "set_reference_document"):
            # Sublime Text 4: the gutter and inline diff show the change
            # against the file as it is on disk.
            original = read_file(path)
            view.set_reference_document(original.replace("\r\n", "\n"))
        with self.diff_lock:
            current = self.diffs.get(path)
            if current is state:
                state.view = view
            else:  # closed by the CLI while we built the view
                view = None
        if view is None:
            return
        window.focus_view(view)
        keys = settings().get("accept_reject_hint", "ctrl+alt+y / ctrl+alt+n")
        window.status_message(
            "Qwen Code proposes changes to {}: Accept or Reject ({})".format(os.path.basename(path), keys)
        )

    def _final_text(self, view, state):
        text = view_text(view)
        return text.replace("\n", "\r\n") if state.crlf else text

    def _forget_diff(self, path):
        with self.diff_lock:
            return self.diffs.pop(path, None)

    def decide(self, view, accept):
        """Accept (with the buffer text, edits included) or reject the diff shown in ``view``."""
        path = view.settings().get(DIFF_PATH)
        state = self._forget_diff(path)
        if state is None:
            sublime.status_message("Qwen Code no longer waits for this diff")
        elif accept:
            self._report("diff_accept", path, self._final_text(view, state))
        else:
            self._report("diff_reject", path)
        view.settings().set(IS_DIFF, False)  # decided: closing it is not a diffClosed
        close_view(view)

    def diff_view_closing(self, view):
        """The user closed a diff view without deciding."""
        path = view.settings().get(DIFF_PATH)
        with self.diff_lock:
            state = self.diffs.get(path)
            if state is None or state.view is None or state.view.id() != view.id():
                return
            del self.diffs[path]
        self._report("diff_closed", path)

    def _report(self, method, *args):
        try:
            getattr(self.companion, method)(*args)
        except _qc.CompanionError as e:
            log("{} failed: {}".format(method, e))

    # -- editor events (UI thread) --------------------------------------

    def sync_view(self, view):
        """Reports a new or renamed file view; returns its path (or None)."""
        path = file_path(view)
        old = self.tracked.get(view.id())
        if path is None:
            return None
        if old is None:
            self.tracked[view.id()] = path
            self.companion.file_opened(path)
        elif old != path:
            self.tracked[view.id()] = path
            self.companion.file_renamed(old, path)
            if self.active == old:
                self.active = path
        return path

    def view_activated(self, view):
        path = self.sync_view(view)
        if path is None:
            return
        if path != self.active:
            self.active = path
            self.companion.file_focused(path)
        self.selection_changed(view)

    def view_closing(self, view):
        path = self.tracked.pop(view.id(), None)
        if path is None:
            return
        if path in self.tracked.values():
            return  # another view (clone) still shows it
        if self.active == path:
            self.active = None
        self.companion.file_closed(path)

    def selection_changed(self, view):
        path = file_path(view)
        if path is None or self.tracked.get(view.id()) != path:
            return
        window = view.window()
        active = window.active_view() if window is not None else None
        if active is None or active.id() != view.id():
            return  # only the focused view counts
        sel = view.sel()
        if len(sel) == 0:
            return
        row, col = view.rowcol(sel[0].b)
        self.companion.set_cursor(path, row + 1, col + 1)
        self.companion.set_selection(path, selected_text(view, sel) or None)
        self.active = path

    def terminal_env(self):
        return self.companion.terminal_env()

    def poll(self):
        window = self.window()
        if window is None:
            close_window_companion(self.window_id)
            return
        self.refresh_roots(window)
        for view in window.views():
            if view.id() in self.tracked:
                safely(self.sync_view, view)  # renamed from the side bar


# --------------------------------------------------------------------------
# registry


def companion_for(window, create=True):
    if window is None:
        return None
    with _lock:
        wc = _companions.get(window.id())
        if wc is None and create:
            try:
                wc = WindowCompanion(window)
            except Exception as e:  # binding or library problem: say it once per window
                log("cannot start for window {}: {}".format(window.id(), e))
                return None
            _companions[window.id()] = wc
            try:
                log("window {} listening on port {} ({})".format(window.id(), wc.companion.port, wc.companion.lock_file))
            except Exception:
                pass
        return wc


def companion_for_view(view):
    """The companion owning ``view`` (diff views remember their window)."""
    window_id = view.settings().get(DIFF_WINDOW)
    if window_id is not None:
        with _lock:
            wc = _companions.get(window_id)
        if wc is not None:
            return wc
    return companion_for(view.window(), create=False)


def close_window_companion(window_id):
    with _lock:
        wc = _companions.pop(window_id, None)
    if wc is not None:
        try:
            wc.close()
        except Exception as e:
            log("close failed: {}".format(e))


def _poll(generation):
    if generation != _poll_generation[0]:
        return  # plugin unloaded or reloaded
    with _lock:
        items = list(_companions.values())
    for wc in items:
        safely(wc.poll)
    sublime.set_timeout(lambda: _poll(generation), POLL_MS)


def plugin_loaded():
    _poll_generation[0] += 1
    generation = _poll_generation[0]
    sublime.set_timeout(lambda: _poll(generation), POLL_MS)
    for window in sublime.windows():
        wc = companion_for(window)
        if wc is None:
            continue
        for view in window.views():
            safely(wc.sync_view, view)
        active = window.active_view()
        if active is not None:
            safely(wc.view_activated, active)


def plugin_unloaded():
    _poll_generation[0] += 1
    with _lock:
        ids = list(_companions)
    for window_id in ids:
        close_window_companion(window_id)


def safely(fn, *args):
    """Editor events must never raise into Sublime Text."""
    try:
        return fn(*args)
    except Exception as e:
        log("{} failed: {}".format(getattr(fn, "__name__", "event"), e))
        return None


def env_lines(env):
    return ["export {}={}".format(k, shell_quote(v)) for k, v in sorted(env.items())]


def shell_quote(value):
    if value and all(c.isalnum() or c in "/._-:+=,@%" for c in value):
        return value
    return "'" + value.replace("'", "'\"'\"'") + "'"


def terminus_installed():
    return bool(sublime.find_resources("Terminus.sublime-settings"))


# --------------------------------------------------------------------------
# events


class QwenCompanionEventListener(sublime_plugin.EventListener):
    def on_new_window(self, window):
        companion_for(window)

    def on_pre_close_window(self, window):
        close_window_companion(window.id())

    def on_load_project(self, window):
        wc = companion_for(window, create=False)
        if wc is not None:
            safely(wc.refresh_roots, window)

    def on_post_window_command(self, window, command_name, args):
        wc = companion_for(window, create=False)
        if wc is None:
            return
        safely(wc.refresh_roots, window)  # add/remove folder, open project...
        if command_name in ("rename_path", "rename_file", "save_as", "move_path"):
            for view in window.views():
                safely(wc.sync_view, view)

    def on_window_command(self, window, command_name, args):
        """Gives every Terminus terminal of the window the companion's env."""
        if command_name != "terminus_open" or not settings().get("terminus_inject_env", True):
            return None
        wc = companion_for(window, create=False)
        if wc is None:
            return None
        args = dict(args or {})
        env = dict(args.get("env") or {})
        if "QWEN_CODE_IDE_SERVER_PORT" in env:
            return None  # already set (by us or by the user)
        try:
            env.update(wc.terminal_env())
        except Exception as e:
            log("terminal env unavailable: {}".format(e))
            return None
        args["env"] = env
        return (command_name, args)

    def on_activated(self, view):
        window = view.window()
        wc = companion_for(window)
        if wc is None:
            return
        safely(wc.refresh_roots, window)
        safely(wc.view_activated, view)

    def on_load(self, view):
        wc = companion_for(view.window())
        if wc is not None:
            safely(wc.sync_view, view)

    def on_post_save(self, view):
        wc = companion_for(view.window())
        if wc is None:
            return
        safely(wc.sync_view, view)  # first save of a new file, or "save as"
        window = view.window()
        if window is not None and window.active_view() is not None and window.active_view().id() == view.id():
            safely(wc.view_activated, view)

    def on_selection_modified(self, view):
        if view.settings().get(IS_DIFF):
            return
        wc = companion_for(view.window(), create=False)
        if wc is not None:
            safely(wc.selection_changed, view)

    def on_pre_close(self, view):
        if view.settings().get(IS_DIFF):
            wc = companion_for_view(view)
            if wc is not None:
                safely(wc.diff_view_closing, view)
            return
        wc = companion_for_view(view)
        if wc is not None:
            safely(wc.view_closing, view)


# --------------------------------------------------------------------------
# commands


class QwenCompanionSetContentCommand(sublime_plugin.TextCommand):
    """Internal: replaces the whole buffer (used for proposed diffs)."""

    def run(self, edit, text=""):
        self.view.replace(edit, sublime.Region(0, self.view.size()), text)
        self.view.sel().clear()
        self.view.sel().add(sublime.Region(0, 0))

    def is_visible(self):
        return False


class QwenCompanionAcceptDiffCommand(sublime_plugin.TextCommand):
    """Accept the proposed change, as edited in this view."""

    def run(self, edit):
        wc = companion_for_view(self.view)
        if wc is not None:
            wc.decide(self.view, accept=True)

    def is_enabled(self):
        return bool(self.view.settings().get(IS_DIFF))


class QwenCompanionRejectDiffCommand(sublime_plugin.TextCommand):
    """Reject the proposed change."""

    def run(self, edit):
        wc = companion_for_view(self.view)
        if wc is not None:
            wc.decide(self.view, accept=False)

    def is_enabled(self):
        return bool(self.view.settings().get(IS_DIFF))


class QwenCompanionShowEnvCommand(sublime_plugin.WindowCommand):
    """Shows (and copies) the ``export`` lines that point ``qwen`` at this window."""

    def run(self):
        wc = companion_for(self.window)
        if wc is None:
            sublime.error_message(LOG_PREFIX + "not running (see the console)")
            return
        try:
            env = wc.terminal_env()
        except Exception as e:
            sublime.error_message(LOG_PREFIX + str(e))
            return
        lines = env_lines(env)
        text = "\n".join(lines) + "\n"
        sublime.set_clipboard(text)
        panel = self.window.create_output_panel("qwen_companion")
        panel.run_command("qwen_companion_set_content", {"text": "# copied to the clipboard; run qwen after these:\n" + text})
        self.window.run_command("show_panel", {"panel": "output.qwen_companion"})
        self.window.status_message("Qwen Code environment copied to the clipboard")


class QwenCompanionOpenTerminalCommand(sublime_plugin.WindowCommand):
    """Opens a Terminus terminal with the companion's environment (runs ``terminal_cmd``)."""

    def run(self):
        wc = companion_for(self.window)
        if wc is None:
            return
        env = wc.terminal_env()
        args = {"title": "Qwen Code", "env": env}
        if wc.folders:
            args["cwd"] = wc.folders[0]
        cmd = settings().get("terminal_cmd")
        if cmd:
            args["cmd"] = cmd
        self.window.run_command("terminus_open", args)

    def is_enabled(self):
        return terminus_installed()


class QwenCompanionRestartCommand(sublime_plugin.WindowCommand):
    """Restarts this window's companion (new port, new lock file)."""

    def run(self):
        close_window_companion(self.window.id())
        wc = companion_for(self.window)
        if wc is None:
            return
        for view in self.window.views():
            safely(wc.sync_view, view)
        active = self.window.active_view()
        if active is not None:
            safely(wc.view_activated, active)
