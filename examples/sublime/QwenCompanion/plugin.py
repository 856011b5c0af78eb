"""Qwen Companion for Sublime Text 4: makes each window an IDE companion of
Qwen Code, Gemini CLI or both (the setting ``cli``).

One companion (MCP server + the discovery file of each CLI) per window, fed with the window's
folders and its file views; Qwen Code's proposed edits open as scratch views
(Accept / Reject); ``Qwen Companion: Terminal Environment`` gives the
lines that set ``QWEN_CODE_IDE_SERVER_PORT`` (``export``, fish, PowerShell or
cmd syntax), and Terminus terminals get
them automatically.

Threading: the companion's open-diff / close-diff / log callables run on a
library thread. They only record state, read buffer text (Sublime's API is
thread-safe) and hand every UI change to the main thread with
``sublime.set_timeout``; they never wait for the main thread, which may be
closing the companion at that moment.

Identity: a diff is known by its path, but only the view the UI thread made
for the current proposal (``DiffState.view``) may answer it, and only once it
shows the newest proposal; every other "Proposed:" view is stale and closes
without telling the CLI anything. A closed companion refuses new diffs, and a
window that is closing never gets a new companion from its last events.

Runs in the Python 3.8 plugin host (see ``.python-version``); the
``qwen_companion`` binding is pure Python over ctypes, found as
``qwen_core/binding.py`` explains (the package's own ``lib/``, the
``binding_path`` setting, an importable one, or the repository's
``bindings/python`` in a development checkout), never through the global
``sys.path``.
"""

import os
import threading

import sublime

from .qwen_core import agents as _agents_mod
from .qwen_core import binding as _binding_mod
from .qwen_core import diagnostics as _diagnostics_mod
from .qwen_core import editor_tools as _editor_tools
from .qwen_core import host as _host_mod
from .qwen_core import layout as _layout_mod
from .qwen_core import logbuf as _logbuf
from .qwen_core.proposal import DiffState, ShownProposal  # noqa: F401 (plugin.DiffState)
from .qwen_core.views import (  # noqa: F401 (the package's other modules use them as core.X)
    IS_DIFF,
    MAX_SELECTION_CHARS,
    close_view,
    discard_diff_view,
    file_path,
    read_file,
    selected_text,
    view_text,
    window_by_id,
    window_views,
)
from .qwen_core import status as _status_mod

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
SETTINGS_FILE = "QwenCompanion.sublime-settings"

# View settings of a proposed-diff view (and IS_DIFF, from qwen_core/views.py).
DIFF_PATH = "qwen_companion_diff_path"  # the file the diff proposes to change
DIFF_WINDOW = "qwen_companion_window"  # id of the window whose companion owns it

LOG_PREFIX = "Qwen Companion: "

#: How often (ms) windows are checked for folder changes, renamed files and
#: closed windows: Sublime Text has no event for a folder added through a
#: dialog, so events are backed by this light poll.
POLL_MS = 2000

#: A window whose close was announced (``on_pre_close_window``) gets no new
#: companion from the events its closing views still send. If it is still
#: open after this many polls, the close was cancelled (e.g. at the "save
#: changes?" prompt) and the companion comes back.
CLOSING_GRACE_POLLS = 5

_lock = threading.RLock()
_companions = {}  # window id -> WindowCompanion
_closing = {}  # window id -> polls seen while closing; None once the window is gone
_qc = None  # the imported qwen_companion module
_poll_generation = [0]
_loaded = [False]  # between plugin_loaded and plugin_unloaded: companions may start
_window_hooks = []  # (on_open, on_close) registered by the package's other modules
_terminal_env_providers = []  # provider(window) -> dict, see register_terminal_env
_cli_problem = [None]  # the last bad "cli" setting shown
_linter_store = _diagnostics_mod.LinterStore()  # SublimeLinter's results, for editor_diagnostics
_unsubscribe_linter = [None]


def cli_of(s):
    """The setting ``cli`` checked: a bad value gives the default, logged and
    shown in the status bar (once per value)."""
    cli, problem = _agents_mod.cli_setting(s.get("cli"))
    if problem is not None and _cli_problem[0] != problem:
        _cli_problem[0] = problem
        log(problem)
        sublime.set_timeout(lambda: sublime.status_message(LOG_PREFIX + problem), 0)
    elif problem is None:
        _cli_problem[0] = None
    return cli


