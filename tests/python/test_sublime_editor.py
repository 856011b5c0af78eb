"""The Sublime Text package's issue-21 features, on the stub editor and the
real library: the reference typed into the qwen terminal (escapes, line
ranges, no terminal), the editor tools (diagnostics from SublimeLinter, LSP
and the build panel; open file and its errors; open editors; selection),
the side-by-side proposal and its layout restore, Close All Diffs, the
proposing CLI's label, and the log panel."""

import importlib
import os
import sys
import types

import pytest

from conftest import HERE

STUBS = os.path.join(HERE, "stubs")
if STUBS not in sys.path:
    sys.path.insert(0, STUBS)

import sublime  # noqa: E402  (the stub)
import sublime_plugin  # noqa: E402

import qwen_companion  # noqa: E402
from sublime_harness import open_terminal, sent, st  # noqa: E402,F401
from test_sublime_plugin import PROPOSED, open_diff, text_of  # noqa: E402


def core_module(name):
    return importlib.import_module("QwenCompanion.qwen_core." + name)


@pytest.fixture
def cmds(st):
    """The package's qwen_commands plugin module (loaded as Sublime Text loads it)."""
    return importlib.import_module("QwenCompanion.qwen_commands")


# -- the reference ------------------------------------------------------------


def test_reference_escapes_and_ranges(st):
    ref = core_module("prompt_ref")
    assert ref.reference("/ws/src/app.py", "/ws") == "@src/app.py "
    assert ref.reference("/ws/src/app.py", "/ws", 10, 20) == "@src/app.py (lines 10-20) "
    assert ref.reference("/ws/a.py", "/ws", 7, 7) == "@a.py (line 7) "
    assert ref.reference("/ws/a.py", "/ws/", 9, 3) == "@a.py (lines 3-9) "
    # every character that ends or breaks a reference gets a backslash
    assert ref.reference("/ws/my notes (v2)/a,b;c!.md", "/ws") == "@my\\ notes\\ \\(v2\\)/a\\,b\\;c\\!.md "
    assert ref.escape_path("x[1]{2}$`'\"#&<>~|*?\t") == "x\\[1\\]\\{2\\}\\$\\`\\'\\\"\\#\\&\\<\\>\\~\\|\\*\\?\\\t"
    with pytest.raises(ref.ReferenceError_, match="not inside /ws"):
        ref.reference("/elsewhere/a.py", "/ws")
    with pytest.raises(ref.ReferenceError_, match="not inside"):
        ref.reference("/ws", "/ws")
    with pytest.raises(ref.ReferenceError_, match="line break"):
        ref.reference("/ws/a\nb.py", "/ws")
    # Windows: no unescaping in Qwen Code, so such a path is refused, a plain one is typed
    assert ref.reference("C:\\ws\\src\\a.py", "C:\\ws", windows=True) == "@src/a.py "
    with pytest.raises(ref.ReferenceError_, match="on Windows"):
        ref.reference("C:\\ws\\my file.py", "C:\\ws", windows=True)
    # selections: an end at column 0 of a later line does not count that line
    assert ref.selection_lines([((2, 4), (5, 0))]) == (3, 5)
    assert ref.selection_lines([((9, 0), (9, 3)), ((1, 2), (2, 1))]) == (2, 10)
    assert ref.selection_lines([]) is None


def run_qwen(st):
    """"Run Qwen Code", then the terminal Terminus would open for it."""
    sublime.add_resource("Packages/Terminus/Terminus.sublime-settings")
    term, args = open_terminal(st, "qwen_companion_run_qwen")
    assert args["tag"] == "qwen-companion-{}".format(st.window.id())
    return term, args


