#!/usr/bin/env python3
"""Runs the `qwen-companion-plugins` entry of a Qwen Code settings file as
Qwen Code does (the entry's command and args, in CWD, over stdio with
newline-delimited JSON-RPC), then: initialize, tools/list, and tools/call of
TOOL with ARGS_JSON. Prints one JSON object {"entry", "tools", "result"}.

    bridge_client.py SETTINGS CWD TOOL ARGS_JSON [--timeout S]

Standard library only. The bridge process is ended (stdin closed, then
SIGTERM, SIGKILL) before exit.
"""

import json
import re
import subprocess
import sys
import threading


def jsonc(text):
    # The settings file the library writes may keep the user's comments.
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            i = text.index("*/", i + 2) + 2
        else:
            out.append(c)
            i += 1
    return json.loads(re.sub(r",(\s*[}\]])", r"\1", "".join(out)))


def main():
    settings, cwd, tool, args = sys.argv[1:5]
    timeout = float(sys.argv[sys.argv.index("--timeout") + 1]) if "--timeout" in sys.argv else 30.0
    entry = jsonc(open(settings, encoding="utf-8").read())["mcpServers"]["qwen-companion-plugins"]
    proc = subprocess.Popen(
        [entry["command"]] + entry.get("args", []),
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    next_id = [0]

    def send(msg):
        proc.stdin.write((json.dumps(msg) + "\n").encode())
        proc.stdin.flush()

    def request(method, params):
        next_id[0] += 1
        send({"jsonrpc": "2.0", "id": next_id[0], "method": method, "params": params})
        while True:
            line = proc.stdout.readline()
            if not line:
                raise SystemExit("bridge closed stdout: " + proc.stderr.read().decode(errors="replace")[:500])
            msg = json.loads(line)
            if msg.get("id") == next_id[0] and ("result" in msg or "error" in msg):
                if "error" in msg:
                    raise SystemExit("%s failed: %s" % (method, msg["error"]))
                return msg["result"]

    try:
        request(
            "initialize",
            {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "nvim-test", "version": "1"}},
        )
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        tools = [t["name"] for t in request("tools/list", {})["tools"]]
        result = request("tools/call", {"name": tool, "arguments": json.loads(args)})
        print(json.dumps({"entry": entry, "tools": tools, "result": result}))
    finally:
        timer.cancel()
        try:
            proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.terminate()
            try:
                proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


if __name__ == "__main__":
    main()