def companion_config(s):
    """The companion's construction settings (a change restarts the companions)."""
    config = {}
    cli = cli_of(s)
    if cli != _agents_mod.DEFAULT_CLI:  # (the default is left to the library: an older one knows no "cli")
        config["cli"] = cli
    for key in ("lock_dir", "gemini_dir"):
        if s.get(key):
            config[key] = os.path.expanduser(s.get(key))
    for key in ("debounce_ms", "max_wait_ms", "request_timeout_ms"):
        if s.get(key) is not None:
            config[key] = s.get(key)
    return config


def log(message):
    """The console, and the "Qwen: Show Log" panel's bounded log."""
    print(LOG_PREFIX + message)
    _logbuf.add(message)


def settings():
    return sublime.load_settings(SETTINGS_FILE)


# --------------------------------------------------------------------------
# the binding


def import_binding():
    """The ``qwen_companion`` binding, found as ``qwen_core/binding.py`` says
    (the package's own ``lib/``, ``binding_path``, importable, the checkout)."""
    global _qc
    if _qc is None:
        _qc = _binding_mod.import_binding(__package__, PACKAGE_DIR, settings().get("binding_path"))
    return _qc


#: The last MissingLibraryError shown: a window's events retry quietly after it.
_library_problem = [None]


def library_path(s=None):
    """The native library to load: the ``library_path`` setting; else None
    when ``$QWEN_COMPANION_LIB`` is set (the binding reads it) or the package
    ships no library (a development checkout: the binding searches); else
    the one the package ships for this machine (``lib/<platform>/``). Raises
    ``MissingLibraryError`` when the package has none for this machine."""
    configured = (s or settings()).get("library_path")
    if configured:
        return os.path.expanduser(configured)
    if os.environ.get("QWEN_COMPANION_LIB"):
        return None
    return _binding_mod.bundled_library(PACKAGE_DIR, sublime.platform(), _binding_mod.host_arch(sublime))


# --------------------------------------------------------------------------
# helpers: qwen_core/views.py (file_path, selected_text, window_views,
# discard_diff_view, ...) and qwen_core/proposal.py (ShownProposal, DiffState)