def test_add_file_and_selection_to_the_prompt(st, cmds, workspace, tmp_path):
    term, args = run_qwen(st)
    assert args["cwd"] == workspace
    sub = os.path.join(workspace, "my dir")
    os.mkdir(sub)
    path = os.path.join(sub, "a (1).py")
    with open(path, "w", encoding="utf-8") as f:
        f.write("one\ntwo\nthree\nfour\n")
    view = st.editor.open_file(st.window, path)

    view.run_command("qwen_companion_add_file_to_prompt")
    assert sent(st)[-1] == {"string": "@my\\ dir/a\\ \\(1\\).py ", "tag": args["tag"]}
    assert st.window.active_view() is term  # the terminal gets the focus; no Enter was typed

    st.window.focus_view(view)
    st.editor.move_cursor(view, 1, 1, select_to=(3, 0))  # lines 2-3 (the end is at column 0 of line 4)
    view.run_command("qwen_companion_add_selection_to_prompt")
    assert sent(st)[-1]["string"] == "@my\\ dir/a\\ \\(1\\).py (lines 2-3) "

    st.window.focus_view(view)
    st.editor.move_cursor(view, 2, 2)  # no selection: the caret's line
    assert st.editor.press(view, "ctrl+alt+k") is None  # keymaps are not loaded in this fixture
    view.run_command("qwen_companion_add_selection_to_prompt")
    assert sent(st)[-1]["string"] == "@my\\ dir/a\\ \\(1\\).py (line 3) "

    # a file outside qwen's folder: nothing typed, the status bar says why
    outside = tmp_path / "outside.py"
    outside.write_text("x\n", encoding="utf-8")
    n = len(sent(st))
    other = st.editor.open_file(st.window, str(outside))
    other.run_command("qwen_companion_add_file_to_prompt")
    assert len(sent(st)) == n
    assert "not inside" in sublime.status_messages[-1]

    # the side bar: several files at once
    st.window.run_command("qwen_companion_add_path_to_prompt",
                          {"paths": [os.path.join(workspace, "main.py"), os.path.join(workspace, "README.md")]})
    assert sent(st)[-1]["string"] == "@main.py @README.md "


def test_a_terminal_from_before_a_reload_is_still_found(st, cmds, workspace):
    """The package reloaded: Run Qwen Code's record is gone, its tagged
    Terminus view is not; it runs in the window's first folder."""
    term = st.window.new_file()
    term.settings().set("terminus_view.tag", st.plugin.qwen_terminal_tag(st.window))
    view = st.editor.open_file(st.window, os.path.join(workspace, "main.py"))
    view.run_command("qwen_companion_add_file_to_prompt")
    assert sent(st) == [{"string": "@main.py ", "tag": st.plugin.qwen_terminal_tag(st.window)}]


def test_no_qwen_terminal_types_nothing(st, cmds, workspace):
    view = st.editor.open_file(st.window, os.path.join(workspace, "main.py"))
    view.run_command("qwen_companion_add_file_to_prompt")
    assert sent(st) == []
    assert "no Qwen Code or Gemini CLI terminal runs in this window" in sublime.status_messages[-1]
    # a terminal that finished (qwen exited) counts as none
    term, _ = run_qwen(st)
    term.settings().set("terminus_view.finished", True)
    view.run_command("qwen_companion_add_file_to_prompt")
    assert sent(st) == [] and "no Qwen Code or Gemini CLI terminal" in sublime.status_messages[-1]
    # a proposal view is no file
    st.window.focus_view(view)
    assert not sublime_plugin.text_command("qwen_companion_add_file_to_prompt")(st.window.new_file()).is_enabled()


# -- the editor tools ---------------------------------------------------------


class FakeLinterEvents(object):
    """SublimeLinter's ``lint.events`` (subscribe / unsubscribe / broadcast)."""

    def __init__(self):
        self.handlers = {}

    def subscribe(self, topic, fn):
        self.handlers.setdefault(topic, []).append(fn)

    def unsubscribe(self, topic, fn):
        self.handlers.get(topic, []).remove(fn)

    def broadcast(self, topic, payload):
        for fn in list(self.handlers.get(topic, [])):
            fn(**payload)


class FakeSession(object):
    def __init__(self, diagnostics):
        self.diagnostics = diagnostics


def fake_lsp(window_sessions):
    manager = types.SimpleNamespace(get_sessions=lambda: iter(window_sessions))
    registry = types.SimpleNamespace(windows=types.SimpleNamespace(lookup=lambda window: manager))
    return {"LSP.plugin.core.registry": registry}


