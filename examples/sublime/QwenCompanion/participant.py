"""Qwen Sessions: each Sublime Text window joins Qwen Code's cross-session
messaging (see SESSIONS.md for the user's side).

One participant per window (kind ``external``, named
``sublime-<project folder>`` or the ``participant_name`` setting) is
registered when the window's companion starts and unregistered when the
window closes or the plugin is unloaded. The logic lives in
``qwen_participant_core``; this module is the Sublime Text side: commands,
the "Qwen messages" output panel, status messages, quick panels.

Threading: the library calls back on its own thread; everything it reports
reaches the UI through ``sublime.set_timeout``. Calls that block (send, the
registry read of the sessions list, release, deny) run on Sublime's async
thread (``set_timeout_async``), never on the UI thread.

``plugin.py`` (the companion) is imported lazily as ``core``; this module
uses its ``register_window_hook(on_open, on_close)``, ``companion_for`` and
``import_binding``.
"""

import html
import os
import threading
import time

import sublime
import sublime_plugin

from . import qwen_participant_core as pcore
from .qwen_core import logbuf as _logbuf

SETTINGS_FILE = "QwenCompanion.sublime-settings"
PANEL = "qwen_messages"
LOG_PREFIX = "Qwen Sessions: "

_lock = threading.RLock()
_participants = {}  # window id -> WindowParticipant
_shown_held = {}  # window id -> set of held msgIds already announced
_state = {"loaded": False, "hooked": False, "settings": None}


def log(message):
    print(LOG_PREFIX + message)
    _logbuf.add(LOG_PREFIX + message)  # "Qwen: Show Log"


def settings():
    return sublime.load_settings(SETTINGS_FILE)


def _core():
    from . import plugin as core  # lazily: plugin.py is the companion's module

    return core


def _window_id(window):
    if isinstance(window, int):
        return window
    return window.id()


def _window(window_id):
    for w in sublime.windows():
        if w.id() == window_id:
            return w
    return None


def status(window, text):
    if window is not None:
        window.status_message(LOG_PREFIX + text)
    else:
        sublime.status_message(LOG_PREFIX + text)


def _settings_snapshot():
    s = settings()
    return {
        "enabled": s.get("sessions_enabled", True),
        "name": s.get("participant_name"),
        "policy": s.get("inbox_policy", "default"),
        "expiry": s.get("held_expiry"),
        "from_mode": s.get("send_from_mode", "prompting"),
        "qwen_home": s.get("qwen_home"),
        "library": s.get("library_path"),
    }


# --------------------------------------------------------------------------
# lifecycle


def participant_for(window):
    """The window's participant, or None (not started, disabled or failed).
    Its folders (where relative ``path:line`` references are looked up) follow
    the window's."""
    if window is None:
        return None
    with _lock:
        wp = _participants.get(_window_id(window))
    if wp is not None and not isinstance(window, int):
        wp.folders = list(window.folders())
    return wp


def on_window_open(window, *unused):
    """The window's companion started: register its participant (UI thread)."""
    if not _state["loaded"] or isinstance(window, int):
        return None
    snap = _settings_snapshot()
    if not snap["enabled"]:
        return None
    wid = window.id()
    with _lock:
        if wid in _participants:
            return _participants[wid]
    try:
        wp = _make_participant(window, snap)
    except Exception as e:  # binding, library or settings problem: said once per window
        log("cannot join cross-session messaging for window {}: {}".format(wid, pcore.library_message(e)))
        status(window, "not started: {}".format(pcore.library_message(e)))
        return None
    with _lock:
        other = _participants.get(wid)
        if other is None and _state["loaded"]:
            _participants[wid] = wp
            _shown_held[wid] = set()
    if other is not None or not _state["loaded"]:  # lost a race: keep the first one
        wp.close()
        return other
    log("window {} is {} [{}] ({})".format(wid, wp.name, wp.info.get("ref"), wp.info.get("recordPath")))
    return wp