class WindowCompanion(object):
    """The companion of one window plus the window's editor state."""

    def __init__(self, window):
        qc = import_binding()
        s = settings()
        self.window_id = window.id()
        self.folders = list(window.folders())
        self.diff_lock = threading.Lock()
        self.diffs = {}  # path -> DiffState
        self.closed = False  # set (under diff_lock) by close()
        self.tracked = {}  # view id -> path last reported for it
        self.active = None  # path reported as focused
        self.announced_to = []  # the window hooks told of this companion
        # The editor state (tracked, active) changes on Sublime's async
        # thread; a restart or revival may touch it from the main thread.
        self.editor_lock = threading.RLock()
        self.last_error = None  # the last failure, shown by the status indicator
        self.layout = _layout_mod.SideBySide()  # main thread only
        self.config = companion_config(s)
        self.log_level = int(s.get("log_level", qc.LOG_WARN))
        self.companion = qc.Companion(
            workspace_roots=self.folders,
            ide_name=s.get("ide_name") or "Sublime Text",
            ide_id=s.get("ide_id") or "sublime-text",
            open_diff=self._on_open_diff,
            close_diff=self._on_close_diff,
            log=self._on_log,
            log_level=max(1, min(5, self.log_level)),
            library=library_path(s),
            **self.config
        )
        self.env = self.companion.terminal_env()  # kept current by refresh_roots
        self.port = self.companion.port
        self.cli = self.config.get("cli", _agents_mod.DEFAULT_CLI)
        try:  # fixed for the companion's life (port and pid): asked once
            self.discovery = self.companion.discovery_files()
        except qc.NotFoundError:  # a library from before Gemini CLI support: Qwen Code's lock file only
            self.discovery = {"qwen": self.companion.lock_file, "gemini": None}

    # -- library thread -------------------------------------------------

    def _on_log(self, level, message):
        if level <= int(settings().get("log_level", self.log_level)):
            log(message)

    def _on_open_diff(self, path, new_content):
        """Library thread: record the proposal; the UI thread shows it."""
        if window_by_id(self.window_id) is None:
            raise _qc.RefuseDiff("the Sublime Text window is closed")
        with self.diff_lock:
            if self.closed:  # racing with close() on the UI thread
                raise _qc.RefuseDiff("the Sublime Text window's companion is closed")
            state = self.diffs.get(path)
            if state is None:
                state = self.diffs[path] = DiffState(path, new_content)
            else:  # a new proposal for a file whose diff is still open
                state.proposed = new_content
                state.generation += 1
        label = self._proposer_label(path)
        with self.diff_lock:
            state.label = label
        sublime.set_timeout(lambda: self.show_diff(path), 0)

    def _proposer_label(self, path):
        """Library thread: the label of the CLI that proposed the diff of
        ``path`` ("CLI #2") when more than one CLI is connected, else None
        (also with a library too old to tell)."""
        try:
            found = self.companion.open_diffs()
        except (_qc.CompanionError, AttributeError):
            return None
        if int(found.get("clients") or 0) <= 1:
            return None
        for diff in found.get("diffs") or []:
            if diff.get("filePath") == path:
                return (diff.get("session") or {}).get("label")
        return None

    def _on_close_diff(self, path):
        """Library thread: the CLI closes the diff; answer with the buffer text."""
        with self.diff_lock:
            state = self.diffs.pop(path, None)
            if state is None:
                return None
            view, shown, up_to_date = state.view, state.shown, state.up_to_date()
            text = state.proposed
        if up_to_date and view is not None and view.is_valid():
            # Reading is thread-safe. A newer proposal not shown yet was never
            # edited: then the answer is that proposal, as is.
            text = shown.final(view_text(view))
        if view is not None:
            sublime.set_timeout(lambda: discard_diff_view(view), 0)
        return text

    # -- UI thread ------------------------------------------------------

    def window(self):
        return window_by_id(self.window_id)

    def close(self, on_ui=True):
        """Closes the companion (lock file removed); its diff views are
        discarded now (``on_ui``) or from the main thread."""
        with self.diff_lock:
            self.closed = True
            views = [d.view for d in self.diffs.values()]
            self.diffs.clear()
        try:
            self.companion.close()
        finally:
            def discard():
                for v in views:
                    discard_diff_view(v)

            if on_ui:
                discard()
            elif views:
                sublime.set_timeout(discard, 0)

    def refresh_roots(self, window=None):
        window = window or self.window()
        if window is None:
            return
        folders = list(window.folders())
        if folders != self.folders:
            self.companion.set_workspace_roots(folders)
            self.folders = folders
            self.env = self.companion.terminal_env()
            log("workspace folders: {}".format(", ".join(folders) or "(none)"))

    def show_diff(self, path):
        with self.diff_lock:
            state = self.diffs.get(path)
            if state is None or self.closed:  # already closed by the CLI
                return
            proposed, generation, view = state.proposed, state.generation, state.view
            if view is not None and view.is_valid() and state.shown_generation == generation:
                return  # a repeated callback: shown already (keep the user's edits)
        window = self.window()
        if window is None:
            if self._forget_diff(path, state):
                self._report("diff_closed", path)
            return
        created = view is None or not view.is_valid()
        if created:
            view = self._new_diff_view(window, path)
        label = state.label
        view.set_name("Proposed{}: {}".format(" ({})".format(label) if label else "", os.path.basename(path)))
        shown = ShownProposal(proposed)
        view.run_command("qwen_companion_set_content", {"text": shown.text})
        view.set_line_endings("windows" if shown.crlf else "unix")
        if hasattr(view, "set_reference_document"):
            # Sublime Text 4: the gutter and inline diff show the change
            # against the file as it is on disk.
            original = read_file(path)
            view.set_reference_document(original.replace("\r\n", "\n"))
        with self.diff_lock:
            live = not self.closed and self.diffs.get(path) is state
            if live:
                state.view = view
                state.shown = shown
                state.shown_generation = generation
        if not live:
            # Closed by the CLI while we built the view (a reused view is
            # closed by whoever closed the diff). A view made here would be
            # an orphan that could answer a newer diff for the same file.
            if created:
                discard_diff_view(view)
            return
        if created and settings().get("diff_side_by_side", True):
            self.layout.show(view.window() or window, view, self._original_view(window, path))
        (view.window() or window).focus_view(view)
        self.update_status()
        keys = settings().get("accept_reject_hint", "ctrl+s or ctrl+alt+y / ctrl+alt+n")
        window.status_message(
            "{} proposes changes to {}: Accept or Reject ({})".format(
                _agents_mod.who(self.cli), os.path.basename(path), keys)
        )

    def _original_view(self, window, path):
        """The view of the file a proposal changes (opened when the file
        exists but is not open), for the left side; None for a new file."""
        for view in window_views(window):
            if view.file_name() == path and not view.settings().get(IS_DIFF):
                return view
        if not os.path.isfile(path):
            return None
        return window.open_file(path)

    def restore_layout_if_done(self):
        """Main thread: the window's layout from before the side-by-side
        proposal, once no proposal view of this companion is left."""
        window = self.window()
        if window is None:
            return
        for view in window_views(window):
            if view.settings().get(IS_DIFF) and view.settings().get(DIFF_WINDOW) == self.window_id:
                return
        self.layout.restore(window)

    def close_all_diffs(self):
        """Main thread: rejects every open diff (the CLIs get
        ``ide/diffRejected``; nothing is written) and closes their views.
        Returns how many."""
        with self.diff_lock:
            states = list(self.diffs.values())
            self.diffs.clear()
        for state in states:
            sublime.set_timeout_async(lambda path=state.path: self._report("diff_reject", path), 0)
            if state.view is not None:
                discard_diff_view(state.view)
        self.update_status()
        return len(states)

    def _new_diff_view(self, window, path):
        view = window.new_file()
        view.set_scratch(True)
        view.settings().set(IS_DIFF, True)
        view.settings().set(DIFF_PATH, path)
        view.settings().set(DIFF_WINDOW, self.window_id)
        if hasattr(sublime, "find_syntax_for_file"):
            syntax = sublime.find_syntax_for_file(path)
            if syntax is not None:
                view.assign_syntax(syntax)
        return view

    def _forget_diff(self, path, state):
        """Forgets ``state`` if it is still the diff of ``path``."""
        with self.diff_lock:
            if self.diffs.get(path) is state:
                del self.diffs[path]
                return True
            return False

    def decide(self, view, accept):
        """Accept (with the buffer text, edits included) or reject the diff shown in ``view``."""
        path = view.settings().get(DIFF_PATH)
        with self.diff_lock:
            state = self.diffs.get(path)
            live = state is not None and state.is_answered_by(view)
            up_to_date = live and state.up_to_date()
            if up_to_date:
                del self.diffs[path]
        if not live:  # decided or closed already, or a stale view
            sublime.status_message("Qwen Code no longer waits for this diff")
            discard_diff_view(view)
            return
        if not up_to_date:  # its update is queued for the UI thread
            sublime.status_message("Qwen Code changed this proposal: review it again, then decide")
            return
        if accept:
            self._report("diff_accept", path, state.shown.final(view_text(view)))
        else:
            self._report("diff_reject", path)
        discard_diff_view(view)

    def diff_view_closing(self, view):
        """The user closed a diff view without deciding: forgets it here
        (main thread), tells the library from the async thread."""
        path = view.settings().get(DIFF_PATH)
        with self.diff_lock:
            state = self.diffs.get(path)
            if state is None or not state.is_answered_by(view):
                return
            del self.diffs[path]
        sublime.set_timeout_async(lambda: self._report("diff_closed", path), 0)
        self.update_status()

    def _report(self, method, *args):
        try:
            getattr(self.companion, method)(*args)
        except _qc.CompanionError as e:
            self.failed("{} failed: {}".format(method, e))
        self.update_status()

    def failed(self, message):
        log(message)
        self.last_error = message
        self.update_status()

    def pending_diffs(self):
        with self.diff_lock:
            return sorted(os.path.basename(p) for p in self.diffs)

    def connected_clients(self):
        """How many CLIs are connected (None with a library without the count)."""
        fn = getattr(self.companion, "connected_clients", None)
        if fn is None:
            return None
        try:
            return fn()
        except _qc.CompanionError:
            return None

    def update_status(self):
        """Recomputes the status indicator on the async thread (it asks the
        library for the CLI count) and shows it in the window's active view
        from the main thread. Any thread."""
        sublime.set_timeout_async(self._refresh_status, 0)

    def _refresh_status(self):
        if self.closed:
            return
        clients = self.connected_clients()
        text = _status_mod.status_text(
            clients, self.pending_diffs(), self.last_error or _hosts.error, self.port)
        window_id = self.window_id
        sublime.set_timeout(lambda: _status_mod.show(window_by_id(window_id), text), 0)

    # -- editor events (Sublime's async thread) ---------------------------

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
        self._untrack(view.id())

    def view_closed(self, view_id):
        self._untrack(view_id)

    def _untrack(self, view_id):
        path = self.tracked.pop(view_id, None)
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
        # Qwen Code counts columns in UTF-16 units (as VS Code does); Sublime
        # Text's points are code points (rowcol_utf16 is Sublime Text 4).
        rowcol = getattr(view, "rowcol_utf16", None) or view.rowcol
        row, col = rowcol(sel[0].b)
        self.companion.set_cursor(path, row + 1, col + 1)
        self.companion.set_selection(path, selected_text(view, sel) or None)
        self.active = path

    def terminal_env(self):
        """The env of a terminal for this window: the companion's, plus what
        the plugin host's MCP server needs (kept current; no library call)."""
        env = dict(self.env)
        env.update(_hosts.terminal_env())
        window = self.window()
        with _lock:
            providers = list(_terminal_env_providers)
        for provider in providers:
            try:
                env.update(provider(window) or {})
            except Exception as e:  # a broken provider never breaks the terminal
                log("terminal env provider failed: {}".format(e))
        return env

    def poll(self):
        window = self.window()
        if window is None:
            close_window_companion(self.window_id, on_ui=False)
            return
        self.refresh_roots(window)
        views = window_views(window)
        for view in views:
            if view.id() in self.tracked:
                safely(self.sync_view, view)  # renamed from the side bar
        present = set(v.id() for v in views)
        for view_id in [i for i in self.tracked if i not in present]:
            safely(self._untrack, view_id)  # closed or moved without an event
        self.update_status()


