"""PluginHost's view server (views_start / views / view_url /
set_color_scheme / views_stop) through the Python binding: the listing, a
page served with pluginHost injected, a pushed scheme change, invoke, the
views_changed event, the show_notification view link, and list()'s
manifest and lastError."""

import json
import os
import socket
import threading
import urllib.error
import urllib.request

import pytest

from conftest import REPO, wait_for
from qwen_companion import (
    AlreadyRunningError,
    InvalidArgumentError,
    NotFoundError,
    NotRunningError,
    PluginHost,
)

FIXTURES = os.path.join(REPO, "tests", "plugins", "fixtures")
PROBE = "test.view-probe"


def fixture(name):
    return os.path.join(FIXTURES, name)


def http(url, method="GET", body=None, headers=None):
    req = urllib.request.Request(url, method=method, data=body, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status, r.headers, r.read().decode("utf-8")
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode("utf-8", "replace")


@pytest.fixture
def host(lib_path, tmp_path):
    h = PluginHost(plugins_dir=str(tmp_path / "plugins"), library=lib_path)
    h.install(fixture("view-probe"))
    h.install(fixture("hello"))
    yield h
    h.close()


def test_views_lifecycle_and_errors(host):
    with pytest.raises(NotRunningError):
        host.views()
    with pytest.raises(NotRunningError):
        host.view_url(PROBE, "probe")
    host.set_color_scheme("dark")  # allowed before the server runs
    info = host.views_start()
    assert info["colorScheme"] == "dark"
    assert info["url"].startswith("http://127.0.0.1:") and info["url"].endswith("/")
    assert [(v["plugin"], v["id"], v["title"]) for v in info["views"]] == [(PROBE, "probe", "View Probe")]
    assert [(p["plugin"], p["title"]) for p in info["panels"]] == [(PROBE, "Probe Panel")]
    assert host.views() == info
    assert host.view_url(PROBE, "probe") == info["views"][0]["url"]
    assert host.view_url(PROBE) == info["panels"][0]["url"]
    with pytest.raises(AlreadyRunningError):
        host.views_start()
    with pytest.raises(NotFoundError):
        host.view_url("com.example.hello")
    with pytest.raises(NotFoundError):
        host.view_url(PROBE, "nope")
    with pytest.raises(NotFoundError):
        host.view_url("no.such.plugin", "x")
    with pytest.raises(InvalidArgumentError):
        host.set_color_scheme("blue")
    host.views_stop()
    with pytest.raises(NotRunningError):
        host.views_stop()
    with pytest.raises(InvalidArgumentError):
        host.views_start({"colorScheme": "purple"})
    assert host.views_start({"colorScheme": "light"})["colorScheme"] == "light"


def test_page_served_invoke_and_scheme(host):
    info = host.views_start()
    url = host.view_url(PROBE, "probe")
    status, headers, body = http(url)
    assert status == 200
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    assert headers["X-Content-Type-Options"] == "nosniff"
    cap = url.split("/")[4]
    assert body.index("window, 'pluginHost'") < body.index("<meta charset")
    api = info["url"] + "api/" + cap + "/"
    req = json.dumps({"toolName": "echo", "params": {"text": "py"}}).encode()
    status, _, out = http(api + "invoke", "POST", req, {"Content-Type": "application/json"})
    assert status == 200 and json.loads(out)["content"][0]["text"] == "echo: py"
    # An open page's stream hears the scheme change.
    port = int(info["url"].split(":")[2].rstrip("/"))
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall("GET /api/{}/events HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n\r\n".format(cap, port).encode())
    s.settimeout(10)
    got = b""
    while b"event: ready" not in got:
        got += s.recv(4096)
    host.set_color_scheme("dark")
    while b"event: scheme" not in got:
        got += s.recv(4096)
    assert b'{"colorScheme":"dark"}' in got.split(b"event: scheme", 1)[1]
    s.close()
    assert json.loads(http(api + "scheme")[2]) == {"colorScheme": "dark"}
    # A wrong capability is refused.
    wrong = ("0" if cap[0] != "0" else "1") + cap[1:]
    assert http(url.replace(cap, wrong))[0] == 403
    host.views_stop()
    with pytest.raises(Exception):
        urllib.request.urlopen(url, timeout=5)


def test_views_changed_event_and_notification_view(host):
    events = []
    host.on_event(events.append)
    seen = []
    host.set_capability("show_notification", lambda req: seen.append(req) or {"shown": True})
    host.views_start()
    url = host.view_url(PROBE, "probe")
    host.disable(PROBE)
    assert wait_for(lambda: any(e.get("type") == "views_changed" for e in events))
    assert host.views()["views"] == []
    with pytest.raises(NotFoundError):
        host.view_url(PROBE, "probe")
    host.enable(PROBE)
    assert wait_for(lambda: sum(e.get("type") == "views_changed" for e in events) == 2)
    out = host.call(PROBE, "notify", {"viewId": "probe"})
    assert out["details"]["answer"] == {"shown": True}
    assert seen and seen[0]["params"]["view"] == {"id": "probe", "title": "View Probe", "url": url}
    # Without a running view server there is no page to link.
    host.views_stop()
    host.call(PROBE, "notify", {"viewId": "probe"})
    assert len(seen) == 2 and "view" not in seen[1]["params"], seen[1]
    assert seen[1]["params"]["viewId"] == "probe"


def test_list_gains_manifest_and_last_error(host, tmp_path):
    plugins = {p["id"]: p for p in host.list()}
    probe = plugins[PROBE]
    with open(os.path.join(fixture("view-probe"), "manifest.json")) as f:
        assert probe["manifest"] == json.load(f)
    assert probe["lastError"] is None
    crasher = tmp_path / "crasher"
    crasher.mkdir()
    (crasher / "manifest.json").write_text(json.dumps({
        "id": "test.crasher", "name": "Crasher", "version": "1.0.0", "main": "index.js",
        "tools": [{"name": "boom", "parameters": {"type": "object"}}]}))
    (crasher / "index.js").write_text("process.on('message', () => process.exit(9));")
    host.install(str(crasher))
    with pytest.raises(Exception):
        host.call("test.crasher", "boom", {})
    assert wait_for(lambda: {p["id"]: p for p in host.list()}["test.crasher"]["lastError"] is not None)
    last = {p["id"]: p for p in host.list()}["test.crasher"]["lastError"]
    assert "exited unexpectedly" in last["message"]
    assert last["at"] > 1700000000000
