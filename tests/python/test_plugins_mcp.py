"""The plugin MCP server and its settings entry from Python
(PluginHost.mcp_start / mcp_stop / mcp_info, register_mcp, unregister_mcp):
a raw streamable-HTTP client on the advertised url and header, stop and
close removing the lock file, registration keeping comments, a settings
file Qwen could not read refused untouched."""

import http.client
import json
import os
import socket
import stat

import pytest

import qwen_companion
from conftest import REPO
from qwen_companion import PluginHost, register_mcp, unregister_mcp

HELLO = os.path.join(REPO, "tests", "plugins", "fixtures", "hello")


def post(port, token, body, session=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {
        "Authorization": "Bearer " + token,
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    if session:
        headers["mcp-session-id"] = session
        headers["mcp-protocol-version"] = "2025-11-25"
    conn.request("POST", "/mcp", body=json.dumps(body), headers=headers)
    r = conn.getresponse()
    text = r.read().decode("utf-8")
    sid = r.getheader("mcp-session-id")
    conn.close()
    messages = []
    if text.strip().startswith("{"):
        messages.append(json.loads(text))
    for line in text.splitlines():
        if line.startswith("data:") and line[5:].strip():
            messages.append(json.loads(line[5:]))
    return r.status, sid, messages


def list_tools(port, token):
    status, sid, _ = post(port, token, {
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "pytest", "version": "1"}}})
    assert status == 200 and sid
    status, _, _ = post(port, token, {"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)
    assert status == 202
    status, _, msgs = post(port, token, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, sid)
    assert status == 200
    reply = [m for m in msgs if m.get("id") == 1][0]
    return sorted(t["name"] for t in reply["result"]["tools"])


@pytest.fixture
def host(lib_path, tmp_path):
    h = PluginHost(plugins_dir=str(tmp_path / "plugins"), workspace_root=str(tmp_path), library=lib_path)
    h.install(HELLO)
    yield h
    h.close()


def test_mcp_start_info_list_stop(host, tmp_path):
    with pytest.raises(qwen_companion.NotRunningError):
        host.mcp_info()
    with pytest.raises(qwen_companion.NotRunningError):
        host.mcp_stop()
    info = host.mcp_start({"lockDir": str(tmp_path / "locks")})
    assert info["sessions"] == 0
    assert info["url"] == "http://127.0.0.1:{}/mcp".format(info["port"])
    assert info["serverName"] == "qwen-companion-plugins"
    assert info["env"] == {"QWEN_COMPANION_PLUGINS_PID": str(os.getpid())}
    token = info["headers"]["Authorization"][len("Bearer "):]
    lock = json.load(open(info["lockFile"]))
    assert str(lock["pid"]) == info["env"]["QWEN_COMPANION_PLUGINS_PID"]
    assert lock["port"] == info["port"] and lock["authToken"] == token
    assert stat.S_IMODE(os.stat(info["lockFile"]).st_mode) == 0o600
    assert "hello_say_hello" in info["tools"] and "plugins-status" in info["tools"]
    with pytest.raises(qwen_companion.AlreadyRunningError):
        host.mcp_start({"lockDir": str(tmp_path / "locks")})

    assert list_tools(info["port"], token) == sorted(info["tools"])
    status, _, _ = post(info["port"], "0" * 64, {"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert status == 401

    host.mcp_stop()
    assert not os.path.exists(info["lockFile"])
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", info["port"]), timeout=2).close()
    with pytest.raises(qwen_companion.NotRunningError):
        host.mcp_info()

    # close() stops a running server too.
    info = host.mcp_start({"lockDir": str(tmp_path / "locks")})
    assert os.path.exists(info["lockFile"])
    host.close()
    assert not os.path.exists(info["lockFile"])


def test_mcp_start_bad_config(host, tmp_path):
    with pytest.raises(qwen_companion.InvalidJsonError):
        host.mcp_start({"lockDir": str(tmp_path / "locks"), "bogus": 1})
    with pytest.raises(qwen_companion.InvalidArgumentError):
        host.mcp_start({"lockDir": str(tmp_path / "locks"), "maxSessions": 0})
    assert not os.path.exists(str(tmp_path / "locks")) or os.listdir(str(tmp_path / "locks")) == []


def fake_bridge(tmp_path):
    p = tmp_path / "qc-mcp-bridge"
    p.write_text("#!/bin/sh\nexit 1\n")
    p.chmod(0o755)
    return str(p)


def test_register_project_keeps_comments(lib_path, tmp_path):
    project = tmp_path / "proj"
    (project / ".qwen").mkdir(parents=True)
    settings = project / ".qwen" / "settings.json"
    settings.write_text('{\n  // mine\n  "theme": "dark"\n}\n')
    bridge = fake_bridge(tmp_path)
    out = register_mcp("project", project=str(project), bridge=bridge, library=lib_path)
    assert out["ok"] is True and out["change"] == "added"
    assert out["settings"] == str(settings)
    assert out["approve"] == "qwen mcp approve qwen-companion-plugins"
    text = settings.read_text()
    assert "// mine" in text and '"theme": "dark"' in text
    assert bridge in text
    again = register_mcp("project", project=str(project), bridge=bridge, library=lib_path)
    assert again["change"] == "unchanged"
    assert settings.read_text() == text
    always = register_mcp("project", project=str(project), bridge=bridge, always_load_tools=True, library=lib_path)
    assert always["change"] == "replaced"
    assert '"alwaysLoadTools": true' in settings.read_text()
    gone = unregister_mcp("project", project=str(project), library=lib_path)
    assert gone["change"] == "removed" and "approve" not in gone
    assert "qwen-companion-plugins" not in settings.read_text()
    assert "// mine" in settings.read_text()
    assert unregister_mcp("project", project=str(project), library=lib_path)["change"] == "absent"


def test_register_user_scope_uses_qwen_home(lib_path, tmp_path):
    bridge = fake_bridge(tmp_path)
    out = register_mcp("user", bridge=bridge, library=lib_path)
    assert out["settings"] == os.path.join(os.environ["QWEN_HOME"], "settings.json")
    assert "approve" not in out
    assert unregister_mcp("user", library=lib_path)["change"] == "removed"


def test_register_refuses_bad_settings_and_bad_options(lib_path, tmp_path):
    project = tmp_path / "proj"
    (project / ".qwen").mkdir(parents=True)
    settings = project / ".qwen" / "settings.json"
    bad = '{\n  "theme": "dark",\n}\n'
    settings.write_text(bad)
    bridge = fake_bridge(tmp_path)
    with pytest.raises(qwen_companion.InvalidJsonError) as e:
        register_mcp("project", project=str(project), bridge=bridge, library=lib_path)
    assert "line 3" in str(e.value)
    assert settings.read_text() == bad
    with pytest.raises(qwen_companion.InvalidArgumentError):
        register_mcp("global", bridge=bridge, library=lib_path)
    with pytest.raises(qwen_companion.InvalidArgumentError):
        register_mcp("project", bridge=bridge, library=lib_path)
    with pytest.raises(qwen_companion.InvalidArgumentError):
        register_mcp("user", library=lib_path)
    with pytest.raises(qwen_companion.NotFoundError):
        register_mcp("user", bridge=str(tmp_path / "missing"), library=lib_path)
    with pytest.raises(qwen_companion.InvalidArgumentError):
        register_mcp("user", bridge="a\0b", library=lib_path)