def _editor_locked(method):
    def locked(self, *args):
        with self.editor_lock:
            return method(self, *args)

    locked.__name__ = method.__name__
    locked.__doc__ = method.__doc__
    return locked


for _name in ("sync_view", "view_activated", "view_closing", "view_closed", "_untrack", "selection_changed",
              "poll", "refresh_roots"):
    setattr(WindowCompanion, _name, _editor_locked(getattr(WindowCompanion, _name)))


# --------------------------------------------------------------------------
# registry


def companion_for(window, create=True):
    if window is None:
        return None
    with _lock:
        wc = _companions.get(window.id())
        if wc is None and create and _loaded[0] and window.id() not in _closing:
            wc = _new_companion(window)
            if wc is None:
                return None
            if not _loaded[0] or window.id() in _closing:
                # unloaded (or the window closing) while it started on the async thread
                _close(wc, False)
                return None
            _register(wc)
        return wc


def _new_companion(window):
    """A new WindowCompanion, or None (the error logged, and shown once)."""
    try:
        wc = WindowCompanion(window)
    except _binding_mod.MissingLibraryError as e:  # said once, not at every event of every window
        if _library_problem[0] != str(e):
            _library_problem[0] = str(e)
            _hosts.fail(str(e))
        return None
    except Exception as e:  # binding, library or settings problem
        _hosts.fail("cannot start for window {}: {}".format(window.id(), e))
        return None
    _library_problem[0] = None
    return wc


