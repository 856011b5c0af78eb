"""The Participant class (cross-session messaging) against the real library:
two participants in one private QWEN_HOME and runtime dir, registry, sends
with receipts, the hold buffer, child tokens, error mapping and teardown."""

import json
import logging
import os
import re
import shutil
import socket
import stat
import tempfile
import threading
import time
import uuid

import pytest

import qwen_companion
from qwen_companion import Participant, _native
from conftest import wait_for  # noqa: E402

TIMEOUT = 10.0


def os_thread_name():
    """The kernel's name of the calling thread (the library names its own)."""
    try:
        with open("/proc/self/task/{}/comm".format(threading.get_native_id()), encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return None


class Recorder(object):
    """Collects what a callable receives, with the thread it ran on."""

    def __init__(self):
        self.items = []
        self.threads = set()
        self.lock = threading.Lock()

    def __call__(self, value):
        with self.lock:
            self.items.append(value)
            self.threads.add((threading.get_ident(), os_thread_name()))

    def snapshot(self):
        with self.lock:
            return list(self.items)

    def wait(self, predicate, timeout=TIMEOUT):
        """The first item matching ``predicate`` (waits for it)."""
        def find():
            for item in self.snapshot():
                if predicate(item):
                    return (item,)  # truthy even when the item is not
            return None

        found = wait_for(find, timeout)
        assert found is not None, "nothing matching arrived; got {!r}".format(self.snapshot())
        return found[0]


@pytest.fixture
def area():
    """A private QWEN_HOME and runtime dir, short enough for socket paths."""
    root = tempfile.mkdtemp(prefix="qcs-")
    try:
        yield {"home": os.path.join(root, "home"), "rt": os.path.join(root, "rt")}
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def make_participant(lib_path, area):
    """Creates participants confined to ``area``; all closed at the end."""
    made = []

    def make(**kwargs):
        if not isinstance(kwargs.get("config"), str):
            config = {"qwenHome": area["home"], "runtimeDir": area["rt"], "sweepSockets": False}
            config.update(kwargs.pop("config", None) or {})
            kwargs["config"] = config
        kwargs.setdefault("library", lib_path)
        p = Participant(**kwargs)
        made.append(p)
        return p

    yield make
    for p in made:
        p.close()


def sessions_dir(area):
    return os.path.join(area["home"], "sessions")


def raw_send(path, lines, timeout=TIMEOUT):
    """Writes JSON lines to an inbox as any peer would, half-closes, and
    returns whether the inbox closed its side in time."""
    payload = "".join(json.dumps(line) + "\n" for line in lines).encode("utf-8")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(path)
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        try:
            return s.recv(64) == b""
        except socket.timeout:
            return False


def user_frame(content, from_path=None, reply_token=None, to_session=None, from_mode=None):
    frame = {
        "msgV": 1,
        "msgId": str(uuid.uuid4()),
        "type": "user",
        "fromName": "raw client",
        "message": {"role": "user", "content": content},
    }
    if from_path is not None:
        frame["from"] = from_path
    if reply_token is not None:
        frame["replyToken"] = reply_token
    if to_session is not None:
        frame["toSessionId"] = to_session
    if from_mode is not None:
        frame["fromMode"] = from_mode
    return frame


# -- registry ---------------------------------------------------------------


def test_register_publishes_records_and_list_shows_both(make_participant, area):
    a = make_participant()
    b = make_participant()
    assert a.ipc_path is None and a.sessions() == []
    sa = a.register(name="alpha", cwd="/work/alpha")
    sb = b.register(name="bravo")
    for s in (sa, sb):
        assert set(s) >= {"sessionId", "ref", "name", "kind", "cwd", "startedAt", "recordPath", "ipcPath"}
        assert os.path.dirname(s["recordPath"]) == sessions_dir(area)
        assert stat.S_IMODE(os.stat(s["recordPath"]).st_mode) == 0o600
        assert stat.S_ISSOCK(os.stat(s["ipcPath"]).st_mode)
        assert len(s["ref"]) == 6
    assert sa["name"] == "alpha" and sa["cwd"] == "/work/alpha" and sa["kind"] == "external"
    assert sa["recordPath"] != sb["recordPath"] and sa["ipcPath"] != sb["ipcPath"]
    assert a.ipc_path == sa["ipcPath"] and b.ipc_path == sb["ipcPath"]
    assert a.sessions() == [sa]

    listed = a.list()
    by_id = dict((r["sessionId"], r) for r in listed)
    assert set(by_id) == {sa["sessionId"], sb["sessionId"]}
    assert by_id[sb["sessionId"]]["name"] == "bravo"
    assert by_id[sb["sessionId"]]["recordPath"] == sb["recordPath"]
    assert by_id[sb["sessionId"]]["pid"] == os.getpid()
    assert all(r["reachable"] for r in listed)
    assert "ipcToken" not in json.dumps(listed)  # tokens are never listed

    peers = a.peers(sa["sessionId"])
    assert [p["name"] for p in peers] == ["bravo"] and peers[0]["address"] == "bravo"
    assert b.resolve("alpha")["sessionId"] == sa["sessionId"]
    assert b.resolve("[{}]".format(sa["ref"]))["sessionId"] == sa["sessionId"]
    assert "sessions=['alpha']" in repr(a)


def test_record_contents(make_participant):
    p = make_participant(kind="sublime-text", version="editor 4.1")
    s = p.register(name="rec")
    with open(s["recordPath"], encoding="utf-8") as f:
        record = json.load(f)
    assert record["pid"] == os.getpid() and record["sessionId"] == s["sessionId"]
    assert record["kind"] == "sublime-text" and record["qwenVersion"] == "editor 4.1"
    assert record["ipcPath"] == s["ipcPath"] and len(record["ipcToken"]) == 64


def test_unregister_rotate_and_unregister_all(make_participant):
    p = make_participant(multi_session=True)
    s1 = p.register(name="one")
    s2 = p.register(name="two")
    assert s1["ipcPath"] == s2["ipcPath"]  # one inbox behind both
    assert {s["name"] for s in p.sessions()} == {"one", "two"}
    rotated = p.rotate_session_id(s1["sessionId"], "fixed-new-id")
    assert rotated["sessionId"] == "fixed-new-id" and rotated["recordPath"] == s1["recordPath"]
    fresh = p.rotate_session_id("fixed-new-id")
    assert fresh["sessionId"] != "fixed-new-id" and len(fresh["sessionId"]) == 36
    p.unregister(s2["sessionId"])
    assert not os.path.exists(s2["recordPath"])
    assert [s["sessionId"] for s in p.sessions()] == [fresh["sessionId"]]
    with pytest.raises(qwen_companion.NotFoundError):
        p.unregister(s2["sessionId"])
    p.unregister_all()
    assert p.sessions() == [] and p.ipc_path is None
    assert not os.path.exists(s1["recordPath"]) and not os.path.exists(s1["ipcPath"])
    assert not p.closed  # the handle is still valid (to free)


def test_participant_is_finished_after_unregister_all(make_participant):
    p = make_participant()
    first = p.register(name="first")
    p.unregister_all()
    assert not os.path.exists(first["recordPath"])
    # As documented: after close only free remains.
    with pytest.raises(qwen_companion.NotRunningError):
        p.register(name="back")


# -- sending ----------------------------------------------------------------


def test_send_by_name_and_ref_with_receipts_and_messages(make_participant):
    receipts = Recorder()
    messages = Recorder()
    a = make_participant(on_receipt=receipts)
    b = make_participant(inbound_policy="accept", on_message=messages)
    sa = a.register(name="alpha")
    sb = b.register(name="bravo")

    sent = a.send("bravo", "hello <b>by name</b>")
    assert sent["address"] == "bravo" and sent["toSessionId"] == sb["sessionId"] and sent["confirmed"]
    m = messages.wait(lambda m: m["msgId"] == sent["msgId"])
    assert m["content"] == "hello <b>by name</b>" and m["text"] == "hello &lt;b>by name&lt;/b>"
    assert m["origin"] == "peer" and m["sessionId"] == sb["sessionId"]
    assert m["fromName"] == "alpha" and m["from"] == sa["ipcPath"] and m["priority"] == "next"
    assert "fromMode" not in m  # asserted only when given
    r = receipts.wait(lambda r: r["msgId"] == sent["msgId"])
    assert r["status"] == "delivered" and r["previous"] == "pending" and r["address"] == "bravo"
    assert r["frame"]["origMsgId"] == sent["msgId"] and r["frame"]["status"] == "delivered"
    state = a.wait(sent["msgId"], timeout=5)
    assert state["state"] == "delivered" and state["last"]["status"] == "delivered"
    assert a.send_state(sent["msgId"])["state"] == "delivered"

    for address in ("[{}]".format(sb["ref"]), sb["ref"], "bravo [{}]".format(sb["ref"])):
        content = "by address " + address
        sent = a.send(address, content, from_mode="bypass", priority="now")
        m = messages.wait(lambda m: m["content"] == content)
        assert m["fromMode"] == "bypass" and m["priority"] == "now" and m["origin"] == "peer"
        assert a.wait(sent["msgId"])["state"] == "delivered"

    # Both callables ran on the participants' library threads, never here.
    main = threading.get_ident()
    for rec in (receipts, messages):
        assert rec.threads and all(ident != main for ident, _ in rec.threads)
        names = {name for _, name in rec.threads}
        assert names <= {"qc-cb", None}, names


def test_mode_parity_and_unknown_review_class(make_participant):
    held = Recorder()
    a = make_participant()
    b = make_participant(review_class=None, on_held=held)  # None: review class unknown
    a.register(name="sender")
    sb = b.register(name="unknown-mode")
    assert b.inbound_settings(sb["sessionId"]).get("reviewClass") is None
    sent = a.send("unknown-mode", "who am I talking to")
    buffer = held.wait(lambda h: any(x["msgId"] == sent["msgId"] for x in h))
    assert buffer[0]["cause"] == "mode-unknown" and buffer[0]["origin"] == "peer"
    assert a.wait(sent["msgId"], timeout=5, final_only=False)["state"] == "held"


def test_hold_policy_release_and_deny(make_participant):
    receipts = Recorder()
    messages = Recorder()
    held = Recorder()
    a = make_participant(on_receipt=receipts)
    b = make_participant(inbound_policy="hold", held_expiry="never", on_message=messages, on_held=held)
    a.register(name="alpha")
    sb = b.register(name="bravo")
    assert b.inbound_settings(sb["sessionId"]) == {"policy": "hold", "reviewClass": "prompting", "heldExpiry": "never"}

    first = a.send("bravo", "please hold me")
    second = a.send("bravo", "deny me")
    wait_for(lambda: len(b.held()) == 2)
    listed = b.held()
    assert [h["msgId"] for h in listed] == [first["msgId"], second["msgId"]]
    assert listed[0]["cause"] == "explicit-setting" and listed[0]["content"] == "please hold me"
    assert listed[0]["sessionId"] == sb["sessionId"] and "expiresAt" not in listed[0]
    assert held.wait(lambda h: len(h) == 2) == listed
    assert receipts.wait(lambda r: r["msgId"] == first["msgId"])["status"] == "held"
    assert a.wait(first["msgId"], timeout=0.2)["state"] == "held"  # not final: times out, no error
    assert messages.snapshot() == []

    b.release(first["msgId"])
    m = messages.wait(lambda m: m["msgId"] == first["msgId"])
    assert m["content"] == "please hold me" and m["origin"] == "peer"
    assert a.wait(first["msgId"])["state"] == "delivered"
    b.deny(second["msgId"])
    assert a.wait(second["msgId"])["state"] == "denied"
    assert receipts.wait(lambda r: r["msgId"] == second["msgId"] and r["status"] == "denied")["previous"] == "held"
    assert b.held() == [] and held.wait(lambda h: h == []) == []
    assert [m["msgId"] for m in messages.snapshot()] == [first["msgId"]]

    with pytest.raises(qwen_companion.NotFoundError):
        b.release(first["msgId"])  # no longer held
    with pytest.raises(qwen_companion.NotFoundError):
        b.deny("never-held")


def test_update_inbound_rejudges_held_messages(make_participant):
    messages = Recorder()
    a = make_participant()
    b = make_participant(inbound_policy="hold", on_message=messages)
    a.register(name="alpha")
    sb = b.register(name="bravo")
    sent = a.send("bravo", "held until the policy changes", from_mode="prompting")
    wait_for(lambda: len(b.held()) == 1)
    # Unset the policy: mode parity (we are prompting, so is the sender) accepts it.
    b.update_inbound(sb["sessionId"], policy=None)
    assert messages.wait(lambda m: m["msgId"] == sent["msgId"])["fromMode"] == "prompting"
    assert b.held() == []
    settings = b.inbound_settings(sb["sessionId"])
    assert settings.get("policy") is None and settings["reviewClass"] == "prompting" and settings["heldExpiry"] == "5m"
    b.update_inbound(sb["sessionId"], {"policy": "refuse", "heldExpiry": "1m"})
    settings = b.inbound_settings(sb["sessionId"])
    assert settings["policy"] == "refuse" and settings.get("reviewClass") is None and settings["heldExpiry"] == "1m"
    refused = a.send("bravo", "refused outright")
    assert a.wait(refused["msgId"])["state"] == "refused"
    b.update_inbound(sb["sessionId"], json.dumps({"policy": "accept"}))
    assert b.inbound_settings(sb["sessionId"])["policy"] == "accept"


def test_manual_ack(make_participant):
    messages = Recorder()
    a = make_participant()
    b = make_participant(inbound_policy="accept", manual_ack=True, on_message=messages)
    a.register(name="alpha")
    b.register(name="bravo")
    sent = a.send("bravo", "ack me")
    messages.wait(lambda m: m["msgId"] == sent["msgId"])
    b.ack(sent["msgId"])
    with pytest.raises(qwen_companion.NotFoundError):
        b.ack(sent["msgId"])  # consumed already


def test_child_env_token_proves_own_process_origin(make_participant):
    messages = Recorder()
    held = Recorder()
    # Review class unknown: a plain peer is held, an own process is not.
    b = make_participant(review_class=None, on_message=messages, on_held=held)
    sb = b.register(name="host")
    env = b.child_env(sb["sessionId"])
    assert set(env) == {"QWEN_CODE_MESSAGING_SOCKET", "QWEN_CODE_MESSAGING_TOKEN"}
    assert env["QWEN_CODE_MESSAGING_SOCKET"] == sb["ipcPath"]
    token = env["QWEN_CODE_MESSAGING_TOKEN"]
    with open(sb["recordPath"], encoding="utf-8") as f:
        record_token = json.load(f)["ipcToken"]
    assert token != record_token and len(token) >= 32

    frame = user_frame("from a tool the editor started")
    frame["x-unknown-field"] = {"kept": True}
    assert raw_send(env["QWEN_CODE_MESSAGING_SOCKET"], [{"msgV": 1, "type": "auth", "token": token}, frame])
    m = messages.wait(lambda m: m["msgId"] == frame["msgId"])
    assert m["origin"] == "own-process" and 'origin="own-process"' in m["envelope"]
    assert m["content"] == "from a tool the editor started"
    assert m["frame"] == frame  # exactly as received, unknown fields included

    # The same frame with the record's token is a plain peer: held.
    peer = user_frame("as a plain peer")
    raw_send(sb["ipcPath"], [{"msgV": 1, "type": "auth", "token": record_token}, peer])
    buffer = held.wait(lambda h: any(x["msgId"] == peer["msgId"] for x in h))
    assert buffer[0]["origin"] == "peer" and buffer[0]["cause"] == "mode-unknown"

    # A made-up token is dropped silently.
    bogus = user_frame("forged")
    raw_send(sb["ipcPath"], [{"msgV": 1, "type": "auth", "token": "0" * 64}, bogus])
    time.sleep(0.3)  # the behaviour under test: nothing arrives within 300 ms
    assert all(m["msgId"] != bogus["msgId"] for m in messages.snapshot())
    assert all(h["msgId"] != bogus["msgId"] for h in b.held())


def test_send_to_parent_uses_the_child_token(make_participant):
    messages = Recorder()
    parent = make_participant(review_class=None, on_message=messages)
    sp = parent.register(name="parent")
    env = parent.child_env(sp["sessionId"])
    child = make_participant(
        parent_socket=env["QWEN_CODE_MESSAGING_SOCKET"], parent_token=env["QWEN_CODE_MESSAGING_TOKEN"]
    )
    child.register(name="child")
    sent = child.send_to_parent("done with the task")
    m = messages.wait(lambda m: m["msgId"] == sent["msgId"])
    assert m["origin"] == "own-process" and m["content"] == "done with the task"
    pinned = child.send_to_parent("to that session", to_session_id=sp["sessionId"], priority="now")
    m = messages.wait(lambda m: m["msgId"] == pinned["msgId"])
    assert m["priority"] == "now" and m["frame"]["toSessionId"] == sp["sessionId"]
    orphan = make_participant()
    orphan.register(name="orphan")
    if os.environ.get("QWEN_CODE_MESSAGING_SOCKET") is None:
        with pytest.raises(qwen_companion.NotFoundError):
            orphan.send_to_parent("nobody")


# -- errors -------------------------------------------------------------------


def test_error_mapping(make_participant):
    a = make_participant()
    sa = a.register(name="alpha")
    b = make_participant()
    b.register(name="twin")
    c = make_participant()
    c.register(name="twin")

    with pytest.raises(qwen_companion.NotFoundError) as info:
        a.send("nobody-here", "x")
    assert info.value.status == 8 and info.value.status_name == "QC_NOT_FOUND"
    with pytest.raises(qwen_companion.NotFoundError):
        a.resolve("nobody-here")
    with pytest.raises(qwen_companion.InvalidArgumentError) as info:
        a.send("twin", "which one?")
    assert "twin" in info.value.message
    with pytest.raises(qwen_companion.InvalidArgumentError):
        a.resolve("twin")
    with pytest.raises(qwen_companion.NotFoundError):
        a.send_state("never-sent")
    with pytest.raises(qwen_companion.NotFoundError):
        a.wait("never-sent")
    with pytest.raises(qwen_companion.NotFoundError):
        a.child_env("no-such-session")
    with pytest.raises(qwen_companion.NotFoundError):
        a.inbound_settings("no-such-session")

    # Options the library refuses as JSON (bad values, unknown fields).
    with pytest.raises(qwen_companion.InvalidJsonError):
        a.send("twin", "x", priority="soon")
    with pytest.raises(qwen_companion.InvalidJsonError):
        a.send("twin", "x", from_mode="sometimes")
    with pytest.raises(qwen_companion.InvalidJsonError):
        a.update_inbound(sa["sessionId"], "{not json")
    with pytest.raises(qwen_companion.InvalidJsonError):
        a.update_inbound(sa["sessionId"], {"policy": "maybe"})
    with pytest.raises(qwen_companion.InvalidJsonError):
        a.register(inbound_policy="sometimes")
    with pytest.raises((qwen_companion.InvalidArgumentError, qwen_companion.InvalidJsonError)):
        a.register(kind="9-starts-with-a-digit")

    # Python-side checks.
    with pytest.raises(TypeError):
        a.send("twin", b"bytes")
    with pytest.raises(qwen_companion.InvalidArgumentError):
        a.release("nul\0inside")
    with pytest.raises(TypeError):
        a.wait("x", timeout="soon")
    with pytest.raises(qwen_companion.InvalidArgumentError):
        a.set_log_callback(None, 0)


def test_bad_config(make_participant, lib_path):
    with pytest.raises(qwen_companion.InvalidJsonError):
        make_participant(config="{not json")
    with pytest.raises(qwen_companion.InvalidJsonError, match="bogus"):
        make_participant(config={"bogus": 1})
    with pytest.raises(qwen_companion.InvalidJsonError):
        make_participant(held_expiry="2m")
    with pytest.raises(TypeError):
        Participant(config="{}", kind="x", library=lib_path)


def test_config_string_is_passed_verbatim(make_participant, area):
    p = make_participant(
        config=json.dumps({"qwenHome": area["home"], "runtimeDir": area["rt"], "sweepSockets": False, "kind": "raw"})
    )
    s = p.register(name="raw")
    assert s["kind"] == "raw" and s["recordPath"].startswith(area["home"])


def test_a_missing_symbol_fails_loading_naming_it(monkeypatch, lib_path):
    monkeypatch.setattr(_native, "_loaded", {})
    prototypes = dict(_native.PROTOTYPES)
    prototypes["qc_participant_from_the_future"] = (_native.c_status, [_native.c_handle])
    monkeypatch.setattr(_native, "PROTOTYPES", prototypes)
    with pytest.raises(qwen_companion.AbiMismatchError) as info:
        qwen_companion.load_library(lib_path)
    assert "qc_participant_from_the_future" in str(info.value)
    assert "lacks functions" in str(info.value)


def test_every_participant_function_is_prototyped(lib_path):
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(here, "include", "qwen_companion.h"), encoding="utf-8") as f:
        header = f.read()
    declared = set(re.findall(r"^[a-z].*?\b(qc_participant_[a-z0-9_]+)\(", header, re.M))
    assert "qc_participant_new" in declared and "qc_participant_set_held_callback" in declared
    bound = set(_native.PROTOTYPES) | set(_native.OPTIONAL_PROTOTYPES)  # optional: newer than some libraries
    assert declared <= bound, sorted(declared - bound)
    lib = qwen_companion.load_library(lib_path)
    for name in declared:
        assert callable(getattr(lib, name))


