#!/usr/bin/env python3
"""Scripted fake of the Gemini API (generativelanguage v1beta) for the Gemini CLI e2e test.

Standard library only. Listens on 127.0.0.1 (port 0 by default), writes the port it got
to --port-file, and appends one JSON line per request to --log:

    {"n": 3, "t": <unix time>, "method": "POST", "path": "/v1beta/models/M:streamGenerateContent?alt=sse",
     "rpc": "streamGenerateContent", "main": true, "last_role": "user",
     "last_user_text": "...", "ide_context": {...} | null, "ide_context_kind": "full"|"delta"|null,
     "decision": {"kind": "tool_call", ...}, "body": {...}}

The CLI is pointed here with GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:<port>. Answered:
  POST .../models/<m>:streamGenerateContent   SSE ("data: <GenerateContentResponse>" events)
  POST .../models/<m>:generateContent         one GenerateContentResponse
  POST .../models/<m>:countTokens             {"totalTokens": <chars / 4>}
  POST .../models/<m>:embedContent            a zero vector
  GET  .../models[/<m>]                       one model
anything else gets 404 (and is logged, so a test can tell what the CLI asked for).

Script (stateless, decided from the request alone):
  * only main-agent requests (system instruction starting "You are Gemini CLI") are scripted; a
    side request (routing, next-speaker, summaries) that asks for JSON gets an object with
    the schema's required properties filled in, any other side request the text "ok";
  * the last content is a function response  -> text "E2E_FINAL_ANSWER tool_result=<response>";
  * the last user text has "E2E_WRITE path=<abs> content=<TOKEN>"
                                               -> write_file{file_path: <abs>, content: "<TOKEN>\\n"};
  * the last user text has "E2E_ASK"          -> text "E2E_CONTEXT_ANSWER";
  * anything else                             -> text "ok".

The editor context the CLI adds to the conversation (a user text starting "Here is the
user's editor context as a JSON object" or "Here is a summary of changes in the user's
editor context") is parsed: the newest such block is logged as "ide_context" with
"ide_context_kind" full or delta.
"""

import json
import os
import re
import sys
import time
from urllib.parse import urlsplit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fake_server  # noqa: E402  (tests/e2e/fake_server.py)

MAIN_PREFIX = "You are Gemini CLI"
RPC_RE = re.compile(r"/models/([^/:?]+):([A-Za-z]+)$")
CONTEXT_HEADS = (
    ("full", "Here is the user's editor context as a JSON object."),
    ("delta", "Here is a summary of changes in the user's editor context, in JSON format."),
)
JSON_BLOCK_RE = re.compile(r"```json\n(.*?)\n```", re.S)


def part_texts(content):
    return [p["text"] for p in (content or {}).get("parts") or []
            if isinstance(p, dict) and isinstance(p.get("text"), str)]


def function_names(body):
    names = []
    for tool in body.get("tools") or []:
        for decl in (tool or {}).get("functionDeclarations") or []:
            if isinstance(decl, dict) and isinstance(decl.get("name"), str):
                names.append(decl["name"])
    return names


def ide_context(contents):
    """The newest editor-context block of the conversation -> (kind, parsed JSON)."""
    for content in reversed(contents):
        if content.get("role") != "user":
            continue
        for text in reversed(part_texts(content)):
            for kind, head in CONTEXT_HEADS:
                if text.startswith(head):
                    m = JSON_BLOCK_RE.search(text)
                    try:
                        return kind, json.loads(m.group(1)) if m else None
                    except ValueError:
                        return kind, {"unparsed": m.group(1)}
    return None, None


def fill_schema(schema):
    """A value satisfying a JSON schema's required parts (for side requests)."""
    if not isinstance(schema, dict):
        return "e2e"
    typ = str(schema.get("type", "object")).lower()
    if schema.get("enum"):
        return schema["enum"][0]
    if typ == "object":
        props = schema.get("properties") or {}
        return {k: fill_schema(props.get(k)) for k in schema.get("required") or props.keys()}
    if typ == "array":
        return []
    if typ == "boolean":
        return False
    if typ in ("number", "integer"):
        return schema.get("minimum", 1)
    return "e2e"