def _make_participant(window, snap):
    qc = _core().import_binding()
    folders = list(window.folders())
    name = pcore.participant_name(folders[0] if folders else None, snap["name"])
    cwd = folders[0] if folders else os.path.expanduser("~")
    config = {}
    if snap["qwen_home"]:
        config["qwenHome"] = os.path.expanduser(snap["qwen_home"])
    wid = window.id()
    from_mode = snap["from_mode"]
    if from_mode is not None and from_mode not in pcore.FROM_MODES:
        raise pcore.ParticipantError(
            "send_from_mode must be null, \"prompting\" or \"bypass\", not {!r}".format(from_mode)
        )
    wp = pcore.WindowParticipant(
        qc,
        name,
        cwd,
        notify=lambda kind, payload: sublime.set_timeout(lambda: _ui_event(wid, kind, payload), 0),
        policy=snap["policy"],
        held_expiry=snap["expiry"],
        from_mode=from_mode,
        folders=folders,
        library=snap["library"] or _core().library_path(),
        config=config,
        label=wid,
    )
    wp.start()
    return wp


def on_window_close(window, *unused):
    """The window closes: unregister its participant (its record goes)."""
    close_window(_window_id(window))


def close_window(window_id):
    with _lock:
        wp = _participants.pop(window_id, None)
        _shown_held.pop(window_id, None)
    if wp is not None:
        try:
            wp.close()
        except Exception as e:
            log("unregister failed: {}".format(e))


def plugin_loaded():
    """Follows the companions: ``on_open(window, wc)`` when a window's
    companion starts (also for the ones running already), ``on_close(window_id)``
    when it stops (window closed, Restart, unload)."""
    _state["loaded"] = True
    if not _state["hooked"]:
        _state["hooked"] = _core().register_window_hook(on_window_open, on_window_close)
    if not _state.get("env_hooked"):
        _state["env_hooked"] = _core().register_terminal_env(participant_env)
    s = settings()
    if hasattr(s, "add_on_change"):
        s.add_on_change("qwen_sessions", settings_changed)
    _state["settings"] = _settings_snapshot()


def plugin_unloaded():
    _state["loaded"] = False
    remove, _state["hooked"] = _state["hooked"], False
    if callable(remove):
        remove()
    remove_env, _state["env_hooked"] = _state.get("env_hooked"), False
    if callable(remove_env):
        remove_env()
    s = settings()
    if hasattr(s, "clear_on_change"):
        s.clear_on_change("qwen_sessions")
    with _lock:
        ids = list(_participants)
    for window_id in ids:
        close_window(window_id)


def settings_changed():
    """Applies changed settings: ``inbox_policy``/``held_expiry`` at once
    (held messages are judged again); a new ``participant_name``,
    ``send_from_mode``, ``qwen_home`` or ``sessions_enabled`` registers
    every window again. A bad value is reported and changes nothing."""
    old, new = _state["settings"] or {}, _settings_snapshot()
    _state["settings"] = new
    if not _state["loaded"]:
        return
    rejoin = any(old.get(k) != new[k] for k in ("enabled", "name", "from_mode", "qwen_home", "library"))
    with _lock:
        items = list(_participants.items())
    if rejoin:
        for wid, _ in items:
            close_window(wid)
        for w in sublime.windows():
            if _core().companion_for(w, create=False) is not None:
                on_window_open(w)
        return
    if old.get("policy") == new["policy"] and old.get("expiry") == new["expiry"]:
        return
    for wid, wp in items:
        window = _window(wid)
        try:
            doc = wp.set_policy(new["policy"], new["expiry"] or "5m")  # null: the default, 5m
        except pcore.ParticipantError as e:
            status(window, str(e))
            log(str(e))
            continue
        except Exception as e:
            status(window, "inbox settings not applied: {}".format(pcore.library_message(e)))
            continue
        status(window, "inbox policy {}; held messages expire after {}".format(
            new["policy"] or "default", doc.get("heldExpiry") or "5m"))


