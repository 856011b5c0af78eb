#!/usr/bin/env python3
"""Minimal stand-in for `qcdemo ide` (standard library only), for checking the harness.

It speaks the same stdin/stdout protocol as `target/c/qcdemo ide --workspace WS` and the
IDE-companion side of the MCP streamable-HTTP protocol, just well enough for the real
CLI. It is NOT the product: run_e2e.sh uses it only with `E2E_DEMO=standin`, to tell a
harness problem from a library problem. STANDIN_FAULT=initialized200 makes it answer
notifications with 200 instead of 202 (the CLI then never opens its GET stream), to see
how the harness reports a broken companion.

`--cli qwen|gemini|both` (default qwen) chooses the discovery files written: Qwen Code's
lock and/or Gemini CLI's $TMPDIR/gemini/ide/gemini-ide-server-<pid>-<port>.json.

stdout (JSON lines): {"event":"ready","port":P,"lockFile":"...","discoveryFiles":{...},"env":{...}},
  {"event":"diff_opened","filePath":...,"newContent":...},
  {"event":"diff_close_requested","filePath":...}, {"event":"error","message":...}
stdin: open PATH | focus PATH | cursor LINE CHAR | select TEXT | accept PATH |
  accept-from FILE PATH | reject PATH | closed PATH | stop
"""

import argparse
import json
import os
import secrets
import sys
import tempfile
import threading
import time
from http.server import ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fake_server  # noqa: E402  (tests/e2e/fake_server.py)

OUT_LOCK = threading.Lock()


def emit(obj):
    with OUT_LOCK:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


class Companion:
    def __init__(self, workspace):
        self.workspace = workspace
        self.token = secrets.token_hex(16)
        self.lock = threading.Lock()
        self.files = {}          # path -> dict(path, timestamp, ...)
        self.active = None
        self.diffs = {}          # path -> proposed content
        self.streams = {}        # session id -> list of wfile (GET streams)

    # ---- context ---------------------------------------------------------
    def context(self):
        files = sorted(self.files.values(), key=lambda f: -f["timestamp"])[:10]
        out = []
        for f in files:
            g = {"path": f["path"], "timestamp": f["timestamp"]}
            if f["path"] == self.active:
                g["isActive"] = True
                if "cursor" in f:
                    g["cursor"] = f["cursor"]
                if f.get("selectedText"):
                    g["selectedText"] = f["selectedText"]
            out.append(g)
        return {"workspaceState": {"openFiles": out, "isTrusted": True}}

    def touch(self, path, active):
        with self.lock:
            f = self.files.setdefault(path, {"path": path})
            f["timestamp"] = int(time.time() * 1000) + len(self.files)
            if active:
                self.active = path

    def broadcast(self, method, params):
        msg = json.dumps({"jsonrpc": "2.0", "method": method, "params": params})
        data = ("event: message\ndata: " + msg + "\n\n").encode()
        with self.lock:
            targets = [(sid, w) for sid, ws in self.streams.items() for w in ws]
        for sid, w in targets:
            try:
                w.write(data)
                w.flush()
            except OSError:
                with self.lock:
                    if w in self.streams.get(sid, []):
                        self.streams[sid].remove(w)

    def push_context(self):
        self.broadcast("ide/contextUpdate", self.context())


