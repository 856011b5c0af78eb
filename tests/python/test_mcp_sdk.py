"""The binding against a real MCP client other than ours: the official MCP
Python SDK over streamable HTTP, authenticated with the lock file's token."""

import json
import logging
import os
import threading
import time
import urllib.error
import urllib.request

import pytest

import qwen_companion
from conftest import wait_for  # noqa: E402

NO_PROXY_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def text_blocks(result):
    return [b.text for b in result.content if getattr(b, "type", None) == "text"]


class DiffRecorder:
    """An open-diff callable that records its calls (and the thread)."""

    def __init__(self):
        self.calls = []
        self.threads = []

    def __call__(self, path, content):
        self.calls.append((path, content))
        self.threads.append(threading.current_thread())


def test_tools_list(make_companion, mcp_connect):
    c = make_companion()
    client = mcp_connect(c.lock_file)
    tools = {t.name: t for t in client.list_tools().tools}
    assert set(tools) >= {"openDiff", "closeDiff"}
    assert "filePath" in tools["openDiff"].input_schema["properties"]
    assert "newContent" in tools["openDiff"].input_schema["properties"]
    assert "filePath" in tools["closeDiff"].input_schema["properties"]


def test_wrong_token_is_refused(make_companion, mcp_connect):
    c = make_companion()
    with pytest.raises(Exception):
        mcp_connect(c.lock_file, token="not-the-token", timeout=5)
    # what the SDK saw: 401 for a wrong token, and the lock file's token works
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
        }
    ).encode()
    url = "http://127.0.0.1:{}/mcp".format(c.port)
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    bad = urllib.request.Request(url, body, dict(headers, Authorization="Bearer nope"))
    with pytest.raises(urllib.error.HTTPError) as info:
        NO_PROXY_OPENER.open(bad, timeout=5)
    assert info.value.code == 401
    with open(c.lock_file, encoding="utf-8") as f:
        token = json.load(f)["authToken"]
    good = urllib.request.Request(url, body, dict(headers, Authorization="Bearer " + token))
    with NO_PROXY_OPENER.open(good, timeout=5) as response:
        assert response.status == 200


def test_open_diff_callback_then_accept(make_companion, mcp_connect, workspace):
    rec = DiffRecorder()
    c = make_companion(workspace_roots=[workspace], open_diff=rec)
    client = mcp_connect(c.lock_file)
    path = os.path.join(workspace, "new_file.py")
    result = client.call_tool("openDiff", {"filePath": path, "newContent": "print('proposed')\n"})
    assert not result.is_error and result.content == []
    assert rec.calls == [(path, "print('proposed')\n")]
    assert rec.threads[0] is not threading.main_thread()

    c.diff_accept(path, "print('edited by the user')\n")
    params = client.wait_notification("ide/diffAccepted")
    assert params == {"filePath": path, "content": "print('edited by the user')\n"}
    with pytest.raises(qwen_companion.NotFoundError):
        c.diff_accept(path)  # already decided


def test_accept_unchanged_sends_the_proposal(make_companion, mcp_connect, workspace):
    c = make_companion(open_diff=DiffRecorder())
    client = mcp_connect(c.lock_file)
    path = os.path.join(workspace, "a.txt")
    client.call_tool("openDiff", {"filePath": path, "newContent": "proposal\n"})
    c.diff_accept(path)
    assert client.wait_notification("ide/diffAccepted")["content"] == "proposal\n"


def test_reject_and_closed(make_companion, mcp_connect, workspace):
    c = make_companion(open_diff=DiffRecorder())
    client = mcp_connect(c.lock_file)
    a, b = os.path.join(workspace, "a.txt"), os.path.join(workspace, "b.txt")
    client.call_tool("openDiff", {"filePath": a, "newContent": "A"})
    client.call_tool("openDiff", {"filePath": b, "newContent": "B"})
    c.diff_reject(a)
    assert client.wait_notification("ide/diffRejected") == {"filePath": a}
    c.diff_closed(b)
    assert client.wait_notification("ide/diffClosed")["filePath"] == b


def test_every_client_gets_the_decision(make_companion, mcp_connect, workspace):
    c = make_companion(open_diff=DiffRecorder())
    first, second = mcp_connect(c.lock_file), mcp_connect(c.lock_file)
    # A session counts once the server has handled its notifications/initialized;
    # its first notification (the context) shows that. (A decision made in the few
    # milliseconds between the initialize reply and that point misses the session.)
    first.wait_notification("ide/contextUpdate")
    second.wait_notification("ide/contextUpdate")
    path = os.path.join(workspace, "both.txt")
    first.call_tool("openDiff", {"filePath": path, "newContent": "x"})
    c.diff_accept(path, "y")
    assert first.wait_notification("ide/diffAccepted")["content"] == "y"
    assert second.wait_notification("ide/diffAccepted")["content"] == "y"


