"""Smoke test of the binding and the Sublime plugin on a real Python 3.8
(Sublime Text's plugin host). Standard library only: the MCP side is a few
raw JSON-RPC requests over urllib.

    python3.8 tests/python/py38_smoke.py LIBRARY_PATH

Prints "PY38 SMOKE OK" on success.
"""

import json
import os
import shutil
import sys
import tempfile
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
#: $QC_SUBLIME_PACKAGE_DIR (tests/sublime/run.sh): the installed release package,
#: its binding (lib/) and the library it ships, which the plugin finds itself.
PACKAGED = os.environ.get("QC_SUBLIME_PACKAGE_DIR")
BINDING_DIR = os.path.join(os.path.abspath(PACKAGED), "lib") if PACKAGED else os.path.join(REPO, "bindings", "python")
sys.path[:0] = [BINDING_DIR, os.path.join(HERE, "stubs")]

import qwen_companion as qc  # noqa: E402

OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def rpc(url, token, message, session=None):
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Authorization": "Bearer " + token,
    }
    if session:
        headers["Mcp-Session-Id"] = session
        headers["Mcp-Protocol-Version"] = "2025-06-18"
    req = urllib.request.Request(url, json.dumps(message).encode("utf-8"), headers)
    with OPENER.open(req, timeout=10) as resp:
        body = resp.read().decode("utf-8")
        sid = resp.headers.get("Mcp-Session-Id") or session
        status = resp.status
    if not body.strip():
        return status, sid, None
    if body.lstrip().startswith("{"):
        return status, sid, json.loads(body)
    for line in body.splitlines():  # SSE framing
        if line.startswith("data:") and line[5:].strip():
            msg = json.loads(line[5:])
            if "id" in msg:
                return status, sid, msg
    return status, sid, None


