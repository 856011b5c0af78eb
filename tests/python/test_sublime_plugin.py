"""The Sublime Text plugin (examples/sublime/QwenCompanion) against stub
``sublime``/``sublime_plugin`` modules and the real library: event -> library
mapping, workspace folders, terminal env, and the whole diff flow driven by
an MCP client (the official Python SDK)."""

import json
import os
import subprocess
import sys
import threading

import pytest

from conftest import BINDING_DIR, HERE, SUBLIME_PACKAGE_DIR

STUBS = os.path.join(HERE, "stubs")
if STUBS not in sys.path:
    sys.path.insert(0, STUBS)

import sublime  # noqa: E402  (the stub)
import sublime_plugin  # noqa: E402

from sublime_harness import PLUGIN_FILE, Recorder, St, load_plugin, st  # noqa: E402,F401


def test_one_companion_per_window(st, workspace, tmp_path):
    lock = st.lock()
    assert lock["workspacePath"] == workspace
    assert lock["ideInfo"] == {"name": "sublime-text", "displayName": "Sublime Text"}
    assert lock["ppid"] == os.getpid()

    other = tmp_path / "other"
    other.mkdir()
    second = st.editor.new_window([str(other)])
    assert st.wc(second) is not st.wc()
    assert st.lock(second)["workspacePath"] == str(other)
    assert st.wc(second).companion.port != st.wc().companion.port

    lock_file = st.wc(second).companion.lock_file
    st.editor.close_window(second)
    assert second.id() not in st.plugin._companions
    assert not os.path.exists(lock_file)


def test_plugin_unloaded_closes_every_companion(st):
    lock_file = st.wc().companion.lock_file
    st.plugin.plugin_unloaded()
    assert st.plugin._companions == {}
    assert not os.path.exists(lock_file)


def test_file_events_map_to_library_calls(st, workspace):
    rec = st.record()
    main = os.path.join(workspace, "main.py")
    view = st.editor.open_file(st.window, main)
    assert rec.events() == [
        ("file_opened", main),
        ("file_focused", main),
        ("set_cursor", main, 1, 1),
        ("set_selection", main, None),
    ]
    del rec.calls[:]

    st.editor.move_cursor(view, 2, 0, select_to=(2, 5))  # "print" on line 3
    assert rec.events() == [("set_cursor", main, 3, 6), ("set_selection", main, "print")]
    f = rec.context()["workspaceState"]["openFiles"][0]
    assert f["path"] == main and f["isActive"] is True
    assert f["cursor"] == {"line": 3, "character": 6} and f["selectedText"] == "print"

    readme = os.path.join(workspace, "README.md")
    st.editor.open_file(st.window, readme)
    del rec.calls[:]
    st.window.focus_view(view)  # back to main.py
    assert rec.events()[0] == ("file_focused", main)

    del rec.calls[:]
    view.close()
    assert ("file_closed", main) in rec.events()
    paths = [x["path"] for x in rec.context()["workspaceState"]["openFiles"]]
    assert paths == [readme]


def test_multiple_and_huge_selections(st, tmp_path):
    big = tmp_path / "big.txt"
    big.write_text("abc\n" + "x" * 100000 + "\n", encoding="utf-8")
    rec = st.record()
    view = st.editor.open_file(st.window, str(big))
    view.sel().clear()
    view.sel().add(sublime.Region(0, 1))
    view.sel().add(sublime.Region(2, 3))
    sublime_plugin.emit("on_selection_modified", view)
    assert rec.events()[-1] == ("set_selection", str(big), "a\nc")

    view.sel().clear()
    view.sel().add(sublime.Region(0, view.size()))  # select all
    del rec.calls[:]
    sublime_plugin.emit("on_selection_modified", view)
    sent = rec.events()[-1][2]
    assert 16384 < len(sent) <= st.plugin.MAX_SELECTION_CHARS  # not the whole buffer
    text = rec.context()["workspaceState"]["openFiles"][0]["selectedText"]
    assert text.endswith("... [TRUNCATED]") and len(text) <= 16384


def test_views_without_a_file_on_disk_are_ignored(st, workspace):
    rec = st.record()
    scratch = st.window.new_file()
    st.editor.type_text(scratch, "unsaved text")
    st.editor.move_cursor(scratch, 0, 3)
    st.window.create_output_panel("exec")
    assert rec.events() == []

    # saving it makes it a file: now it is reported
    path = os.path.join(workspace, "new.txt")
    st.editor.save(scratch, path)
    assert ("file_opened", path) in rec.events()
    assert ("file_focused", path) in rec.events()


def test_save_as_and_side_bar_rename_are_renames(st, workspace):
    rec = st.record()
    main = os.path.join(workspace, "main.py")
    view = st.editor.open_file(st.window, main)
    del rec.calls[:]

    saved_as = os.path.join(workspace, "saved_as.py")
    st.editor.save(view, saved_as)
    assert rec.events()[0] == ("file_renamed", main, saved_as)

    del rec.calls[:]
    moved = os.path.join(workspace, "moved.py")
    st.editor.rename(st.window, view, moved)
    assert ("file_renamed", saved_as, moved) in rec.events()
    f = rec.context()["workspaceState"]["openFiles"][0]
    assert f["path"] == moved and f["isActive"] is True