def _register(wc):
    with _lock:
        _companions[wc.window_id] = wc
    sublime.set_timeout(lambda: _notify_open(wc), 0)
    files = ", ".join(p for p in (wc.discovery.get("qwen"), wc.discovery.get("gemini")) if p)
    log("window {} listening on port {} for {} ({})".format(
        wc.window_id, wc.port, _agents_mod.served_names(wc.cli), files))


def _feed(wc, window):
    """Reports the window's views to a new companion."""
    for view in window_views(window):
        safely(wc.sync_view, view)
    active = window.active_view()
    if active is not None:
        safely(wc.view_activated, active)


def replace_companion(window):
    """A settings change: the window gets a companion built with the new
    settings; if that fails the old one keeps running (nothing is lost)."""
    with _lock:
        old = _companions.get(window.id())
    new = _new_companion(window)
    if new is None:
        return old
    if old is not None:
        close_window_companion(window.id())
    _register(new)
    _feed(new, window)
    return new


def companion_for_view(view):
    """The companion owning ``view`` (diff views remember their window)."""
    window_id = view.settings().get(DIFF_WINDOW)
    if window_id is not None:
        with _lock:
            wc = _companions.get(window_id)
        if wc is not None:
            return wc
    return companion_for(view.window(), create=False)


def close_window_companion(window_id, on_ui=True):
    """Closes the window's companion now; ``on_ui`` is False off the main
    thread (the diff views and the close hooks then wait for it)."""
    with _lock:
        wc = _companions.pop(window_id, None)
    if wc is None:
        return
    _close(wc, on_ui)
    if on_ui:
        _notify_close(window_id)
    else:
        sublime.set_timeout(lambda: _notify_close(window_id), 0)


