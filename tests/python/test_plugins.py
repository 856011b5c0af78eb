"""PluginHost (bindings/python/qwen_companion/plugins.py) against the fixture
plugins under tests/plugins/fixtures: install, list, calls and their error
kinds, events, capabilities answered by Python, the default render_pdf,
visible/options/parse, unload, pull mode, and no plugin process left."""

import os
import threading
import time

import pytest

import qwen_companion
from conftest import REPO, wait_for
from qwen_companion import Pending, PluginCallError, PluginHost, PluginInstallError

FIXTURES = os.path.join(REPO, "tests", "plugins", "fixtures")


def fixture(*parts):
    return os.path.join(FIXTURES, *parts)


def node_children():
    """Live child processes of this process (the host spawns plugins directly)."""
    me = str(os.getpid())
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/{}/stat".format(name)) as f:
                stat = f.read()
        except OSError:
            continue
        rest = stat.rsplit(")", 1)[1].split()
        if rest[1] == me and rest[0] != "Z":
            out.append(int(name))
    return out


@pytest.fixture
def make_host(lib_path, tmp_path):
    """Plugin hosts over a private plugins directory; all closed at the end,
    and then no plugin process of ours may be left."""
    made = []

    def make(**kwargs):
        kwargs.setdefault("plugins_dir", str(tmp_path / "plugins"))
        kwargs.setdefault("library", lib_path)
        h = PluginHost(**kwargs)
        made.append(h)
        return h

    yield make
    for h in made:
        h.close()
    assert wait_for(lambda: not node_children(), 10), "plugin processes left: {}".format(node_children())


def test_install_list_call(make_host):
    host = make_host()
    summary = host.install(fixture("hello"))
    assert summary["id"] == "com.example.hello"
    assert summary["replaced"] is False
    plugins = host.list()
    assert [p["id"] for p in plugins] == ["com.example.hello"]
    assert plugins[0]["enabled"] is True
    out = host.call("com.example.hello", "say_hello", {"name": "Ada"})
    assert out["content"] == [{"type": "text", "text": "Hello, Ada!"}]
    assert host.stats("com.example.hello")["starts"] == 1
    assert host.plugins_dir.endswith("plugins")
    again = host.install(fixture("hello"))
    assert again["replaced"] is True


def test_install_invalid_manifest_raises_with_problems(make_host):
    host = make_host()
    with pytest.raises(PluginInstallError) as e:
        host.install(fixture("invalid", "tool-name-invalid"))
    assert e.value.code == "invalid_manifest"
    assert e.value.problems, e.value.details
    assert host.list() == []  # nothing installed
    with pytest.raises(PluginInstallError) as e:
        host.install(os.path.join(FIXTURES, "no-such-plugin"))
    assert isinstance(e.value, qwen_companion.NotFoundError)


def test_schema_error_has_kind_and_errors(make_host):
    host = make_host()
    host.install(fixture("hello"))
    with pytest.raises(PluginCallError) as e:
        host.call("com.example.hello", "say_hello", {"name": 42})
    err = e.value
    assert err.kind == "schema"
    assert isinstance(err, qwen_companion.InvalidArgumentError)
    assert err.errors and err.errors[0]["path"] == "/name"
    assert host.stats("com.example.hello")["starts"] == 0  # never reached the plugin


def test_unknown_tool_and_unknown_plugin(make_host):
    host = make_host()
    host.install(fixture("hello"))
    with pytest.raises(PluginCallError) as e:
        host.call("com.example.hello", "nope", {})
    assert e.value.kind == "unknown_tool"
    assert isinstance(e.value, qwen_companion.NotFoundError)
    with pytest.raises(PluginCallError) as e:
        host.call("com.example.absent", "x", {})
    assert e.value.kind == "not_found"


def test_tool_error_carries_plugin_message(make_host):
    host = make_host()
    host.install(fixture("todo-quadrant"))
    with pytest.raises(PluginCallError) as e:
        host.call("local.todo-quadrant", "manage_todo_quadrant", {"action": "add", "content": " "})
    assert e.value.kind == "tool_error"
    assert 'add needs a non-empty "content"' in e.value.plugin_message
    assert isinstance(e.value, qwen_companion.RefusedError)