# -- callables ----------------------------------------------------------------


def test_exception_in_a_callable_is_contained_and_logged(make_participant, caplog):
    lines = []
    calls = []

    def bad(message):
        calls.append(message["msgId"])
        raise RuntimeError("boom in on_message")

    a = make_participant()
    b = make_participant(inbound_policy="accept", on_message=bad, log=lambda level, text: lines.append((level, text)))
    a.register(name="alpha")
    b.register(name="bravo")
    with caplog.at_level(logging.ERROR, logger="qwen_companion"):
        first = a.send("bravo", "first")
        second = a.send("bravo", "second")
        wait_for(lambda: len(calls) == 2)
        wait_for(lambda: len(lines) >= 2)
    assert calls == [first["msgId"], second["msgId"]]  # the thread survived the exception
    assert any(level == qwen_companion.LOG_ERROR and "RuntimeError: boom in on_message" in text for level, text in lines)
    assert "exception in the on_message callable" in caplog.text
    assert a.wait(second["msgId"])["state"] == "delivered"


def test_callables_can_be_replaced_and_removed(make_participant):
    first = Recorder()
    second = Recorder()
    a = make_participant()
    b = make_participant(inbound_policy="accept", on_message=first)
    a.register(name="alpha")
    b.register(name="bravo")
    one = a.send("bravo", "one")
    first.wait(lambda m: m["msgId"] == one["msgId"])
    b.set_message_callback(second)
    two = a.send("bravo", "two")
    second.wait(lambda m: m["msgId"] == two["msgId"])
    b.set_message_callback(None)
    three = a.send("bravo", "three")  # accepted, queued until a callable is set
    assert a.wait(three["msgId"])["state"] == "delivered"
    time.sleep(0.2)  # the behaviour under test: "second" gets nothing more
    assert [m["msgId"] for m in second.snapshot()] == [two["msgId"]]
    b.set_message_callback(first)
    first.wait(lambda m: m["msgId"] == three["msgId"])
    with pytest.raises(TypeError):
        b.set_message_callback("not callable")


