#!/usr/bin/env python3
"""Scripted OpenAI-compatible chat-completions server for the real-CLI e2e test.

Standard library only. Listens on 127.0.0.1 (port 0 by default), writes the port it
got to --port-file, and appends one JSON line per request to --log:

    {"n": 3, "t": <unix time>, "method": "POST", "path": "/v1/chat/completions",
     "headers": {...}, "body": {...}, "main": true, "last_role": "user",
     "last_user_text": "...", "decision": {"kind": "tool_call", ...}}

Script (stateless: decided from the request alone):
  * only main-agent requests (first system message starts with "You are Qwen Code")
    are scripted; anything else gets the text "ok";
  * last message is a tool result        -> text "E2E_FINAL_ANSWER tool_result=<result>";
  * last user message has "E2E_WRITE path=<abs> content=<TOKEN>"
                                          -> write_file{file_path: <abs>, content: "<TOKEN>\\n"};
  * last user message has "E2E_CALL name=<tool> args=<JSON without spaces>"
                                          -> a call of <tool> with those arguments;
  * last user message has "E2E_ADD"       -> text "E2E_ADD_FOUND <token>" when the request
                                             holds a token E2E_FILE_BODY_<word> (the content of a
                                             file the prompt referenced with @path), else
                                             "E2E_ADD_MISSING";
  * last user message has "E2E_ASK"       -> text "E2E_CONTEXT_ANSWER";
  * anything else                         -> text "ok".

Supports "stream": true (SSE chunks, tool_calls deltas, a usage chunk, "data: [DONE]")
and plain JSON replies. GET /v1/models lists one model.
"""

import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fake_server  # noqa: E402  (tests/e2e/fake_server.py)

CALL_RE = re.compile(r"E2E_CALL name=(\S+) args=(\S+)")
FILE_BODY_RE = re.compile(r"E2E_FILE_BODY_\w+")
MAIN_PREFIX = "You are Qwen Code"


def flatten(content):
    """OpenAI message content (string, list of parts, or None) -> plain text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, dict):
                if isinstance(part.get("text"), str):
                    out.append(part["text"])
            elif isinstance(part, str):
                out.append(part)
        return "\n".join(out)
    return json.dumps(content)


def decide(body):
    """Return (decision dict, summary fields for the log)."""
    messages = body.get("messages") or []
    system = next((m for m in messages if m.get("role") == "system"), None)
    main = bool(system) and flatten(system.get("content")).lstrip().startswith(MAIN_PREFIX)
    last = messages[-1] if messages else {}
    last_role = last.get("role")
    last_user = next((m for m in reversed(messages) if m.get("role") == "user"), None)
    last_user_text = flatten(last_user.get("content")) if last_user else ""
    info = {"main": main, "last_role": last_role, "last_user_text": last_user_text}
    if not main:
        return {"kind": "text", "text": "ok", "why": "not main agent"}, info
    if last_role == "tool":
        result = flatten(last.get("content")).replace("\n", " ").strip()
        return fake_server.final_answer(result), info
    if last_role == "user":
        write = fake_server.write_decision(last_user_text)
        if write:
            return write, info
        m = CALL_RE.search(last_user_text)
        if m:
            try:
                args = json.loads(m.group(2))
            except ValueError:
                args = {"unparsed": m.group(2)}
            return {"kind": "tool_call", "name": m.group(1), "args": args,
                    "why": "call"}, info
        if "E2E_ADD" in last_user_text:
            body = FILE_BODY_RE.search("\n".join(flatten(m.get("content")) for m in messages
                                                 if m.get("role") == "user"))
            return {"kind": "text", "text": "E2E_ADD_FOUND " + body.group(0) if body else "E2E_ADD_MISSING",
                    "why": "add"}, info
        if "E2E_ASK" in last_user_text:
            return {"kind": "text", "text": "E2E_CONTEXT_ANSWER", "why": "ask"}, info
    return {"kind": "text", "text": "ok", "why": "unscripted"}, info


def make_handler(state, model_name):
    class Handler(fake_server.Handler):
        server_version = "e2e-fake-model/1"

        def do_GET(self):
            state.record({"t": time.time(), "method": "GET", "path": self.path,
                          "headers": dict(self.headers)})
            if self.path.rstrip("/").endswith("/models"):
                self._json(200, {"object": "list", "data": [
                    {"id": model_name, "object": "model", "created": 0, "owned_by": "e2e"}]})
            else:
                self._json(404, {"error": {"message": "not found"}})

        def do_POST(self):
            raw, body = self._read_json()
            entry = {"t": time.time(), "method": "POST", "path": self.path,
                     "headers": dict(self.headers)}
            if not isinstance(body, dict) or not self.path.rstrip("/").endswith("/chat/completions"):
                entry["body_raw"] = raw.decode("utf-8", "replace")
                state.record(entry)
                self._json(404 if isinstance(body, dict) else 400,
                           {"error": {"message": "unsupported request"}})
                return
            decision, info = decide(body)
            entry.update(info)
            entry["decision"] = decision
            entry["body"] = body
            n = state.record(entry)
            model = body.get("model") or model_name
            if body.get("stream"):
                self._stream(n, model, decision, body)
            else:
                self._plain(n, model, decision)

        def _message(self, n, decision):
            if decision["kind"] == "tool_call":
                return {"role": "assistant", "content": None, "tool_calls": [{
                    "id": "call_e2e_%d" % n, "type": "function",
                    "function": {"name": decision["name"],
                                 "arguments": json.dumps(decision["args"])}}]}, "tool_calls"
            return {"role": "assistant", "content": decision["text"]}, "stop"

        def _plain(self, n, model, decision):
            message, finish = self._message(n, decision)
            self._json(200, {
                "id": "chatcmpl-e2e-%d" % n, "object": "chat.completion",
                "created": int(time.time()), "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})

        def _stream(self, n, model, decision, body):
            self._start_sse()
            base = {"id": "chatcmpl-e2e-%d" % n, "object": "chat.completion.chunk",
                    "created": int(time.time()), "model": model}

            def send(choices, **extra):
                self._send_data(dict(base, choices=choices, **extra))

            send([{"index": 0, "delta": {"role": "assistant", "content": ""},
                   "finish_reason": None}])
            if decision["kind"] == "tool_call":
                args = json.dumps(decision["args"])
                half = len(args) // 2
                send([{"index": 0, "delta": {"tool_calls": [{
                    "index": 0, "id": "call_e2e_%d" % n, "type": "function",
                    "function": {"name": decision["name"], "arguments": args[:half]}}]},
                    "finish_reason": None}])
                send([{"index": 0, "delta": {"tool_calls": [{
                    "index": 0, "function": {"arguments": args[half:]}}]},
                    "finish_reason": None}])
                finish = "tool_calls"
            else:
                text = decision["text"]
                for i in range(0, len(text), 16):
                    send([{"index": 0, "delta": {"content": text[i:i + 16]},
                           "finish_reason": None}])
                finish = "stop"
            send([{"index": 0, "delta": {}, "finish_reason": finish}])
            if (body.get("stream_options") or {}).get("include_usage", True):
                send([], usage={"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15})
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

    return Handler


def main():
    return fake_server.main(__doc__.splitlines()[0], "e2e-fake-model", make_handler)


if __name__ == "__main__":
    sys.exit(main())