def test_exited_kind_with_code_and_stderr(make_host):
    host = make_host()
    host.install(fixture("hostile", "crash-mid-call"))
    with pytest.raises(PluginCallError) as e:
        host.call("test.hostile.crash-mid-call", "explode", {})
    assert e.value.kind == "exited"
    assert e.value.exit_code == 3
    assert "boom mid-call" in e.value.stderr_tail


def test_ui_push_events_in_order_before_result(make_host):
    events = []
    lock = threading.Lock()

    def on_event(ev):
        with lock:
            events.append(ev)

    host = make_host(on_event=on_event)
    host.install(fixture("hostile", "ui-push"))
    out = host.call("test.hostile.ui-push", "progress", {"steps": 3})
    assert out["content"][0]["text"] == "pushed 3 updates"

    def pushes():
        with lock:
            return [e for e in events if e["type"] == "ui_push"]

    assert wait_for(lambda: len(pushes()) == 3)
    assert [p["payload"] for p in pushes()] == [{"step": i, "of": 3} for i in (1, 2, 3)]
    assert all(p["channel"] == "progress" and p["plugin"] == "test.hostile.ui-push" for p in pushes())
    with lock:
        started = [e for e in events if e["type"] == "plugin_started"]
    assert started and started[0]["pid"] > 0


def test_show_notification_answered_by_python_handler(make_host):
    seen = []
    host = make_host()
    host.install(fixture("todo-quadrant"))

    def notify(request):
        seen.append(request)
        return {"shown": True}

    host.set_capability("show_notification", notify)
    host.call("local.todo-quadrant", "manage_todo_quadrant", {"action": "add", "content": "write tests"})
    out = host.call("local.todo-quadrant", "manage_todo_quadrant", {"action": "remind_now"})
    assert out["content"][0]["text"] == "Reminder shown."
    assert seen[0]["capability"] == "show_notification"
    assert seen[0]["plugin"] == "local.todo-quadrant"
    assert seen[0]["params"]["viewId"] == "quadrant"


def test_capability_handler_raising_gives_host_error(make_host):
    host = make_host(log=lambda level, msg: None)
    host.install(fixture("todo-quadrant"))

    def refuse(request):
        raise RuntimeError("do not disturb")

    host.set_capability("show_notification", refuse)
    with pytest.raises(PluginCallError) as e:
        host.call("local.todo-quadrant", "manage_todo_quadrant", {"action": "remind_now"})
    # the plugin's requestHost rejects with the host_error message → tool_error
    assert e.value.kind == "tool_error"
    assert "do not disturb" in e.value.plugin_message


def test_capability_answered_later_with_pending(make_host):
    host = make_host()
    host.install(fixture("todo-quadrant"))
    answered = []
    threads = []

    def later(request):
        p = Pending()

        def answer():
            time.sleep(0.1)  # a deliberately late answer (from another thread)
            answered.append(p.resolve({"shown": False, "reason": "later"}))
            answered.append(p.resolve({"shown": True}))  # a second answer is refused

        threads.append(threading.Thread(target=answer))
        threads[-1].start()
        return p

    host.set_capability("show_notification", later)
    out = host.call("local.todo-quadrant", "manage_todo_quadrant", {"action": "remind_now"})
    assert out["content"][0]["text"] == "Reminder not shown (later)."
    threads[0].join(10)
    assert answered == [True, False]


def test_respond_method_and_unknown_request(make_host):
    host = make_host()
    host.install(fixture("todo-quadrant"))
    ids = []

    def later(request):
        ids.append(request["id"])
        threading.Timer(0.05, lambda: host.respond(request["id"], error="busy")).start()
        return Pending()  # never resolved: the respond above answers

    host.set_capability("show_notification", later)
    with pytest.raises(PluginCallError) as e:
        host.call("local.todo-quadrant", "manage_todo_quadrant", {"action": "remind_now"})
    assert "busy" in e.value.plugin_message
    with pytest.raises(qwen_companion.NotFoundError):
        host.respond(ids[0], {"shown": True})  # already answered


def test_default_render_pdf_writes_a_pdf(make_host, tmp_path):
    host = make_host()
    host.install(fixture("full"))
    target = str(tmp_path / "out" / "report.pdf")
    out = host.call(
        "com.example.full", "export_pdf", {"title": "T", "content": "# Hello\n\nSome *text*.", "outputPath": target}
    )
    assert out["details"]["filePath"] == target
    with open(target, "rb") as f:
        assert f.read(5) == b"%PDF-"


