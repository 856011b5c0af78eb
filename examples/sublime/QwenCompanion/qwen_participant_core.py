"""The editor-independent half of Qwen Sessions (cross-session messaging).

A :class:`WindowParticipant` is one Sublime Text window taking part in Qwen
Code's cross-session messaging through the ``qwen_companion.Participant``
binding: one registry record and one inbox, kind ``external``, named
``sublime-<project folder>``. It sends the user's text to Qwen sessions,
follows the delivery receipts, receives what sessions send to the editor and
keeps the hold buffer for review. It knows nothing about Sublime Text: the
``participant`` module turns what it reports into status messages, the
"Qwen messages" panel and quick panels.

Threading: the binding's callables run on the participant's library thread
(``qc-cb``). This module only records state under its own lock there and
hands each event to ``notify(kind, payload)``; the editor layer moves it to
its UI thread. ``send``, ``peers``, ``release`` and ``deny`` block (a send
up to about 5 s): the editor layer calls them off its UI thread.

No ``sublime`` import here: the tests drive this module directly, and the
Sublime layer around it under stub ``sublime`` modules.
"""

import json
import os
import re
import threading
import time
import unicodedata

#: The inbox policies a user can choose (setting ``inbox_policy``):
#: ``default`` is the library's mode parity (a message is delivered when the
#: sender claims the editor's review class, "prompting"; else it is held), the
#: others apply to every peer message.
POLICIES = ("default", "accept", "hold", "refuse")

#: What the editor claims about itself when it sends (setting
#: ``send_from_mode``): a person types or picks every message the editor
#: sends, so "prompting"; ``None`` claims nothing (Qwen then holds the message
#: for its user's review).
FROM_MODES = ("prompting", "bypass")

HELD_EXPIRIES = ("1m", "5m", "10m", "never")

#: Receipt states after which nothing more is expected (``held`` is not one).
FINAL_STATES = ("delivered", "denied", "refused", "expired", "misaddressed", "dropped")

#: Longest build output sent: its tail is kept (a model reads the end first).
MAX_BUILD_OUTPUT = 60000

#: Received messages kept for "Open Referenced Location" and the panel.
MAX_KEPT_MESSAGES = 200

#: Sent messages whose receipts are followed.
MAX_TRACKED_SENDS = 200

STATE_TEXT = {
    "pending": "sent, waiting for the recipient",
    "delivered": "delivered",
    "held": "held by the recipient for review",
    "denied": "denied by the recipient's user",
    "refused": "refused",
    "expired": "expired before it was read",
    "misaddressed": "misaddressed (that session changed)",
    "dropped": "dropped",
}


class ParticipantError(Exception):
    """A user-facing failure (the message is meant to be shown as is)."""


class SendRefused(ParticipantError):
    """The library refused to send (rate, duplicate, size): nothing went out."""


# --------------------------------------------------------------------------
# names, ages, locations


def _keep(ch):
    return ch in "._-" or unicodedata.category(ch)[0] in "LMN"


def participant_name(folder=None, override=None, prefix="sublime"):
    """The name of a window's participant: ``override`` (the
    ``participant_name`` setting) when given, else ``<prefix>-<folder name>``.

    Qwen's own rules for names: every run of characters other than letters,
    marks, digits, ``.``, ``_`` and ``-`` becomes one ``-``; leading and
    trailing dashes go; at most 40 characters (the official SDK's cap).
    A name that sanitises to nothing is an error for an override, and
    ``<prefix>`` alone for a folder.
    """
    if override is not None:
        if not isinstance(override, str):
            raise ParticipantError("participant_name must be a string, not {}".format(type(override).__name__))
        name = _sanitise(override)
        if not name:
            raise ParticipantError("participant_name {!r} has no letter or digit left to use".format(override))
        return name
    base = ""
    if folder:
        base = _sanitise(os.path.basename(os.path.normpath(folder)))
    return _sanitise(prefix + "-" + base) if base else prefix


def _sanitise(text):
    text = unicodedata.normalize("NFC", text)
    out = []
    for ch in text:
        if _keep(ch):
            out.append(ch)
        elif not out or out[-1] != "-":
            out.append("-")
    name = "".join(out).strip("-")
    return name[:40].rstrip("-")