def decide(body):
    """Return (decision dict, summary fields for the log)."""
    contents = [c for c in body.get("contents") or [] if isinstance(c, dict)]
    system = "\n".join(part_texts(body.get("systemInstruction")))
    main = system.lstrip().startswith(MAIN_PREFIX)
    last = contents[-1] if contents else {}
    parts = [p for p in last.get("parts") or [] if isinstance(p, dict)]
    responses = [p["functionResponse"] for p in parts if isinstance(p.get("functionResponse"), dict)]
    last_role = "function" if responses else last.get("role")
    last_user_text = ""
    for content in reversed(contents):
        texts = [t for t in part_texts(content)
                 if not any(t.startswith(h) for _, h in CONTEXT_HEADS)]
        if content.get("role") == "user" and texts:
            last_user_text = "\n".join(texts)
            break
    kind, ctx = ide_context(contents)
    info = {"main": main, "last_role": last_role, "last_user_text": last_user_text,
            "ide_context_kind": kind, "ide_context": ctx, "tools": function_names(body)}
    if not main:
        config = body.get("generationConfig") or {}
        if config.get("responseMimeType") == "application/json":
            schema = config.get("responseJsonSchema") or config.get("responseSchema")
            return {"kind": "text", "text": json.dumps(fill_schema(schema)),
                    "why": "side request (json)"}, info
        return {"kind": "text", "text": "ok", "why": "side request"}, info
    if responses:
        result = json.dumps(responses[-1].get("response"), ensure_ascii=False)
        return fake_server.final_answer(result), info
    if last_role == "user":
        write = fake_server.write_decision(last_user_text)
        if write:
            return write, info
        if "E2E_ASK" in last_user_text:
            return {"kind": "text", "text": "E2E_CONTEXT_ANSWER", "why": "ask"}, info
    return {"kind": "text", "text": "ok", "why": "unscripted"}, info


USAGE = {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}


def response_of(decision, model, final=True):
    if decision["kind"] == "tool_call":
        part = {"functionCall": {"name": decision["name"], "args": decision["args"]}}
    else:
        part = {"text": decision["text"]}
    cand = {"content": {"role": "model", "parts": [part]}, "index": 0}
    if final:
        cand["finishReason"] = "STOP"
    return {"candidates": [cand], "usageMetadata": USAGE, "modelVersion": model}


def make_handler(state, model_name):
    class Handler(fake_server.Handler):
        server_version = "e2e-fake-gemini/1"

        def _error(self, code, message):
            self._json(code, {"error": {"code": code, "message": message, "status": "NOT_FOUND"
                                        if code == 404 else "INVALID_ARGUMENT"}})

        def do_GET(self):
            path = urlsplit(self.path).path.rstrip("/")
            state.record({"t": time.time(), "method": "GET", "path": self.path,
                          "headers": dict(self.headers)})
            model = {"name": "models/" + model_name, "displayName": model_name,
                     "inputTokenLimit": 1048576, "outputTokenLimit": 65536,
                     "supportedGenerationMethods": ["generateContent", "countTokens"]}
            if path.endswith("/models"):
                self._json(200, {"models": [model]})
            elif "/models/" in path:
                self._json(200, dict(model, name="models/" + path.rsplit("/", 1)[1]))
            else:
                self._error(404, "not found")

        def do_POST(self):
            raw, body = self._read_json()
            entry = {"t": time.time(), "method": "POST", "path": self.path,
                     "headers": dict(self.headers)}
            m = RPC_RE.search(urlsplit(self.path).path)
            rpc = m.group(2) if m else None
            entry["rpc"] = rpc
            if not isinstance(body, dict) or rpc not in (
                    "streamGenerateContent", "generateContent", "countTokens", "embedContent"):
                entry["body_raw"] = raw.decode("utf-8", "replace")
                state.record(entry)
                self._error(404 if isinstance(body, dict) else 400, "unsupported request")
                return
            model = m.group(1)
            if rpc == "countTokens":
                entry["body"] = body
                state.record(entry)
                self._json(200, {"totalTokens": max(1, len(raw) // 4)})
                return
            if rpc == "embedContent":
                entry["body"] = body
                state.record(entry)
                self._json(200, {"embedding": {"values": [0.0] * 8}})
                return
            decision, info = decide(body)
            entry.update(info)
            entry["decision"] = decision
            entry["body"] = body
            state.record(entry)
            if rpc == "generateContent":
                self._json(200, response_of(decision, model))
            else:
                self._stream(decision, model)

        def _stream(self, decision, model):
            self._start_sse()
            if decision["kind"] == "text":
                text = decision["text"]
                chunks = [text[i:i + 16] for i in range(0, len(text), 16)] or [""]
                for i, chunk in enumerate(chunks):
                    self._send_data(response_of(dict(decision, text=chunk), model, final=i == len(chunks) - 1))
            else:
                self._send_data(response_of(decision, model))

    return Handler


def main():
    return fake_server.main(__doc__.splitlines()[0], "gemini-2.5-flash", make_handler)


if __name__ == "__main__":
    sys.exit(main())