def test_unicode_and_nul_content_round_trip(make_companion, mcp_connect, tmp_path):
    rec = DiffRecorder()
    c = make_companion(open_diff=rec)
    client = mcp_connect(c.lock_file)
    path = str(tmp_path / "dïr" / "fïlé 😀.txt")
    content = "a\0b\nçé 😀\r\n"
    client.call_tool("openDiff", {"filePath": path, "newContent": content})
    assert rec.calls == [(path, content)]
    c.diff_accept(path, content + "\0end")
    assert client.wait_notification("ide/diffAccepted")["content"] == content + "\0end"


def test_context_events_reach_the_client(make_companion, mcp_connect, workspace):
    c = make_companion(workspace_roots=[workspace])
    client = mcp_connect(c.lock_file)
    initial = client.wait_notification("ide/contextUpdate")
    assert initial["workspaceState"]["openFiles"] == []
    main = os.path.join(workspace, "main.py")
    c.file_opened(main)
    c.file_focused(main)
    c.set_cursor(main, 3, 2)
    c.set_selection(main, "print('hello')")

    def complete(params):
        files = params["workspaceState"]["openFiles"]
        return files and files[0].get("selectedText") == "print('hello')"

    params = client.wait_notification("ide/contextUpdate", complete)
    f = params["workspaceState"]["openFiles"][0]
    assert f["path"] == main and f["isActive"] is True
    assert f["cursor"] == {"line": 3, "character": 2}
    assert params == c.context()

    c.set_trusted(False)
    params = client.wait_notification("ide/contextUpdate", lambda p: p["workspaceState"]["isTrusted"] is False)
    assert params["workspaceState"]["openFiles"][0]["path"] == main


def test_close_diff_reply_carries_the_buffer_text(make_companion, mcp_connect, workspace):
    closed = []

    def close_diff(path):
        closed.append(path)
        return "final text\n"

    c = make_companion(open_diff=DiffRecorder(), close_diff=close_diff)
    client = mcp_connect(c.lock_file)
    path = os.path.join(workspace, "hold.txt")
    client.call_tool("openDiff", {"filePath": path, "newContent": "proposed\n"})
    result = client.call_tool("closeDiff", {"filePath": path, "suppressNotification": True})
    assert not result.is_error
    assert json.loads(text_blocks(result)[0]) == {"content": "final text\n"}
    assert closed == [path]
    with pytest.raises(qwen_companion.NotFoundError):
        c.diff_accept(path)  # the CLI closed it
    time.sleep(0.2)  # the behaviour under test: nothing arrives within 200 ms
    assert [m for m, _ in client.drain() if m.startswith("ide/diff")] == []  # suppressed


def test_close_diff_without_suppress_notifies_diff_closed(make_companion, mcp_connect, workspace):
    c = make_companion(open_diff=DiffRecorder(), close_diff=lambda p: "buffer")
    client = mcp_connect(c.lock_file)
    path = os.path.join(workspace, "x.txt")
    client.call_tool("openDiff", {"filePath": path, "newContent": "p"})
    result = client.call_tool("closeDiff", {"filePath": path})
    assert json.loads(text_blocks(result)[0]) == {"content": "buffer"}
    assert client.wait_notification("ide/diffClosed") == {"filePath": path, "content": "buffer"}


def test_close_diff_returning_none_is_null_content(make_companion, mcp_connect, workspace):
    c = make_companion(open_diff=DiffRecorder(), close_diff=lambda p: None)
    client = mcp_connect(c.lock_file)
    path = os.path.join(workspace, "x.txt")
    client.call_tool("openDiff", {"filePath": path, "newContent": "p"})
    result = client.call_tool("closeDiff", {"filePath": path, "suppressNotification": True})
    assert json.loads(text_blocks(result)[0]) == {"content": None}


def test_close_diff_without_callable_returns_the_proposal(make_companion, mcp_connect, workspace):
    c = make_companion(open_diff=DiffRecorder())
    client = mcp_connect(c.lock_file)
    path = os.path.join(workspace, "x.txt")
    client.call_tool("openDiff", {"filePath": path, "newContent": "the proposal"})
    result = client.call_tool("closeDiff", {"filePath": path, "suppressNotification": True})
    assert json.loads(text_blocks(result)[0]) == {"content": "the proposal"}
    unknown = client.call_tool("closeDiff", {"filePath": os.path.join(workspace, "never.txt")})
    assert json.loads(text_blocks(unknown)[0]) == {"content": None}


