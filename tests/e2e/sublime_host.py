#!/usr/bin/env python3
"""The Sublime Text plugin as a companion host for run_e2e.sh (E2E_DEMO=sublime).

    sublime_host.py [--library LIB] ide --workspace DIR[:DIR...] [--ide-name NAME]

It speaks exactly the protocol of `target/c/qcdemo ide` (see `qcdemo ide --help`), but
the companion behind it is the REAL plugin, examples/sublime/QwenCompanion/plugin.py,
loaded on top of the stub `sublime` / `sublime_plugin` modules of the pytest suite
(tests/python/stubs) and the real Python binding (bindings/python, found by the
plugin itself) over the real library. Every stdin command becomes what a Sublime Text
user would do, and the plugin's reactions are reported on stdout:

  stdout (JSON lines)
    {"event":"ready","port":P,"lockFile":"...","env":{...}}   the window's companion runs
    {"event":"diff_opened","filePath":...,"newContent":...}    the plugin showed a
        "Proposed: ..." diff view (newContent = the view's text, CRLF restored)
    {"event":"diff_close_requested","filePath":...}            the plugin's close-diff
        callable was called (the CLI's closeDiff)
    {"event":"terminal_input","tag":...,"text":...}  the plugin typed text into its
        qwen terminal (forwarded to the tmux pane of run-qwen)
    {"event":"error","message":...}   a command that cannot be carried out, a failure
        the plugin reports in the console, an exception in a UI callback
    {"event":"stopped"}
  stdin (one command a line; blank lines and lines starting with # are ignored)
    open PATH       the file is opened in a view (it gets the focus, as in Sublime Text;
                    an already open file is just focused)
    focus PATH      the file's view is activated (opened first if it is not open)
    close PATH      the file's view is closed
    cursor L C      the caret of the active view moves to line L, character C (1-based;
                    clamped to the text, as Sublime Text's caret cannot leave it)
    select TEXT     the user selects TEXT (escapes \\n \\t \\\\) at the caret: the text
                    there if it already reads TEXT, else TEXT pasted at the caret;
                    selected backwards so the caret (the reported cursor) stays put.
                    No TEXT: the selection collapses to the caret
    workspace DIRS  the window's folders become DIRS (then a window command, like
                    Project > Add Folder); roots are made absolute like the demo does
    caret-after TEXT  the caret of the active view moves to just after the first TEXT
                    in it (escapes as for select): Sublime counts code points, the
                    plugin must report the column in UTF-16 units (an emoji is 2)
    accept PATH     "Qwen Companion: Accept Proposed Change" in the diff view of PATH
    save PATH       the user presses ctrl+s in the diff view of PATH: the key binding
                    the package's Default.sublime-keymap resolves to there runs (it
                    must be Accept; an error event otherwise)
    accept-from FILE PATH   the user replaces the text of that diff view with FILE's text
                    (line endings normalised to LF, as in a Sublime buffer), then Accept
    reject PATH     "Qwen Companion: Reject Proposed Change" in that diff view
    closed PATH     the user closes that diff view (no decision)
    context JSON    not expressible through the plugin (Sublime has no such event):
                    goes to the binding directly (Companion.set_context)
    trust BOOL      idem (the plugin never sets trust): Companion.set_trusted
    run-qwen SOCKET TARGET  the user runs "Qwen Companion: Run Qwen Code"; the stub
                    Terminus terminal it opens stands for the tmux pane TARGET of the
                    tmux server at SOCKET (where the harness runs qwen): what the plugin
                    sends to the terminal (terminus_send_string) is typed there with
                    `tmux send-keys -l`, and reported as a terminal_input event
    add-file PATH   "Qwen: Add File to Prompt" in the view of PATH (opened first if needed)
    add-lines PATH A B  the user selects lines A..B of PATH, then "Qwen: Add Selection
                    to Prompt"
    lint PATH LINE COL SEVERITY MESSAGE  SublimeLinter reports one diagnostic (its
                    lint_result event, 1-based LINE/COL; SEVERITY error|warning)
    stop            the user closes the window, then the plugin host unloads the plugin
  EOF, SIGTERM, SIGINT and SIGHUP stop cleanly too.

The main thread is Sublime's UI thread: it pumps sublime.set_timeout callbacks (the
plugin's UI work, posted from the library thread) and the stdin commands (posted by a
reader thread, so they run in order with the plugin's callbacks). As in Sublime Text, an
exception in a set_timeout callback is printed and the loop goes on; it is also reported
as an error event and makes the exit status 3, like UI calls made off the UI thread.

The plugin's console (print) goes to stderr; so do the stub's status-bar messages.
"""

