#!/usr/bin/env python3
"""JSON-lines helpers shared by the bash harnesses (tests/lib/harness.sh; stdlib only).

As a command (the harness calls it through wait_json, count_json, jget, ...):

  wait-json FILE [--from N] [--nth K] [--eq K=V]... [--has K=SUB]... [--contains SUB]...
            [--timeout S] [--watch-pid PID]... [--abort-file F]...
      Wait for the K-th (default 1st) JSON line (line index >= N, 0-based) whose dotted
      key K equals V / contains SUB and whose raw text contains every --contains SUB (e.g.
      a msgId wherever the line nests it); print that line. Exit 1 on timeout, 2 if a
      watched process died or an abort file appeared.
  count-json FILE [--from N] [--eq K=V]... [--has K=SUB]...   print the number of matches
  get JSON KEY           print a dotted key of a JSON document (strings raw, else JSON)
  submit-line MODE TEXT  print the input line for qwen (tui: --input-file, stream-json: stdin)
  model-summary FILE     one line per request of a fake model's log (tests/e2e/fake_model.py)

As a module (tests/e2e/e2e_util.py, tests/interop/interop_util.py): dig, as_text,
split_kv, matches, read_json_lines, pid_alive.
"""

import argparse
import json
import os
import sys
import time


def dig(obj, key):
    """The value at a dotted key ("a.b.0.c": list items by index), or None."""
    for part in key.split("."):
        if isinstance(obj, dict) and part in obj:
            obj = obj[part]
        elif isinstance(obj, list) and part.isdigit() and int(part) < len(obj):
            obj = obj[int(part)]
        else:
            return None
    return obj


def as_text(v):
    if v is None:
        return None
    return v if isinstance(v, str) else json.dumps(v)


def split_kv(items):
    """["K=V", ...] -> [(K, V), ...]"""
    out = []
    for item in items or []:
        k, sep, v = item.partition("=")
        if not sep:
            raise SystemExit("bad condition %r (want KEY=VALUE)" % item)
        out.append((k, v))
    return out


def matches(doc, eq, has=()):
    """Every dotted key of eq equals its value (as text), every key of has contains it."""
    for k, v in eq:
        if as_text(dig(doc, k)) != v:
            return False
    for k, v in has:
        t = as_text(dig(doc, k))
        if t is None or v not in t:
            return False
    return True


def read_json_lines(path, start=0):
    """[(raw line, document)] of the complete JSON lines of PATH from line index START."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().split("\n")
    except FileNotFoundError:
        return []
    out = []
    for i, line in enumerate(lines[:-1]):  # only complete lines
        if i < start:
            continue
        try:
            out.append((line, json.loads(line)))
        except ValueError:
            continue
    return out


def pid_alive(pid):
    """Alive and not a zombie (from /proc, like proc_alive in harness.sh)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except (OSError, IndexError):
        return False


def cmd_wait_json(a):
    eq, has, subs = split_kv(a.eq), split_kv(a.has), a.contains or []
    deadline = time.monotonic() + a.timeout
    while True:
        seen = 0
        for line, doc in read_json_lines(a.file, a.start):
            if isinstance(doc, dict) and matches(doc, eq, has) and all(s in line for s in subs):
                seen += 1
                if seen >= a.nth:
                    print(line)
                    return 0
        for pid in a.watch_pid or []:
            if not pid_alive(pid):
                print("process %d exited" % pid, file=sys.stderr)
                return 2
        for f in a.abort_file or []:
            if os.path.exists(f):
                print("abort file %s appeared" % f, file=sys.stderr)
                return 2
        if time.monotonic() >= deadline:
            return 1
        time.sleep(0.1)


def cmd_count_json(a):
    eq, has = split_kv(a.eq), split_kv(a.has)
    print(sum(1 for _, d in read_json_lines(a.file, a.start)
              if isinstance(d, dict) and matches(d, eq, has)))
    return 0


def cmd_get(a):
    v = dig(json.loads(a.json), a.key)
    if v is None:
        return 1
    print(as_text(v))
    return 0


def cmd_submit_line(a):
    if a.mode == "tui":
        print(json.dumps({"type": "submit", "text": a.text}))
    else:
        print(json.dumps({"type": "user", "message": {"role": "user", "content": a.text}}))
    return 0


def cmd_model_summary(a):
    for _, d in read_json_lines(a.file, 0):
        text = (d.get("last_user_text") or "").replace("\n", "\\n")
        if len(text) > 160:
            text = text[:80] + " ... " + text[-70:]
        print("#%s %s main=%s last_role=%s decision=%s last_user=%r" % (
            d.get("n"), d.get("path"), d.get("main"), d.get("last_role"),
            json.dumps(d.get("decision")), text))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("wait-json", "count-json"):
        p = sub.add_parser(name)
        p.add_argument("file")
        p.add_argument("--from", dest="start", type=int, default=0)
        p.add_argument("--eq", action="append")
        p.add_argument("--has", action="append")
        if name == "wait-json":
            p.add_argument("--contains", action="append")
            p.add_argument("--timeout", type=float, default=30)
            p.add_argument("--nth", type=int, default=1)
            p.add_argument("--watch-pid", type=int, action="append")
            p.add_argument("--abort-file", action="append")
    p = sub.add_parser("get")
    p.add_argument("json")
    p.add_argument("key")
    p = sub.add_parser("submit-line")
    p.add_argument("mode", choices=["tui", "stream-json"])
    p.add_argument("text")
    p = sub.add_parser("model-summary")
    p.add_argument("file")
    a = ap.parse_args()
    return {"wait-json": cmd_wait_json, "count-json": cmd_count_json, "get": cmd_get,
            "submit-line": cmd_submit_line, "model-summary": cmd_model_summary}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