def participant_env(window):
    """Environment for a terminal (or any process) the editor starts for
    ``window``: ``QWEN_CODE_MESSAGING_SOCKET`` and ``QWEN_CODE_MESSAGING_TOKEN``.

    A process holding them sends to this window's inbox as the editor's own
    process (origin ``own-process``: delivered under the ``default`` policy,
    like a process a Qwen session starts). Qwen Code itself removes both
    variables when it starts and sets its own for its children, so a
    ``qwen`` run in that terminal is unaffected. Empty when the window has
    no participant. Keep the token out of logs.
    """
    wp = participant_for(window)
    if wp is None:
        return {}
    try:
        return dict(wp.child_env())
    except Exception as e:
        log("participant env unavailable: {}".format(pcore.library_message(e)))
        return {}


# --------------------------------------------------------------------------
# the messages panel and notifications (UI thread)


def _stamp():
    return time.strftime("%H:%M:%S")


def messages_panel(window, create=True):
    panel = window.find_output_panel(PANEL)
    if panel is None and create:
        panel = window.create_output_panel(PANEL)
        panel.settings().set("word_wrap", True)
        panel.settings().set("qwen_sessions_panel", True)
    return panel


def append_to_panel(window, text, show=False):
    panel = messages_panel(window)
    panel.run_command("qwen_sessions_append", {"text": text if text.endswith("\n") else text + "\n"})
    if show and settings().get("messages_show_panel", True):
        window.run_command("show_panel", {"panel": "output." + PANEL})


def panel_text(window):
    panel = messages_panel(window, create=False)
    if panel is None:
        return ""
    return panel.substr(sublime.Region(0, panel.size()))


def _show_receipt(window, payload):
    text = pcore.describe_receipt(payload.get("state"), payload.get("reason"), payload.get("dropReason"))
    append_to_panel(window, "[{}] to {}: {}{}".format(
        _stamp(), payload.get("address") or payload.get("to"), text,
        " - " + payload["preview"] if payload.get("preview") else ""))
    status(window, "to {}: {}".format(payload.get("address") or payload.get("to"), text))


def _indent(text):
    return "\n".join("    " + line for line in text.split("\n"))


def _ui_event(window_id, kind, payload):
    window = _window(window_id)
    wp = participant_for(window)
    if window is None or wp is None:
        return
    if kind == "message":
        who = payload.get("fromName") or payload.get("from") or "unknown session"
        lines = ["[{}] message from {} ({}):".format(_stamp(), who, pcore.origin_text(payload)),
                 _indent(payload.get("text", ""))]
        found = pcore.find_locations(payload.get("content", ""), wp.folders)
        if found:
            lines.append("    -> Qwen Sessions: Open Referenced Location: " + ", ".join(f["label"] for f in found))
        append_to_panel(window, "\n".join(lines), show=True)
        status(window, "message from {}: {}".format(who, pcore.preview(payload.get("text", ""))))
        if settings().get("messages_popup", True):
            show_message_popup(window, payload, found)
    elif kind == "receipt":
        _show_receipt(window, payload)
    elif kind == "sent":
        _sent(window, payload)
    elif kind == "held":
        with _lock:
            shown = _shown_held.setdefault(window_id, set())
            new = [h for h in payload if h.get("msgId") not in shown]
            shown.intersection_update(h.get("msgId") for h in payload)
            shown.update(h.get("msgId") for h in new)
        for h in new:
            append_to_panel(window, "[{}] held for your review: from {} ({}, {}, {}): {}".format(
                _stamp(), h.get("fromName") or h.get("from") or "unknown session", pcore.origin_text(h),
                h.get("cause") or "policy", pcore.format_expiry(h.get("expiresAt")),
                pcore.preview(h.get("text", ""))), show=True)
        if new:
            status(window, "{} message(s) held for your review (Qwen Sessions: Review Held Messages)".format(len(payload)))
    elif kind == "log":
        log(payload)