import argparse
import functools
import json
import os
import re
import signal
import sys
import subprocess
import threading
import traceback
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
STUBS = os.path.join(ROOT, "tests", "python", "stubs")
PLUGIN_FILE = os.path.join(ROOT, "examples", "sublime", "QwenCompanion", "plugin.py")
DEFAULT_LIB = os.path.join(ROOT, "target", "release", "libqwen_companion.so")

# The protocol channel is the real stdout; everything printed (the plugin's console)
# goes to stderr.
_PROTO = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8", errors="surrogateescape")
sys.stdout = sys.stderr
_out_lock = threading.Lock()


def emit(obj):
    line = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    with _out_lock:
        try:
            _PROTO.write(line + "\n")
            _PROTO.flush()
        except (OSError, ValueError):
            pass  # stdout closed: keep going, the lock file must still be removed


def emit_error(message):
    emit({"event": "error", "message": message})


def note(message):
    sys.stderr.write("sublime_host: " + message + "\n")
    sys.stderr.flush()


class Failure(Exception):
    """A command that cannot be carried out (reported as an error event)."""


def unescape(text):
    """The demo's `select TEXT` escapes: \\n, \\t and \\\\ (other backslashes stay)."""
    return re.sub(r"\\([nt\\])", lambda m: {"n": "\n", "t": "\t", "\\": "\\"}[m.group(1)], text)


def absolute_roots(spec):
    """DIR[:DIR...] -> absolute paths (relative ones joined to the cwd, symlinks kept)."""
    roots = []
    for d in spec.split(":"):
        if d:
            roots.append(d if d.startswith("/") else os.path.join(os.getcwd(), d))
    return roots


