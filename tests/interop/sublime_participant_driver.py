#!/usr/bin/env python3
"""The Sublime package's Qwen Sessions (participant.py) as a peer for run_sessions.sh.

    sublime_participant_driver.py --workspace DIR --library LIB --lock-dir DIR

The REAL package (plugin.py + participant.py + qwen_participant_core.py, loaded as
Sublime Text loads it by tests/python/sublime_package.py) runs on the stub `sublime`
modules of the pytest suite with one window on DIR, over the real binding and library.
Its Qwen registry is the one of $QWEN_HOME / $HOME/.qwen, like the TUIs next to it; the
plugin host is off (it would write the user's settings.json). Every command is what a
user does in Sublime Text; what the package shows comes back as JSON lines:

  stdout
    {"event":"ready","name","ref","sessionId","ipcPath"}  the window's participant runs
    {"event":"panel","text":CHUNK}    text appended to the "Qwen messages" panel
    {"event":"status","text":MSG}     a "Qwen Sessions: ..." status-bar message
    {"event":"picked","items":[...],"picked":ITEM}  the sessions quick panel and the pick
    {"event":"held","items":[{"msgId","fromName","text","cause"}]}
    {"event":"result","cmd":CMD,...}  a command done (policy: "policy", the library's
        policy after it, "default" for mode parity);  {"event":"error","message"}
    {"event":"stopped","recordGone":BOOL}
  stdin (JSON lines)
    {"cmd":"send-selection","to":NAME,"text":T}  T is written as line 2 of notes.md in
        the workspace, the file is opened, line 2 selected, "Qwen Sessions: Send
        Selection" run, and the session NAME picked from its quick panel
    {"cmd":"policy","value":P}         the inbox_policy setting changes to P
    {"cmd":"held"}                     the hold buffer (the library's)
    {"cmd":"review","msgId":ID,"action":"release"|"deny"}  "Qwen Sessions: Review Held
        Messages", the message ID picked, then Release / Deny
    {"cmd":"stop"}                     the window closes, the package unloads; EOF too
"""

import argparse
import json
import os
import queue
import sys
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))

_PROTO = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
sys.stdout = sys.stderr  # the package's console
_out = threading.Lock()


def emit(obj):
    with _out:
        _PROTO.write(json.dumps(obj, ensure_ascii=False) + "\n")
        _PROTO.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", required=True)
    ap.add_argument("--library", required=True)
    ap.add_argument("--lock-dir", required=True)
    args = ap.parse_args()

    from participant_harness import Ui, load  # noqa: E402 (puts the stubs on sys.path)
    import sublime

    s = sublime.load_settings("QwenCompanion.sublime-settings")
    s.set("library_path", args.library)
    s.set("lock_dir", args.lock_dir)
    s.set("plugins_enabled", False)
    ui = Ui().install()
    editor = sublime.Editor()
    window = editor.new_window([args.workspace])
    pkg, core, mod = load()
    seen = {"status": 0}

    def pump(seconds=0.0):
        end = time.monotonic() + seconds
        while True:
            try:
                sublime.pump(timeout=0.02)
            except Exception:
                emit({"event": "error", "message": traceback.format_exc().strip().splitlines()[-1]})
            msgs = sublime.status_messages
            while seen["status"] < len(msgs):
                m = msgs[seen["status"]]
                seen["status"] += 1
                if m.startswith("Qwen Sessions: "):
                    emit({"event": "status", "text": m})
            if time.monotonic() >= end:
                return

    # every chunk appended to the panel is reported
    raw_append = mod.append_to_panel

    def append_to_panel(w, text, show=False):
        raw_append(w, text, show)
        emit({"event": "panel", "text": text})

    mod.append_to_panel = append_to_panel

    pkg.loaded()
    deadline = time.monotonic() + 20
    while mod.participant_for(window) is None and time.monotonic() < deadline:
        pump(0.05)
    wp = mod.participant_for(window)
    if wp is None:
        emit({"event": "error", "message": "the window's participant did not start (see stderr)"})
        return 1
    emit({"event": "ready", "name": wp.name, "ref": wp.info["ref"], "sessionId": wp.session_id,
          "ipcPath": wp.info["ipcPath"], "pid": os.getpid()})

    lines = queue.Queue()

    def reader():
        for line in sys.stdin:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=reader, daemon=True).start()

    def wait_quick(what):
        end = time.monotonic() + 15
        while not ui.quick and time.monotonic() < end:
            pump(0.02)
        if not ui.quick:
            raise RuntimeError("no quick panel for " + what)
        return ui.quick[-1]

    def do(cmd):
        name = cmd.get("cmd")
        if name == "send-selection":
            path = os.path.join(args.workspace, "notes.md")
            with open(path, "w", encoding="utf-8") as f:
                f.write("# notes\n{}\nthe end\n".format(cmd["text"]))
            view = editor.open_file(window, path)
            editor.move_cursor(view, 1, 0, select_to=(1, len(cmd["text"])))
            window.run_command("qwen_sessions_send_selection")
            _, items, _ = wait_quick("the sessions list")
            picked = ui.pick(lambda item: item[0].startswith(cmd["to"] + " ["))
            emit({"event": "picked", "items": items, "picked": picked})
        elif name == "policy":
            s.set("inbox_policy", cmd["value"])
            mod.settings_changed()
            inbound = wp.inbound_settings()
            emit({"event": "result", "cmd": name, "policy": inbound.get("policy") or "default", "inbound": inbound})
        elif name == "held":
            emit({"event": "held", "items": [{"msgId": h["msgId"], "fromName": h.get("fromName"), "text": h.get("text"),
                                               "cause": h.get("cause")} for h in wp.held_messages()]})
        elif name == "review":
            held = [h["msgId"] for h in wp.held_messages()]
            if cmd["msgId"] not in held:
                raise RuntimeError("{} is not held (held: {})".format(cmd["msgId"], held))
            window.run_command("qwen_sessions_review_held")
            _, _, on_select = ui.quick.pop()
            on_select(held.index(cmd["msgId"]))
            _, actions, _ = wait_quick("the held message's actions")
            ui.pick(lambda item: item.lower().startswith(cmd["action"]))
            emit({"event": "result", "cmd": name, "msgId": cmd["msgId"], "action": cmd["action"]})
        else:
            raise RuntimeError("unknown command {!r}".format(name))

    while True:
        pump(0.03)
        try:
            line = lines.get_nowait()
        except queue.Empty:
            continue
        if line is None:
            break
        line = line.strip()
        if not line:
            continue
        try:
            cmd = json.loads(line)
        except ValueError:
            emit({"event": "error", "message": "not JSON: " + line[:200]})
            continue
        if cmd.get("cmd") == "stop":
            break
        try:
            do(cmd)
        except Exception as e:
            emit({"event": "error", "message": "{}: {}".format(cmd.get("cmd"), e)})
    record = wp.info["recordPath"]
    editor.close_window(window)
    pump(0.2)
    pkg.unloaded()
    emit({"event": "stopped", "recordGone": not os.path.exists(record)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