def _close(wc, on_ui):
    try:
        wc.close(on_ui)
    except Exception as e:
        log("close failed: {}".format(e))


def window_closing(window_id):
    """``on_pre_close_window`` (main thread): no companion for this window
    from now on; the library closes it from the async thread."""
    with _lock:
        _closing[window_id] = 0
        wc = _companions.pop(window_id, None)
    if wc is None:
        return
    with wc.diff_lock:
        wc.closed = True  # refuses new diffs at once
    sublime.set_timeout_async(lambda: _close(wc, False), 0)
    _notify_close(window_id)


def start_companion(window):
    """A companion for ``window``, fed with its views (load, restart, revival)."""
    with _lock:
        _closing.pop(window.id(), None)
    wc = companion_for(window)
    if wc is None:
        return None
    _feed(wc, window)
    return wc


def _check_closing():
    """Windows gone stay marked (ids are never reused); a window still open
    after CLOSING_GRACE_POLLS polls was not closed after all."""
    with _lock:
        pending = [(i, n) for i, n in _closing.items() if n is not None]
    for window_id, polls in pending:
        window = window_by_id(window_id)
        if window is None:
            with _lock:
                _closing[window_id] = None
            _agents_mod.TERMINALS.forget(window_id)
        elif polls + 1 >= CLOSING_GRACE_POLLS:
            log("window {} was not closed: restarting its companion".format(window_id))
            start_companion(window)
        else:
            with _lock:
                if _closing.get(window_id) is not None:
                    _closing[window_id] = polls + 1


def _poll(generation):
    if generation != _poll_generation[0]:
        return  # plugin unloaded or reloaded
    safely(_check_closing)
    with _lock:
        items = list(_companions.values())
    for wc in items:
        safely(wc.poll)
    sublime.set_timeout_async(lambda: _poll(generation), POLL_MS)


# --------------------------------------------------------------------------
# seams for the package's other modules (``from . import plugin as core``)

_hosts = _host_mod.PluginHostManager(lambda: import_binding(), lambda: settings(), lambda m: log(m),
                                     library=lambda s: library_path(s))


def all_folders():
    """The folders of every window, each once, in window order."""
    seen = []
    for w in sublime.windows():
        for d in w.folders():
            if d not in seen:
                seen.append(d)
    return seen


def plugin_host(create=True):
    """The process-wide ``qwen_companion.PluginHost`` started next to the
    companions (its MCP server running and registered with Qwen Code), or
    None when the setting ``plugins_enabled`` is false or it failed to start
    (the error is logged and shown once). ``create=False`` never starts it."""
    if create and not _loaded[0]:
        create = False
    return _hosts.get(create, all_folders())


def register_host_capability(name, handler):
    """Answers the plugins' ``host_request`` ``name`` with ``handler(request)``
    (library thread; see ``PluginHost.set_capability``), now and after a restart
    of the host. Replaces the package's default ``show_notification``."""
    _hosts.set_capability(name, handler)


