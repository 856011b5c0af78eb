"""Qwen Sessions in the Sublime package (participant.py over
qwen_participant_core.py) under the stub ``sublime`` modules, against the
real library: one participant per window, the sessions list, sending the
selection / a typed message / the selection with its location / the build
output, receipts shown, refusals before sending, messages received into the
"Qwen messages" panel with their file references, held messages released
and denied, the inbox policy setting, session-id rotation, the terminal env
and unregistering on close. Each test has its own registry (QWEN_HOME)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

from participant_harness import BINDING_DIR, PACKAGE_DIR, Ui, load

import sublime  # noqa: E402  (the stub, put on sys.path by sublime_package)
import sublime_plugin  # noqa: E402

import qwen_companion
from qwen_companion import Participant
from conftest import wait_for  # noqa: E402

TIMEOUT = 10.0


class Env(object):
    def __init__(self, core, mod, editor, window, home, workspace, ui, lib_path):
        self.core, self.mod, self.editor, self.window = core, mod, editor, window
        self.home, self.workspace, self.ui, self.lib_path = home, workspace, ui, lib_path
        self.peers = []

    def wp(self, window=None):
        return self.mod.participant_for(window or self.window)

    def pump_until(self, predicate, timeout=TIMEOUT):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            sublime.pump(timeout=0.02)
            value = predicate()
            if value:
                return value
        return predicate()

    def panel(self, window=None):
        return self.mod.panel_text(window or self.window)

    def statuses(self):
        return [m for m in sublime.status_messages if m.startswith("Qwen Sessions: ")]

    def peer(self, name="qwen-peer", **kwargs):
        got = {"messages": [], "receipts": []}
        p = Participant(config={"qwenHome": self.home}, library=self.lib_path,
                        on_message=got["messages"].append, on_receipt=got["receipts"].append, **kwargs)
        self.peers.append(p)
        info = p.register(name=name, cwd=self.workspace)
        return p, info, got

    def records(self):
        d = os.path.join(self.home, "sessions")
        out = []
        for n in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            if n.endswith(".json"):
                with open(os.path.join(d, n), encoding="utf-8") as f:
                    out.append(json.load(f))
        return out

    def pick_session(self, name):
        assert self.pump_until(lambda: self.ui.quick), "no sessions quick panel"
        return self.ui.pick(lambda item: item[0].startswith(name + " ["))


@pytest.fixture
def st(lib_path, tmp_path, monkeypatch):
    sublime.reset()
    home = tempfile.mkdtemp(prefix="qcsp-")  # short: record paths, isolated registry
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "main.py").write_text("import os\n\nprint('hello')\nx = 1\n", encoding="utf-8")
    s = sublime.load_settings("QwenCompanion.sublime-settings")
    s.set("library_path", lib_path)
    s.set("lock_dir", str(tmp_path / "ide"))
    s.set("qwen_home", home)
    s.set("messages_show_panel", True)
    s.set("plugins_enabled", False)  # the plugin host has its own tests
    ui = Ui().install(monkeypatch)
    editor = sublime.Editor()
    window = editor.new_window([str(ws)])
    pkg, core, mod = load()
    pkg.loaded()
    env = Env(core, mod, editor, window, home, str(ws), ui, lib_path)
    assert env.pump_until(lambda: env.wp()), "the window's participant did not start"
    try:
        yield env
    finally:
        pkg.unloaded()
        for p in env.peers:
            p.close()
        shutil.rmtree(home, ignore_errors=True)
        assert sublime.ui_violations == [], "UI touched off the UI thread"


# --------------------------------------------------------------------------
# registration


def test_one_participant_per_window_unregistered_on_close(st, tmp_path):
    wp = st.wp()
    assert wp is not None and wp.name == "sublime-ws"
    recs = st.records()
    assert [(r["name"], r["kind"], r["cwd"], r["pid"]) for r in recs] == [("sublime-ws", "external", st.workspace, os.getpid())]
    assert recs[0]["sessionId"] == wp.session_id

    other = tmp_path / "Mon Projet (v2)!"
    other.mkdir()
    second = st.editor.new_window([str(other)])
    assert st.pump_until(lambda: st.wp(second))
    assert st.wp(second).name == "sublime-Mon-Projet-v2"
    assert sorted(r["name"] for r in st.records()) == ["sublime-Mon-Projet-v2", "sublime-ws"]

    st.editor.close_window(second)
    assert st.wp(second) is None
    assert [r["name"] for r in st.records()] == ["sublime-ws"]


def test_participant_name_setting_and_unload(st):
    sublime.load_settings("QwenCompanion.sublime-settings").set("participant_name", "my editor\u200b #1")
    st.mod.settings_changed()  # a changed name registers the window again
    assert st.wp().name == "my-editor-1"
    assert [r["name"] for r in st.records()] == ["my-editor-1"]
    sublime.load_settings("QwenCompanion.sublime-settings").set("participant_name", "!!!")
    st.mod.settings_changed()
    assert st.wp() is None and st.records() == []
    assert any("no letter or digit left" in m for m in st.statuses())

    sublime.load_settings("QwenCompanion.sublime-settings").set("participant_name", None)
    st.mod.settings_changed()
    assert st.wp().name == "sublime-ws"
    st.mod.plugin_unloaded()
    assert st.wp() is None
    assert st.records() == []


# --------------------------------------------------------------------------
# sending


def test_list_then_send_prompt(st):
    peer, info, got = st.peer("qwen-peer", inbound_policy="accept")
    view = st.editor.open_file(st.window, os.path.join(st.workspace, "main.py"))
    st.editor.move_cursor(view, 2, 0, select_to=(2, 14))  # print('hello')

    st.window.run_command("qwen_sessions_list")
    assert st.pump_until(lambda: st.ui.quick)
    _, items, _ = st.ui.quick[-1]
    row = [i for i in items if i[0].startswith("qwen-peer [")]
    assert row == [["qwen-peer [{}]".format(info["ref"]), "external · {} old · {}".format(row[0][1].split(" · ")[1].split(" ")[0], st.workspace)]]
    assert not any(i[0].startswith("sublime-ws") for i in items)  # not ourselves
    st.ui.pick(lambda item: item[0].startswith("qwen-peer ["))
    assert st.pump_until(lambda: st.ui.inputs)  # once the quick panel has closed
    caption, initial = st.ui.inputs[-1][1:3]
    assert caption == "Message to qwen-peer [{}]:".format(info["ref"]) and initial == "print('hello')"
    st.ui.type("please review print('hello')")

    assert st.pump_until(lambda: got["messages"])
    m = got["messages"][0]
    assert m["content"] == "please review print('hello')"
    assert m["fromName"] == "sublime-ws" and m["fromMode"] == "prompting"
    assert st.pump_until(lambda: "to qwen-peer: delivered" in st.panel())
    assert "Qwen Sessions: to qwen-peer: delivered" in st.statuses()
    assert "to qwen-peer: sent (" in st.panel()


def test_send_selection_with_location_and_typed(st):
    peer, _, got = st.peer("qwen-peer", inbound_policy="accept")
    view = st.editor.open_file(st.window, os.path.join(st.workspace, "main.py"))
    st.editor.move_cursor(view, 2, 0, select_to=(4, 0))  # lines 3-4, ending at the start of line 5
    st.window.run_command("qwen_sessions_send_selection", {"mode": "context"})
    st.pick_session("qwen-peer")
    assert st.pump_until(lambda: got["messages"])
    assert got["messages"][0]["content"] == "main.py:3-4\n```\nprint('hello')\nx = 1\n\n```"

    st.editor.move_cursor(view, 0, 0)  # nothing selected: Send Selection asks for a message
    st.window.run_command("qwen_sessions_send_selection", {"to": "qwen-peer"})
    assert st.ui.inputs, "no input panel for a typed message"
    st.ui.type("typed by hand")
    assert st.pump_until(lambda: len(got["messages"]) == 2)
    assert got["messages"][1]["content"] == "typed by hand"


def test_send_build_output(st):
    peer, _, got = st.peer("qwen-peer", inbound_policy="accept")
    st.window.run_command("qwen_sessions_send_build_output", {"to": "qwen-peer"})
    assert "Qwen Sessions: no build output to send (run a build first)" in st.statuses()
    panel = st.window.create_output_panel("exec")
    panel._text = "main.py:3: error: boom\n[Finished in 0.1s with exit code 1]\n"
    st.window.run_command("qwen_sessions_send_build_output")
    st.pick_session("qwen-peer")
    assert st.pump_until(lambda: got["messages"])
    assert got["messages"][0]["content"] == (
        "Build output from Sublime Text (ws):\n```\nmain.py:3: error: boom\n[Finished in 0.1s with exit code 1]\n```"
    )


def test_receipts_held_then_denied_are_shown(st):
    peer, _, got = st.peer("qwen-hold", inbound_policy="hold")
    st.mod.send_to(st.window, "qwen-hold", "held over there")
    assert st.pump_until(lambda: "to qwen-hold: held by the recipient for review" in st.panel())
    assert ("Qwen Sessions: to qwen-hold: held by the recipient for review: Your message is waiting for the "
            "recipient's user to review it.") in st.statuses()
    held = wait_for(lambda: peer.held())
    peer.deny(held[0]["msgId"])
    assert st.pump_until(lambda: "to qwen-hold: denied by the recipient's user" in st.panel())
    record = st.wp().send_state(held[0]["msgId"])
    assert record["history"] == ["pending", "held", "denied"]

    refuser, _, _ = st.peer("qwen-refuse", inbound_policy="refuse")
    st.mod.send_to(st.window, "qwen-refuse", "no thanks")
    assert st.pump_until(lambda: "to qwen-refuse: refused: " in st.panel())


def test_refusals_before_sending_show_the_library_message(st):
    peer, _, got = st.peer("qwen-peer", inbound_policy="accept")
    st.mod.send_to(st.window, "qwen-peer", "same words")
    assert st.pump_until(lambda: "to qwen-peer: delivered" in st.panel())
    st.mod.send_to(st.window, "qwen-peer", "same words")
    line = st.pump_until(lambda: [m for m in st.statuses() if "refused before sending" in m])
    assert line == ["Qwen Sessions: not sent to qwen-peer (refused before sending): that exact message went to "
                    "that inbox within the last 30 seconds, and it turns a repeat away before anyone reads it, "
                    "so this one was not sent; say something different or wait for a reply"]
    assert "(refused before sending)" in st.panel()
    assert wait_for(lambda: got["messages"])
    time.sleep(0.2)  # the behaviour under test: the repeat never arrives
    assert [m["content"] for m in got["messages"]] == ["same words"]  # the repeat never went out

    st.mod.send_to(st.window, "nobody-here", "hello?")
    assert st.pump_until(lambda: [m for m in st.statuses() if m.startswith("Qwen Sessions: not sent to nobody-here: ")])
    del sublime.status_messages[:]
    st.mod.send_to(st.window, "qwen-peer", "   \n")
    assert st.statuses() == ["Qwen Sessions: nothing to send: the message is empty"]


# --------------------------------------------------------------------------
# receiving and reviewing


def test_received_message_in_panel_and_location_opens(st, monkeypatch):
    popups = []
    monkeypatch.setattr(sublime.View, "show_popup",
                        lambda view, content, flags=0, location=-1, max_width=320, max_height=240, on_navigate=None,
                        on_hide=None: popups.append((content, on_navigate)), raising=False)
    monkeypatch.setattr(sublime.View, "hide_popup", lambda view: None, raising=False)
    st.editor.open_file(st.window, os.path.join(st.workspace, "main.py"))
    peer, _, _ = st.peer("qwen-peer")
    sent = peer.send("sublime-ws", "look at main.py:3 and <b>this</b>", from_mode="prompting")
    assert peer.wait(sent["msgId"])["state"] == "delivered"  # default policy: mode parity
    assert st.pump_until(lambda: "message from qwen-peer (peer session):" in st.panel())
    text = st.panel()
    assert "    look at main.py:3 and &lt;b>this&lt;/b>" in text  # neutralised as the library gives it
    assert "-> Qwen Sessions: Open Referenced Location: main.py:3" in text
    assert any(m.startswith("Qwen Sessions: message from qwen-peer: look at main.py:3") for m in st.statuses())
    assert ("show_panel", {"panel": "output.qwen_messages"}) in st.window.commands

    st.window.run_command("qwen_sessions_open_referenced_location")
    assert st.ui.opened == [(st.window, os.path.join(st.workspace, "main.py") + ":3:1", sublime.ENCODED_POSITION)]

    # the popup at the caret: escaped sender and text, links to the panel and the location
    (content, navigate), = popups
    assert "<b>qwen-peer</b> (peer session)" in content
    assert "look at main.py:3 and &amp;lt;b&gt;this&amp;lt;/b&gt;" in content  # never markup
    assert '<a href="open:0">main.py:3</a>' in content and '<a href="panel">' in content
    del st.ui.opened[:]
    navigate("open:0")
    assert [o[1] for o in st.ui.opened] == [os.path.join(st.workspace, "main.py") + ":3:1"]
    navigate("open:7")  # a stale link: nothing
    assert len(st.ui.opened) == 1

    sublime.load_settings("QwenCompanion.sublime-settings").set("messages_popup", False)
    sent = peer.send("sublime-ws", "two places: main.py:1 and {}:4:2".format(os.path.join(st.workspace, "main.py")),
                     from_mode="prompting")
    assert peer.wait(sent["msgId"])["state"] == "delivered"
    assert st.pump_until(lambda: "two places" in st.panel())
    st.window.run_command("qwen_sessions_open_referenced_location")
    st.ui.pick(lambda item: item[0].endswith(":4:2"))
    assert st.ui.opened[-1][1] == os.path.join(st.workspace, "main.py") + ":4:2"
    assert len(popups) == 1  # messages_popup: false

    # a folder added to the window later: its files are found too
    extra = os.path.join(os.path.dirname(st.workspace), "extra")
    os.makedirs(os.path.join(extra, "lib"))
    with open(os.path.join(extra, "lib", "util.c"), "w") as f:
        f.write("int x;\n")
    st.editor.set_folders(st.window, [st.workspace, extra])
    sent = peer.send("sublime-ws", "crash in lib/util.c:1", from_mode="prompting")
    assert peer.wait(sent["msgId"])["state"] == "delivered"
    assert st.pump_until(lambda: "Open Referenced Location: lib/util.c:1" in st.panel())
    st.window.run_command("qwen_sessions_open_referenced_location")
    assert st.ui.opened[-1][1] == os.path.join(extra, "lib", "util.c") + ":1:1"


def test_held_messages_release_and_deny(st):
    peer, _, _ = st.peer("qwen-bypass")
    a = peer.send("sublime-ws", "release me", from_mode="bypass")  # mode mismatch: held
    b = peer.send("sublime-ws", "deny me")  # no fromMode: held
    assert peer.wait(a["msgId"], final_only=False)["state"] == "held"
    assert peer.wait(b["msgId"], final_only=False)["state"] == "held"
    assert st.pump_until(lambda: st.panel().count("held for your review") == 2)
    assert "from qwen-bypass (peer session, " in st.panel() and "expires in 4m" in st.panel()

    st.window.run_command("qwen_sessions_review_held")
    _, items, _ = st.ui.quick[-1]
    assert [i[0] for i in items] == ["qwen-bypass: release me", "qwen-bypass: deny me"]
    assert all(i[1].startswith("peer session · ") and "expires in" in i[1] for i in items)
    st.ui.pick(lambda item: item[0].endswith("release me"))
    assert st.pump_until(lambda: st.ui.quick)
    st.ui.pick(lambda item: item.startswith("Release"))
    assert st.pump_until(lambda: peer.send_state(a["msgId"])["state"] == "delivered")
    assert st.pump_until(lambda: "message from qwen-bypass (peer session):\n    release me" in st.panel())

    st.window.run_command("qwen_sessions_review_held")
    st.ui.pick(lambda item: item[0].endswith("deny me"))
    assert st.pump_until(lambda: st.ui.quick)
    st.ui.pick(lambda item: item.startswith("Deny"))
    assert st.pump_until(lambda: peer.send_state(b["msgId"])["state"] == "denied")
    assert st.pump_until(lambda: "held message {}: denied".format(b["msgId"]) in st.panel())
    assert st.panel().count("message from qwen-bypass") == 1  # released once, denied never shown
    st.window.run_command("qwen_sessions_review_held")
    assert "Qwen Sessions: no message is held for review" in st.statuses()

    # deciding twice: the library's answer, nothing lost
    st.window.run_command("qwen_sessions_review_held", {"msg_id": b["msgId"], "action": "release"})
    assert st.pump_until(lambda: [m for m in st.statuses() if m.startswith("Qwen Sessions: release failed: that message is no longer held")])


def test_inbox_policy_setting(st):
    s = sublime.load_settings("QwenCompanion.sublime-settings")
    peer, _, _ = st.peer("qwen-peer")
    assert st.wp().inbound_settings()["policy"] is None  # default = mode parity

    s.set("inbox_policy", "refuse")
    st.mod.settings_changed()
    assert st.wp().inbound_settings()["policy"] == "refuse"
    sent = peer.send("sublime-ws", "let me in", from_mode="prompting")
    assert peer.wait(sent["msgId"])["state"] == "refused"

    s.set("inbox_policy", "hold")
    s.set("held_expiry", "1m")
    st.mod.settings_changed()
    sent = peer.send("sublime-ws", "hold this", from_mode="prompting")
    assert peer.wait(sent["msgId"], final_only=False)["state"] == "held"
    held = st.wp().held_messages()
    assert held[0]["expiresAt"] - held[0]["heldAt"] == 60000

    s.set("inbox_policy", "accept")  # the held one is judged again and delivered
    st.mod.settings_changed()
    assert peer.wait(sent["msgId"])["state"] == "delivered"
    assert st.pump_until(lambda: "    hold this" in st.panel())

    s.set("inbox_policy", "hold")
    st.mod.settings_changed()
    sent = peer.send("sublime-ws", "then refuse this", from_mode="bypass")
    assert peer.wait(sent["msgId"], final_only=False)["state"] == "held"
    s.set("inbox_policy", "refuse")  # held ones are denied, as Qwen does
    st.mod.settings_changed()
    assert peer.wait(sent["msgId"])["state"] == "denied"
    s.set("inbox_policy", "accept")
    st.mod.settings_changed()

    s.set("inbox_policy", "sometimes")
    st.mod.settings_changed()
    assert any("inbox_policy must be one of default, accept, hold, refuse, not 'sometimes'" in m for m in st.statuses())
    assert st.wp().inbound_settings()["policy"] == "accept"  # unchanged

    s.set("inbox_policy", "default")
    st.mod.settings_changed()
    assert st.wp().inbound_settings()["policy"] is None
    sent = peer.send("sublime-ws", "no mode claimed")
    assert peer.wait(sent["msgId"], final_only=False)["state"] == "held"


def test_session_id_rotation_and_terminal_env(st):
    peer, _, got = st.peer("qwen-peer", inbound_policy="accept")
    wp = st.wp()
    old = wp.session_id
    rotated = wp.participant.rotate_session_id(old)
    assert rotated["sessionId"] != old and wp.session_id == rotated["sessionId"]
    assert [r["sessionId"] for r in st.records() if r["name"] == "sublime-ws"] == [rotated["sessionId"]]

    sent = peer.send("sublime-ws", "after rotation", from_mode="prompting")
    assert peer.wait(sent["msgId"])["state"] == "delivered"
    assert st.pump_until(lambda: "    after rotation" in st.panel())
    st.mod.send_to(st.window, "qwen-peer", "from the rotated id")
    assert st.pump_until(lambda: got["messages"])
    st.window.run_command("qwen_sessions_list")
    assert st.pump_until(lambda: st.ui.quick)
    assert not any(i[0].startswith("sublime-ws") for i in st.ui.quick[-1][1])

    env = st.mod.participant_env(st.window)
    assert sorted(env) == ["QWEN_CODE_MESSAGING_SOCKET", "QWEN_CODE_MESSAGING_TOKEN"]
    assert env["QWEN_CODE_MESSAGING_SOCKET"] == wp.info["ipcPath"]
    # every terminal the package starts for the window carries it (next to the companion's env)
    term = st.core.companion_for(st.window).terminal_env()
    assert term["QWEN_CODE_MESSAGING_SOCKET"] == env["QWEN_CODE_MESSAGING_SOCKET"]
    assert term["QWEN_CODE_MESSAGING_TOKEN"] == env["QWEN_CODE_MESSAGING_TOKEN"]
    assert "QWEN_CODE_IDE_SERVER_PORT" in term
    # a process started with that env (a script in the editor's terminal) reaches the window as its own
    # process, delivered under the default policy
    script = textwrap.dedent("""
        import sys
        sys.path.insert(0, sys.argv[1])
        from qwen_companion import Participant
        with Participant(config={"qwenHome": sys.argv[2]}, library=sys.argv[3]) as p:
            p.register(name="build-script")
            sent = p.send_to_parent("tests passed: main.py:2")
            print(p.wait(sent["msgId"])["state"])
    """)
    out = subprocess.run([sys.executable, "-c", script, BINDING_DIR, st.home, st.lib_path],
                         env=dict(os.environ, **env), capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "delivered", out.stderr
    assert st.pump_until(lambda: "message from build-script (a process this editor started):" in st.panel())
    assert st.mod.participant_env(sublime.Window()) == {}


def test_sessions_started_from_the_editor_come_first(st):
    """A session whose process descends from the editor's (a terminal it
    started) is marked and listed first."""
    older, _, _ = st.peer("elsewhere")
    script = textwrap.dedent("""
        import sys, time
        sys.path.insert(0, sys.argv[1])
        from qwen_companion import Participant
        p = Participant(config={"qwenHome": sys.argv[2]}, library=sys.argv[3])
        p.register(name="child-session")
        print("ready", flush=True)
        sys.stdin.readline()
        p.close()
    """)
    child = subprocess.Popen([sys.executable, "-c", script, BINDING_DIR, st.home, st.lib_path],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        newer, _, _ = st.peer("newest")
        rows = st.wp().peers()
        assert [r["name"] for r in rows] == ["child-session", "newest", "elsewhere"]
        assert [r["child"] for r in rows] == [True, False, False]
        st.window.run_command("qwen_sessions_list")
        assert st.pump_until(lambda: st.ui.quick)
        assert st.ui.quick[-1][1][0][0].endswith("(started in this editor)")
    finally:
        child.stdin.close()
        child.wait(timeout=30)


def test_a_window_without_its_companion_has_no_participant(st, tmp_path):
    """The companion's window hooks decide: plugin_loaded joins the windows
    whose companion runs, Restart re-registers, closing unregisters."""
    st.mod.plugin_unloaded()
    assert st.records() == []
    st.mod.on_window_open(st.window)  # unloaded: ignored
    assert st.wp() is None
    st.mod.plugin_loaded()  # the companion runs already: its hook tells (queued)
    assert st.pump_until(lambda: st.wp())
    assert [r["name"] for r in st.records()] == ["sublime-ws"]
    before = st.wp().session_id
    st.window.run_command("qwen_companion_restart")  # the companion restarts: so does the participant
    assert st.pump_until(lambda: st.wp() and st.wp().session_id != before)
    assert [(r["name"], r["sessionId"]) for r in st.records()] == [("sublime-ws", st.wp().session_id)]
    st.editor.close_window(st.window)
    assert st.wp() is None and st.records() == []


# --------------------------------------------------------------------------
# the editor-independent helpers


def test_core_helpers(tmp_path):
    sys.path.insert(0, PACKAGE_DIR)
    try:
        import qwen_participant_core as pc
    finally:
        sys.path.remove(PACKAGE_DIR)
    assert pc.participant_name("/home/me/my project") == "sublime-my-project"
    assert pc.participant_name("/") == "sublime"
    assert pc.participant_name(None) == "sublime"
    assert pc.participant_name("/x/" + "a" * 60) == "sublime-" + "a" * 32
    assert pc.participant_name("/x/caf\u00e9 \U0001F600") == "sublime-caf\u00e9"
    with pytest.raises(pc.ParticipantError):
        pc.participant_name(None, 42)

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("x\n")
    found = pc.find_locations("see src/a.py:12, src/a.py:3-7, at 12:30, gone.py:1, src/a.py:12", [str(tmp_path)])
    assert [(f["label"], f["line"], f["endLine"]) for f in found] == [("src/a.py:12", 12, None), ("src/a.py:3-7", 3, 7)]
    # Windows references (checked with ntpath): a drive path, and a backslash path in a folder
    import ntpath

    there = {"C:\\w\\src\\a.py", "C:\\w\\src\\b.py"}
    found = pc.find_locations("at C:\\w\\src\\a.py:4:2 and src\\b.py:9, not line:3", ["C:\\w"], there.__contains__, ntpath)
    assert [(f["path"], f["line"], f["column"]) for f in found] == [("C:\\w\\src\\a.py", 4, 2), ("C:\\w\\src\\b.py", 9, 1)]

    assert pc.selection_message("a\n```\nb", "/w/f.py", 2, 2, ["/w"]) == "f.py:2\n````\na\n```\nb\n````"
    long = "x" * (pc.MAX_BUILD_OUTPUT + 5)
    assert "[the first 5 characters are left out]" in pc.build_output_message(long)
    assert pc.format_expiry(None) == "never expires"
    assert pc.format_expiry(1000 + 125000, now_ms=1000) == "expires in 2m 05s"
    assert pc.format_age(0, now_ms=7200 * 1000) == "2h"
    assert pc.describe_receipt("dropped", "too many", "rate-limited") == "dropped (rate-limited): too many"
    with pytest.raises(pc.ParticipantError):
        pc.policy_value("maybe")

    proc = tmp_path / "proc"
    for pid, ppid in ((50, 40), (40, 30), (30, 1), (60, 1)):
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "stat").write_text("{} (a b) S {} 0 0\n".format(pid, ppid))
    assert pc.is_descendant(50, 30, proc=str(proc))
    assert not pc.is_descendant(60, 30, proc=str(proc))
    assert not pc.is_descendant(99, 30, proc=str(proc))


def test_palette_entries_and_settings_exist(st):
    """Every "Qwen Sessions:" palette entry runs a command of participant.py
    with arguments it takes, and every setting it reads is in the package's
    settings file with the default the code uses."""
    import inspect
    import re

    with open(os.path.join(PACKAGE_DIR, "QwenSessions.sublime-commands"), encoding="utf-8") as f:
        entries = json.load(f)
    assert len(entries) == 8
    for e in entries:
        assert e["caption"].startswith("Qwen Sessions: ")
        cls = sublime_plugin.window_command(e["command"])
        assert cls is not None and cls.__module__.endswith(".participant"), e
        params = inspect.signature(cls.run).parameters
        assert set(e.get("args", {})) <= set(params), e
    with open(os.path.join(PACKAGE_DIR, "QwenCompanion.sublime-settings"), encoding="utf-8") as f:
        defaults = json.loads(re.sub(r"^\s*//.*$", "", f.read(), flags=re.M))
    sublime.reset()
    snap = st.mod._settings_snapshot()  # nothing set: the code's own defaults
    assert {k: defaults[k] for k in ("sessions_enabled", "participant_name", "inbox_policy", "held_expiry",
                                     "send_from_mode", "qwen_home", "messages_show_panel", "messages_popup")} == {
        "sessions_enabled": snap["enabled"], "participant_name": snap["name"], "inbox_policy": snap["policy"],
        "held_expiry": snap["expiry"], "send_from_mode": snap["from_mode"], "qwen_home": snap["qwen_home"],
        "messages_show_panel": True, "messages_popup": True,
    }


def test_core_reports_sent_before_its_receipts(st):
    """Whatever the race between send() returning and the receipts, each
    send is reported once as "sent" and then only its later transitions."""
    sys.path.insert(0, PACKAGE_DIR)
    try:
        import qwen_participant_core as pc
    finally:
        sys.path.remove(PACKAGE_DIR)

    peer, _, _ = st.peer("qwen-fast", inbound_policy="accept")
    events = []
    wp = pc.WindowParticipant(qwen_companion, "core-test", st.workspace, lambda k, p: events.append((k, p)),
                              config={"qwenHome": st.home}, library=st.lib_path)
    try:
        wp.start()
        ids = [wp.send("qwen-fast", "message {}".format(i))["msgId"] for i in range(5)]
        for msg_id in ids:
            assert wp.wait(msg_id)["state"] == "delivered"
        assert wait_for(lambda: all(wp.send_state(i)["state"] == "delivered" for i in ids))
        for msg_id in ids:
            mine = [(k, p) for k, p in events if k in ("sent", "receipt") and p["msgId"] == msg_id]
            assert mine[0][0] == "sent" and [k for k, _ in mine].count("sent") == 1
            seen = mine[0][1]["history"] + [p["state"] for _, p in mine[1:]]
            assert seen == ["pending", "delivered"], mine
    finally:
        wp.close()


def test_bad_settings_at_start_are_reported(st):
    """A window whose settings cannot be used is not registered, and the
    status bar says why; with the setting fixed it joins."""
    s = sublime.load_settings("QwenCompanion.sublime-settings")
    for key, value, good, why in (
            ("held_expiry", "2h", None, "held_expiry must be one of 1m, 5m, 10m, never, not '2h'"),
            ("send_from_mode", "yolo", "prompting", "send_from_mode must be null, \"prompting\" or \"bypass\", not 'yolo'"),
            ("inbox_policy", "open", "default", "inbox_policy must be one of default, accept, hold, refuse, not 'open'")):
        st.mod.close_window(st.window.id())
        assert st.records() == []
        s.set(key, value)
        del sublime.status_messages[:]
        assert st.mod.on_window_open(st.window) is None
        assert st.wp() is None and st.records() == []
        assert st.statuses() == ["Qwen Sessions: not started: " + why], key
        s.set(key, good)
        assert st.mod.on_window_open(st.window) is st.wp() is not None
        assert [r["name"] for r in st.records()] == ["sublime-ws"]
