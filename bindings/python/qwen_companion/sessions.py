"""The :class:`Participant`: an editor joins Qwen Code's cross-session messaging.

A participant is one inbox (a UNIX socket) plus one registry record
(``$QWEN_HOME/sessions/<pid>.json``) per registered session. Qwen sessions and
other participants find it with ``qwen sessions ps`` and send it messages;
it sends them messages and follows their delivery receipts::

    from qwen_companion import Participant

    def on_message(msg):                     # runs on the library thread
        ui.call_soon(show_message, msg["fromName"], msg["text"])

    with Participant(on_message=on_message, inbound_policy="hold") as p:
        me = p.register(name="my-editor", cwd=project_dir)
        print([s["name"] for s in p.peers(me["sessionId"])])
        sent = p.send("reviewer", "please look at main.c")
        print(p.wait(sent["msgId"], timeout=10)["state"])   # "delivered", "held", ...
        os.environ.update(p.child_env(me["sessionId"]))      # for tools the editor starts

Results are the library's JSON documents as ``dict``/``list`` with its
camelCase keys (``sessionId``, ``msgId``, ``recordPath``...); see
``include/qwen_companion.h`` for every field.

Threading
---------
Every method may be called from any thread, also from inside a callable.
The callables ``on_message``, ``on_receipt``, ``on_held`` and ``log`` run on
the participant's own **library thread** (named ``qc-cb``), one at a time, in
order, never on the thread that created the participant. GUI toolkits must hop
to their UI thread from there (Sublime Text: ``sublime.set_timeout``).
:meth:`Participant.close` called outside a callable waits for a running
callable to return, so a callable must never block on a thread that may be
closing the participant. ``send``, ``wait``, ``register``, ``unregister`` and
``close`` block (``send`` up to about 5 s, ``wait`` up to its timeout).

An exception escaping a callable never reaches the library: it is logged
with its traceback (``logging`` logger ``qwen_companion``) and reported to the
``log`` callable. A message whose ``on_message`` raised still counts as
consumed (unless ``manual_ack``: then only :meth:`Participant.ack` consumes it).
"""

import json

from typing import Any, Callable, Dict, List, Optional, Union  # noqa: F401 (type comments)

from . import _native
from ._handle import LogCallable, NativeHandle, camel, closed_at_exit
from ._handle import config_json as _config_json
from ._handle import library_logger, logger  # noqa: F401 (still this module's names)
from ._native import (
    CompanionError,
    LOG_INFO,
    encode,
    run_guarded,
)

JsonCallable = Callable[[Any], Any]


class _Unset(object):
    """Marks an argument that was not given (``None`` has a meaning of its own)."""

    def __repr__(self):
        # type: () -> str
        return "UNSET"


#: Default of arguments where ``None`` means JSON ``null`` (e.g. ``review_class=None``
#: is "review class unknown", while leaving it out keeps the library default).
UNSET = _Unset()

def _path(value, name):
    # type: (Any, str) -> str
    return encode(value, name).decode("utf-8")


def _options(values):
    # type: (Dict[str, Any]) -> Dict[str, Any]
    """snake_case keyword values -> the library's camelCase JSON object
    (``None`` and :data:`UNSET` left out, except where ``None`` is meaningful)."""
    out = {}  # type: Dict[str, Any]
    for key, value in values.items():
        if value is UNSET:
            continue
        if value is None and key not in ("review_class",):
            continue
        out[camel(key)] = value
    return out


def _text(value, name):
    # type: (Any, str) -> str
    if not isinstance(value, str):
        raise TypeError("{} must be str, not {}".format(name, type(value).__name__))
    return value


def _optional_text(value, name):
    # type: (Any, str) -> Optional[bytes]
    return None if value is None else encode(value, name)