def test_diagnostics_from_sublime_linter_lsp_and_the_build(st, workspace, tmp_path):
    diag = core_module("diagnostics")
    main = os.path.join(workspace, "main.py")
    readme = os.path.join(workspace, "README.md")
    events = FakeLinterEvents()
    store = diag.LinterStore()
    unsubscribe = diag.subscribe_sublime_linter(store, {"SublimeLinter.lint.events": events})
    events.broadcast("lint_result", {"filename": main, "linter_name": "flake8", "errors": [
        {"line": 2, "start": 0, "end": 5, "error_type": "warning", "code": "E501", "msg": "line too long",
         "linter": "flake8"},
        {"line": 0, "start": 7, "error_type": "error", "msg": "unused import", "linter": "flake8"}]})
    lsp = fake_lsp([FakeSession({("file", main): [
        {"range": {"start": {"line": 2, "character": 8}, "end": {"line": 2, "character": 12}},
         "severity": 1, "message": "undefined name", "source": "pyright", "code": "reportUndefined"},
        {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}},
         "severity": 4, "message": "a hint"}], ("untitled", "x"): []})])
    panel = st.window.create_output_panel("exec")
    panel.results = [("README.md", 1, 3, "build: bad heading"), ("/abs/else.c", 9, 0, "")]
    found = diag.collect([st.window], None, None, store, lsp)
    assert {"path": main, "line": 3, "column": 1, "endLine": 3, "endColumn": 6, "severity": "warning",
            "message": "line too long", "source": "flake8", "code": "E501"} in found
    assert {"path": main, "line": 1, "column": 8, "severity": "error", "message": "unused import",
            "source": "flake8"} in found
    assert {"path": main, "line": 3, "column": 9, "endLine": 3, "endColumn": 13, "severity": "error",
            "message": "undefined name", "source": "pyright", "code": "reportUndefined"} in found
    assert {"path": readme, "line": 1, "column": 3, "severity": "error", "message": "build: bad heading",
            "source": "build"} in found
    assert {"path": "/abs/else.c", "line": 9, "column": 1, "severity": "error", "message": "build error",
            "source": "build"} in found
    assert len(found) == 6
    # severity: the least severe kind wanted; path: one file
    assert sorted(d["message"] for d in diag.collect([st.window], main, "warning", store, lsp)) == [
        "line too long", "undefined name", "unused import"]
    assert [d["message"] for d in diag.collect([st.window], readme, "error", store, lsp)] == ["build: bad heading"]
    # a cleared lint result forgets the file; unsubscribe stops the feed
    events.broadcast("lint_result", {"filename": main, "linter_name": "flake8", "errors": []})
    assert store.entries() == []
    unsubscribe()
    assert events.handlers["lint_result"] == []
    # an LSP of another shape is skipped and logged, never an error
    logged = []
    broken = {"LSP.plugin.core.registry": types.SimpleNamespace(windows=None)}
    assert diag.lsp_entries(st.window, None, broken, log=logged.append) == []
    assert "LSP's diagnostics could not be read" in logged[0]
    # LSP columns are UTF-16: an emoji before the column counts 2 units, 1 character
    assert diag.utf16_to_chars("\U0001F600 = x", 3) == 2
    assert diag.utf16_to_chars(None, 3) == 3


def answer(st, handlers, name, params):
    pending = handlers[name]({"id": 1, "plugin": None, "from": "mcp", "capability": name, "params": params})
    assert isinstance(pending, qwen_companion.Pending)
    assert pending._answer is None  # answered on the main thread, not on the library's
    st.pump_until(lambda: pending._answer is not None, timeout=2)
    return pending._answer