POPUP_CHARS = 400


def show_message_popup(window, payload, found):
    """A popup at the caret of the active view: sender, origin, the start of
    the text (as the panel shows it), links to the messages panel and to
    each file:line the message names."""
    view = window.active_view()
    if view is None or not hasattr(view, "show_popup"):
        return
    text = payload.get("text", "")
    if len(text) > POPUP_CHARS:
        text = text[:POPUP_CHARS] + "\u2026"
    links = ['<a href="panel">Qwen messages</a>']
    links += ['<a href="open:{}">{}</a>'.format(i, html.escape(f["label"])) for i, f in enumerate(found)]
    content = (
        '<body id="qwen-sessions-message"><div><b>{}</b> ({})</div><div>{}</div><div>{}</div></body>'.format(
            html.escape(payload.get("fromName") or payload.get("from") or "unknown session"),
            html.escape(pcore.origin_text(payload)),
            html.escape(text).replace("\n", "<br>"),
            " &middot; ".join(links),
        )
    )

    def navigate(href):
        if href == "panel":
            window.run_command("show_panel", {"panel": "output." + PANEL})
        elif href.startswith("open:") and href[5:].isdigit() and int(href[5:]) < len(found):
            open_location(window, found[int(href[5:])])
        if hasattr(view, "hide_popup"):
            view.hide_popup()

    view.show_popup(content, getattr(sublime, "HIDE_ON_MOUSE_MOVE_AWAY", 0), -1, 600, 300, navigate)


# --------------------------------------------------------------------------
# sending (the blocking part on the async thread)


def send_to(window, address, content):
    """Sends ``content`` to ``address`` from ``window`` off the UI thread;
    the result (pending, or the library's refusal) is shown on the UI thread."""
    wp = participant_for(window)
    if wp is None:
        status(window, "this window takes no part in cross-session messaging (see the console)")
        return
    if not content or not content.strip():
        status(window, "nothing to send: the message is empty")
        return

    def work():
        try:
            wp.send(address, content)  # reported through notify("sent")
        except pcore.ParticipantError as e:
            why = str(e)
            refused = isinstance(e, pcore.SendRefused)
            sublime.set_timeout(lambda: _send_failed(window, address, why, refused), 0)
            return
        except Exception as e:
            why = pcore.library_message(e)
            sublime.set_timeout(lambda: _send_failed(window, address, why, False), 0)
            return

    sublime.set_timeout_async(work, 0)


def _sent(window, record):
    """The "sent" line, then the transitions that came before it was shown."""
    append_to_panel(window, "[{}] to {}: sent ({}) - {}".format(
        _stamp(), record.get("address"), record.get("msgId"), record.get("preview")))
    early = record.get("history", ["pending"])[1:]
    if not early:
        status(window, "to {}: {}".format(record.get("address"), pcore.describe_receipt("pending")))
    for i, state in enumerate(early):
        last = i == len(early) - 1
        _show_receipt(window, dict(record, state=state, reason=record.get("reason") if last else None,
                                   dropReason=record.get("dropReason") if last else None))


def _send_failed(window, address, why, refused):
    what = "not sent to {}{}: {}".format(address, " (refused before sending)" if refused else "", why)
    append_to_panel(window, "[{}] {}".format(_stamp(), what))
    status(window, what)


def pick_session(window, on_pick):
    """Reads the registry (async thread), then a quick panel of the sessions;
    ``on_pick(row)`` runs on the UI thread with the chosen one."""
    wp = participant_for(window)
    if wp is None:
        status(window, "this window takes no part in cross-session messaging (see the console)")
        return

    def work():
        try:
            rows = wp.peers()
        except Exception as e:
            why = pcore.library_message(e)
            sublime.set_timeout(lambda: status(window, "cannot read the sessions: " + why), 0)
            return
        sublime.set_timeout(lambda: _show_sessions(window, rows, on_pick), 0)

    sublime.set_timeout_async(work, 0)


