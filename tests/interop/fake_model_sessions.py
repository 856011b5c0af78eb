#!/usr/bin/env python3
"""tests/e2e/fake_model.py with one more script line, for the cross-session checks.

Same server, same log, same options (see tests/e2e/fake_model.py); main-agent requests
additionally follow:

  * last message is a user message containing "E2E_PEER_SEND to=<address> msg=<token>"
      -> call the session's `send_message` tool with {"to": <address>, "message": <token>}:
         directly when the request declares `send_message`, else through the deferred-tool
         bridge `tool_call` {"name": "send_message", "arguments": {...}} (0.24.4 defers
         send_message, so it is normally not declared);
  * every logged request gets "peer_envelope": true when its last user message holds a
    `<cross_session_message` envelope (what a delivered cross-session message looks like
    to the model), so the harness can wait for it.
"""

import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import fake_model  # noqa: E402  (tests/e2e/fake_model.py, reused as is)

PEER_SEND_RE = re.compile(r"E2E_PEER_SEND to=(\S+) msg=(\S+)")
_base_decide = fake_model.decide


def declared_tools(body):
    names = set()
    for tool in body.get("tools") or []:
        if isinstance(tool, dict):
            fn = tool.get("function") if isinstance(tool.get("function"), dict) else tool
            if isinstance(fn.get("name"), str):
                names.add(fn["name"])
    return names


def decide(body):
    decision, info = _base_decide(body)
    info["peer_envelope"] = "<cross_session_message" in info.get("last_user_text", "")
    if info.get("main") and info.get("last_role") == "user":
        m = PEER_SEND_RE.search(info["last_user_text"])
        if m:
            args = {"to": m.group(1), "message": m.group(2)}
            tools = declared_tools(body)
            if "send_message" in tools:
                decision = {"kind": "tool_call", "name": "send_message", "args": args,
                            "why": "peer send (direct)"}
            else:
                decision = {"kind": "tool_call", "name": "tool_call",
                            "args": {"name": "send_message", "arguments": args},
                            "why": "peer send (tool_call bridge)"}
            decision["declared"] = sorted(tools)
    return decision, info


fake_model.decide = decide

if __name__ == "__main__":
    sys.exit(fake_model.main())