def add_host_listener(fn):
    """``fn(event)`` gets every event of the plugin host (library thread)."""
    _hosts.add_listener(fn)


def remove_host_listener(fn):
    _hosts.remove_listener(fn)


def register_terminal_env(provider):
    """``provider(window) -> dict`` adds variables to the env of every
    terminal the package starts for a window (e.g. the cross-session
    participant's ``QWEN_CODE_MESSAGING_*``). Returns a function that
    removes it."""
    with _lock:
        _terminal_env_providers.append(provider)

    def remove():
        with _lock:
            if provider in _terminal_env_providers:
                _terminal_env_providers.remove(provider)

    return remove


def register_window_hook(on_open=None, on_close=None):
    """``on_open(window, wc)`` when a window's companion starts (``wc`` is its
    ``WindowCompanion``: ``wc.companion`` the binding's ``Companion``,
    ``wc.folders``), ``on_close(window_id)`` when it closes (the window
    closed, "Restart", the package unloading). Both run on the main thread;
    windows whose companion already runs get ``on_open`` soon (queued).
    Returns a function that removes the hooks."""
    entry = (on_open, on_close)
    with _lock:
        _window_hooks.append(entry)
        running = list(_companions.values())
    if on_open is not None:
        for wc in running:
            sublime.set_timeout(lambda wc=wc: _notify_open(wc, [entry]), 0)

    def remove():
        with _lock:
            if entry in _window_hooks:
                _window_hooks.remove(entry)

    return remove


def _notify_open(wc, hooks=None):
    """Main thread: ``on_open`` hooks for ``wc`` if it still is its window's companion."""
    with _lock:
        if _companions.get(wc.window_id) is not wc:
            return
        hooks = list(_window_hooks if hooks is None else hooks)
        # each hook hears of a companion once (its creation and a hook
        # registered meanwhile may both have queued this)
        hooks = [h for h in hooks if not any(h is done for done in wc.announced_to)]
        wc.announced_to.extend(hooks)
    window = wc.window()
    if window is None:
        return
    for on_open, _ in hooks:
        if on_open is not None:
            safely(on_open, window, wc)


def _notify_close(window_id):
    with _lock:
        hooks = list(_window_hooks)
    for _, on_close in hooks:
        if on_close is not None:
            safely(on_close, window_id)


def plugin_loaded():
    _loaded[0] = True
    _poll_generation[0] += 1
    generation = _poll_generation[0]
    sublime.set_timeout_async(lambda: _poll(generation), POLL_MS)
    for window in sublime.windows():
        start_companion(window)
    offer_editor_tools()
    # The host's first start copies the bridge and writes ~/.qwen/settings.json:
    # off the UI thread (a module asking plugin_host() meanwhile waits for it).
    sublime.set_timeout_async(lambda: plugin_host(create=True), 0)
    watch_settings()


def plugin_unloaded():
    _loaded[0] = False  # the events of the views closed below start nothing
    _poll_generation[0] += 1
    with _lock:
        ids = list(_companions)
    for window_id in ids:
        close_window_companion(window_id)
    _hosts.stop()
    unsubscribe, _unsubscribe_linter[0] = _unsubscribe_linter[0], None
    if unsubscribe is not None:
        unsubscribe()
    settings().clear_on_change(ON_CHANGE_TAG)
    for window in sublime.windows():
        _status_mod.clear(window)


def safely(fn, *args):
    """Editor events must never raise into Sublime Text."""
    try:
        return fn(*args)
    except Exception as e:
        log("{} failed: {}".format(getattr(fn, "__name__", "event"), e))
        return None


def env_lines(env, shell=None):
    """The lines that set ``env`` in the user's shell: ``shell``, else the
    setting ``terminal_shell`` ("auto": PowerShell on Windows, else fish or
    a POSIX shell after ``$SHELL``). Raises ``ValueError`` for a value the
    shell cannot carry (cmd: a line break, ``"`` or ``%``)."""
    p = import_binding().platforms
    chosen = p.shell_for(shell if shell is not None else settings().get("terminal_shell", "auto"))
    return p.env_lines(env, chosen)