def format_age(started_at_ms, now_ms=None):
    """``started_at_ms`` (Unix ms) as a short age: ``12s``, ``5m``, ``3h``, ``2d``."""
    if not isinstance(started_at_ms, (int, float)):
        return "?"
    now_ms = time.time() * 1000 if now_ms is None else now_ms
    s = max(0, int((now_ms - started_at_ms) / 1000))
    if s < 60:
        return "{}s".format(s)
    if s < 3600:
        return "{}m".format(s // 60)
    if s < 86400:
        return "{}h".format(s // 3600)
    return "{}d".format(s // 86400)


def format_expiry(expires_at_ms, now_ms=None):
    """How long a held message has left, as the library set it."""
    if not isinstance(expires_at_ms, (int, float)):
        return "never expires"
    now_ms = time.time() * 1000 if now_ms is None else now_ms
    left = int((expires_at_ms - now_ms) / 1000)
    if left <= 0:
        return "expiring"
    if left < 60:
        return "expires in {}s".format(left)
    return "expires in {}m {:02d}s".format(left // 60, left % 60)


# A file reference in a message: a path with a slash (or a backslash) or an
# extension, a colon, a line, optionally ":column" or "-endline". A Windows
# path may start with a drive, as in C:\src\a.py:3.
LOCATION_RE = re.compile(
    r"(?P<path>(?:[A-Za-z]:[\\/])?(?:~|\.{1,2})?[\\/]?[\w.@+-]*[A-Za-z_][\w.@+-]*(?:[\\/][\w.@+-]+)*)"
    r":(?P<line>\d+)(?::(?P<col>\d+)|-(?P<end>\d+))?"
)


def find_locations(text, folders=(), exists=os.path.isfile, pathmod=os.path):
    """The ``path:line`` references of ``text`` that name an existing file.

    A relative path is looked up in each of ``folders``. Returns dicts
    ``{"path": absolute, "line", "column", "endLine", "label"}`` in the order
    they appear, each file+line once. ``pathmod`` (``os.path``; ``ntpath`` or
    ``posixpath`` in tests) decides what is absolute and how paths join.
    """
    out = []
    seen = set()
    for m in LOCATION_RE.finditer(text or ""):
        raw = m.group("path")
        if "/" not in raw and "\\" not in raw and "." not in raw.lstrip("."):
            continue  # "at line:12" is no file name
        candidates = []
        expanded = pathmod.expanduser(raw)
        if pathmod.isabs(expanded):
            candidates.append(expanded)
        else:
            candidates.extend(pathmod.join(f, expanded) for f in folders)
        for c in candidates:
            c = pathmod.normpath(c)
            if exists(c):
                line = int(m.group("line"))
                key = (c, line)
                if key in seen:
                    break
                seen.add(key)
                out.append(
                    {
                        "path": c,
                        "line": max(1, line),
                        "column": int(m.group("col")) if m.group("col") else 1,
                        "endLine": int(m.group("end")) if m.group("end") else None,
                        "label": m.group(0),
                    }
                )
                break
    return out


def relative_to(path, folders):
    """``path`` relative to the first of ``folders`` that holds it, else as is."""
    for f in folders:
        try:
            rel = os.path.relpath(path, f)
        except ValueError:
            continue
        if not rel.startswith(".."):
            return rel
    return path


def selection_message(text, path=None, first_line=None, last_line=None, folders=()):
    """The selection with its location: ``path:first-last`` then the text
    in a fenced block (the location alone when the file has no name)."""
    if path:
        where = relative_to(path, folders)
    else:
        where = "untitled"
    if first_line is not None:
        if last_line is not None and last_line != first_line:
            where += ":{}-{}".format(first_line, last_line)
        else:
            where += ":{}".format(first_line)
    fence = "```"
    while fence in text:
        fence += "`"
    return "{}\n{}\n{}\n{}".format(where, fence, text, fence)


def build_output_message(text, project=None, limit=MAX_BUILD_OUTPUT):
    """The build output panel's text as a message (its tail when too long)."""
    text = text.rstrip("\n")
    note = ""
    if len(text) > limit:
        note = "[the first {} characters are left out]\n".format(len(text) - limit)
        text = text[-limit:]
    head = "Build output from Sublime Text" + (" ({})".format(project) if project else "") + ":"
    fence = "```"
    while fence in text:
        fence += "`"
    return "{}\n{}{}\n{}\n{}".format(head, note, fence, text, fence)


def is_descendant(pid, ancestor, proc="/proc"):
    """True when process ``pid`` descends from ``ancestor`` (Linux ``/proc``;
    False wherever that cannot be read)."""
    seen = 0
    while isinstance(pid, int) and pid > 1 and seen < 64:
        if pid == ancestor:
            return True
        try:
            with open(os.path.join(proc, str(pid), "stat"), "rb") as f:
                stat = f.read().decode("utf-8", "replace")
        except (OSError, IOError):
            return False
        try:
            pid = int(stat[stat.rindex(")") + 2:].split()[1])
        except (ValueError, IndexError):
            return False
        seen += 1
    return pid == ancestor


def describe_receipt(state, reason=None, drop_reason=None):
    """One line for a receipt state, with the reason the recipient gave."""
    text = STATE_TEXT.get(state, state)
    if state == "dropped" and drop_reason:
        text += " ({})".format(drop_reason)
    if reason and state not in ("pending", "delivered"):
        text += ": " + reason
    return text


def library_message(error):
    """The library's own sentence from a binding exception."""
    return getattr(error, "message", None) or str(error)


def policy_value(policy):
    """The ``inbox_policy`` setting as the library's ``policy`` (``None`` =
    mode parity); a :class:`ParticipantError` for anything else."""
    if policy is None or policy == "default":
        return None
    if policy in POLICIES:
        return policy
    raise ParticipantError(
        "inbox_policy must be one of {}, not {!r}".format(", ".join(POLICIES), policy)
    )


# --------------------------------------------------------------------------
# one window's participant


class WindowParticipant(object):
    """A window's participant: registers on :meth:`start`, unregisters on
    :meth:`close`, and records sends, receipts, messages and held ones.

    ``qc`` is the imported ``qwen_companion`` module; ``notify(kind,
    payload)`` is called (on the library thread, or the caller's) with
    ``"message"`` (a received message), ``"sent"`` (a send that went out, with
    the transitions that came before ``send`` returned in its ``history``),
    ``"receipt"`` (a tracked send after a later transition), ``"held"`` (the hold buffer, only when its set of ids
    changed) and ``"log"`` (a library line at warning or worse).
    """

    def __init__(self, qc, name, cwd, notify, policy="default", held_expiry=None,
                 from_mode="prompting", folders=(), library=None, config=None, label=None):
        self.qc = qc
        self.name = name
        self.cwd = cwd
        self.folders = list(folders)
        self.notify = notify
        self.from_mode = from_mode if from_mode in FROM_MODES else None
        self.label = label  # e.g. the window id, for logs
        self._policy = policy_value(policy)
        if held_expiry is not None and held_expiry not in HELD_EXPIRIES:
            raise ParticipantError(
                "held_expiry must be one of {}, not {!r}".format(", ".join(HELD_EXPIRIES), held_expiry)
            )
        self._held_expiry = held_expiry
        self._lock = threading.Lock()
        self.messages = []  # received, oldest first
        self.sent = {}  # msgId -> {"to", "address", "preview", "state", "reason", "history"}
        self._sent_order = []
        self.held = []
        self._held_ids = ()
        self.closed = False
        self.info = None
        self.participant = qc.Participant(
            kind="external",
            config=dict(config or {}),
            on_message=self._on_message,
            on_receipt=self._on_receipt,
            on_held=self._on_held,
            log=self._on_log,
            log_level=qc.LOG_WARN,
            library=library,
        )

    # -- lifetime -------------------------------------------------------

    def start(self):
        """Registers the window's session (binds the inbox, writes the record)."""
        kwargs = {"name": self.name, "cwd": self.cwd, "kind": "external"}
        if self._policy is not None:
            kwargs["inbound_policy"] = self._policy
        if self._held_expiry is not None:
            kwargs["held_expiry"] = self._held_expiry
        try:
            self.info = self.participant.register(**kwargs)
        except Exception:
            self.participant.close()
            self.closed = True
            raise
        return self.info

    def close(self):
        """Unregisters (held messages settle as expired), removes the record."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
        self.participant.close()

    @property
    def session(self):
        """Our session as the library has it now (it follows a rotated id)."""
        sessions = self.participant.sessions()
        if not sessions:
            raise ParticipantError("the participant {} is not registered".format(self.name))
        return sessions[0]

    @property
    def session_id(self):
        return self.session["sessionId"]

    def child_env(self):
        """``QWEN_CODE_MESSAGING_SOCKET``/``_TOKEN`` for processes the editor starts."""
        return self.participant.child_env(self.session_id)

    # -- inbound settings -----------------------------------------------

    def set_policy(self, policy, held_expiry=None):
        """Applies a new ``inbox_policy`` (and ``held_expiry``); held messages
        are judged again by the library. Bad values change nothing."""
        value = policy_value(policy)
        if held_expiry is not None and held_expiry not in HELD_EXPIRIES:
            raise ParticipantError(
                "held_expiry must be one of {}, not {!r}".format(", ".join(HELD_EXPIRIES), held_expiry)
            )
        sid = self.session_id
        doc = self.participant.inbound_settings(sid)
        doc["policy"] = value
        if held_expiry is not None:
            doc["heldExpiry"] = held_expiry
        self.participant.update_inbound(sid, settings=doc)
        self._policy = value
        return self.participant.inbound_settings(sid)

    def inbound_settings(self):
        return self.participant.inbound_settings(self.session_id)

    # -- the registry ---------------------------------------------------

    def peers(self, own_pid=None):
        """The sessions a message can go to (fresh registry read), as rows:
        ``address``, ``name``, ``ref``, ``cwd``, ``kind``, ``age``, ``pid``,
        ``child`` (started from this editor's process), newest first with
        this editor's own children first."""
        own_pid = os.getpid() if own_pid is None else own_pid
        rows = []
        for p in self.participant.peers(self.session_id):
            rows.append(
                {
                    "address": p.get("address") or p.get("name"),
                    "name": p.get("name") or "",
                    "ref": p.get("ref") or "",
                    "cwd": p.get("cwd") or "",
                    "kind": p.get("kind") or "tui",
                    "age": format_age(p.get("startedAt")),
                    "startedAt": p.get("startedAt"),
                    "pid": p.get("pid"),
                    "child": is_descendant(p.get("pid"), own_pid) and p.get("pid") != own_pid,
                }
            )
        rows.sort(key=lambda r: (not r["child"], -(r["startedAt"] or 0)))
        return rows

    # -- sending --------------------------------------------------------

    def send(self, address, content):
        """Sends ``content`` to ``address``; returns the tracked send record.

        :class:`SendRefused` (with the library's sentence) when the library
        turns it away before sending (rate, repeat, size);
        :class:`ParticipantError` for a blank message or an unknown or
        ambiguous address. Blocks up to about 5 s.
        """
        if not isinstance(content, str) or not content.strip():
            raise ParticipantError("nothing to send: the message is empty")
        if not address:
            raise ParticipantError("no recipient chosen")
        qc = self.qc
        try:
            result = self.participant.send(address, content, from_mode=self.from_mode, from_session=self.session_id)
        except qc.RefusedError as e:
            raise SendRefused(library_message(e))
        except (qc.NotFoundError, qc.InvalidArgumentError) as e:
            raise ParticipantError(library_message(e))
        msg_id = result["msgId"]
        with self._lock:
            record = self.sent.get(msg_id)
            if record is None:  # receipts may already have come in
                record = self.sent[msg_id] = self._new_record(msg_id, address)
            record["to"] = address
            record["address"] = result.get("address") or address
            record["preview"] = preview(content)
            record["announced"] = True
            self._sent_order.append(msg_id)
            while len(self._sent_order) > MAX_TRACKED_SENDS:
                self.sent.pop(self._sent_order.pop(0), None)
            snapshot = _copy(record)
            # under the lock: "sent" is reported before any later receipt of it
            self.notify("sent", snapshot)
        return snapshot

    def _new_record(self, msg_id, address):
        return {"msgId": msg_id, "to": address, "address": address, "preview": "", "announced": False,
                "state": "pending", "reason": None, "dropReason": None, "history": ["pending"]}

    def send_state(self, msg_id):
        with self._lock:
            record = self.sent.get(msg_id)
            return _copy(record) if record is not None else None

    def wait(self, msg_id, timeout=10.0):
        """The library's state of a sent message after up to ``timeout`` s."""
        return self.participant.wait(msg_id, timeout=timeout)

    # -- held messages --------------------------------------------------

    def held_messages(self):
        """The hold buffer as the library has it now."""
        return self.participant.held()

    def release(self, msg_id):
        """Delivers a held message to this editor (its sender gets
        ``delivered``). :class:`ParticipantError` when it is no longer held."""
        try:
            self.participant.release(msg_id)
        except self.qc.NotFoundError:
            raise ParticipantError("that message is no longer held (it expired or was decided)")
        except self.qc.RefusedError as e:
            raise ParticipantError(library_message(e))

    def deny(self, msg_id):
        try:
            self.participant.deny(msg_id)
        except self.qc.NotFoundError:
            raise ParticipantError("that message is no longer held (it expired or was decided)")

    # -- received messages ----------------------------------------------

    def recent_messages(self):
        with self._lock:
            return list(self.messages)

    def locations(self, message=None):
        """The file references of ``message`` (default: the newest message
        that has any), resolved against the window's folders."""
        if message is not None:
            return find_locations(message.get("content", ""), self.folders)
        for m in reversed(self.recent_messages()):
            found = find_locations(m.get("content", ""), self.folders)
            if found:
                return found
        return []

    # -- library thread -------------------------------------------------

    def _on_message(self, message):
        kept = {
            "msgId": message.get("msgId"),
            "content": message.get("content", ""),
            "text": message.get("text", ""),
            "fromName": message.get("fromName") or "",
            "from": message.get("from") or "",
            "fromMode": message.get("fromMode"),
            "origin": message.get("origin", "peer"),
            "controllerLabel": message.get("controllerLabel"),
            "at": time.time(),
        }
        with self._lock:
            self.messages.append(kept)
            del self.messages[:-MAX_KEPT_MESSAGES]
        self.notify("message", dict(kept))

    def _on_receipt(self, event):
        msg_id = event.get("msgId")
        status = event.get("status")
        with self._lock:
            record = self.sent.get(msg_id)
            if record is None:  # a receipt before send() returned
                record = self.sent[msg_id] = self._new_record(msg_id, event.get("address") or "")
            record["state"] = status
            record["reason"] = event.get("reason")
            record["dropReason"] = event.get("dropReason")
            record["history"].append(status)
            if event.get("address"):
                record["address"] = event["address"]
            if record["announced"]:  # else send() reports it with its history
                self.notify("receipt", _copy(record))

    def _on_held(self, held):
        ids = tuple(h.get("msgId") for h in held)
        with self._lock:
            self.held = list(held)
            changed = ids != self._held_ids
            self._held_ids = ids
        if changed:
            self.notify("held", list(held))

    def _on_log(self, level, message):
        self.notify("log", "{}: {}".format(self.name, message))


def _copy(record):
    out = dict(record)
    out["history"] = list(record["history"])
    return out


def preview(text, limit=80):
    """One line of ``text``, at most ``limit`` characters."""
    line = " ".join((text or "").split())
    return line if len(line) <= limit else line[: limit - 1] + "\u2026"


def origin_text(message):
    """Who the connection proved the sender to be, for display."""
    origin = message.get("origin")
    if origin == "controller":
        label = message.get("controllerLabel")
        return "controller {}".format(json.dumps(label)) if label else "controller"
    if origin == "own-process":
        return "a process this editor started"
    return "peer session"