def test_folder_changes_update_workspace_roots(st, workspace, tmp_path):
    other = tmp_path / "second"
    other.mkdir()
    view = st.editor.open_file(st.window, os.path.join(workspace, "main.py"))

    # a folder added (no event of its own): noticed on the next activation
    st.window._folders = [workspace, str(other)]
    sublime_plugin.emit("on_activated", view)
    assert st.lock()["workspacePath"] == os.pathsep.join([workspace, str(other)])
    assert st.wc().companion.terminal_env()["QWEN_CODE_IDE_WORKSPACE_PATH"] == os.pathsep.join(
        [workspace, str(other)]
    )

    # after a window command (remove folder, open project...)
    st.window._folders = [str(other)]
    st.window.run_command("remove_folder", {"dirs": [workspace]})
    assert st.lock()["workspacePath"] == str(other)

    # and by the periodic check, with no event at all
    st.window._folders = [workspace]
    sublime.pump(advance=3.0)
    assert st.lock()["workspacePath"] == workspace


def test_terminus_terminals_get_the_env(st, workspace):
    sublime.add_resource("Packages/Terminus/Terminus.sublime-settings")
    port = str(st.wc().companion.port)

    st.window.run_command("terminus_open", {"cmd": ["bash"]})
    name, args = st.window.commands[-1]
    assert name == "terminus_open" and args["cmd"] == ["bash"]
    assert args["env"]["QWEN_CODE_IDE_SERVER_PORT"] == port
    assert args["env"]["QWEN_CODE_IDE_WORKSPACE_PATH"] == workspace

    # the plugin's own command: Terminus with the env, in the first folder
    sublime.load_settings("QwenCompanion.sublime-settings").set("terminal_cmd", ["qwen"])
    st.window.run_command("qwen_companion_open_terminal")
    name, args = st.window.commands[-1]
    assert name == "terminus_open"
    assert args["cmd"] == ["qwen"] and args["cwd"] == workspace and args["title"] == "Qwen Code"
    assert args["env"]["QWEN_CODE_IDE_SERVER_PORT"] == port

    # a terminal that already sets the port is left alone; injection can be turned off
    st.window.run_command("terminus_open", {"env": {"QWEN_CODE_IDE_SERVER_PORT": "1"}})
    assert st.window.commands[-1][1]["env"] == {"QWEN_CODE_IDE_SERVER_PORT": "1"}
    sublime.load_settings("QwenCompanion.sublime-settings").set("terminus_inject_env", False)
    st.window.run_command("terminus_open", {"cmd": ["bash"]})
    assert "env" not in st.window.commands[-1][1]


def test_context_reaches_an_mcp_client(st, workspace, mcp_connect):
    client = mcp_connect(st.wc().companion.lock_file)
    main = os.path.join(workspace, "main.py")
    view = st.editor.open_file(st.window, main)
    st.editor.move_cursor(view, 2, 0, select_to=(2, 5))

    def selected(params):
        files = params["workspaceState"]["openFiles"]
        return files and files[0].get("selectedText") == "print"

    params = client.wait_notification("ide/contextUpdate", selected)
    f = params["workspaceState"]["openFiles"][0]
    assert f["path"] == main and f["isActive"] is True and f["cursor"] == {"line": 3, "character": 6}


# -- the diff flow ------------------------------------------------------------

PROPOSED = "import os\nimport sys\n\nprint('hello', sys.argv)\n"


def open_diff(st, client, path, content=PROPOSED):
    result = client.call_tool("openDiff", {"filePath": path, "newContent": content})
    assert not result.is_error, result
    assert result.content == []


def test_diff_accept_sends_the_edited_buffer(st, workspace, mcp_connect):
    main = os.path.join(workspace, "main.py")
    original = open(main, encoding="utf-8").read()
    source = st.editor.open_file(st.window, main)
    client = mcp_connect(st.wc().companion.lock_file)
    rec = st.record()

    open_diff(st, client, main)
    assert st.pump_until(lambda: st.diff_views())
    (view,) = st.diff_views()
    assert st.window.active_view() is view
    assert view.is_scratch() and view.name() == "Proposed: main.py"
    assert view.substr(sublime.Region(0, view.size())) == PROPOSED
    assert view.reference_document == original  # Sublime Text 4 diff against the file on disk
    assert view.syntax().path.endswith("Python.sublime-syntax")
    assert view.file_name() is None
    assert any("Accept or Reject" in m for m in sublime.status_messages)
    # the diff view is not an editor file: focusing it changes nothing
    assert not [c for c in rec.events() if c[0] == "file_focused"]

    st.editor.type_text(view, "# reviewed in Sublime\n")  # the user edits the proposal
    view.run_command("qwen_companion_accept_diff")

    params = client.wait_notification("ide/diffAccepted")
    assert params == {"filePath": main, "content": PROPOSED + "# reviewed in Sublime\n"}
    assert not view.is_valid() and st.diff_views() == []
    assert open(main, encoding="utf-8").read() == original  # the CLI writes the file, not us
    assert ("diff_accept", main, PROPOSED + "# reviewed in Sublime\n") in rec.events()
    assert not [m for m, _ in client.drain() if m in ("ide/diffClosed", "ide/diffRejected")]
    assert source.is_valid()


def test_diff_reject(st, workspace, mcp_connect):
    path = os.path.join(workspace, "brand_new.py")
    client = mcp_connect(st.wc().companion.lock_file)
    open_diff(st, client, path)
    assert st.pump_until(lambda: st.diff_views())
    (view,) = st.diff_views()
    assert view.reference_document == ""  # a new file: everything is added
    view.run_command("qwen_companion_reject_diff")
    assert client.wait_notification("ide/diffRejected") == {"filePath": path}
    assert not view.is_valid()


