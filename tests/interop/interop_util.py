#!/usr/bin/env python3
"""Helpers for run_sessions.sh beyond tests/lib/harness_util.py (stdlib only).

  find-record DIR [--eq K=V]... [--require-ipc]
      Print (one compact line, ipcToken removed) the first session record in DIR
      (a $QWEN_HOME/sessions directory; records are pretty-printed JSON files named
      <pid>.json or <pid>-<8 hex>.json) whose keys equal the given values. Exit 1 if none.
  records DIR
      One line per record file: file name, pid, name, kind, sessionId, ipcPath.
  ps-find FILE [--eq K=V]...
      FILE holds JSON lines (`qwen sessions ps --json`, `qcdemo sessions ps --json`);
      print the first line whose dotted keys equal the values, exit 1 if none.
      Non-JSON lines are ignored.
  same-lines A B
      A and B hold JSON lines; exit 0 if they hold the same documents in the same order
      (key order included), else print the first difference and exit 1.
  envelope JSONLINE TOKEN
      JSONLINE is one fake-model log entry; print the `<cross_session_message ...>`
      block (opening tag, content, closing tag) whose content holds TOKEN, exit 1 if none.
  user-text-tail JSONLINE [N]
      Print the last N (default 600) characters of the entry's last user message.
"""

import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness_util import matches, split_kv  # noqa: E402

RECORD_RE = re.compile(r"^\d+(-[0-9a-f]{8})?\.json$")


def parse_opts(argv):
    """--eq K=V pairs, other --flags, positional arguments."""
    eqs, flags, rest = [], set(), []
    i = 0
    while i < len(argv):
        if argv[i] == "--eq" and i + 1 < len(argv):
            eqs.append(argv[i + 1])
            i += 2
        elif argv[i].startswith("--"):
            flags.add(argv[i])
            i += 1
        else:
            rest.append(argv[i])
            i += 1
    return split_kv(eqs), flags, rest


def load_records(d):
    out = []
    try:
        names = sorted(os.listdir(d))
    except OSError:
        return out
    for n in names:
        if not RECORD_RE.match(n):
            continue
        try:
            with open(os.path.join(d, n), encoding="utf-8") as f:
                rec = json.load(f)
        except (OSError, ValueError):
            continue
        if isinstance(rec, dict):
            out.append((n, rec))
    return out


def cmd_find_record(argv):
    eqs, flags, rest = parse_opts(argv)
    for n, rec in load_records(rest[0]):
        if not matches(rec, eqs):
            continue
        if "--require-ipc" in flags and not rec.get("ipcPath"):
            continue
        rec = dict(rec)
        rec.pop("ipcToken", None)
        rec["file"] = n
        print(json.dumps(rec, ensure_ascii=False))
        return 0
    return 1


def cmd_records(argv):
    for n, rec in load_records(argv[0]):
        print("%s pid=%s name=%r kind=%s sessionId=%s ipcPath=%s" % (
            n, rec.get("pid"), rec.get("name"), rec.get("kind"), rec.get("sessionId"),
            rec.get("ipcPath")))
    return 0


def cmd_ps_find(argv):
    eqs, _, rest = parse_opts(argv)
    try:
        with open(rest[0], encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return 1
    for line in lines:
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict) and matches(doc, eqs):
            print(line)
            return 0
    return 1


def read_docs(path):
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f.read().splitlines():
            if line.strip():
                out.append(json.loads(line))
    return out


def cmd_same_lines(argv):
    a, b = read_docs(argv[0]), read_docs(argv[1])
    if len(a) != len(b):
        print("%d lines vs %d lines" % (len(a), len(b)))
        return 1
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y or list(x) != list(y):
            print("line %d differs: %s vs %s" % (i + 1, json.dumps(x)[:300], json.dumps(y)[:300]))
            return 1
    return 0


def last_user_text(entry):
    return entry.get("last_user_text") or ""


def cmd_envelope(argv):
    entry, token = json.loads(argv[0]), argv[1]
    text = last_user_text(entry)
    for m in re.finditer(r"<cross_session_message\b[^\n]*>\n(.*?)\n</cross_session_message>", text, re.S):
        if token in m.group(1):
            print(m.group(0))
            return 0
    return 1


def cmd_user_text_tail(argv):
    entry = json.loads(argv[0])
    n = int(argv[1]) if len(argv) > 1 else 600
    print(last_user_text(entry)[-n:])
    return 0


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    cmd, argv = sys.argv[1], sys.argv[2:]
    fn = {"find-record": cmd_find_record, "records": cmd_records, "ps-find": cmd_ps_find,
          "envelope": cmd_envelope, "same-lines": cmd_same_lines,
          "user-text-tail": cmd_user_text_tail}.get(cmd)
    if not fn:
        print(__doc__)
        return 2
    return fn(argv)


if __name__ == "__main__":
    sys.exit(main())