def test_editor_tools_answer_on_the_main_thread(st, workspace, tmp_path):
    tools = core_module("editor_tools")
    handlers = tools.make_handlers(sublime, qwen_companion.Pending, None)
    assert sorted(handlers) == sorted(tools.CAPABILITIES)
    main = os.path.join(workspace, "main.py")
    readme = os.path.join(workspace, "README.md")
    st.editor.open_file(st.window, readme)
    view = st.editor.open_file(st.window, main)
    view._dirty = True

    result, error = answer(st, handlers, "editor_open_editors", {})
    assert error is None and result == {"editors": [
        {"path": readme, "active": False, "dirty": False},
        {"path": main, "active": True, "dirty": True, "language": "python"}]}

    assert answer(st, handlers, "editor_selection", {}) == ({"selection": None}, None)
    st.editor.move_cursor(view, 0, 7, select_to=(2, 5))
    result, _ = answer(st, handlers, "editor_selection", {})
    assert result == {"selection": {"path": main, "text": "os\n\nprint", "start": {"line": 1, "column": 8},
                                    "end": {"line": 3, "column": 6}}}

    result, error = answer(st, handlers, "editor_open_file", {"path": readme, "line": 1, "column": 3,
                                                              "endLine": 1, "endColumn": 7})
    assert (result, error) == ({"opened": True}, None)
    assert st.window.active_view().file_name() == readme
    assert list(st.window.active_view().sel()) == [sublime.Region(2, 6)]
    # errors: a missing file is never created, a folder is no file
    missing = os.path.join(workspace, "missing.py")
    result, error = answer(st, handlers, "editor_open_file", {"path": missing, "line": 2})
    assert result is None and "does not exist" in error and not os.path.exists(missing)
    assert "is a folder" in answer(st, handlers, "editor_open_file", {"path": workspace})[1]
    assert "absolute" in answer(st, handlers, "editor_open_file", {"path": "main.py"})[1]
    assert "severity must be" in answer(st, handlers, "editor_diagnostics", {"severity": "fatal"})[1]
    assert answer(st, handlers, "editor_diagnostics", {}) == ({"diagnostics": []}, None)
    assert sublime.ui_violations == []


def test_the_plugin_offers_the_editor_tools_before_the_host_starts(st):
    caps = st.plugin._hosts._capabilities
    assert set(caps) >= {"editor_diagnostics", "editor_open_file", "editor_open_editors", "editor_selection"}


# -- proposals: side by side, labels, close all --------------------------------


def test_a_proposal_opens_beside_its_file_and_the_layout_comes_back(st, workspace, mcp_connect):
    main = os.path.join(workspace, "main.py")
    client = mcp_connect(st.wc().companion.lock_file)
    assert st.window.num_groups() == 1
    before = st.window.get_layout()

    open_diff(st, client, main)  # main.py is not open: it is opened on the left
    assert st.pump_until(lambda: st.diff_views())
    (view,) = st.diff_views()
    assert st.window.num_groups() == 2
    original = [v for v in st.window.views() if v.file_name() == main][0]
    assert st.window.get_view_index(original)[0] == 0 and st.window.get_view_index(view)[0] == 1
    assert st.window.active_view() is view

    view.run_command("qwen_companion_reject_diff")
    assert client.wait_notification("ide/diffRejected") == {"filePath": main}
    st.pump_until(lambda: st.window.num_groups() == 1, timeout=2)
    assert st.window.get_layout() == before

    # a window the user split keeps its layout
    split = {"cols": [0.0, 0.3, 1.0], "rows": [0.0, 1.0], "cells": [[0, 0, 1, 1], [1, 0, 2, 1]]}
    st.window.set_layout(split)
    st.window.focus_view(original)
    open_diff(st, client, main)
    assert st.pump_until(lambda: st.diff_views())
    (view,) = st.diff_views()
    assert st.window.get_view_index(view)[0] == 1
    view.close()  # closing it is diffClosed; the user's layout stays
    client.wait_notification("ide/diffClosed")
    st.pump_until(lambda: False, timeout=0.2)
    assert st.window.get_layout() == split


def test_side_by_side_can_be_turned_off(st, workspace, mcp_connect):
    sublime.load_settings("QwenCompanion.sublime-settings").set("diff_side_by_side", False)
    client = mcp_connect(st.wc().companion.lock_file)
    open_diff(st, client, os.path.join(workspace, "main.py"))
    assert st.pump_until(lambda: st.diff_views())
    assert st.window.num_groups() == 1


def test_close_all_diffs_rejects_each_and_closes_their_views(st, workspace, mcp_connect, cmds):
    client = mcp_connect(st.wc().companion.lock_file)
    paths = [os.path.join(workspace, "main.py"), os.path.join(workspace, "new.py")]
    for p in paths:
        open_diff(st, client, p)
    assert st.pump_until(lambda: len(st.diff_views()) == 2)
    st.window.run_command("qwen_companion_close_all_diffs")
    got = sorted([client.wait_notification("ide/diffRejected")["filePath"] for _ in paths])
    assert got == sorted(paths)
    assert st.diff_views() == [] and st.wc().pending_diffs() == []
    assert sublime.status_messages[-1].endswith("rejected and closed 2 proposals")
    assert not os.path.exists(paths[1])  # nothing written
    st.pump_until(lambda: st.window.num_groups() == 1, timeout=2)
    assert st.window.num_groups() == 1
    st.window.run_command("qwen_companion_close_all_diffs")
    assert sublime.status_messages[-1].endswith("no proposal is open")


