#!/usr/bin/env python3
"""JSON helpers for run_e2e.sh (standard library only); the generic ones (wait-json,
count-json, get, submit-line, model-summary) are in tests/lib/harness_util.py.

  env-lines JSON KEY     print the object at KEY as NAME=VALUE lines
  check-lock FILE --port P --workspace WS --lock-dir D [--pid PID]
  check-gemini-file FILE --port P --workspace WS --dir D --pid PID [--token-of LOCK]
      Gemini CLI's discovery file: D/gemini-ide-server-PID-P.json, mode 0600, owned by
      us, port, workspacePath, authToken, ideInfo (and LOCK's port and token)
  check-context TEXTFILE [--delta] --path P --cursor C --selected S [--other O]...
  retarget-lock SRC DST PORT   copy a lock file with "port" replaced (for the E2E_TAP proxy)
  tap-get-traffic LOG --from-offset N   count companion->CLI chunks on GET /mcp streams
      (connections whose request was "GET /mcp") logged after byte N of the tap log
"""

import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness_util import dig, pid_alive  # noqa: E402


def cmd_env_lines(a):
    v = dig(json.loads(a.json), a.key)
    if not isinstance(v, dict):
        return 1
    for k, val in v.items():
        if "\n" in str(k) or "=" in str(k) or "\n" in str(val):
            print("unusable env entry %r" % k, file=sys.stderr)
            return 1
        print("%s=%s" % (k, val))
    return 0