def test_accept_and_reject_only_in_diff_views(st, workspace):
    view = st.editor.open_file(st.window, os.path.join(workspace, "main.py"))
    rec = st.record()
    view.run_command("qwen_companion_accept_diff")
    view.run_command("qwen_companion_reject_diff")
    assert rec.events() == [] and view.is_valid()


def test_closing_the_diff_view_is_diff_closed(st, workspace, mcp_connect):
    path = os.path.join(workspace, "main.py")
    client = mcp_connect(st.wc().companion.lock_file)
    open_diff(st, client, path)
    assert st.pump_until(lambda: st.diff_views())
    st.diff_views()[0].close()
    assert client.wait_notification("ide/diffClosed")["filePath"] == path


def test_cli_close_diff_returns_the_edited_buffer(st, workspace, mcp_connect):
    path = os.path.join(workspace, "main.py")
    client = mcp_connect(st.wc().companion.lock_file)
    open_diff(st, client, path)
    assert st.pump_until(lambda: st.diff_views())
    (view,) = st.diff_views()
    st.editor.type_text(view, "# edit\n")

    result = client.call_tool("closeDiff", {"filePath": path, "suppressNotification": True})
    assert not result.is_error
    assert json.loads(result.content[0].text) == {"content": PROPOSED + "# edit\n"}
    assert st.pump_until(lambda: not view.is_valid())
    sublime.pump(timeout=0.2)
    assert not [m for m, _ in client.drain() if m.startswith("ide/diff")]


def test_cli_close_diff_before_the_view_exists(st, workspace, mcp_connect):
    path = os.path.join(workspace, "main.py")
    client = mcp_connect(st.wc().companion.lock_file)
    open_diff(st, client, path)  # the view is only queued for the UI thread
    result = client.call_tool("closeDiff", {"filePath": path, "suppressNotification": True})
    assert json.loads(result.content[0].text) == {"content": PROPOSED}
    sublime.pump(timeout=0.2)
    assert st.diff_views() == []


def test_a_new_proposal_reuses_the_open_diff_view(st, workspace, mcp_connect):
    path = os.path.join(workspace, "main.py")
    client = mcp_connect(st.wc().companion.lock_file)
    open_diff(st, client, path, "first\n")
    assert st.pump_until(lambda: st.diff_views())
    open_diff(st, client, path, "second\n")
    assert st.pump_until(lambda: st.diff_views()[0].substr(sublime.Region(0, 7)) == "second\n")
    assert len(st.diff_views()) == 1


def test_crlf_proposals_keep_their_line_endings(st, workspace, mcp_connect):
    path = os.path.join(workspace, "dos.txt")
    client = mcp_connect(st.wc().companion.lock_file)
    open_diff(st, client, path, "a\r\nb\r\n")
    assert st.pump_until(lambda: st.diff_views())
    (view,) = st.diff_views()
    assert view.substr(sublime.Region(0, view.size())) == "a\nb\n"
    assert view.line_endings() == "Windows"
    st.editor.type_text(view, "c\n")
    view.run_command("qwen_companion_accept_diff")
    assert client.wait_notification("ide/diffAccepted")["content"] == "a\r\nb\r\nc\r\n"


def test_closing_the_window_closes_its_companion_and_diffs(st, workspace, mcp_connect):
    path = os.path.join(workspace, "main.py")
    lock_file = st.wc().companion.lock_file
    client = mcp_connect(lock_file)
    open_diff(st, client, path)
    assert st.pump_until(lambda: st.diff_views())
    window = st.window
    st.editor.close_window(window)
    assert not os.path.exists(lock_file)
    assert window.id() not in st.plugin._companions


# -- identity and lifecycle races ------------------------------------------------


def text_of(view):
    return view.substr(sublime.Region(0, view.size()))


def diff_notifications(client):
    return [(m, p) for m, p in client.drain() if m.startswith("ide/diff")]


def test_close_diff_while_the_view_is_built_leaves_no_orphan(st, workspace, mcp_connect):
    """closeDiff + a new openDiff for the same file arrive while the UI thread
    builds the first view: that view is closed, never left as an orphan that
    could answer the newer diff."""
    path = os.path.join(workspace, "main.py")
    client = mcp_connect(st.wc().companion.lock_file)
    open_diff(st, client, path, "first\n")
    built = []
    raw_new_file = st.window.new_file

    def new_file():  # the CLI acts while the plugin builds the view
        view = raw_new_file()
        if not built:
            built.append(view)
            result = client.call_tool("closeDiff", {"filePath": path, "suppressNotification": True})
            assert json.loads(result.content[0].text) == {"content": "first\n"}
            open_diff(st, client, path, "second\n")
        return view

    st.window.new_file = new_file
    assert st.pump_until(lambda: [text_of(v) for v in st.diff_views()] == ["second\n"])
    sublime.pump(timeout=0.2)
    (orphan,) = built
    assert not orphan.is_valid()
    (view,) = st.diff_views()
    view.run_command("qwen_companion_accept_diff")
    assert client.wait_notification("ide/diffAccepted") == {"filePath": path, "content": "second\n"}