def test_visible_options_parse(make_host, tmp_path):
    host = make_host()
    host.install(fixture("full"))
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    plain = tmp_path / "plain"
    plain.mkdir()
    assert host.visible("com.example.full", str(repo)) is True
    assert host.visible("com.example.full", str(plain)) is False
    options = host.options("com.example.full", "mode")
    assert options[0] == {"value": "auto", "label": "Auto"}
    assert [o["value"] for o in options[1:]] == ["fast", "accurate"]
    assert host.parse_document("text/markdown", "# Héllo\n".encode("utf-8")) == {"success": True, "text": "# Héllo\n"}
    bad = host.parse_document("text/markdown", b"\xff\xfe\x00")
    assert bad["success"] is False and "UTF-8" in bad["reason"]
    with pytest.raises(PluginCallError) as e:
        host.parse_document("application/x-none", b"")
    assert e.value.kind == "not_found"
    with pytest.raises(TypeError):
        host.parse_document("text/markdown", "not bytes")


def test_config_value_reaches_context(make_host):
    host = make_host()
    host.install(fixture("full"))
    host.set_config_value("com.example.full", "prefix", ">> ")
    out = host.call("com.example.full", "do_something", {})
    assert out["details"]["todos"][0]["content"].startswith(">> ")
    with pytest.raises(qwen_companion.InvalidArgumentError):
        host.set_config_value("com.example.full", "limit", "not a number")
    with pytest.raises(qwen_companion.NotFoundError):
        host.set_config_value("com.example.full", "nope", 1)


def test_unload_enable_disable(make_host):
    events = []
    host = make_host(on_event=events.append)
    host.install(fixture("hello"))
    host.call("com.example.hello", "say_hello", {"name": "a"})
    assert host.stats("com.example.hello")["running"] is True
    host.unload("com.example.hello")
    assert host.stats("com.example.hello")["running"] is False
    assert wait_for(lambda: any(e["type"] == "plugin_exit" and e["expected"] for e in events))
    host.disable("com.example.hello")
    with pytest.raises(PluginCallError) as e:
        host.call("com.example.hello", "say_hello", {"name": "a"})
    assert e.value.kind == "disabled"
    host.enable("com.example.hello")
    assert host.call("com.example.hello", "say_hello", {"name": "b"})["content"][0]["text"] == "Hello, b!"
    assert host.stats("com.example.hello")["starts"] == 2
    with pytest.raises(PluginCallError) as e:
        host.unload("com.example.absent")
    assert e.value.kind == "not_found"


def test_uninstall_keeps_or_removes_data(make_host):
    host = make_host()
    host.install(fixture("hello"))
    assert host.uninstall("com.example.hello") == {"id": "com.example.hello", "dataRemoved": False}
    assert host.list() == []
    with pytest.raises(PluginInstallError) as e:
        host.uninstall("com.example.hello", remove_data=True)
    assert e.value.code == "not_found"


def test_call_async_success_and_error(make_host):
    host = make_host()
    host.install(fixture("hello"))
    done = threading.Event()
    results = []

    def cb(result, error):
        results.append((result, error, threading.current_thread().name))
        if len(results) == 2:
            done.set()

    host.call_async("com.example.hello", "say_hello", {"name": "Ada"}, cb)
    host.call_async("com.example.hello", "nope", {}, cb)
    assert done.wait(10)
    by_ok = sorted(results, key=lambda r: r[0] is None)
    assert by_ok[0][0]["content"][0]["text"] == "Hello, Ada!"
    assert isinstance(by_ok[1][1], PluginCallError) and by_ok[1][1].kind == "unknown_tool"
    assert isinstance(by_ok[1][1], qwen_companion.NotFoundError)
    assert all(r[2] != threading.current_thread().name for r in results)
    with pytest.raises(TypeError):
        host.call_async("com.example.hello", "say_hello", {"name": "x"}, None)


