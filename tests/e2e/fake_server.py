"""What the scripted fake servers of the e2e tests share (tests/e2e/fake_model.py,
tests/e2e/fake_gemini.py, and the stand-in IDE tests/e2e/standin_ide.py): the request log,
the quiet HTTP/1.1 handler with its JSON and server-sent-event replies, and the main that
listens on 127.0.0.1 and writes the port it got to --port-file.

Standard library only.
"""

import argparse
import json
import os
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

WRITE_RE = re.compile(r"E2E_WRITE path=(\S+) content=(\S+)")


def write_decision(text):
    """An "E2E_WRITE path=<abs> content=<TOKEN>" in text -> the decision to call
    write_file{file_path: <abs>, content: "<TOKEN>\\n"}; None without it."""
    m = WRITE_RE.search(text)
    if not m:
        return None
    return {"kind": "tool_call", "name": "write_file",
            "args": {"file_path": m.group(1), "content": m.group(2) + "\n"},
            "path": m.group(1), "token": m.group(2), "why": "write"}


def final_answer(result):
    """The answer to a tool's result: the text "E2E_FINAL_ANSWER tool_result=<result>"."""
    return {"kind": "text", "text": "E2E_FINAL_ANSWER tool_result=" + result, "why": "tool result"}


class State:
    """The request log: numbers each entry and appends it as one JSON line to log_path."""

    def __init__(self, log_path):
        self.lock = threading.Lock()
        self.n = 0
        self.log_path = log_path

    def record(self, entry):
        with self.lock:
            self.n += 1
            entry = dict(n=self.n, **entry)
            if self.log_path:
                with open(self.log_path, "a", encoding="utf-8") as f:
                    f.write(json.dumps(entry, ensure_ascii=False) + "\n")
            return self.n


class Handler(BaseHTTPRequestHandler):
    """HTTP/1.1, silent on stderr, with JSON and server-sent-event helpers."""

    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # keep stderr quiet
        pass

    def _json(self, code, obj):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _read_json(self):
        """The request body -> (raw bytes, parsed JSON or None when it does not parse)."""
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return raw, json.loads(raw or b"{}")
        except ValueError:
            return raw, None

    def _start_sse(self):
        """Answer 200 with an event stream; the connection closes when the handler returns."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def _send_data(self, obj):
        """One "data: <JSON>" event."""
        self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
        self.wfile.flush()


def main(description, default_model, make_handler):
    """Parse --host/--port/--port-file/--log/--model, serve make_handler(State, model) until
    interrupted; the port is written to --port-file (atomically) once listening."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", default="")
    ap.add_argument("--model", default=default_model)
    args = ap.parse_args()
    state = State(args.log)
    server = ThreadingHTTPServer((args.host, args.port), make_handler(state, args.model))
    server.daemon_threads = True
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % server.server_address[1])
    os.replace(tmp, args.port_file)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    return 0