def session_items(rows):
    items = []
    for r in rows:
        head = "{} [{}]".format(r["name"], r["ref"])
        if r.get("child"):
            head += "  (started in this editor)"
        items.append([head, "{} · {} old · {}".format(r["kind"], r["age"], r["cwd"])])
    return items


def _show_sessions(window, rows, on_pick):
    if not rows:
        status(window, "no Qwen session to send to (start qwen, or check qwen sessions ps)")
        return

    def done(i):
        if 0 <= i < len(rows):  # the next prompt opens once this panel has closed
            sublime.set_timeout(lambda: on_pick(rows[i]), 0)

    window.show_quick_panel(session_items(rows), done)


def prompt_and_send(window, row, initial=""):
    """The send prompt: an input panel for the message to ``row``."""
    window.show_input_panel(
        "Message to {} [{}]:".format(row["name"], row["ref"]),
        initial,
        lambda text: send_to(window, row["address"], text),
        None,
        None,
    )


def _selection(view):
    """(text, regions) of the view's non-empty selections."""
    if view is None:
        return "", []
    regions = [r for r in view.sel() if not r.empty()]
    return "\n".join(view.substr(r) for r in regions), regions


def _context_message(view, regions, folders):
    blocks = []
    for r in regions:
        first = view.rowcol(r.begin())[0] + 1
        end = r.end()
        last_row, last_col = view.rowcol(end)
        if last_col == 0 and end > r.begin():
            last_row -= 1  # a selection that ends at a line start ends on the line before
        blocks.append(pcore.selection_message(view.substr(r), view.file_name(), first, last_row + 1, folders))
    return "\n\n".join(blocks)


# --------------------------------------------------------------------------
# commands


class QwenSessionsAppendCommand(sublime_plugin.TextCommand):
    """Internal: appends text to the messages panel."""

    def run(self, edit, text=""):
        set_ro = getattr(self.view, "set_read_only", None)
        if set_ro is not None:
            set_ro(False)
        self.view.insert(edit, self.view.size(), text)
        if set_ro is not None:
            set_ro(True)

    def is_visible(self):
        return False


class QwenSessionsListCommand(sublime_plugin.WindowCommand):
    """Qwen Sessions: List - live sessions; picking one opens the send prompt."""

    def run(self):
        window = self.window
        initial = _selection(window.active_view())[0]
        pick_session(window, lambda row: prompt_and_send(window, row, initial))


class QwenSessionsSendSelectionCommand(sublime_plugin.WindowCommand):
    """Qwen Sessions: Send Selection. ``mode``: ``selection`` (the selected
    text; a typed message when nothing is selected), ``context`` (the
    selection after its ``path:first-last``), ``typed`` (an input panel).
    ``to``: an address (skips the sessions list)."""

    def run(self, mode="selection", to=None):
        window = self.window
        view = window.active_view()
        text, regions = _selection(view)
        wp = participant_for(window)
        if mode == "context" and regions and wp is not None:
            text = _context_message(view, regions, wp.folders)
        typed = mode == "typed" or not text

        def with_row(row):
            if typed:
                prompt_and_send(window, row, "")
            else:
                send_to(window, row["address"], text)

        if to:
            with_row({"address": to, "name": to, "ref": "?"})
        else:
            pick_session(window, with_row)


class QwenSessionsSendBuildOutputCommand(sublime_plugin.WindowCommand):
    """Qwen Sessions: Send Build Output - the build panel's text."""

    def run(self, to=None):
        window = self.window
        panel = window.find_output_panel("exec")
        text = panel.substr(sublime.Region(0, panel.size())) if panel is not None else ""
        if not text.strip():
            status(window, "no build output to send (run a build first)")
            return
        wp = participant_for(window)
        project = os.path.basename(wp.folders[0]) if wp is not None and wp.folders else None
        message = pcore.build_output_message(text, project)
        if to:
            send_to(window, to, message)
        else:
            pick_session(window, lambda row: send_to(window, row["address"], message))


