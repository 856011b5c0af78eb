#!/usr/bin/env python3
"""Tiny MCP-over-HTTP client and JSON-lines checker for tests/c/run_demo_asan.sh.

Standard library only. Subcommands:

  init   --lock LOCKFILE --state STATE    initialize + notifications/initialized (must be 202);
                                          saves port/token/session to STATE, prints the result
  call   --state STATE TOOL ARGS_JSON     tools/call; prints the JSON-RPC result (or error)
  list   --state STATE                    tools/list; prints the result
  listen --state STATE --out FILE         GET /mcp SSE stream; appends each JSON message to FILE
  expect FILE EXPR [--timeout S] [--count N]
                                          wait until N JSON lines of FILE satisfy EXPR, print the
                                          last one; EXPR sees e (the object), env, json, os
  count  FILE EXPR                        print how many JSON lines of FILE satisfy EXPR
  valid  FILE                             every line of FILE is a JSON object with an "event"
  eval   EXPR [JSON]                      evaluate EXPR with d = JSON (or None); exit 0 iff truthy
                                          (EXPR may call L(FILE): the JSON lines of FILE)
  get    JSON KEY...                      print d[KEY][KEY]... (strings raw, others as JSON)
"""

import argparse
import http.client
import json
import os
import sys
import time

PROTOCOL_VERSION = "2025-11-25"