def main():
    lib = sys.argv[1]
    assert sys.version_info[:2] == (3, 8), sys.version
    tmp = tempfile.mkdtemp(prefix="qc-py38-")
    try:
        run(lib, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("PY38 SMOKE OK")


def run(lib, tmp):
    ws = os.path.join(tmp, "ws")
    os.makedirs(ws)
    main_py = os.path.join(ws, "main.py")
    with open(main_py, "w") as f:
        f.write("print('hi')\n")
    lock_dir = os.path.join(tmp, "ide")

    try:
        qc.Companion(config="{bad", library=lib)
        raise AssertionError("bad config accepted")
    except qc.InvalidJsonError as e:
        assert e.status == 3

    diffs = []
    with qc.Companion(
        workspace_roots=[ws],
        lock_dir=lock_dir,
        open_diff=lambda p, t: diffs.append((p, t)),
        close_diff=lambda p: "final text",
        library=lib,
    ) as c:
        c.file_opened(main_py)
        c.file_focused(main_py)
        c.set_cursor(None, 1, 3)
        c.set_selection(None, "print")
        f = c.context()["workspaceState"]["openFiles"][0]
        assert f["path"] == main_py and f["cursor"] == {"line": 1, "character": 3}
        assert c.terminal_env()["QWEN_CODE_IDE_SERVER_PORT"] == str(c.port)
        with open(c.lock_file) as fh:
            token = json.load(fh)["authToken"]
        url = "http://127.0.0.1:{}/mcp".format(c.port)
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "py38", "version": "0"}},
        }
        status, sid, reply = rpc(url, token, init)
        assert status == 200 and sid and reply["result"]["protocolVersion"]
        status, _, _ = rpc(url, token, {"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)
        assert status == 202, status
        target = os.path.join(ws, "new.txt")
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "openDiff", "arguments": {"filePath": target, "newContent": "proposed\n"}},
        }
        _, _, reply = rpc(url, token, call, sid)
        assert reply["result"]["content"] == [] and not reply["result"].get("isError"), reply
        assert diffs == [(target, "proposed\n")], diffs
        call = {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "closeDiff", "arguments": {"filePath": target, "suppressNotification": True}},
        }
        _, _, reply = rpc(url, token, call, sid)
        assert json.loads(reply["result"]["content"][0]["text"]) == {"content": "final text"}, reply
        try:
            c.diff_accept(target)
            raise AssertionError("accepted a closed diff")
        except qc.NotFoundError:
            pass
        lock_file = c.lock_file
    assert not os.path.exists(lock_file)

    participants(lib, tmp)

    # the Sublime plugin imports and starts on 3.8 too
    import sublime

    s = sublime.load_settings("QwenCompanion.sublime-settings")
    if not PACKAGED:
        s.set("library_path", lib)
    s.set("lock_dir", lock_dir)
    s.set("cli", "both")  # issue 22: Qwen Code and Gemini CLI from one companion
    s.set("gemini_dir", os.path.join(tmp, "gemini-ide"))
    window = sublime.Editor().new_window([ws])
    sys.path.insert(0, HERE)
    from sublime_package import load_package  # the package imported as Sublime Text does

    package = load_package(only=("plugin", "qwen_commands", "qwen_events"))
    plugin = package.plugin
    if PACKAGED:  # the library the package ships for this machine, found by the plugin
        assert plugin.library_path() == os.path.abspath(lib), (plugin.library_path(), lib)
    plugin.plugin_loaded()
    wc = plugin._companions[window.id()]
    host = plugin.plugin_host()  # the plugin host and its MCP server start on 3.8 too
    assert host is not None, plugin._hosts.error
    assert host.mcp_info()["serverName"] == "qwen-companion-plugins"
    with open(wc.companion.lock_file) as fh:
        assert json.load(fh)["workspacePath"] == ws
    view = sublime.Editor().open_file(window, main_py)
    assert wc.companion.context()["workspaceState"]["openFiles"][0]["path"] == main_py
    # issue 21 on 3.8: the editor tools are offered, the reference is typed, the health report
    assert "editor_diagnostics" in plugin._hosts._capabilities
    sublime.add_resource("Packages/Terminus/Terminus.sublime-settings")
    window.run_command("qwen_companion_run_qwen")
    term = window.new_file()
    term.settings().set("terminus_view.tag", window.commands[-1][1]["tag"])
    view.run_command("qwen_companion_add_file_to_prompt")
    assert window.commands[-1] == ("terminus_send_string", {"string": "@main.py ", "tag": plugin.qwen_terminal_tag(window)})
    # issue 22 on 3.8: Gemini CLI's discovery file, Run Gemini CLI, the reference typed into its terminal
    assert os.path.isfile(wc.discovery["gemini"]) and wc.discovery["qwen"] == wc.companion.lock_file
    window.run_command("qwen_companion_run_gemini")
    args = window.commands[-1][1]
    assert args["env"]["GEMINI_CLI_IDE_PID"] == str(os.getpid()) and args["shell_cmd"] == "gemini", args
    gemini_term = window.new_file()
    gemini_term.settings().set("terminus_view.tag", args["tag"])
    window.focus_view(view)
    view.run_command("qwen_companion_add_file_to_prompt")
    assert window.commands[-1] == ("terminus_send_string", {"string": "@main.py ", "tag": args["tag"]})
    report = qc.health({"qwen": os.path.join(tmp, "no-qwen")}, companion=wc.companion, plugin_host=host)
    assert report["library"]["version"] == qc.library_version(lib) and report["checks"], report
    assert qc.health_report_lines(report)[0].startswith("qwen-companion ")
    plugin.plugin_unloaded()
    assert host.closed
    assert sublime.ui_violations == []


def participants(lib, tmp):
    """Two participants exchange a message (callbacks on the library thread)."""
    import threading

    got = []
    done = threading.Event()

    def on_message(msg):
        got.append(msg)
        done.set()

    conf = {"qwenHome": os.path.join(tmp, "qh"), "runtimeDir": os.path.join(tmp, "rt"), "sweepSockets": False}
    with qc.Participant(config=conf, library=lib) as a, qc.Participant(
        config=conf, inbound_policy="accept", on_message=on_message, library=lib
    ) as b:
        a.register(name="py38-a")
        sb = b.register(name="py38-b")
        assert sorted(r["name"] for r in a.list()) == ["py38-a", "py38-b"]
        sent = a.send("py38-b", "hello from 3.8")
        assert done.wait(10) and got[0]["origin"] == "peer" and got[0]["content"] == "hello from 3.8"
        assert a.wait(sent["msgId"], timeout=5)["state"] == "delivered"
        try:
            a.send("nobody", "x")
            raise AssertionError("sent to nobody")
        except qc.NotFoundError:
            pass
    assert not os.path.exists(sb["recordPath"])


if __name__ == "__main__":
    main()