class Host(object):
    def __init__(self, args):
        self.args = args
        self.stopping = False
        self.problems = 0  # plugin exceptions and UI-thread violations
        self.pending_diffs = []  # diff views whose content the plugin just set
        self.reported_violations = 0
        self.reported_async_errors = 0

    # ------------------------------------------------------------------ set-up

    def setup(self):
        if STUBS not in sys.path:
            sys.path.insert(0, STUBS)
        # Imported here, on the main thread: the stub takes it as the UI thread.
        import sublime
        import sublime_plugin

        self.sublime = sublime
        self.sublime_plugin = sublime_plugin
        self._patch_stub()

        s = sublime.load_settings("QwenCompanion.sublime-settings")
        s.set("library_path", self.args.library)
        s.set("log_level", self.args.log_level)
        # The plugin host (plugins and their MCP server in ~/.qwen/settings.json)
        # has its own real-CLI suite; here it runs only with --plugins.
        s.set("plugins_enabled", bool(self.args.plugins))
        if self.args.ide_name:
            s.set("ide_name", self.args.ide_name)

        if self.args.plugins:
            s.set("mcp_always_load_tools", True)  # the model sees the tools without searching
        self._stub_terminus()
        self._stub_sublime_linter()

        # Sublime Text starts with the window open, then loads the plugin.
        self.editor = sublime.Editor()
        self.window = self.editor.new_window(absolute_roots(self.args.workspace))
        # Imported as Sublime Text imports a package (QwenCompanion.plugin).
        sys.path.insert(0, os.path.dirname(STUBS))
        from sublime_package import load_package

        package = load_package(only=("plugin", "qwen_commands", "qwen_events"))
        plugin = package.plugin
        self.plugin = plugin
        for keymap in ("Default.sublime-keymap",):  # what Sublime Text loads on Linux
            sublime.load_keymap(os.path.join(os.path.dirname(PLUGIN_FILE), keymap))
        self._observe_plugin()
        plugin.plugin_loaded()
        self.pump_once()

        wc = plugin._companions.get(self.window.id())
        if wc is None:
            emit_error("start: the plugin did not start a companion for the window (see stderr)")
            return False
        qc = plugin.import_binding()
        note("plugin {} with the binding {} and the library {}".format(
            PLUGIN_FILE, getattr(qc, "__file__", "?"), qc.load_library(self.args.library).path if qc else "?"))
        ready = {"event": "ready", "port": wc.companion.port, "lockFile": wc.companion.lock_file,
                 "env": wc.terminal_env()}
        if self.args.plugins:
            # Started on the async thread by plugin_loaded; wait for it (and its settings.json
            # entry) before qwen can start.
            if plugin.plugin_host(create=True) is None:
                emit_error("start: the plugin host did not start: {}".format(plugin._hosts.error))
                return False
            ready["mcp"] = plugin._hosts.mcp
        emit(ready)
        return True

    def _stub_terminus(self):
        """Terminus as far as the plugin uses it: terminus_open makes a terminal view
        (tagged), terminus_send_string types into the tmux pane of run-qwen."""
        sublime, sublime_plugin, host = self.sublime, self.sublime_plugin, self
        sublime.add_resource("Packages/Terminus/Terminus.sublime-settings")
        self.pane = None  # (socket, target) of run-qwen

        class TerminusOpenCommand(sublime_plugin.WindowCommand):
            def run(self, **kwargs):
                view = self.window.new_file()
                view.set_scratch(True)
                view.set_name(kwargs.get("title") or "Terminus")
                view.settings().set("terminus_view", True)
                if kwargs.get("tag"):
                    view.settings().set("terminus_view.tag", kwargs["tag"])
                note("terminus_open {}".format(json.dumps(dict((k, v) for k, v in kwargs.items() if k != "env"))))

        class TerminusSendStringCommand(sublime_plugin.WindowCommand):
            def run(self, string, tag=None, visible_only=False, bracketed=False):
                views = [v for v in self.window.views() if v.settings().get("terminus_view.tag") == tag]
                if not views or host.pane is None:
                    raise Failure("terminus_send_string: no terminal tagged {!r} (run-qwen first)".format(tag))
                socket_path, target = host.pane
                subprocess.run(["tmux", "-S", socket_path, "send-keys", "-t", target, "-l", "--", string],
                               check=True, timeout=10)
                self.window.focus_view(views[-1])
                emit({"event": "terminal_input", "tag": tag, "text": string})

        self.terminus_classes = (TerminusOpenCommand, TerminusSendStringCommand)

    def _stub_sublime_linter(self):
        """SublimeLinter's public event module (subscribe / unsubscribe / broadcast),
        so that the plugin follows its lint results as in Sublime Text."""
        handlers = {}
        events = types.ModuleType("SublimeLinter.lint.events")
        events.subscribe = lambda topic, fn: handlers.setdefault(topic, []).append(fn)
        events.unsubscribe = lambda topic, fn: handlers.get(topic, []).remove(fn)

        def broadcast(topic, payload):
            for fn in list(handlers.get(topic, [])):
                fn(**payload)

        events.broadcast = broadcast
        for name in ("SublimeLinter", "SublimeLinter.lint"):
            sys.modules.setdefault(name, types.ModuleType(name))
        sys.modules["SublimeLinter.lint.events"] = events
        self.linter_events = events

    def _patch_stub(self):
        """What the stub lacks of Sublime Text for a long-running host: set_timeout
        callbacks that raise are printed and do not stop the others; status-bar
        messages are shown (on stderr); the host notices diff views being filled."""
        sublime = self.sublime
        host = self

        def guarded(fn):
            def run():
                try:
                    fn()
                except Exception:
                    host.problems += 1
                    tb = traceback.format_exc()
                    sys.stderr.write(tb)
                    emit_error("exception in a set_timeout callback: " + tb.strip().splitlines()[-1])
            return run

        raw_set_timeout, raw_set_timeout_async = sublime.set_timeout, sublime.set_timeout_async
        sublime.set_timeout = lambda fn, delay=0: raw_set_timeout(guarded(fn), delay)
        sublime.set_timeout_async = lambda fn, delay=0: raw_set_timeout_async(guarded(fn), delay)

        def status_message(msg):
            note("status bar: " + msg)
            if "no longer waits" in msg:  # the plugin's only failure shown this way
                emit_error(msg)

        sublime.status_message = status_message
        sublime.Window.status_message = lambda window, msg: status_message(msg)

        raw_run_command = sublime.View.run_command

        def run_command(view, name, args=None):
            result = raw_run_command(view, name, args)
            if name == "qwen_companion_set_content" and view.settings().get(self.plugin.IS_DIFF):
                host.pending_diffs.append(view)
            return result

        sublime.View.run_command = run_command

    def _observe_plugin(self):
        """Reports what the plugin does, without changing what it does."""
        plugin = self.plugin
        ui_thread = self.sublime.UI_THREAD

        raw_close_diff = plugin.WindowCompanion._on_close_diff

        def on_close_diff(wc, path):  # library thread
            emit({"event": "diff_close_requested", "filePath": path})
            return raw_close_diff(wc, path)

        # Before any WindowCompanion exists: it hands self._on_close_diff to the binding.
        plugin.WindowCompanion._on_close_diff = on_close_diff

        raw_log = plugin.log
        failure = re.compile(r"^(\w+ failed: |cannot start for window |close failed: )")

        def log(message):
            raw_log(message)  # print() -> stderr
            # The plugin's own failures are logged on the UI thread (library log lines
            # come on the library thread and stay on stderr, like the demo's).
            if threading.current_thread() is ui_thread and failure.match(message):
                emit_error(message)

        plugin.log = log

    # ------------------------------------------------------------------ the loop

    def pump_once(self, timeout=0.0):
        self.sublime.pump(timeout=timeout)
        self.announce_diffs()
        errors = self.sublime.async_errors
        while self.reported_async_errors < len(errors):
            tb = errors[self.reported_async_errors]
            self.reported_async_errors += 1
            self.problems += 1
            emit_error("exception on the async thread: " + tb.strip().splitlines()[-1])
        violations = self.sublime.ui_violations
        while self.reported_violations < len(violations):
            what, thread = violations[self.reported_violations]
            self.reported_violations += 1
            self.problems += 1
            emit_error("{} called off the UI thread ({})".format(what, thread))

    def announce_diffs(self):
        views, self.pending_diffs = self.pending_diffs, []
        seen = set()
        for view in views:
            if view.id() in seen or not view.is_valid() or not view.settings().get(self.plugin.IS_DIFF):
                continue
            seen.add(view.id())
            text = self.text(view)
            if view.line_endings() == "Windows":
                text = text.replace("\n", "\r\n")
            emit({"event": "diff_opened", "filePath": view.settings().get(self.plugin.DIFF_PATH),
                  "newContent": text})

    def run(self):
        def post(raw):
            line = raw.decode("utf-8", "surrogateescape")
            self.sublime.set_timeout(functools.partial(self.command, line), 0)

        def reader():
            # os.read, not sys.stdin: a daemon thread blocked inside a BufferedReader
            # holds its lock, and the interpreter aborts on it at exit.
            buf = b""
            while True:
                try:
                    chunk = os.read(0, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                buf += chunk
                while b"\n" in buf:
                    raw, buf = buf.split(b"\n", 1)
                    post(raw)
            if buf:
                post(buf)  # an unterminated last line still runs, as in the demo
            self.sublime.set_timeout(self.request_stop, 0)  # EOF

        threading.Thread(target=reader, name="stdin", daemon=True).start()
        while not self.stopping:
            self.pump_once(timeout=0.05)

    def request_stop(self):
        self.stopping = True

    def shutdown(self):
        window, plugin = getattr(self, "window", None), getattr(self, "plugin", None)
        if window is not None and window in self.sublime.windows():
            self.editor.close_window(window)  # on_pre_close_window closes its companion
        if plugin is not None:
            if plugin._companions:
                note("after the window closed, the plugin still has companions for windows {} "
                     "(re-created by an event of the closing window)".format(sorted(plugin._companions)))
            plugin.plugin_unloaded()
        if window is not None:
            self.pump_once()

    # ------------------------------------------------------------------ commands

    def command(self, line):
        line = line.rstrip("\n")
        if line.endswith("\r"):
            line = line[:-1]
        if not line or line.startswith("#"):
            return
        if "\0" in line:
            emit_error("command line contains a NUL byte")
            return
        verb, _, arg = line.partition(" ")
        handler = getattr(self, "cmd_" + verb.replace("-", "_"), None)
        if handler is None:
            emit_error("unknown command: " + verb)
            return
        try:
            handler(arg)
        except Failure as e:
            emit_error("{}: {}".format(verb, e))
        except Exception as e:  # the binding's CompanionError and the like
            if not isinstance(e, getattr(self.qc(), "CompanionError", ())):
                traceback.print_exc()
            emit_error("{}: {}".format(verb, e))

    # helpers

    def qc(self):
        return self.plugin.import_binding() if getattr(self, "plugin", None) else None

    def wc(self):
        wc = self.plugin._companions.get(self.window.id())
        if wc is None:
            raise Failure("the window has no companion")
        return wc

    def text(self, view):
        return view.substr(self.sublime.Region(0, view.size()))

    def file_view(self, path):
        for view in self.window.views():
            if view.file_name() == path and not view.settings().get(self.plugin.IS_DIFF):
                return view
        return None

    def diff_view(self, path):
        found = [v for v in self.window.views()
                 if v.settings().get(self.plugin.IS_DIFF) and v.settings().get(self.plugin.DIFF_PATH) == path]
        if not found:
            raise Failure("no diff view for " + path)
        return found[-1]

    def active_file_view(self):
        view = self.window.active_view()
        if view is None or view.file_name() is None or view.settings().get(self.plugin.IS_DIFF):
            raise Failure("no active file view")
        return view

    def require(self, arg, usage):
        if not arg:
            raise Failure("missing argument (usage: {})".format(usage))
        return arg

    def open_view(self, path):
        """File > Open: a view loaded with the file's text (on_load), then focused."""
        try:
            with open(path, "rb") as f:
                text = f.read().decode("utf-8", "replace").replace("\r\n", "\n")
            loaded = True
        except OSError:
            text, loaded = "", False  # Sublime opens an empty buffer for a missing file
        view = self.sublime.View(self.window, file_name=path, text=text)
        self.window._views.append(view)
        if loaded:
            self.sublime_plugin.emit("on_load", view)
        self.window.focus_view(view)
        return view

    def replace_buffer(self, view, text):
        """The user selects all and pastes ``text``."""
        view._text = text
        view._sel._regions = [self.sublime.Region(len(text))]
        self.sublime_plugin.emit("on_modified", view)

    # editor events

    def cmd_open(self, arg):
        path = self.require(arg, "open PATH")
        view = self.file_view(path)
        if view is not None:
            self.window.focus_view(view)
        else:
            self.open_view(path)

    def cmd_focus(self, arg):
        path = self.require(arg, "focus PATH")
        view = self.file_view(path)
        if view is None:
            self.open_view(path)
        else:
            self.window.focus_view(view)

    def cmd_close(self, arg):
        path = self.require(arg, "close PATH")
        view = self.file_view(path)
        if view is None:
            raise Failure(path + " is not open")
        view.close()

    def cmd_cursor(self, arg):
        parts = arg.split(" ")
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise Failure("expected two unsigned integers (usage: cursor LINE CHAR)")
        line, char = int(parts[0]), int(parts[1])
        if line < 1 or char < 1:
            raise Failure("LINE and CHAR are 1-based")
        view = self.active_file_view()
        lines = self.text(view).split("\n")
        row = min(line - 1, len(lines) - 1)
        col = min(char - 1, len(lines[row]))
        if (row, col) != (line - 1, char - 1):
            note("cursor {} {} is outside {}: the caret goes to {} {}".format(
                line, char, view.file_name(), row + 1, col + 1))
        self.editor.move_cursor(view, row, col)  # -> on_selection_modified

    def cmd_caret_after(self, arg):
        text = unescape(self.require(arg, "caret-after TEXT"))
        view = self.active_file_view()
        at = self.text(view).find(text)
        if at < 0:
            raise Failure("{!r} is not in {}".format(text, view.file_name()))
        row, col = view.rowcol(at + len(text))
        self.editor.move_cursor(view, row, col)  # -> on_selection_modified(_async)

    def cmd_select(self, arg):
        sublime = self.sublime
        view = self.active_file_view()
        sel = view.sel()
        caret = sel[0].b if len(sel) else 0
        if arg == "":
            view._sel._regions = [sublime.Region(caret)]
        else:
            text = unescape(arg)
            if view.substr(sublime.Region(caret, caret + len(text))) != text:
                view._text = view._text[:caret] + text + view._text[caret:]  # pasted
                self.sublime_plugin.emit("on_modified", view)
            view._sel._regions = [sublime.Region(caret + len(text), caret)]
        self.sublime_plugin.emit("on_selection_modified", view)

    def cmd_workspace(self, arg):
        roots = absolute_roots(self.require(arg, "workspace DIR[:DIR...]"))
        if not roots:
            raise Failure("no directory given")
        self.editor.set_folders(self.window, roots)  # window command -> refresh_roots
        if self.wc().folders != roots:
            raise Failure("the plugin did not take the folders {}".format(roots))

    def cmd_context(self, arg):
        self.wc().companion.set_context(self.require(arg, "context JSON"))

    def cmd_trust(self, arg):
        if arg not in ("true", "false"):
            raise Failure("expected true or false (usage: trust true|false)")
        self.wc().companion.set_trusted(arg == "true")

    # diffs

    def cmd_accept(self, arg):
        view = self.diff_view(self.require(arg, "accept PATH"))
        view.run_command("qwen_companion_accept_diff")

    def cmd_accept_from(self, arg):
        src, _, path = arg.partition(" ")
        if not src or not path:
            raise Failure("missing argument (usage: accept-from FILE PATH)")
        view = self.diff_view(path)
        try:
            with open(src, "rb") as f:
                data = f.read()
        except OSError as e:
            raise Failure("cannot read {}: {}".format(src, e.strerror))
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise Failure("{} is not UTF-8 text: {}".format(src, e))
        self.replace_buffer(view, text.replace("\r\n", "\n"))
        view.run_command("qwen_companion_accept_diff")

    def cmd_save(self, arg):
        view = self.diff_view(self.require(arg, "save PATH"))
        binding = self.editor.press(view, "ctrl+s")
        command = binding and binding.get("command")
        if command != "qwen_companion_accept_diff":
            raise Failure("ctrl+s in the diff view ran {} instead of Accept".format(command or "save"))

    def cmd_reject(self, arg):
        view = self.diff_view(self.require(arg, "reject PATH"))
        view.run_command("qwen_companion_reject_diff")

    def cmd_closed(self, arg):
        self.diff_view(self.require(arg, "closed PATH")).close()

    # add to the prompt, diagnostics

    def cmd_run_qwen(self, arg):
        parts = arg.split(" ")
        if len(parts) != 2 or not all(parts):
            raise Failure("missing argument (usage: run-qwen SOCKET TARGET)")
        self.pane = (parts[0], parts[1])
        self.window.run_command("qwen_companion_run_qwen")
        if self.plugin.qwen_terminal(self.window) is None:
            raise Failure("Run Qwen Code opened no tagged terminal")

    def cmd_add_file(self, arg):
        path = self.require(arg, "add-file PATH")
        self.cmd_focus(path)
        view = self.file_view(path)
        view.run_command("qwen_companion_add_file_to_prompt")

    def cmd_add_lines(self, arg):
        path, _, lines = arg.rpartition(" ")
        path, _, first = path.rpartition(" ")
        if not path or not first.isdigit() or not lines.isdigit():
            raise Failure("missing argument (usage: add-lines PATH A B)")
        self.cmd_focus(path)
        view = self.file_view(path)
        a, b = sorted((int(first), int(lines)))
        view._sel._regions = [self.sublime.Region(view.text_point(a - 1, 0), view.line(view.text_point(b - 1, 0)).end())]
        self.sublime_plugin.emit("on_selection_modified", view)
        view.run_command("qwen_companion_add_selection_to_prompt")

    def cmd_lint(self, arg):
        parts = arg.split(" ", 4)
        if len(parts) != 5 or not parts[1].isdigit() or not parts[2].isdigit():
            raise Failure("missing argument (usage: lint PATH LINE COL SEVERITY MESSAGE)")
        path, line, col, severity, message = parts
        self.linter_events.broadcast("lint_result", {
            "filename": path, "linter_name": "e2e-linter",
            "errors": [{"line": int(line) - 1, "start": int(col) - 1, "end": int(col), "error_type": severity,
                        "code": "E2E", "msg": message, "linter": "e2e-linter"}]})

    def cmd_stop(self, arg):
        self.stopping = True


def main():
    ap = argparse.ArgumentParser(description="The Sublime Text plugin as a qcdemo-compatible host.")
    ap.add_argument("--library", default=os.environ.get("QWEN_COMPANION_LIB") or DEFAULT_LIB,
                    help="the shared library (default: $QWEN_COMPANION_LIB, else %(default)s)")
    ap.add_argument("--log-level", type=int, default=3,
                    help="the plugin's log_level setting (library lines to stderr; default 3, info)")
    ap.add_argument("mode", choices=["ide"])
    ap.add_argument("--workspace", required=True)
    ap.add_argument("--ide-name")
    ap.add_argument("--plugins", action="store_true",
                    help="run the package's plugin host too (it registers its MCP server in ~/.qwen)")
    args = ap.parse_args()
    if not absolute_roots(args.workspace):
        ap.error("--workspace names no directory")

    host = Host(args)
    stop_signal = []

    def on_signal(sig, _frame):
        stop_signal.append(sig)
        host.stopping = True

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)

    rc = 0
    try:
        if host.setup():
            host.run()
        else:
            rc = 1
    finally:
        if stop_signal:
            note("signal {}, stopping".format(stop_signal[0]))
        try:
            host.shutdown()
        except Exception:
            traceback.print_exc()
            rc = rc or 1
        emit({"event": "stopped"})
    if rc == 0 and host.problems:
        note("{} exception(s) or UI-thread violation(s) in the plugin (see above)".format(host.problems))
        rc = 3
    return rc


if __name__ == "__main__":
    sys.exit(main())