def test_exceptions_in_callables_never_reach_the_library(make_host):
    logged = []
    host = make_host(log=lambda level, msg: logged.append(msg))
    host.install(fixture("hostile", "ui-push"))

    def bad_event(ev):
        raise ValueError("boom in on_event")

    host.on_event(bad_event)
    done = threading.Event()

    def bad_cb(result, error):
        done.set()
        raise ValueError("boom in callback")

    host.call_async("test.hostile.ui-push", "progress", {"steps": 1}, bad_cb)
    assert done.wait(10)
    assert wait_for(lambda: any("boom in on_event" in m for m in logged))
    assert wait_for(lambda: any("boom in callback" in m for m in logged))
    # the host still works
    assert host.call("test.hostile.ui-push", "progress", {"steps": 1})["content"][0]["text"] == "pushed 1 updates"


def test_pull_mode(make_host):
    host = make_host()
    host.install(fixture("todo-quadrant"))
    with pytest.raises(qwen_companion.RefusedError, match="enable_events first"):
        host.wait_event(0)
    host.enable_events()
    assert host.wait_event(0) is False  # nothing waits yet
    host.offer_capability("show_notification")
    box = {}

    def caller():
        try:
            box["out"] = host.call("local.todo-quadrant", "manage_todo_quadrant", {"action": "remind_now"})
        except BaseException as e:  # reported below
            box["err"] = e

    t = threading.Thread(target=caller)
    t.start()
    woke = False
    request = None
    deadline = time.monotonic() + 10
    while request is None and time.monotonic() < deadline:
        woke = host.wait_event(0.5) or woke  # select here; WaitForSingleObject on Windows
        ev = host.next_event()
        while ev is not None:
            if ev["type"] == "host_request":
                request = ev
                break
            ev = host.next_event()
    assert woke, "wait_event never reported the queued events"
    assert request is not None and request["capability"] == "show_notification"
    host.respond(request["id"], {"shown": True})
    t.join(10)
    assert "err" not in box, box.get("err")
    assert box["out"]["content"][0]["text"] == "Reminder shown."


def test_startup_finished_and_close(make_host):
    host = make_host()
    host.install(fixture("todo-quadrant"))
    host.install(fixture("hello"))
    assert host.startup_finished() == [{"plugin": "local.todo-quadrant", "ok": True}]
    assert node_children()
    host.close()
    assert wait_for(lambda: not node_children())
    with pytest.raises(qwen_companion.ClosedError):
        host.list()
    host.close()  # twice is fine


def test_bad_arguments(make_host):
    with pytest.raises(qwen_companion.InvalidArgumentError):
        make_host(call_timeout_ms=1)
    with pytest.raises(qwen_companion.InvalidArgumentError, match="replyPollUs"):
        make_host(reply_poll_us=10001)
    with pytest.raises(qwen_companion.InvalidArgumentError, match="restartBackoffMs"):
        make_host(restart_backoff_ms=600001)
    make_host(reply_poll_us=0, restart_backoff_ms=0).close()
    with pytest.raises(qwen_companion.InvalidJsonError):
        make_host(config={"noSuchField": 1})
    host = make_host()
    with pytest.raises(qwen_companion.InvalidArgumentError):
        host.call("a\0b", "t")
    with pytest.raises(TypeError):
        host.call("com.example.hello", "say_hello", {"x": object()})
    with pytest.raises(TypeError):
        host.set_capability("show_notification", 42)


def test_pending_resolved_before_the_handler_returns(make_host):
    host = make_host()
    host.install(fixture("todo-quadrant"))

    def early(request):
        p = Pending()
        assert p.resolve({"shown": False, "reason": "early"}) is True
        assert p.reject("too late") is False  # one answer only
        return p

    host.set_capability("show_notification", early)
    out = host.call("local.todo-quadrant", "manage_todo_quadrant", {"action": "remind_now"})
    assert out["content"][0]["text"] == "Reminder not shown (early)."


def test_handler_result_that_is_not_json_gives_the_plugin_an_error(make_host):
    host = make_host(log=lambda level, msg: None)
    host.install(fixture("todo-quadrant"))
    host.set_capability("show_notification", lambda request: {"shown": object()})
    with pytest.raises(PluginCallError) as e:
        host.call("local.todo-quadrant", "manage_todo_quadrant", {"action": "remind_now"})
    assert "not JSON-serializable" in e.value.plugin_message
    host.set_capability("show_notification", None)  # the library default again
    out = host.call("local.todo-quadrant", "manage_todo_quadrant", {"action": "remind_now"})
    assert out["content"][0]["text"].startswith("Reminder not shown")