def test_calls_from_inside_a_callable_and_close_there(make_participant):
    a = make_participant()
    seen = {}
    done = threading.Event()
    holder = {}

    def on_message(message):
        p = holder["b"]
        seen["held"] = p.held()
        seen["sessions"] = [s["name"] for s in p.sessions()]
        p.close()  # allowed: no join from the library thread
        p.close()
        seen["closed"] = p.closed
        done.set()

    b = make_participant(inbound_policy="accept", on_message=on_message)
    holder["b"] = b
    a.register(name="alpha")
    sb = b.register(name="bravo")
    a.send("bravo", "close yourself")
    assert done.wait(TIMEOUT)
    assert seen == {"held": [], "sessions": ["bravo"], "closed": True}
    assert wait_for(lambda: not os.path.exists(sb["recordPath"]))
    with pytest.raises(qwen_companion.ClosedError):
        b.sessions()


# -- teardown -------------------------------------------------------------------


def test_close_removes_records_and_releases_callables(make_participant, lib_path, area):
    lib = qwen_companion.load_library(lib_path)
    before = len(lib.callbacks)
    p = make_participant(on_message=Recorder(), on_receipt=Recorder(), on_held=Recorder(), log=lambda *a: None)
    assert len(lib.callbacks) == before + 4
    s = p.register(name="closing")
    assert os.path.exists(s["recordPath"]) and os.path.exists(s["ipcPath"])
    p.close()
    assert not os.path.exists(s["recordPath"]) and not os.path.exists(s["ipcPath"])
    assert os.listdir(sessions_dir(area)) == []
    assert p.closed and repr(p) == "<qwen_companion.Participant closed>"
    p.close()  # idempotent
    for call in (p.sessions, p.list, p.held, lambda: p.send("x", "y"), lambda: p.register(name="again")):
        with pytest.raises(qwen_companion.ClosedError):
            call()
    assert wait_for(lambda: len(lib.callbacks) == before)