def read_json_file(path, what):
    """The JSON in `path`, or None after saying why it cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print("cannot read %s %s: %s" % (what, path, e))
        return None


def shown_json(doc):
    """`doc` as one line for the log, the token replaced by its length."""
    shown = dict(doc)
    if "authToken" in shown:
        shown["authToken"] = "<%d chars>" % len(str(shown["authToken"]))
    return json.dumps(shown, sort_keys=True)


def cmd_check_lock(a):
    problems = []
    expected = os.path.join(a.lock_dir, "%d.lock" % a.port)
    if os.path.abspath(a.file) != os.path.abspath(expected):
        problems.append("lock file is %s, expected %s" % (a.file, expected))
    lock = read_json_file(a.file, "lock file")
    if lock is None:
        return 1
    print("lock file %s: %s" % (a.file, shown_json(lock)))
    if lock.get("port") != a.port:
        problems.append("port is %r, expected the number %d" % (lock.get("port"), a.port))
    wp = lock.get("workspacePath")
    if not isinstance(wp, str) or a.workspace not in wp.split(os.pathsep):
        problems.append("workspacePath %r does not list %s" % (wp, a.workspace))
    if not isinstance(lock.get("authToken"), str) or not lock.get("authToken"):
        problems.append("authToken missing or empty")
    ppid = lock.get("ppid")
    if not isinstance(ppid, int) or not pid_alive(ppid):
        problems.append("ppid %r is not a live process (the CLI deletes such locks)" % ppid)
    elif a.pid and ppid != a.pid:
        print("note: ppid %d is not the demo's pid %d" % (ppid, a.pid))
    info = lock.get("ideInfo")
    if not (isinstance(info, dict) and isinstance(info.get("name"), str) and info.get("name")
            and isinstance(info.get("displayName"), str) and info.get("displayName")):
        problems.append("ideInfo {name, displayName} missing: without TERM_PROGRAM=vscode "
                        "the CLI will not even try to connect")
    for p in problems:
        print("problem: " + p)
    return 1 if problems else 0


def cmd_check_gemini_file(a):
    problems = []
    expected = os.path.join(a.dir, "gemini-ide-server-%d-%d.json" % (a.pid, a.port))
    if os.path.abspath(a.file) != os.path.abspath(expected):
        problems.append("discovery file is %s, expected %s" % (a.file, expected))
    doc = read_json_file(a.file, "discovery file")
    if doc is None:
        return 1
    st = os.stat(a.file)
    print("discovery file %s (mode %o): %s" % (a.file, st.st_mode & 0o7777, shown_json(doc)))
    if st.st_mode & 0o7777 != 0o600:
        problems.append("mode is %o, expected 600 (the token is a secret)" % (st.st_mode & 0o7777))
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        problems.append("owned by uid %d: Gemini CLI ignores files of another user" % st.st_uid)
    if doc.get("port") != a.port:
        problems.append("port is %r, expected the number %d" % (doc.get("port"), a.port))
    wp = doc.get("workspacePath")
    if not isinstance(wp, str) or a.workspace not in wp.split(os.pathsep):
        problems.append("workspacePath %r does not list %s" % (wp, a.workspace))
    if not isinstance(doc.get("authToken"), str) or len(doc.get("authToken")) < 16:
        problems.append("authToken missing or short")
    info = doc.get("ideInfo")
    if not (isinstance(info, dict) and isinstance(info.get("name"), str) and info.get("name")
            and isinstance(info.get("displayName"), str) and info.get("displayName")):
        problems.append("ideInfo {name, displayName} missing: outside VS Code Gemini CLI "
                        "will not even try to connect")
    if a.token_of:
        with open(a.token_of, encoding="utf-8") as f:
            lock = json.load(f)
        if lock.get("port") != doc.get("port") or lock.get("authToken") != doc.get("authToken"):
            problems.append("%s has another port or token (port %r)" % (a.token_of, lock.get("port")))
        else:
            print("same port and token as %s" % a.token_of)
    for p in problems:
        print("problem: " + p)
    return 1 if problems else 0


def cmd_check_context(a):
    with open(a.textfile, encoding="utf-8") as f:
        text = f.read()
    header = ("<system-reminder>\nHere is a summary of changes in the user's current editor context"
              if a.delta else "<system-reminder>\nHere is the user's current editor context")
    start = text.find(header)
    if start < 0:
        heads = [blk.split("\n", 2)[1][:100] for blk in text.split("<system-reminder>")[1:]
                 if "\n" in blk]
        print("no %r block in the user message. Its system-reminder blocks start with: %s\n"
              "Its last 300 characters: %r" % (header, json.dumps(heads), text[-300:]))
        return 1
    end = text.find("</system-reminder>", start)
    block = text[start:end + len("</system-reminder>")] if end >= 0 else text[start:]
    want = ["  Path: " + a.path, "  Cursor: " + a.cursor, "  Selected text:\n```\n" + a.selected + "\n```"]
    want += ["  - " + o for o in a.other or []]
    missing = [w for w in want if w not in block]
    print("editor context block received by the model:\n" + block)
    for w in missing:
        print("missing: %r" % w)
    return 1 if missing else 0


def cmd_retarget_lock(a):
    with open(a.src, encoding="utf-8") as f:
        lock = json.load(f)
    lock["port"] = a.port
    tmp = a.dst + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(lock, f)
    os.replace(tmp, a.dst)
    return 0


def cmd_tap_get_traffic(a):
    head = re.compile(r"^\[ *([0-9.]+)\] #(\d+) (\S+) (\d+) bytes$")
    get_conns, chunks, cur, offset = set(), [], None, 0
    with open(a.log, "rb") as f:
        for raw in f:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            m = head.match(line)
            if m:
                cur = [float(m.group(1)), int(m.group(2)), m.group(3), [], offset]
                chunks.append(cur)
            elif cur is not None:
                cur[3].append(line[4:])
            offset += len(raw)
    for t, conn, direction, body, _ in chunks:
        if direction == "C>S" and body and body[0].startswith("GET /mcp "):
            get_conns.add(conn)
    seen = [(t, conn, body) for t, conn, direction, body, off in chunks
            if off >= a.from_offset and direction == "S>C" and conn in get_conns
            and body and not body[0].startswith("<")]
    print(len(seen))
    for t, conn, body in seen[:10]:
        print("  [%8.3f] #%d %s" % (t, conn, " | ".join(body)[:200]))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("env-lines")
    p.add_argument("json")
    p.add_argument("key")
    p = sub.add_parser("check-lock")
    p.add_argument("file")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--workspace", required=True)
    p.add_argument("--lock-dir", required=True)
    p.add_argument("--pid", type=int, default=0)
    p = sub.add_parser("check-gemini-file")
    p.add_argument("file")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--workspace", required=True)
    p.add_argument("--dir", required=True)
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--token-of", default="")
    p = sub.add_parser("check-context")
    p.add_argument("textfile")
    p.add_argument("--path", required=True)
    p.add_argument("--cursor", required=True)
    p.add_argument("--selected", required=True)
    p.add_argument("--other", action="append")
    p.add_argument("--delta", action="store_true",
                   help="expect the 'summary of changes' block (a later turn)")
    p = sub.add_parser("retarget-lock")
    p.add_argument("src")
    p.add_argument("dst")
    p.add_argument("port", type=int)
    p = sub.add_parser("tap-get-traffic")
    p.add_argument("log")
    p.add_argument("--from-offset", type=int, default=0)
    a = ap.parse_args()
    return {"env-lines": cmd_env_lines, "check-lock": cmd_check_lock,
            "check-gemini-file": cmd_check_gemini_file,
            "check-context": cmd_check_context, "retarget-lock": cmd_retarget_lock,
            "tap-get-traffic": cmd_tap_get_traffic}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