def terminus_installed():
    return bool(sublime.find_resources("Terminus.sublime-settings"))


# --------------------------------------------------------------------------
# events: the listener is qwen_events.py (QwenCompanionEventListener)


def _is_diff(view):
    return bool(view.settings().get(IS_DIFF))


# --------------------------------------------------------------------------
# settings: re-read on change


#: Settings a running companion was built with: a change restarts every
#: window's companion (new port; Qwen Code reconnects with /ide enable).
COMPANION_KEYS = ("ide_name", "ide_id", "library_path", "lock_dir", "debounce_ms", "max_wait_ms",
                  "request_timeout_ms", "cli", "gemini_dir")
#: Settings of the plugin host: a change restarts it.
HOST_KEYS = ("plugins_enabled", "plugins_dir", "node_path", "plugins_mcp", "register_mcp",
             "mcp_always_load_tools", "mcp_bridge_path", "library_path", "log_level")
ON_CHANGE_TAG = "qwen_companion"
_seen_settings = [None]


def _snapshot(keys):
    s = settings()
    return dict((k, s.get(k)) for k in keys)


def watch_settings():
    s = settings()
    s.clear_on_change(ON_CHANGE_TAG)
    _seen_settings[0] = (_snapshot(COMPANION_KEYS), _snapshot(HOST_KEYS))
    s.add_on_change(ON_CHANGE_TAG, settings_changed)


def settings_changed():
    """Main thread (Sublime Text calls ``add_on_change`` callbacks there).
    Settings read at each use (``log_level``, ``terminus_inject_env``,
    ``qwen_command``, ``gemini_command``, ...) need nothing; the others
    restart what uses them."""
    if not _loaded[0] or _seen_settings[0] is None:
        return
    companion_now, host_now = _snapshot(COMPANION_KEYS), _snapshot(HOST_KEYS)
    companion_was, host_was = _seen_settings[0]
    _seen_settings[0] = (companion_now, host_now)
    if host_now != host_was:
        log("plugin host settings changed: restarting it")
        _hosts.reset()
        plugin_host(create=True)
    if companion_now != companion_was:
        _library_problem[0] = None
        changed = sorted(k for k in COMPANION_KEYS if companion_now[k] != companion_was[k])
        log("{} changed: restarting the companions".format(", ".join(changed)))
        for window in sublime.windows():
            if window.id() in _companions:
                replace_companion(window)


# --------------------------------------------------------------------------
# the agent terminals ("Run Qwen Code", "Run Gemini CLI": qwen_core/agents.py;
# the commands are in qwen_commands.py) and the editor tools

remember_terminal = _agents_mod.remember  # (window, agent, cwd): started; the one used last
terminal_focused = _agents_mod.focused  # (view): an agent terminal focused is the one used last
agent_terminal = _agents_mod.terminal  # (window, agent) -> (view, cwd) while it runs, else None
last_agent_terminal = _agents_mod.last_terminal  # (window) -> (agent, view, cwd) used last, else None


def terminal_tag(window, agent):
    return _agents_mod.tag(window.id(), agent)


def qwen_terminal_tag(window):
    """The Terminus tag of the window's "Run Qwen Code" terminal."""
    return terminal_tag(window, "qwen")


def qwen_terminal(window):
    """``(view, cwd)`` of the window's running "Run Qwen Code" terminal, else None."""
    return agent_terminal(window, "qwen")


def remember_qwen_terminal(window, cwd):
    remember_terminal(window, "qwen", cwd)


def offer_editor_tools():
    """Offers the editor tools (``editor_diagnostics``, ``editor_open_file``,
    ``editor_open_editors``, ``editor_selection``) to the plugin host before
    its MCP server starts: Qwen Code reads the tool list once. SublimeLinter's
    results are followed from here on (if it is installed)."""
    if _unsubscribe_linter[0] is None:
        _unsubscribe_linter[0] = _diagnostics_mod.subscribe_sublime_linter(_linter_store)
    handlers = _editor_tools.make_handlers(sublime, lambda: import_binding().Pending(), _linter_store, log)
    for name, handler in handlers.items():
        _hosts.set_capability(name, handler)