@pytest.mark.parametrize("accept", [True, False], ids=["accept", "reject"])
def test_deciding_in_a_view_that_is_not_the_live_diff_does_nothing(st, workspace, mcp_connect, accept):
    path = os.path.join(workspace, "main.py")
    client = mcp_connect(st.wc().companion.lock_file)
    open_diff(st, client, path)
    assert st.pump_until(lambda: st.diff_views())
    (live,) = st.diff_views()
    rec = st.record()

    # a stale "Proposed:" view for the same file (as left by an older plugin)
    stale = st.window.new_file()
    for key, value in (("qwen_companion_is_diff", True), ("qwen_companion_diff_path", path),
                       ("qwen_companion_window", st.window.id())):
        stale.settings().set(key, value)
    stale.run_command("qwen_companion_set_content", {"text": "stale\n"})
    stale.run_command("qwen_companion_accept_diff" if accept else "qwen_companion_reject_diff")

    assert not stale.is_valid()
    assert any("no longer waits" in m for m in sublime.status_messages)
    assert not [c for c in rec.events() if c[0].startswith("diff_")]
    sublime.pump(timeout=0.2)
    assert diff_notifications(client) == []
    assert live.is_valid() and st.diff_views() == [live]

    live.run_command("qwen_companion_accept_diff")  # the live diff still answers
    assert client.wait_notification("ide/diffAccepted") == {"filePath": path, "content": PROPOSED}


def test_a_decision_waits_until_the_newest_proposal_is_shown(st, workspace, mcp_connect):
    path = os.path.join(workspace, "main.py")
    client = mcp_connect(st.wc().companion.lock_file)
    open_diff(st, client, path, "first\n")
    assert st.pump_until(lambda: st.diff_views())
    (view,) = st.diff_views()
    open_diff(st, client, path, "second\n")  # queued for the UI thread, not shown yet
    view.run_command("qwen_companion_accept_diff")
    assert view.is_valid() and view.settings().get("qwen_companion_is_diff")
    assert any("changed this proposal" in m for m in sublime.status_messages)
    sublime.pump()
    assert text_of(view) == "second\n"
    assert diff_notifications(client) == []
    view.run_command("qwen_companion_accept_diff")
    assert client.wait_notification("ide/diffAccepted") == {"filePath": path, "content": "second\n"}


def test_close_diff_with_a_newer_unshown_proposal_returns_that_proposal(st, workspace, mcp_connect):
    path = os.path.join(workspace, "main.py")
    client = mcp_connect(st.wc().companion.lock_file)
    open_diff(st, client, path, "first\n")
    assert st.pump_until(lambda: st.diff_views())
    (view,) = st.diff_views()
    st.editor.type_text(view, "edited\n")
    open_diff(st, client, path, "second\n")  # not shown yet: the edits were made to "first"
    result = client.call_tool("closeDiff", {"filePath": path, "suppressNotification": True})
    assert json.loads(result.content[0].text) == {"content": "second\n"}
    assert st.pump_until(lambda: not view.is_valid())
    assert st.diff_views() == []


def test_a_repeated_show_keeps_the_users_edits(st, workspace, mcp_connect):
    """Two queued show callbacks for one proposal: the second one does not
    overwrite what the user typed in between."""
    path = os.path.join(workspace, "main.py")
    client = mcp_connect(st.wc().companion.lock_file)
    open_diff(st, client, path)
    assert st.pump_until(lambda: st.diff_views())
    (view,) = st.diff_views()
    st.editor.type_text(view, "# mine\n")
    st.wc().show_diff(path)
    assert text_of(view) == PROPOSED + "# mine\n"


def test_a_closed_companion_refuses_diffs_and_shows_none(st, workspace, mcp_connect):
    path = os.path.join(workspace, "main.py")
    client = mcp_connect(st.wc().companion.lock_file)
    old = st.wc()
    open_diff(st, client, path)  # queued, then the companion restarts
    st.window.run_command("qwen_companion_restart")
    assert st.wc() is not old
    with pytest.raises(st.plugin._qc.RefuseDiff):
        old._on_open_diff(path, "late\n")  # a callback racing with close()
    sublime.pump(timeout=0.2)
    assert st.diff_views() == []


def test_decide_without_a_companion_closes_the_view(st, workspace):
    view = st.window.new_file()
    view.settings().set("qwen_companion_is_diff", True)
    view.settings().set("qwen_companion_diff_path", os.path.join(workspace, "main.py"))
    view.settings().set("qwen_companion_window", st.window.id())
    st.plugin.close_window_companion(st.window.id())
    view.run_command("qwen_companion_accept_diff")
    assert not view.is_valid()
    assert any("no longer waits" in m for m in sublime.status_messages)


def test_closing_a_window_does_not_restart_its_companion(st, workspace, mcp_connect, lock_dir):
    main = os.path.join(workspace, "main.py")
    st.editor.open_file(st.window, main)
    st.editor.open_file(st.window, os.path.join(workspace, "README.md"))
    client = mcp_connect(st.wc().companion.lock_file)
    open_diff(st, client, main)
    assert st.pump_until(lambda: st.diff_views())
    window = st.window
    st.editor.close_window(window)  # closing the views activates the others
    assert window.id() not in st.plugin._companions
    assert [f for f in os.listdir(lock_dir) if f.endswith(".lock")] == []
    sublime.pump(advance=3.0)
    assert st.plugin._companions == {}


def test_unloading_the_plugin_does_not_restart_companions(st, workspace, mcp_connect, lock_dir):
    main = os.path.join(workspace, "main.py")
    st.editor.open_file(st.window, main)
    client = mcp_connect(st.wc().companion.lock_file)
    open_diff(st, client, main)
    assert st.pump_until(lambda: st.diff_views())
    st.plugin.plugin_unloaded()  # closing the diff view activates main.py
    assert st.plugin._companions == {}
    assert [f for f in os.listdir(lock_dir) if f.endswith(".lock")] == []