def load_state(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def headers(state, session=True):
    h = {
        "Authorization": "Bearer " + state["token"],
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "Host": "127.0.0.1:%d" % state["port"],
    }
    if session and state.get("session"):
        h["mcp-session-id"] = state["session"]
        h["mcp-protocol-version"] = PROTOCOL_VERSION
    return h


def sse_messages(lines):
    """Yield the JSON messages of an SSE stream given as an iterator of text lines."""
    data = []
    for raw in lines:
        line = raw.rstrip("\r\n")
        if line == "":
            if data:
                payload = "\n".join(data)
                data = []
                if payload.strip():
                    yield json.loads(payload)
            continue
        if line.startswith(":"):
            continue  # comment / keep-alive
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            data.append(value)
    if data and "\n".join(data).strip():
        yield json.loads("\n".join(data))


def response_lines(resp):
    while True:
        line = resp.readline()
        if not line:
            return
        yield line.decode("utf-8")


def post(state, body, session=True, timeout=30):
    """POST one JSON-RPC message. Returns (status, headers, messages)."""
    conn = http.client.HTTPConnection("127.0.0.1", state["port"], timeout=timeout)
    try:
        conn.request("POST", "/mcp", body=json.dumps(body).encode("utf-8"), headers=headers(state, session))
        resp = conn.getresponse()
        ctype = resp.getheader("Content-Type", "")
        msgs = []
        if resp.status == 200 and "text/event-stream" in ctype:
            # Stop at our response: the stream may stay open after it.
            for m in sse_messages(response_lines(resp)):
                msgs.append(m)
                if "id" in m and m.get("id") == body.get("id") and ("result" in m or "error" in m):
                    break
        else:
            raw = resp.read()
            if raw.strip() and "json" in ctype:
                msgs.append(json.loads(raw.decode("utf-8")))
        return resp.status, resp, msgs
    finally:
        conn.close()


def rpc(state, rid, method, params):
    status, _, msgs = post(state, {"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
    if status != 200:
        raise SystemExit("%s: HTTP %d" % (method, status))
    for m in msgs:
        if m.get("id") == rid:
            return m
    raise SystemExit("%s: no JSON-RPC response in %r" % (method, msgs))


def cmd_init(a):
    with open(a.lock, encoding="utf-8") as f:
        lock = json.load(f)
    state = {"port": int(lock["port"]), "token": lock["authToken"], "session": None, "next_id": 1}
    status, resp, msgs = post(
        state,
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        },
        session=False,
    )
    if status != 200:
        raise SystemExit("initialize: HTTP %d" % status)
    sid = resp.getheader("Mcp-Session-Id")
    if not sid:
        raise SystemExit("initialize: no Mcp-Session-Id header")
    state["session"] = sid
    result = next((m for m in msgs if m.get("id") == 0), None)
    if result is None or "result" not in result:
        raise SystemExit("initialize: bad response %r" % (msgs,))
    st2, _, _ = post(state, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    with open(a.state, "w", encoding="utf-8") as f:
        json.dump(state, f)
    print(json.dumps({"initialize": result["result"], "initializedStatus": st2}))
    if st2 != 202:
        raise SystemExit("notifications/initialized: HTTP %d, want 202" % st2)


def next_id(a, state):
    rid = state.get("next_id", 1)
    state["next_id"] = rid + 1
    with open(a.state, "w", encoding="utf-8") as f:
        json.dump(state, f)
    return rid


def cmd_call(a):
    state = load_state(a.state)
    m = rpc(state, next_id(a, state), "tools/call", {"name": a.tool, "arguments": json.loads(a.args)})
    print(json.dumps(m.get("result", m)))


def cmd_list(a):
    state = load_state(a.state)
    m = rpc(state, next_id(a, state), "tools/list", {})
    print(json.dumps(m.get("result", m)))


def cmd_listen(a):
    state = load_state(a.state)
    h = headers(state)
    h["Accept"] = "text/event-stream"
    del h["Content-Type"]
    conn = http.client.HTTPConnection("127.0.0.1", state["port"], timeout=a.timeout)
    conn.request("GET", "/mcp", headers=h)
    resp = conn.getresponse()
    with open(a.out, "a", encoding="utf-8") as out:
        out.write(json.dumps({"_stream": "open", "status": resp.status,
                              "contentType": resp.getheader("Content-Type", "")}) + "\n")
        out.flush()
        if resp.status == 200:
            try:
                for m in sse_messages(response_lines(resp)):
                    out.write(json.dumps(m) + "\n")
                    out.flush()
            except (OSError, http.client.HTTPException) as e:
                out.write(json.dumps({"_stream": "error", "error": str(e)}) + "\n")
        out.write(json.dumps({"_stream": "closed"}) + "\n")
    conn.close()


def read_json_lines(path):
    out = []
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.endswith("\n"):
                    break  # still being written
                try:
                    out.append(json.loads(line))
                except ValueError:
                    out.append(None)
    except FileNotFoundError:
        pass
    return out


def L(path):
    """The complete JSON lines of a file (None for a line that is not JSON)."""
    return read_json_lines(path)


def matches(expr, e):
    try:
        return bool(eval(expr, {"e": e, "env": os.environ, "json": json, "os": os, "L": L}))
    except Exception:
        return False


def cmd_expect(a):
    deadline = time.monotonic() + a.timeout
    while True:
        hits = [e for e in read_json_lines(a.file) if e is not None and matches(a.expr, e)]
        if len(hits) >= a.count:
            print(json.dumps(hits[-1]))
            return
        if time.monotonic() >= deadline:
            sys.stderr.write("timeout (%gs): %d of %d lines match %s\n" % (a.timeout, len(hits), a.count, a.expr))
            try:
                with open(a.file, encoding="utf-8", errors="replace") as f:
                    tail = f.readlines()[-15:]
                sys.stderr.write("last lines of %s:\n%s" % (a.file, "".join("  " + x for x in tail)))
            except FileNotFoundError:
                sys.stderr.write("%s does not exist\n" % a.file)
            raise SystemExit(1)
        time.sleep(0.05)


def cmd_count(a):
    print(sum(1 for e in read_json_lines(a.file) if e is not None and matches(a.expr, e)))


def cmd_valid(a):
    bad = 0
    with open(a.file, "rb") as f:
        for n, raw in enumerate(f, 1):
            try:
                e = json.loads(raw.decode("utf-8"))
                ok = isinstance(e, dict) and isinstance(e.get("event"), str)
            except ValueError:
                ok = False
            if not ok:
                bad += 1
                sys.stderr.write("line %d is not a JSON event: %r\n" % (n, raw))
            elif not raw.endswith(b"\n"):
                bad += 1
                sys.stderr.write("line %d is not terminated\n" % n)
    raise SystemExit(1 if bad else 0)


def cmd_eval(a):
    d = json.loads(a.json) if a.json is not None else None
    try:
        ok = eval(a.expr, {"d": d, "env": os.environ, "json": json, "os": os, "L": L})
    except Exception as ex:  # report, don't crash
        sys.stderr.write("%s: %r\n" % (a.expr, ex))
        ok = False
    if not ok:
        sys.stderr.write("false: %s\n  with d = %s\n" % (a.expr, a.json))
    raise SystemExit(0 if ok else 1)


def cmd_get(a):
    d = json.loads(a.json)
    for k in a.keys:
        d = d[int(k)] if isinstance(d, list) else d[k]
    print(d if isinstance(d, str) else json.dumps(d))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("init")
    s.add_argument("--lock", required=True)
    s.add_argument("--state", required=True)
    s.set_defaults(fn=cmd_init)
    s = sub.add_parser("call")
    s.add_argument("--state", required=True)
    s.add_argument("tool")
    s.add_argument("args")
    s.set_defaults(fn=cmd_call)
    s = sub.add_parser("list")
    s.add_argument("--state", required=True)
    s.set_defaults(fn=cmd_list)
    s = sub.add_parser("listen")
    s.add_argument("--state", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--timeout", type=float, default=600)
    s.set_defaults(fn=cmd_listen)
    s = sub.add_parser("expect")
    s.add_argument("file")
    s.add_argument("expr")
    s.add_argument("--timeout", type=float, default=20)
    s.add_argument("--count", type=int, default=1)
    s.set_defaults(fn=cmd_expect)
    s = sub.add_parser("count")
    s.add_argument("file")
    s.add_argument("expr")
    s.set_defaults(fn=cmd_count)
    s = sub.add_parser("valid")
    s.add_argument("file")
    s.set_defaults(fn=cmd_valid)
    s = sub.add_parser("eval")
    s.add_argument("expr")
    s.add_argument("json", nargs="?")
    s.set_defaults(fn=cmd_eval)
    s = sub.add_parser("get")
    s.add_argument("json")
    s.add_argument("keys", nargs="+")
    s.set_defaults(fn=cmd_get)
    a = p.parse_args()
    a.fn(a)


if __name__ == "__main__":
    main()