class QwenSessionsOpenReferencedLocationCommand(sublime_plugin.WindowCommand):
    """Qwen Sessions: Open Referenced Location - the ``path:line`` of the
    newest received message that names one (a choice when it names several)."""

    def run(self):
        window = self.window
        wp = participant_for(window)
        found = wp.locations() if wp is not None else []
        if not found:
            status(window, "no received message names a file:line of this window's folders")
            return
        if len(found) == 1:
            open_location(window, found[0])
            return
        window.show_quick_panel(
            [[f["label"], f["path"]] for f in found],
            lambda i: open_location(window, found[i]) if 0 <= i < len(found) else None,
        )


def open_location(window, loc):
    window.open_file("{}:{}:{}".format(loc["path"], loc["line"], loc["column"]),
                     getattr(sublime, "ENCODED_POSITION", 1))


class QwenSessionsReviewHeldCommand(sublime_plugin.WindowCommand):
    """Qwen Sessions: Review Held Messages - release or deny each one.
    ``msg_id`` and ``action`` (``release``/``deny``) decide one directly."""

    def run(self, msg_id=None, action=None):
        window = self.window
        wp = participant_for(window)
        if wp is None:
            status(window, "this window takes no part in cross-session messaging")
            return
        if msg_id and action:
            decide_held(window, msg_id, action)
            return
        held = wp.held_messages()
        if not held:
            status(window, "no message is held for review")
            return
        items = []
        for h in held:
            items.append([
                "{}: {}".format(h.get("fromName") or h.get("from") or "unknown session", pcore.preview(h.get("text", ""))),
                "{} · {} · {}".format(pcore.origin_text(h), h.get("cause") or "policy", pcore.format_expiry(h.get("expiresAt"))),
            ])

        def chosen(i):
            if 0 <= i < len(held):
                sublime.set_timeout(lambda: _choose_action(window, held[i]), 0)

        window.show_quick_panel(items, chosen)


HELD_ACTIONS = (
    ("release", "Release: deliver it to this editor"),
    ("deny", "Deny: tell the sender no"),
    ("show", "Show the whole message in the Qwen messages panel"),
)


def _choose_action(window, held):
    def chosen(i):
        if not 0 <= i < len(HELD_ACTIONS):
            return
        action = HELD_ACTIONS[i][0]
        if action == "show":
            append_to_panel(window, "[{}] held message {} from {}:\n{}".format(
                _stamp(), held.get("msgId"), held.get("fromName") or "unknown session",
                _indent(held.get("text", ""))), show=True)
        else:
            decide_held(window, held.get("msgId"), action)

    window.show_quick_panel([a[1] for a in HELD_ACTIONS], chosen)


def decide_held(window, msg_id, action):
    wp = participant_for(window)
    if wp is None or action not in ("release", "deny"):
        return

    def work():
        try:
            (wp.release if action == "release" else wp.deny)(msg_id)
        except Exception as e:
            why = pcore.library_message(e)
            sublime.set_timeout(lambda: status(window, "{} failed: {}".format(action, why)), 0)
            return
        done = "released (delivered to this editor)" if action == "release" else "denied"
        sublime.set_timeout(lambda: (append_to_panel(window, "[{}] held message {}: {}".format(_stamp(), msg_id, done)),
                                     status(window, "held message " + done)), 0)

    sublime.set_timeout_async(work, 0)


class QwenSessionsShowMessagesCommand(sublime_plugin.WindowCommand):
    """Qwen Sessions: Show Messages - the "Qwen messages" panel."""

    def run(self):
        messages_panel(self.window)
        self.window.run_command("show_panel", {"panel": "output." + PANEL})