def make_handler(c, port_holder):
    class H(fake_server.Handler):

        def _auth(self):
            host = self.headers.get("Host", "")
            ok_hosts = {"127.0.0.1:%d" % port_holder[0], "localhost:%d" % port_holder[0]}
            if host not in ok_hosts or self.headers.get("Origin"):
                self._reply(403, {"error": "forbidden"})
                return False
            if self.headers.get("Authorization") != "Bearer " + c.token:
                self._reply(401, {"error": "unauthorized"})
                return False
            return True

        def _reply(self, code, obj=None, headers=()):
            data = b"" if obj is None else json.dumps(obj).encode()
            self.send_response(code)
            for k, v in headers:
                self.send_header(k, v)
            if obj is not None:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path != "/mcp" or not self._auth():
                return
            sid = self.headers.get("Mcp-Session-Id")
            self._start_sse()
            with c.lock:
                c.streams.setdefault(sid, []).append(self.wfile)
            msg = json.dumps({"jsonrpc": "2.0", "method": "ide/contextUpdate",
                              "params": c.context()})
            try:
                self.wfile.write(("event: message\ndata: " + msg + "\n\n").encode())
                self.wfile.flush()
                while True:
                    time.sleep(20)
                    self.wfile.write(b": keepalive\n\n")
                    self.wfile.flush()
            except OSError:
                pass

        def do_DELETE(self):
            self._reply(405)

        def do_POST(self):
            if self.path != "/mcp" or not self._auth():
                return
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            method, rid = body.get("method"), body.get("id")
            if rid is None:
                # STANDIN_FAULT=initialized200 reproduces a classic companion bug.
                self._reply(200 if os.environ.get("STANDIN_FAULT") == "initialized200" else 202)
                return
            hdr = ()
            if method == "initialize":
                hdr = (("Mcp-Session-Id", secrets.token_hex(8)),)
                result = {"protocolVersion": body["params"].get("protocolVersion", "2025-06-18"),
                          "capabilities": {"tools": {}},
                          "serverInfo": {"name": "standin-ide", "version": "0"}}
            elif method == "tools/list":
                schema = {"type": "object", "properties": {"filePath": {"type": "string"}}}
                result = {"tools": [{"name": "openDiff", "inputSchema": schema},
                                    {"name": "closeDiff", "inputSchema": schema}]}
            elif method == "tools/call":
                name = body["params"]["name"]
                args = body["params"].get("arguments") or {}
                path = args.get("filePath")
                if name == "openDiff":
                    with c.lock:
                        c.diffs[path] = args.get("newContent", "")
                    emit({"event": "diff_opened", "filePath": path,
                          "newContent": args.get("newContent")})
                    result = {"content": []}
                else:
                    with c.lock:
                        content = c.diffs.pop(path, None)
                    emit({"event": "diff_close_requested", "filePath": path})
                    result = {"content": [{"type": "text",
                                           "text": json.dumps({"content": content})}]}
            else:
                result = {}
            self._reply(200, {"jsonrpc": "2.0", "id": rid, "result": result}, hdr)

    return H


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["ide"])
    ap.add_argument("--workspace", required=True)
    ap.add_argument("--cli", choices=["qwen", "gemini", "both"], default="qwen")
    a = ap.parse_args()
    c = Companion(a.workspace)
    port_holder = [0]
    srv = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(c, port_holder))
    srv.daemon_threads = True
    port = port_holder[0] = srv.server_address[1]
    info = {"name": "standin", "displayName": "Stand-in"}
    files = {"qwen": None, "gemini": None}
    env = {}
    if a.cli in ("qwen", "both"):
        base = os.environ.get("QWEN_HOME") or os.path.join(os.path.expanduser("~"), ".qwen")
        os.makedirs(os.path.join(base, "ide"), exist_ok=True)
        files["qwen"] = os.path.join(base, "ide", "%d.lock" % port)
        with open(files["qwen"], "w") as f:
            json.dump({"port": port, "workspacePath": a.workspace, "authToken": c.token,
                       "ppid": os.getpid(), "ideName": "Stand-in", "ideInfo": info}, f)
        env.update(QWEN_CODE_IDE_SERVER_PORT=str(port), QWEN_CODE_IDE_WORKSPACE_PATH=a.workspace)
    if a.cli in ("gemini", "both"):
        # Gemini CLI looks in os.tmpdir()/gemini/ide (TMPDIR first, as here).
        gdir = os.path.join(tempfile.gettempdir(), "gemini", "ide")
        os.makedirs(gdir, exist_ok=True)
        files["gemini"] = os.path.join(gdir, "gemini-ide-server-%d-%d.json" % (os.getpid(), port))
        fd = os.open(files["gemini"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump({"port": port, "workspacePath": a.workspace, "authToken": c.token,
                       "ideInfo": info}, f)
        env.update(GEMINI_CLI_IDE_SERVER_PORT=str(port), GEMINI_CLI_IDE_WORKSPACE_PATH=a.workspace,
                   GEMINI_CLI_IDE_PID=str(os.getpid()))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    emit({"event": "ready", "port": port, "lockFile": files["qwen"] or files["gemini"],
          "discoveryFiles": files, "env": env})
    for line in sys.stdin:
        cmd, _, rest = line.rstrip("\n").partition(" ")
        try:
            if cmd in ("open", "focus"):
                c.touch(rest, active=True)
            elif cmd == "cursor":
                ln, ch = rest.split()
                c.files[c.active]["cursor"] = {"line": int(ln), "character": int(ch)}
            elif cmd == "select":
                c.files[c.active]["selectedText"] = rest
            elif cmd in ("accept", "accept-from"):
                if cmd == "accept-from":
                    src, _, path = rest.partition(" ")
                    text = open(src, encoding="utf-8").read()
                else:
                    path, text = rest, None
                with c.lock:
                    proposed = c.diffs.pop(path)
                c.broadcast("ide/diffAccepted", {"filePath": path,
                                                 "content": proposed if text is None else text})
                continue
            elif cmd in ("reject", "closed"):
                with c.lock:
                    c.diffs.pop(rest)
                c.broadcast("ide/diffRejected" if cmd == "reject" else "ide/diffClosed",
                            {"filePath": rest})
                continue
            elif cmd == "stop":
                break
            c.push_context()
        except Exception as e:  # report and keep going, like the demo
            emit({"event": "error", "message": "%s: %r" % (line.strip(), e)})
    for path in files.values():
        if path:
            os.unlink(path)
    emit({"event": "stopped"})


if __name__ == "__main__":
    main()