class Participant(NativeHandle):
    """A cross-session participant: an inbox and the sessions registered behind it.

    ``with Participant(...) as p:`` closes it on exit: every session is
    unregistered (held and queued messages settle as ``expired``), records
    and the socket are removed. Nothing is bound or written before the first
    :meth:`register`.

    Configuration (all optional; maps to ``qc_participant_new``'s JSON):
    ``qwen_home`` (default ``$QWEN_HOME``, else ``~/.qwen``), ``kind``
    (``external``), ``version`` (written as ``qwenVersion``),
    ``multi_session`` (several sessions behind one inbox), ``inbound_policy``
    (``"accept"``, ``"hold"``, ``"refuse"``; default: mode parity),
    ``review_class`` (``"prompting"`` default, ``"bypass"``, or ``None`` for
    unknown: peer messages are then held), ``held_expiry`` (``"1m"``, ``"5m"``,
    ``"10m"``, ``"never"``), ``manual_ack`` (delivered messages stay queued
    until :meth:`ack`), ``controller_token`` (presented on sends with
    ``controller=True``), ``parent_socket``/``parent_token`` (default from
    ``QWEN_CODE_MESSAGING_SOCKET``/``_TOKEN``), ``cleanup_at_exit`` (default
    true), and the test overrides ``socket_path``, ``runtime_dir``,
    ``tmp_dir``, ``sweep_sockets``, ``line_deadline_ms``. ``config`` is a dict
    (camelCase keys) merged under those, or a JSON string passed verbatim
    (then no other configuration argument may be given).

    Callables (run on the library thread, see the module docs):

    ``on_message(message)``
        A delivered message, a dict: ``msgId``, ``sessionId`` (ours),
        ``content`` (raw, untrusted), ``text`` (every ``<`` escaped, for
        display), ``envelope`` (for a model), ``display`` (one line),
        ``from``/``fromName``/``fromMode`` (claimed by the sender),
        ``priority``, ``origin`` (``"peer"``, ``"own-process"`` or
        ``"controller"``: what the connection proved), ``controllerLabel``
        and ``frame`` (the frame exactly as received, with the sender's
        ``replyToken``: keep it out of models and logs). Messages accepted
        while no callable is set wait (up to 50 per session).
    ``on_receipt(event)``
        Every transition of a message we sent: ``msgId``, ``address``,
        ``status`` (``delivered``, ``held``, ``denied``, ``refused``,
        ``expired``, ``misaddressed``, ``dropped``), ``previous``,
        ``reason``, ``dropReason`` and ``frame`` (the receipt as received).
    ``on_held(held)``
        The whole hold buffer (a list, as :meth:`held` returns it) after each change.
    ``log(level, message)``
        Library log lines up to ``log_level``; without it they go to the
        ``logging`` logger ``qwen_companion.library``.

    ``library`` is the path of the shared library (see :func:`load_library`).
    """

    _NAME = "Participant"
    _WHAT = "the participant"
    _NEW_FN = "qc_participant_new"
    _FREE_FN = "qc_participant_free"
    _LOG_SETTER = "qc_participant_set_log_callback"
    # Closing at exit also removes our registry records and sockets.
    _LIVE = closed_at_exit()

    def __init__(
        self,
        qwen_home=None,  # type: Optional[Any]
        kind=None,  # type: Optional[str]
        version=None,  # type: Optional[str]
        multi_session=None,  # type: Optional[bool]
        inbound_policy=None,  # type: Optional[str]
        review_class=UNSET,  # type: Any
        held_expiry=None,  # type: Optional[str]
        manual_ack=None,  # type: Optional[bool]
        controller_token=None,  # type: Optional[str]
        parent_socket=None,  # type: Optional[Any]
        parent_token=None,  # type: Optional[str]
        cleanup_at_exit=None,  # type: Optional[bool]
        socket_path=None,  # type: Optional[Any]
        runtime_dir=None,  # type: Optional[Any]
        tmp_dir=None,  # type: Optional[Any]
        sweep_sockets=None,  # type: Optional[bool]
        line_deadline_ms=None,  # type: Optional[int]
        config=None,  # type: Optional[Union[str, Dict[str, Any]]]
        on_message=None,  # type: Optional[JsonCallable]
        on_receipt=None,  # type: Optional[JsonCallable]
        on_held=None,  # type: Optional[JsonCallable]
        log=None,  # type: Optional[LogCallable]
        log_level=LOG_INFO,  # type: int
        library=None,  # type: Optional[Any]
    ):
        # type: (...) -> None
        self._init_handle(library)
        given = _options(
            {
                "qwen_home": None if qwen_home is None else _path(qwen_home, "qwen_home"),
                "kind": kind,
                "version": version,
                "multi_session": multi_session,
                "inbound_policy": inbound_policy,
                "review_class": review_class,
                "held_expiry": held_expiry,
                "manual_ack": manual_ack,
                "controller_token": controller_token,
                "parent_socket": None if parent_socket is None else _path(parent_socket, "parent_socket"),
                "parent_token": parent_token,
                "cleanup_at_exit": cleanup_at_exit,
                "socket_path": None if socket_path is None else _path(socket_path, "socket_path"),
                "runtime_dir": None if runtime_dir is None else _path(runtime_dir, "runtime_dir"),
                "tmp_dir": None if tmp_dir is None else _path(tmp_dir, "tmp_dir"),
                "sweep_sockets": sweep_sockets,
                "line_deadline_ms": line_deadline_ms,
            }
        )
        config_json = _config_json(config, given)[0]

        def setup():
            # type: () -> None
            self.set_log_callback(log, log_level)
            if on_message is not None:
                self.set_message_callback(on_message)
            if on_receipt is not None:
                self.set_receipt_callback(on_receipt)
            if on_held is not None:
                self.set_held_callback(on_held)

        self._create(config_json, setup)

    # ------------------------------------------------------------------
    # lifetime

    def _repr_state(self):
        # type: () -> str
        try:
            names = [s.get("name") for s in self.sessions()]
        except CompanionError:
            return "closed"
        return "sessions={!r}".format(names)

    def close(self):
        # type: () -> None
        """Unregisters every session and frees the participant.

        Held and queued messages settle as ``expired``; records and the
        socket are removed; the callables are released once the library no
        longer needs them. Safe to call more than once, from any thread, and
        from inside one of this participant's callables. Outside a callable
        it waits for a running callable to return. Any later call raises
        :class:`ClosedError`.
        """
        self._free()

    # ------------------------------------------------------------------
    # our sessions

    def register(
        self,
        session_id=None,  # type: Optional[str]
        name=None,  # type: Optional[str]
        cwd=None,  # type: Optional[Any]
        kind=None,  # type: Optional[str]
        inbound_policy=None,  # type: Optional[str]
        review_class=UNSET,  # type: Any
        held_expiry=None,  # type: Optional[str]
    ):
        # type: (...) -> Dict[str, Any]
        """Registers a session (binds the inbox on the first one, then writes
        its record) and returns it: ``sessionId``, ``ref``, ``name``, ``kind``,
        ``cwd``, ``startedAt``, ``recordPath``, ``ipcPath``.

        ``session_id`` defaults to a fresh UUID; ``name`` to one derived from
        ``cwd`` (default: the process's) as Qwen derives it. ``kind``,
        ``inbound_policy``, ``review_class`` (``None`` = unknown) and
        ``held_expiry`` override the configuration for this session.
        """
        opts = _options(
            {
                "session_id": session_id,
                "name": name,
                "cwd": None if cwd is None else _path(cwd, "cwd"),
                "kind": kind,
                "inbound_policy": inbound_policy,
                "review_class": review_class,
                "held_expiry": held_expiry,
            }
        )
        return self._call_json("qc_participant_register", encode(json.dumps(opts), "options"))

    def unregister(self, session_id):
        # type: (str) -> None
        """Unregisters ``session_id``: its held and queued messages settle as
        ``expired``, its record is removed; the last one closes the inbox."""
        self._call("qc_participant_unregister", encode(session_id, "session_id"))

    def unregister_all(self):
        # type: () -> None
        """Unregisters every session and closes the inbox. The participant is
        finished afterwards (register raises NotRunningError); only
        :meth:`close` remains to do."""
        self._call("qc_participant_close")

    def rotate_session_id(self, session_id, new_session_id=None):
        # type: (str, Optional[str]) -> Dict[str, Any]
        """Gives ``session_id`` a new id (``new_session_id``, or a fresh UUID),
        rewriting the same record; returns the session as :meth:`register` does."""
        return self._call_json(
            "qc_participant_rotate_session_id",
            encode(session_id, "session_id"),
            _optional_text(new_session_id, "new_session_id"),
        )

    def sessions(self):
        # type: () -> List[Dict[str, Any]]
        """Our registered sessions (as :meth:`register` returns them)."""
        return self._call_json("qc_participant_sessions_json")

    def child_env(self, session_id):
        # type: (str) -> Dict[str, str]
        """Environment for processes started on behalf of ``session_id``:
        ``QWEN_CODE_MESSAGING_SOCKET`` and ``QWEN_CODE_MESSAGING_TOKEN``. Their
        messages arrive with origin ``"own-process"``. Keep the token out of logs."""
        return self._call_json("qc_participant_child_env_json", encode(session_id, "session_id"))

    @property
    def ipc_path(self):
        # type: () -> Optional[str]
        """The inbox socket path, or ``None`` while no session is registered."""
        try:
            return self._call_string("qc_participant_ipc_path")
        except _native.NotRunningError:
            return None

    def inbound_settings(self, session_id):
        # type: (str) -> Dict[str, Any]
        """How ``session_id`` treats inbound messages: ``policy`` (``None`` or
        absent = mode parity), ``reviewClass`` (``None`` or absent = unknown),
        ``heldExpiry``."""
        return self._call_json("qc_participant_inbound_settings_json", encode(session_id, "session_id"))

    def update_inbound(self, session_id, settings=None, policy=UNSET, review_class=UNSET, held_expiry=UNSET):
        # type: (str, Optional[Union[str, Dict[str, Any]]], Any, Any, Any) -> None
        """Replaces the inbound settings of ``session_id``; held messages are
        judged again (as when a Qwen session changes mode).

        ``settings`` is the whole document (dict or JSON, as
        :meth:`inbound_settings` gives it). Without it, the current settings
        are read and the keyword arguments given (``policy``,
        ``review_class``, ``held_expiry``; ``None`` = unset/unknown) replace
        theirs. That read-modify-write is not atomic against another thread
        updating the same session.
        """
        if settings is None:
            doc = self.inbound_settings(session_id)  # type: Dict[str, Any]
        elif isinstance(settings, str):
            if not (policy is UNSET and review_class is UNSET and held_expiry is UNSET):
                raise TypeError("settings given as a JSON string: pass no other settings arguments")
            self._call("qc_participant_update_inbound", encode(session_id, "session_id"), encode(settings, "settings"))
            return
        else:
            doc = dict(settings)
        for key, value in (("policy", policy), ("reviewClass", review_class), ("heldExpiry", held_expiry)):
            if value is not UNSET:
                doc[key] = value
        self._call(
            "qc_participant_update_inbound",
            encode(session_id, "session_id"),
            encode(json.dumps(doc), "settings"),
        )

    # ------------------------------------------------------------------
    # the registry

    def list(self):
        # type: () -> List[Dict[str, Any]]
        """Every live record in the registry, newest first, with the fields of
        ``qwen sessions ps --json`` plus ``ref``, ``reachable``,
        ``recordPath`` (never a token)."""
        return self._call_json("qc_participant_list_json")

    def peers(self, from_session=None):
        # type: (Optional[str]) -> List[Dict[str, Any]]
        """The sessions a message can be sent to (excluding ``from_session``),
        each with its shortest unambiguous ``address``."""
        return self._call_json("qc_participant_peers_json", _optional_text(from_session, "from_session"))

    def resolve(self, address, from_session=None):
        # type: (str, Optional[str]) -> Dict[str, Any]
        """Resolves ``address`` (``name``, ``name [ref]``, ``[ref]`` or a bare
        ref) against a fresh read of the registry. :class:`NotFoundError`
        when nothing matches; :class:`InvalidArgumentError` when a name is
        ambiguous (the message lists the candidates)."""
        return self._call_json(
            "qc_participant_resolve_json",
            encode(address, "address"),
            _optional_text(from_session, "from_session"),
        )

    # ------------------------------------------------------------------
    # sending

    def send(self, to, content, from_mode=None, priority=None, controller=False, from_session=None):
        # type: (str, str, Optional[str], Optional[str], bool, Optional[str]) -> Dict[str, Any]
        """Sends ``content`` to the session at address ``to``; returns
        ``msgId``, ``address``, ``toSessionId``, ``confirmed``.

        Blocks until the recipient took the connection (about 5 s at most).
        ``from_mode`` (``"prompting"``/``"bypass"``) is asserted only when
        given; ``priority`` is ``"now"`` or ``"next"``; ``controller=True``
        presents the configured controller token; ``from_session`` picks
        which of our sessions sends (needed when several are registered).
        Follow the message with :meth:`wait`, :meth:`send_state` or
        ``on_receipt``. :class:`NotFoundError` for an unknown address,
        :class:`InvalidArgumentError` for an ambiguous one,
        :class:`RefusedError` when the send would exceed the recipient's limits.
        """
        opts = {"to": _text(to, "to"), "content": _text(content, "content")}  # type: Dict[str, Any]
        opts.update(_options({"from_session": from_session, "priority": priority, "from_mode": from_mode}))
        if controller:
            opts["controller"] = True
        return self._call_json("qc_participant_send", encode(json.dumps(opts), "options"))

    def send_to_parent(self, content, from_mode=None, priority=None, from_session=None, to_session_id=None):
        # type: (str, Optional[str], Optional[str], Optional[str], Optional[str]) -> Dict[str, Any]
        """Sends ``content`` to the Qwen session that started this process
        (``QWEN_CODE_MESSAGING_SOCKET``/``_TOKEN``, or ``parent_socket`` /
        ``parent_token``), as own-process. ``to_session_id`` picks one of the
        parent inbox's sessions (default: the only live record naming that
        inbox). :class:`NotFoundError` when there is no parent session."""
        opts = {"content": _text(content, "content")}  # type: Dict[str, Any]
        opts.update(
            _options(
                {
                    "from_session": from_session,
                    "priority": priority,
                    "from_mode": from_mode,
                    "to_session_id": to_session_id,
                }
            )
        )
        return self._call_json("qc_participant_send_to_parent", encode(json.dumps(opts), "options"))

    def send_state(self, msg_id):
        # type: (str) -> Dict[str, Any]
        """The delivery state of a message we sent: ``msgId``, ``address``,
        ``state`` (``pending``, ``held``, ``delivered``, ``denied``,
        ``refused``, ``expired``, ``misaddressed``, ``dropped``) and ``last``
        (the last receipt). :class:`NotFoundError` for an id we never sent."""
        return self._call_json("qc_participant_send_state_json", encode(msg_id, "msg_id"))

    def wait(self, msg_id, timeout=10.0, final_only=True):
        # type: (str, Optional[float], bool) -> Dict[str, Any]
        """Waits up to ``timeout`` seconds (``None``: without limit) for the
        message's next transition, or with ``final_only`` for a final state
        (not ``pending`` or ``held``); returns the state reached by then, as
        :meth:`send_state` does. A timeout is not an error."""
        if timeout is None:
            ms = 0xFFFFFFFF
        else:
            if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
                raise TypeError("timeout must be a number of seconds, not {}".format(type(timeout).__name__))
            ms = max(0, min(0xFFFFFFFF, int(timeout * 1000)))
        return self._call_json(
            "qc_participant_wait", encode(msg_id, "msg_id"), ms, 1 if final_only else 0
        )

    # ------------------------------------------------------------------
    # inbound messages awaiting the host

    def held(self):
        # type: () -> List[Dict[str, Any]]
        """Messages held for the host's review: ``msgId``, ``sessionId``,
        ``content``, ``text``, ``from``, ``fromName``, ``fromMode``,
        ``origin``, ``controllerLabel``, ``cause``, ``heldAt``, ``expiresAt``
        and ``frame`` (as in ``on_message``)."""
        return self._call_json("qc_participant_held_json")

    def release(self, msg_id):
        # type: (str) -> None
        """Delivers a held message (the sender gets ``delivered``).
        :class:`NotFoundError` when it is no longer held; :class:`RefusedError`
        when the input queue is full."""
        self._call("qc_participant_release", encode(msg_id, "msg_id"))

    def deny(self, msg_id):
        # type: (str) -> None
        """Denies a held message (the sender gets ``denied``).
        :class:`NotFoundError` when it is no longer held."""
        self._call("qc_participant_deny", encode(msg_id, "msg_id"))

    def ack(self, msg_id):
        # type: (str) -> None
        """With ``manual_ack``: the host consumed a delivered message (it
        leaves the input queue). :class:`NotFoundError` when it is not queued."""
        self._call("qc_participant_ack", encode(msg_id, "msg_id"))

    # ------------------------------------------------------------------
    # callables

    def _set_json_callback(self, setter, what, fn):
        # type: (str, str, Optional[JsonCallable]) -> None
        if fn is not None and not callable(fn):
            raise TypeError("{} must be callable, not {}".format(what, type(fn).__name__))

        def make_thunk():
            # type: () -> Callable[[Any, Optional[bytes]], None]
            report = self._error_reporter(what)  # the thunk must not keep the participant alive

            def thunk(_user_data, data):
                # type: (Any, Optional[bytes]) -> None
                def run():
                    # type: () -> None
                    fn(json.loads(_native.decode(data)))

                run_guarded(what, run, report)

            return thunk

        self._set_callback(setter, _native.JSON_FN, fn, make_thunk)

    def set_message_callback(self, fn):
        # type: (Optional[JsonCallable]) -> None
        """Sets (``None`` removes) ``fn(message)``, called with each delivered
        message (runs on the library thread; see the class docs)."""
        self._set_json_callback("qc_participant_set_message_callback", "the on_message callable", fn)

    def set_receipt_callback(self, fn):
        # type: (Optional[JsonCallable]) -> None
        """Sets (``None`` removes) ``fn(event)``, called with every transition
        of a message we sent (runs on the library thread)."""
        self._set_json_callback("qc_participant_set_receipt_callback", "the on_receipt callable", fn)

    def set_held_callback(self, fn):
        # type: (Optional[JsonCallable]) -> None
        """Sets (``None`` removes) ``fn(held)``, called with the whole hold
        buffer after each change (runs on the library thread)."""
        self._set_json_callback("qc_participant_set_held_callback", "the on_held callable", fn)