class FakeDiffs(object):
    def __init__(self, answer):
        self.answer = answer

    def open_diffs(self):
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def test_the_proposing_cli_is_named_only_with_several_connected(st):
    wc = st.wc()
    real = wc.companion
    one = {"clients": 1, "diffs": [{"filePath": "/w/a.py", "session": {"id": "s1", "label": "CLI #1"}}]}
    two = {"clients": 2, "diffs": [{"filePath": "/w/a.py", "session": {"id": "s2", "label": "CLI #2"}},
                                   {"filePath": "/w/b.py", "session": {"id": "s1", "label": "CLI #1"}}]}
    try:
        wc.companion = FakeDiffs(one)
        assert wc._proposer_label("/w/a.py") is None
        wc.companion = FakeDiffs(two)
        assert wc._proposer_label("/w/a.py") == "CLI #2" and wc._proposer_label("/w/b.py") == "CLI #1"
        wc.companion = FakeDiffs(qwen_companion.NotFoundError("old library", 8))
        assert wc._proposer_label("/w/a.py") is None
    finally:
        wc.companion = real


def test_the_label_reaches_the_proposal_views_name(st, workspace, mcp_connect):
    if not hasattr(st.wc().companion._lib, "qc_companion_open_diffs_json"):
        pytest.fail("the library has no qc_companion_open_diffs_json (issue 21's core)")
    first = mcp_connect(st.wc().companion.lock_file)
    second = mcp_connect(st.wc().companion.lock_file)
    main = os.path.join(workspace, "main.py")
    assert st.pump_until(lambda: st.wc().connected_clients() == 2)
    open_diff(st, second, main)
    assert st.pump_until(lambda: st.diff_views())
    (view,) = st.diff_views()
    assert view.name() == "Proposed (CLI #2): main.py"
    assert text_of(view) == PROPOSED
    open_diff(st, first, main)  # a newer proposal from the other CLI renames the view
    assert st.pump_until(lambda: view.name() == "Proposed (CLI #1): main.py")


# -- health and log -----------------------------------------------------------


def test_the_log_panel_keeps_the_newest_lines(st, cmds):
    logbuf = core_module("logbuf")
    logbuf.clear()
    for i in range(logbuf.MAX_LINES + 5):
        st.plugin.log("line {}".format(i))
    st.window.run_command("qwen_companion_show_log")
    text = text_of(st.window.find_output_panel("qwen_log"))
    assert text.startswith("(5 older lines dropped: the log keeps the last 2000)\n")
    assert "line 4\n" not in text and text.rstrip().endswith("line 2004")
    assert len(text.splitlines()) == logbuf.MAX_LINES + 1
    assert ("show_panel", {"panel": "output.qwen_log"}) in st.window.commands
    # the package's other modules log there too, with their prefix
    importlib.import_module("QwenCompanion.participant").log("from sessions")
    importlib.import_module("QwenCompanion.plugin_ui").log("from plugins")
    assert "Qwen Sessions: from sessions\n" in logbuf.text() and "from plugins\n" in logbuf.text()


def test_health_options_come_from_the_settings(cmds):
    s = sublime.Settings({"qwen_command": "~/bin/qwen --approval-mode default", "node_path": "/opt/node"})
    assert cmds.health_options(s) == {"qwen": os.path.expanduser("~/bin/qwen"), "node": "/opt/node"}
    assert cmds.health_options(sublime.Settings({"qwen_command": ["qwen", "-y"]})) == {"qwen": "qwen"}
    assert cmds.health_options(sublime.Settings({})) == {}


def test_the_health_command_shows_each_check(st, cmds):
    if not hasattr(st.wc().companion._lib, "qc_health_json"):
        pytest.fail("the library has no qc_health_json (issue 21's core)")
    st.window.run_command("qwen_companion_health")
    panel = st.window.find_output_panel("qwen_health")
    assert st.pump_until(lambda: text_of(panel).startswith("qwen-companion "), timeout=30)
    text = text_of(panel)
    assert "] qwen: " in text and "] node: " in text and "] lock_file: " in text
    assert sublime.ui_violations == []