def test_a_cancelled_window_close_gets_its_companion_back(st, workspace):
    main = os.path.join(workspace, "main.py")
    view = st.editor.open_file(st.window, main)
    sublime_plugin.emit("on_pre_close_window", st.window)  # then the user cancels (unsaved files)
    sublime_plugin.emit("on_activated", view)
    assert st.window.id() not in st.plugin._companions
    for _ in range(st.plugin.CLOSING_GRACE_POLLS + 1):
        sublime.pump(advance=3.0)
    wc = st.wc()
    assert wc.tracked == {view.id(): main} and wc.active == main
    assert st.lock()["workspacePath"] == workspace


def test_the_restart_command_revives_a_window_marked_closing(st, workspace):
    sublime_plugin.emit("on_pre_close_window", st.window)
    st.window.run_command("qwen_companion_restart")
    assert st.window.id() in st.plugin._companions


def test_a_view_moved_to_another_window_changes_companion(st, workspace, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    second = st.editor.new_window([str(other)])
    main = os.path.join(workspace, "main.py")
    view = st.editor.open_file(st.window, main)
    rec1, rec2 = st.record(), st.record(second)
    st.editor.move_view(view, second)
    assert ("file_closed", main) in rec1.events()
    assert rec2.events()[:2] == [("file_opened", main), ("file_focused", main)]
    assert rec1.context()["workspaceState"]["openFiles"] == []
    assert [f["path"] for f in rec2.context()["workspaceState"]["openFiles"]] == [main]


def test_a_view_that_left_the_window_without_events_is_closed_by_the_poll(st, workspace):
    main = os.path.join(workspace, "main.py")
    view = st.editor.open_file(st.window, main)
    rec = st.record()
    st.window._views.remove(view)  # Sublime Text 3: no move events
    sublime.pump(advance=3.0)
    assert ("file_closed", main) in rec.events()
    assert st.wc().tracked == {}


# -- line endings ----------------------------------------------------------------

MIXED = "a\r\nb\nc\r\n"


@pytest.mark.parametrize("decide", ["accept", "close_diff"])
def test_mixed_line_endings_come_back_unchanged(st, workspace, mcp_connect, decide):
    path = os.path.join(workspace, "mixed.txt")
    client = mcp_connect(st.wc().companion.lock_file)
    open_diff(st, client, path, MIXED)
    assert st.pump_until(lambda: st.diff_views())
    (view,) = st.diff_views()
    assert text_of(view) == "a\nb\nc\n"
    assert view.line_endings() == "Unix"  # not uniformly CRLF
    if decide == "accept":
        view.run_command("qwen_companion_accept_diff")
        assert client.wait_notification("ide/diffAccepted")["content"] == MIXED
    else:
        result = client.call_tool("closeDiff", {"filePath": path, "suppressNotification": True})
        assert json.loads(result.content[0].text) == {"content": MIXED}


def test_edited_mixed_line_endings_keep_each_lines_ending(st, workspace, mcp_connect):
    path = os.path.join(workspace, "mixed.txt")
    client = mcp_connect(st.wc().companion.lock_file)
    open_diff(st, client, path, MIXED)
    assert st.pump_until(lambda: st.diff_views())
    (view,) = st.diff_views()
    view._text = "a\nB\nc\nd\n"  # the user changes line 2 and adds line 4
    view.run_command("qwen_companion_accept_diff")
    assert client.wait_notification("ide/diffAccepted")["content"] == "a\r\nB\nc\r\nd\r\n"


def test_a_new_lf_proposal_resets_the_views_line_endings(st, workspace, mcp_connect):
    path = os.path.join(workspace, "dos.txt")
    client = mcp_connect(st.wc().companion.lock_file)
    open_diff(st, client, path, "a\r\nb\r\n")
    assert st.pump_until(lambda: st.diff_views() and st.diff_views()[0].line_endings() == "Windows")
    open_diff(st, client, path, "a\nb\n")
    assert st.pump_until(lambda: st.diff_views()[0].line_endings() == "Unix")
    st.diff_views()[0].run_command("qwen_companion_accept_diff")
    assert client.wait_notification("ide/diffAccepted")["content"] == "a\nb\n"


def test_line_ending_restoration_of_a_big_edited_file_is_fast(st):
    import time

    lines = ["x = {}".format(i) if i % 3 else "" for i in range(60000)]
    proposed = "".join(line + ("\r\n" if i % 2 else "\n") for i, line in enumerate(lines))
    shown = st.plugin.ShownProposal(proposed)
    buffer = shown.text.replace("x = 30001\n", "x = 30001 # edited\n")
    start = time.monotonic()
    result = shown.final(buffer)
    assert time.monotonic() - start < 2.0
    assert result == proposed.replace("x = 30001\r\n", "x = 30001 # edited\r\n")


@pytest.mark.parametrize(
    "proposed, buffer, expected",
    [
        ("a\r\nb\nc\r\n", "a\nb\nc\n", "a\r\nb\nc\r\n"),  # unchanged: exact
        ("a\r\nb\r\n", "a\nb\nc\n", "a\r\nb\r\nc\r\n"),  # uniform CRLF
        ("a\nb\n", "a\nb\nc\n", "a\nb\nc\n"),  # LF
        ("a\r\nb\nc\r\n", "x\na\nb\nc\n", "x\r\na\r\nb\nc\r\n"),  # inserted first line
        ("a\r\nb\nc\r\n", "a\nb\nb2\nc\n", "a\r\nb\nb2\nc\r\n"),  # inserted after an LF line
        ("a\r\nb\nc\r\n", "a\nc\n", "a\r\nc\r\n"),  # deleted line
        ("a\r\nb\nc", "a\nb\nc\nd", "a\r\nb\nc\nd"),  # no final newline: as the line before
        ("a\rb\r\nc\n", "a\rb\nc\nd\n", "a\rb\r\nc\nd\n"),  # a lone CR is text
        ("\r\r\n\n", "\r\n\nz", "\r\r\n\nz"),  # CR before CRLF
        ("", "new\n", "new\n"),
    ],
)
def test_proposal_line_ending_restoration(st, proposed, buffer, expected):
    shown = st.plugin.ShownProposal(proposed)
    assert shown.text == proposed.replace("\r\n", "\n")
    assert shown.final(shown.text) == proposed
    assert shown.final(buffer) == expected


# -- finding the binding ----------------------------------------------------

IMPORT_CHECK = r"""
import os, sys
sys.path.insert(0, {here!r})
from sublime_package import load_package
import sublime
settings = sublime.load_settings("QwenCompanion.sublime-settings")
if {binding_path!r}:
    settings.set("binding_path", {binding_path!r})
plugin = load_package({package!r}, only=("plugin",)).plugin
qc = plugin.import_binding()
print(os.path.dirname(os.path.dirname(os.path.abspath(qc.__file__))))
"""


@pytest.mark.parametrize("binding_path", [BINDING_DIR, None], ids=["setting", "repository-checkout"])
def test_plugin_finds_the_binding(binding_path, tmp_path):
    code = IMPORT_CHECK.format(here=HERE, binding_path=binding_path, package=SUBLIME_PACKAGE_DIR)
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=str(tmp_path),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        universal_newlines=True,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == BINDING_DIR


# -- issue 12: UTF-16 columns ---------------------------------------------------

EMOJI_LINE = "s = '\U0001F600\U0001F600' + 'x'  # caret after the emoji\n"


def test_stub_rowcol_utf16_counts_utf16_units(st):
    view = sublime.View(st.window, text="ab\n\U0001F600c\u00e9\U0001F600d\n")
    assert view.rowcol(view.text_point(1, 2)) == (1, 2)
    assert view.rowcol_utf16(view.text_point(1, 2)) == (1, 3)  # the emoji counts 2
    assert view.rowcol_utf16(view.text_point(1, 4)) == (1, 6)  # é counts 1, the second emoji 2
    assert view.rowcol_utf16(view.text_point(0, 2)) == (0, 2)


def test_cursor_column_after_emoji_is_in_utf16_units(st, tmp_path, mcp_connect):
    path = tmp_path / "emoji.py"
    path.write_text("x = 1\n" + EMOJI_LINE, encoding="utf-8")
    rec = st.record()
    view = st.editor.open_file(st.window, str(path))
    client = mcp_connect(st.wc().companion.lock_file)
    del rec.calls[:]
    st.editor.move_cursor(view, 1, 7)  # after "s = '" and both emoji: 7 code points
    assert rec.events()[0] == ("set_cursor", str(path), 2, 10)  # 9 UTF-16 units, 1-based

    def at_column(params):
        files = params["workspaceState"]["openFiles"]
        return files and files[0].get("cursor") == {"line": 2, "character": 10}

    assert client.wait_notification("ide/contextUpdate", at_column)


# -- issue 12: library calls and view.substr only in the async handlers -------------------


def test_async_handlers_do_the_library_work(st, workspace, monkeypatch):
    main = os.path.join(workspace, "main.py")
    view = st.editor.open_file(st.window, main)
    rec = st.record()
    reads = []
    raw_substr = sublime.View.substr

    def substr(v, x):
        reads.append(threading.current_thread().name)
        return raw_substr(v, x)

    monkeypatch.setattr(sublime.View, "substr", substr)
    st.editor.move_cursor(view, 2, 0, select_to=(2, 5))
    st.window.focus_view(st.window.new_file())
    st.window.focus_view(view)
    assert ("set_selection", main, "print") in rec.events()
    assert rec.calls and set(rec.threads) == {sublime.ASYNC_THREAD_NAME}
    assert reads and set(reads) == {sublime.ASYNC_THREAD_NAME}


SYNC_EVENTS = {
    "on_pre_close_window": "window", "on_window_command": "window+command",
    "on_post_window_command": "window+command", "on_pre_close": "view", "on_pre_move": "view",
}


def test_every_handler_is_an_event_sublime_text_delivers(st):
    (listener,) = [x for x in sublime_plugin.listeners() if type(x).__name__ == "QwenCompanionEventListener"]
    handlers = [n for n in dir(listener) if n.startswith("on_")]
    assert handlers and set(handlers) <= sublime_plugin.ALL_CALLBACKS, set(handlers) - sublime_plugin.ALL_CALLBACKS


def test_sync_handlers_never_call_the_library(st, workspace, monkeypatch):
    """Every synchronous handler of the listener only hands work over: with
    the async thread held, none of them calls the library or reads a buffer."""
    main = os.path.join(workspace, "main.py")
    view = st.editor.open_file(st.window, main)
    st.wc()._on_open_diff(main, "proposed\n")  # as the library thread calls it
    assert st.pump_until(lambda: st.diff_views())
    (diff,) = st.diff_views()
    st.window.focus_view(view)
    sublime.add_resource("Packages/Terminus/Terminus.sublime-settings")
    rec = st.record()
    reads = []
    monkeypatch.setattr(sublime.View, "substr", lambda v, x: reads.append(x) or "")
    held = []
    monkeypatch.setattr(sublime, "set_timeout_async", lambda fn, delay=0: held.append(fn))
    (listener,) = [x for x in sublime_plugin.listeners() if type(x).__name__ == "QwenCompanionEventListener"]
    sync = sorted(n for n in dir(listener) if n.startswith("on_") and not n.endswith("_async"))
    assert set(sync) == set(SYNC_EVENTS), "a new sync handler: add it here"
    for name in sync:
        kind = SYNC_EVENTS[name]
        hook = getattr(listener, name)
        if kind == "window":
            continue  # on_pre_close_window: below, last
        elif kind == "window+command":
            hook(st.window, "terminus_open", {"cmd": ["bash"]})
            hook(st.window, "rename_path", {"paths": [main]})
        else:
            hook(view)
            hook(diff)
    assert rec.calls == [] and reads == []
    assert held  # the work was handed over, not dropped
    listener.on_pre_close_window(st.window)  # last: it retires the companion
    assert rec.calls == [] and reads == []
    for fn in held:
        sublime.run_async(fn)
    sublime.wait_async()
    assert ("file_closed", main) in rec.events()
    assert ("diff_closed", main) in rec.events()


# -- issue 12: save accepts ---------------------------------------------------------


def load_keymaps(platform):
    names = ["Default.sublime-keymap"]
    if platform == "osx":
        names.append("Default (OSX).sublime-keymap")
    for name in names:
        sublime.load_keymap(os.path.join(SUBLIME_PACKAGE_DIR, name))


@pytest.mark.parametrize("keys, platform", [("ctrl+s", "linux"), ("super+s", "osx")])
def test_save_in_the_proposal_view_accepts(st, workspace, mcp_connect, keys, platform):
    load_keymaps(platform)
    main = os.path.join(workspace, "main.py")
    client = mcp_connect(st.wc().companion.lock_file)
    open_diff(st, client, main)
    assert st.pump_until(lambda: st.diff_views())
    (view,) = st.diff_views()
    st.editor.type_text(view, "# saved\n")
    binding = st.editor.press(view, keys)
    assert binding["command"] == "qwen_companion_accept_diff"
    assert client.wait_notification("ide/diffAccepted") == {"filePath": main, "content": PROPOSED + "# saved\n"}
    assert not view.is_valid()
    assert ("save", None) not in st.window.commands  # no Save As dialog for the scratch view


def test_save_elsewhere_is_still_save(st, workspace):
    load_keymaps("linux")
    view = st.editor.open_file(st.window, os.path.join(workspace, "main.py"))
    rec = st.record()
    assert st.editor.press(view, "ctrl+s") is None
    assert ("save", None) in st.window.commands
    assert not [c for c in rec.events() if c[0].startswith("diff_")]


# -- issue 12: settings re-read on change ---------------------------------------------


def test_changed_companion_settings_restart_the_companions(st, workspace):
    old = st.wc()
    old_lock = old.companion.lock_file
    settings = sublime.load_settings("QwenCompanion.sublime-settings")
    settings.set("debounce_ms", 7)
    new = st.wc()
    assert new is not old and new.config["debounce_ms"] == 7
    assert old.companion.closed and not os.path.exists(old_lock)
    assert st.lock()["workspacePath"] == workspace

    settings.set("ide_name", "Sublime Text (work)")
    assert st.wc() is not new and st.lock()["ideInfo"]["displayName"] == "Sublime Text (work)"

    same = st.wc()
    settings.set("terminus_inject_env", False)  # read at each use: nothing restarts
    settings.set("log_level", 3)
    assert st.wc() is same


def test_an_invalid_changed_setting_is_reported_and_loses_nothing(st, workspace):
    main = os.path.join(workspace, "main.py")
    st.editor.open_file(st.window, main)
    old = st.wc()
    settings = sublime.load_settings("QwenCompanion.sublime-settings")
    settings.set("request_timeout_ms", 5)  # out of the library's range
    sublime.pump()
    assert any("requestTimeoutMs" in m for m in sublime.status_messages)
    assert st.wc() is old and not old.companion.closed  # the running companion stays
    assert os.path.exists(old.companion.lock_file)
    settings.set("request_timeout_ms", 20000)  # fixed: a companion with the new value
    new = st.wc()
    assert new is not old and new.config["request_timeout_ms"] == 20000
    assert new.tracked == {st.window.active_view().id(): main} and new.active == main


# -- issue 12: status indicator -----------------------------------------------------


def status_of(view):
    return view.get_status("qwen_companion")


def test_status_indicator_shows_clis_diffs_and_errors(st, workspace, mcp_connect):
    main = os.path.join(workspace, "main.py")
    view = st.editor.open_file(st.window, main)
    sublime.pump()
    wc = st.wc()
    assert status_of(view).startswith("Qwen: ")
    client = mcp_connect(wc.companion.lock_file)
    counts = hasattr(wc.companion._lib, "qc_companion_connected_clients")
    if counts:
        assert st.pump_until(lambda: (wc.update_status(), sublime.pump(), "1 CLI" in status_of(view))[-1])
    else:
        assert "listening on {}".format(wc.port) in status_of(view)

    open_diff(st, client, main)
    assert st.pump_until(lambda: st.diff_views())
    (diff,) = st.diff_views()
    st.window.focus_view(view)
    sublime.pump()
    assert "diff pending: main.py" in status_of(view)

    wc.companion.close()  # the library refuses the decision now
    diff.run_command("qwen_companion_accept_diff")
    sublime.pump()
    st.window.focus_view(view)
    sublime.pump()
    assert "error: diff_accept failed" in status_of(view)
    assert "diff pending" not in status_of(view)


def test_status_text():
    from QwenCompanion.qwen_core import status

    assert status.status_text(None, [], None, 4000) == "Qwen: listening on 4000"
    assert status.status_text(0, [], None, 4000) == "Qwen: no CLI (port 4000)"
    assert status.status_text(2, ["a.py"], "x\ny", 1) == "Qwen: 2 CLIs | diff pending: a.py | error: x y"
    assert status.status_text(1, ["a", "b", "c"], None) == "Qwen: 1 CLI | 3 diffs pending"
    assert len(status.status_text(1, [], "e" * 500)) < 120


# -- issue 12: Run Qwen Code ----------------------------------------------------------


def test_run_qwen_code_opens_terminus_with_the_env_and_the_command(st, workspace):
    sublime.add_resource("Packages/Terminus/Terminus.sublime-settings")
    settings = sublime.load_settings("QwenCompanion.sublime-settings")
    st.window.run_command("qwen_companion_run_qwen")
    name, args = st.window.commands[-1]
    assert name == "terminus_open"
    assert args["shell_cmd"] == "qwen" and "cmd" not in args  # the default
    assert args["cwd"] == workspace and args["title"] == "Qwen Code"
    assert args["env"]["QWEN_CODE_IDE_SERVER_PORT"] == str(st.wc().companion.port)
    assert args["env"]["QWEN_CODE_IDE_WORKSPACE_PATH"] == workspace

    settings.set("qwen_command", ["qwen", "--approval-mode", "default"])
    st.window.run_command("qwen_companion_run_qwen")
    assert st.window.commands[-1][1]["cmd"] == ["qwen", "--approval-mode", "default"]


def test_run_qwen_code_without_terminus_says_what_to_install(st):
    st.window.run_command("qwen_companion_run_qwen")
    assert not [c for c in st.window.commands if c[0] == "terminus_open"]
    assert any("Terminus" in m for m in sublime.error_messages)


# -- issue 12: menus, commands and documented settings ----------------------------------


def read_jsonc(path):
    import re

    text = open(path, encoding="utf-8").read()
    text = re.sub(r'^\s*//.*$', "", text, flags=re.M)
    return json.loads(re.sub(r",(\s*[\]}])", r"\1", text))


def test_package_settings_menu_opens_the_settings_and_key_bindings():
    menu = read_jsonc(os.path.join(SUBLIME_PACKAGE_DIR, "Main.sublime-menu"))
    prefs = [m for m in menu if m["id"] == "preferences"][0]
    (ours,) = [c for c in prefs["children"][0]["children"] if c["caption"] == "Qwen Companion"]
    files = [c["args"]["base_file"] for c in ours["children"]]
    assert [c["command"] for c in ours["children"]] == ["edit_settings", "edit_settings"]
    for f in files:
        assert os.path.isfile(f.replace("${packages}/QwenCompanion", SUBLIME_PACKAGE_DIR)), f


def test_every_command_in_menus_and_palette_exists(st):
    import importlib

    importlib.import_module("QwenCompanion.qwen_commands")  # the package's other command module
    commands = read_jsonc(os.path.join(SUBLIME_PACKAGE_DIR, "QwenCompanion.sublime-commands"))
    menu = read_jsonc(os.path.join(SUBLIME_PACKAGE_DIR, "Main.sublime-menu"))
    menu += read_jsonc(os.path.join(SUBLIME_PACKAGE_DIR, "Context.sublime-menu"))

    def walk(items):
        for item in items:
            if "command" in item:
                yield item["command"]
            for x in walk(item.get("children", [])):
                yield x

    names = [c["command"] for c in commands] + list(walk(menu))
    for keymap in ("Default.sublime-keymap", "Default (OSX).sublime-keymap"):
        names += [b["command"] for b in read_jsonc(os.path.join(SUBLIME_PACKAGE_DIR, keymap))]
    for name in names:
        if name == "edit_settings":
            continue
        assert sublime_plugin.text_command(name) or sublime_plugin.window_command(name), name
    assert "qwen_companion_run_qwen" in names


def test_every_setting_is_documented(st):
    import re

    used = set()
    for f in ("plugin.py", os.path.join("qwen_core", "host.py"), "participant.py", "qwen_commands.py", "qwen_events.py",
              "plugin_ui.py", "plugin_config.py", "plugin_manager.py"):
        code = open(os.path.join(SUBLIME_PACKAGE_DIR, f), encoding="utf-8").read()
        used |= set(re.findall(r'(?:\bsettings\(\)|\bs|self\._settings\(\))\.get\("([a-z_0-9]+)"', code))
    used |= set(st.plugin.COMPANION_KEYS) | set(st.plugin.HOST_KEYS)
    from QwenCompanion.qwen_core import agents

    used |= set(key for _, key, _ in agents.AGENTS.values())  # qwen_command, gemini_command
    defaults = read_jsonc(os.path.join(SUBLIME_PACKAGE_DIR, "QwenCompanion.sublime-settings"))
    readme = "".join(open(os.path.join(SUBLIME_PACKAGE_DIR, doc), encoding="utf-8").read()
                     for doc in ("README.md", "SESSIONS.md"))
    assert used <= set(defaults), sorted(used - set(defaults))
    assert set(defaults) <= used, sorted(set(defaults) - used)  # no stale setting
    for key in defaults:
        assert "`{}`".format(key) in readme, key