def test_context_manager_and_held_messages_expire_on_close(make_participant, lib_path, area):
    receipts = Recorder()
    a = make_participant(on_receipt=receipts)
    a.register(name="alpha")
    with Participant(
        config={"qwenHome": area["home"], "runtimeDir": area["rt"], "sweepSockets": False},
        inbound_policy="hold",
        library=lib_path,
    ) as b:
        sb = b.register(name="bravo")
        sent = a.send("bravo", "held, then expired by close")
        wait_for(lambda: len(b.held()) == 1)
    assert b.closed and not os.path.exists(sb["recordPath"])
    assert a.wait(sent["msgId"])["state"] == "expired"
    assert [r["name"] for r in a.list()] == ["alpha"]


def test_close_from_another_thread_while_waiting(make_participant):
    a = make_participant()
    b = make_participant(inbound_policy="hold")
    a.register(name="alpha")
    b.register(name="bravo")
    sent = a.send("bravo", "waiting forever")
    wait_for(lambda: len(b.held()) == 1)
    result = {}

    def waiter():
        try:
            result["state"] = a.wait(sent["msgId"], timeout=5)["state"]
        except qwen_companion.CompanionError as e:
            result["error"] = e

    t = threading.Thread(target=waiter)
    t.start()
    # Kept: nothing observable tells that the waiter is blocked in
    # qc_participant_wait (the final state is the same either way).
    time.sleep(0.2)
    b.close()  # the held message expires: the waiter sees a final state
    t.join(TIMEOUT)
    assert not t.is_alive()
    assert result.get("state") == "expired", result


def test_close_while_its_own_wait_runs(make_participant):
    a = make_participant()
    b = make_participant(inbound_policy="hold")
    sa = a.register(name="alpha")
    b.register(name="bravo")
    sent = a.send("bravo", "the sender closes while waiting")
    wait_for(lambda: len(b.held()) == 1)
    result = {}

    def waiter():
        try:
            result["state"] = a.wait(sent["msgId"], timeout=30)["state"]
        except qwen_companion.CompanionError as e:
            result["error"] = e

    t = threading.Thread(target=waiter)
    t.start()
    # Kept: nothing observable tells that the waiter is blocked in
    # qc_participant_wait.
    time.sleep(0.2)
    started = time.monotonic()
    a.close()
    assert not os.path.exists(sa["recordPath"])
    t.join(TIMEOUT)
    assert not t.is_alive() and time.monotonic() - started < 5
    assert result.get("state") == "held" or isinstance(result.get("error"), qwen_companion.NotRunningError), result


def test_participant_is_exported():
    assert qwen_companion.Participant is Participant
    assert "Participant" in qwen_companion.__all__
    assert repr(qwen_companion.UNSET) == "UNSET"