def test_no_open_diff_callable_means_is_error(make_companion, mcp_connect, workspace):
    c = make_companion()
    client = mcp_connect(c.lock_file)
    result = client.call_tool("openDiff", {"filePath": os.path.join(workspace, "x"), "newContent": "p"})
    assert result.is_error and "no diff view" in text_blocks(result)[0]


# -- exceptions inside callables never unwind into C ------------------------


def test_exception_in_open_diff_becomes_an_error_reply(make_companion, mcp_connect, workspace, caplog):
    caplog.set_level(logging.ERROR, logger="qwen_companion")
    lines = []
    state = {"fail": True}
    rec = DiffRecorder()

    def open_diff(path, content):
        if state["fail"]:
            raise RuntimeError("boom in the editor")
        rec(path, content)

    c = make_companion(open_diff=open_diff, log=lambda level, msg: lines.append((level, msg)))
    client = mcp_connect(c.lock_file)
    path = os.path.join(workspace, "x.txt")
    result = client.call_tool("openDiff", {"filePath": path, "newContent": "p"})
    assert result.is_error
    assert "RuntimeError: boom in the editor" in text_blocks(result)[0]
    records = [r for r in caplog.records if "exception in the open-diff callable" in r.getMessage()]
    assert records and records[0].exc_info is not None
    assert (qwen_companion.LOG_ERROR, "exception in the open-diff callable: RuntimeError: boom in the editor") in lines
    with pytest.raises(qwen_companion.NotFoundError):
        c.diff_accept(path)  # a refused diff is not open

    # the library thread survived: the next diff works
    state["fail"] = False
    result = client.call_tool("openDiff", {"filePath": path, "newContent": "q"})
    assert not result.is_error and rec.calls == [(path, "q")]


def test_base_exceptions_are_contained_too(make_companion, mcp_connect, workspace):
    def open_diff(path, content):
        raise KeyboardInterrupt()

    c = make_companion(open_diff=open_diff)
    client = mcp_connect(c.lock_file)
    result = client.call_tool("openDiff", {"filePath": os.path.join(workspace, "x"), "newContent": "p"})
    assert result.is_error and "KeyboardInterrupt" in text_blocks(result)[0]


def test_refuse_diff_and_false_are_refusals_not_bugs(make_companion, mcp_connect, workspace, caplog):
    caplog.set_level(logging.ERROR, logger="qwen_companion")
    answers = [qwen_companion.RefuseDiff("the window is busy"), False]

    def open_diff(path, content):
        answer = answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    c = make_companion(open_diff=open_diff)
    client = mcp_connect(c.lock_file)
    path = os.path.join(workspace, "x")
    first = client.call_tool("openDiff", {"filePath": path, "newContent": "p"})
    assert first.is_error and text_blocks(first) == ["the window is busy"]
    second = client.call_tool("openDiff", {"filePath": path, "newContent": "p"})
    assert second.is_error and "refused" in text_blocks(second)[0]
    assert not [r for r in caplog.records if "exception in" in r.getMessage()]


def test_exception_in_close_diff_becomes_an_error_reply(make_companion, mcp_connect, workspace):
    outcomes = [ValueError("cannot read the buffer"), 42]

    def close_diff(path):
        outcome = outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    c = make_companion(open_diff=DiffRecorder(), close_diff=close_diff)
    client = mcp_connect(c.lock_file)
    for expected in ("ValueError: cannot read the buffer", "TypeError"):
        path = os.path.join(workspace, expected.split(":")[0])
        client.call_tool("openDiff", {"filePath": path, "newContent": "p"})
        result = client.call_tool("closeDiff", {"filePath": path, "suppressNotification": True})
        assert result.is_error and expected in text_blocks(result)[0]


def test_close_from_inside_a_callback(make_companion, mcp_connect, workspace):
    holder = {}
    seen = []

    def open_diff(path, content):
        seen.append(path)
        holder["c"].close()  # allowed: no join from the library thread
        holder["c"].close()  # and twice

    lib = qwen_companion.load_library()
    before = len(lib.callbacks)
    c = make_companion(open_diff=open_diff)
    holder["c"] = c
    lock = c.lock_file
    client = mcp_connect(c.lock_file, timeout=15)
    try:
        result = client.call_tool("openDiff", {"filePath": os.path.join(workspace, "x"), "newContent": "p"})
    except BaseException:
        result = None  # the server went away under the request: either outcome is fine
    assert result is None or result.is_error
    # The stop answers the pending request ("the IDE companion is stopping")
    # before it removes the lock file, so the client may have its answer first.
    assert seen and c.closed and wait_for(lambda: not os.path.exists(lock))
    with pytest.raises(qwen_companion.ClosedError):
        c.port
    # the library finalizes the callables once the callback has returned
    assert wait_for(lambda: len(lib.callbacks) == before)
