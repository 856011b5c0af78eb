"""The :class:`PluginHost`: runs the desktop app's plugins (a folder with
``manifest.json`` and a Node entry script) inside the editor::

    from qwen_companion import PluginHost, PluginCallError

    with PluginHost(plugins_dir=my_dir, on_event=print) as host:
        host.install("/path/to/hello")                  # a folder or a .zip
        out = host.call("com.example.hello", "say_hello", {"name": "Ada"})
        print(out["content"][0]["text"])                # Hello, Ada!

Each plugin runs in its own Node child from its first call (or
:meth:`PluginHost.startup_finished`); results are the library's JSON documents
as ``dict``/``list``. A failed call raises :class:`PluginCallError` with the
failure's ``kind`` (``schema``, ``unknown_tool``, ``timeout``, ``exited``,
``protocol``, ``too_large``, ``tool_error``, ``disabled``, ``not_found``,
``host``) and its extra fields; a failed install, uninstall or list raises
:class:`PluginInstallError` with a ``code`` (``invalid_manifest``,
``not_found``, ...) and the manifest's ``problems``.

Capabilities
------------
A plugin asks its host for things (``show_notification``, ``render_pdf``...)
with ``host_request``. :meth:`PluginHost.set_capability` installs a handler
``handler(request)`` (``request`` is ``{"id", "plugin", "capability",
"params"}``): the dict it returns is the plugin's result, an exception it
raises becomes the plugin's ``host_error``; or it returns a :class:`Pending`
and answers later, from any thread, with :meth:`Pending.resolve` /
:meth:`Pending.reject` (or :meth:`PluginHost.respond` with the request's id).
Without a handler the library's defaults apply (``render_pdf`` writes the
PDF itself; ``show_notification`` answers ``{"shown": false}``).

Threading
---------
Every method may be called from any thread. Event, capability, log and
:meth:`PluginHost.call_async` callables run on the host's own library thread
(``qc-cb``), one at a time, in order; an exception escaping one is logged and
reported to the ``log`` callable, never to the library. A blocking call
(:meth:`~PluginHost.call`, :meth:`~PluginHost.visible`...) made *inside* one
of those callables holds that thread, so a capability request of that very
call could not be answered: use :meth:`~PluginHost.call_async` there.
Pull mode (:meth:`~PluginHost.enable_events`, :meth:`~PluginHost.next_event`)
is for hosts that must never be called on a foreign thread.

Plugin tools in Qwen Code
-------------------------
:meth:`PluginHost.mcp_start` runs the host's MCP server
(``qwen-companion-plugins``: every enabled plugin's tools as MCP tools, on
``127.0.0.1`` with a bearer token) and writes the lock file the
``qc-mcp-bridge`` executable reads; :func:`register_mcp` writes the
``mcpServers`` entry of Qwen Code's ``settings.json`` that starts the bridge
(no port, no token in it, so terminals need no environment variable);
:func:`unregister_mcp` removes it.

It must stay importable by Sublime Text's plugin host (Python 3.8).
"""

import ctypes
import json
import threading

from typing import Any, Callable, Dict, List, Optional, Tuple, Type, Union  # noqa: F401 (type comments)

from . import _native, platforms
from ._handle import LogCallable, NativeHandle, camel, closed_at_exit
from ._handle import config_json as _config_json
from ._native import (
    CompanionError,
    InvalidHandleError,
    LOG_INFO,
    encode,
    run_guarded,
)

JsonCallable = Callable[[Any], Any]

# --------------------------------------------------------------------------
# Errors


class PluginCallError(CompanionError):
    """A failed plugin call (``call``, ``visible``, ``options``,
    ``parse_document``, ``unload``...).

    ``kind`` is the failure's kind, ``message`` the library's sentence,
    ``details`` the whole error document; the usual extra fields are
    attributes too (``None`` when absent): ``plugin_message`` (``tool_error``:
    the plugin's own message), ``exit_code``, ``signal``, ``stderr_tail``
    (``exited``), ``errors`` (``schema``: ``[{"path", "message"}]``).

    Raised instances are also instances of the status's class
    (``schema`` is an :class:`~qwen_companion.InvalidArgumentError`,
    ``unknown_tool`` and ``not_found`` are
    :class:`~qwen_companion.NotFoundError`, ``host`` an
    :class:`~qwen_companion.IoError`, the others
    :class:`~qwen_companion.RefusedError`).
    """

    def __init__(self, details, status=None):
        # type: (Dict[str, Any], Optional[int]) -> None
        self.details = dict(details)
        self.kind = str(self.details.get("kind", "host"))
        super().__init__(str(self.details.get("message", "")), status)
        self.plugin_message = self.details.get("pluginMessage")
        self.exit_code = self.details.get("exitCode")
        self.signal = self.details.get("signal")
        self.stderr_tail = self.details.get("stderrTail")
        self.errors = self.details.get("errors")

    def __str__(self):
        # type: () -> str
        return "{}: {}".format(self.kind, self.message)


class PluginInstallError(CompanionError):
    """A failed ``install``, ``uninstall`` or ``list``: ``code`` (e.g.
    ``invalid_manifest``, ``not_a_zip``, ``not_found``), ``message``,
    ``problems`` (the manifest's problems, ``[]`` when none) and ``details``
    (the whole error document). Also an instance of the status's class."""

    def __init__(self, details, status=None):
        # type: (Dict[str, Any], Optional[int]) -> None
        self.details = dict(details)
        self.code = str(self.details.get("code", "io"))
        super().__init__(str(self.details.get("message", "")), status)
        self.problems = list(self.details.get("problems") or [])

    def __str__(self):
        # type: () -> str
        return "{}: {}".format(self.code, self.message)


_error_classes = {}  # type: Dict[Tuple[type, int], type]
_error_classes_lock = threading.Lock()


def _with_status(base, status):
    # type: (type, int) -> type
    """``base`` mixed with the status's error class (cached), so that
    ``except NotFoundError`` catches an ``unknown_tool`` call too."""
    status_cls = _native.error_class(status)
    if status_cls is CompanionError:
        return base
    with _error_classes_lock:
        cls = _error_classes.get((base, status))
        if cls is None:
            cls = type(base.__name__, (base, status_cls), {"__module__": base.__module__})
            _error_classes[(base, status)] = cls
        return cls


def _error_from_json(base, status, error_json, message):
    # type: (type, int, str, str) -> CompanionError
    if error_json:
        try:
            details = json.loads(error_json)
        except ValueError:
            details = None
        if isinstance(details, dict):
            return _with_status(base, status)(details, status)
    return _native.make_error(status, message)


# --------------------------------------------------------------------------
# Answering later


class Pending(object):
    """Returned by a capability handler that answers later.

    Call :meth:`resolve` (a JSON-able result) or :meth:`reject` (an error
    message for the plugin) exactly once, from any thread; it may even come
    before the handler returned. Both return ``True`` when the plugin got the
    answer, ``False`` when the request was no longer waiting (timed out,
    answered, plugin gone) or the host is closed.
    """

    def __init__(self):
        # type: () -> None
        self._lock = threading.Lock()
        self._target = None  # type: Optional[Tuple[PluginHost, int]]
        self._answer = None  # type: Optional[Tuple[Any, Optional[str]]]
        self._done = False

    def resolve(self, result=None):
        # type: (Any) -> bool
        """Answers with ``result`` (the plugin's ``host_response``)."""
        return self._settle(result, None)

    def reject(self, message):
        # type: (str) -> bool
        """Answers with ``message`` (the plugin's ``host_error``)."""
        return self._settle(None, str(message))

    def _settle(self, result, error):
        # type: (Any, Optional[str]) -> bool
        with self._lock:
            if self._done:
                return False
            if self._target is None:  # not bound yet: the binding answers when it binds
                self._answer = (result, error)
                self._done = True
                return True
            self._done = True
            host, request_id = self._target
        return host._respond_quietly(request_id, result, error)

    def _bind(self, host, request_id):
        # type: (PluginHost, int) -> None
        with self._lock:
            if self._target is not None:
                raise ValueError("this Pending already answers another request")
            self._target = (host, request_id)
            answer = self._answer
        if answer is not None:
            host._respond_quietly(request_id, answer[0], answer[1])


def _json_or_null(value, what):
    # type: (Any, str) -> bytes
    try:
        return json.dumps(value).encode("utf-8")
    except (TypeError, ValueError) as e:
        raise TypeError("{} is not JSON-serializable: {}".format(what, e))


# --------------------------------------------------------------------------
# The host


class PluginHost(NativeHandle):
    """A plugin host over one plugins directory (``qc_plugin_host``).

    ``with PluginHost(...) as host:`` frees it on exit: every plugin process
    ends (with its descendants), waiting capability requests are answered
    with an error, running :meth:`call_async` calls complete with kind
    ``host``.

    Configuration (all optional; maps to ``qc_plugin_host_new``'s JSON):
    ``plugins_dir`` (default ``$QWEN_HOME/companion/plugins``, else
    ``~/.qwen/companion/plugins``), ``node`` (path or name in PATH),
    ``node_is_electron``, ``call_timeout_ms`` (30000), ``max_message_bytes``
    (16 MiB), ``start_timeout_ms`` (10000), ``kill_grace_ms`` (2000),
    ``probe_timeout_ms`` (1000), ``host_request_timeout_ms`` (30000),
    ``workspace_root`` (``context.cwd`` of calls that give none),
    ``crash_loop_max_exits`` (3; 0 = never) and ``crash_loop_window_ms``
    (60000), ``restart_backoff_ms`` (1000; 0 = only the next call restarts a
    background plugin) and ``reply_poll_us`` (200; 0..10000: how long a call
    polls for the plugin's reply before its thread sleeps; 0 = never). ``config`` is a dict (camelCase keys) merged under those, or a
    JSON string passed verbatim.

    Callables: ``on_event(event)`` (see :meth:`on_event`), ``log(level,
    message)``; they run on the library thread.
    """

    _NAME = "PluginHost"
    _WHAT = "the plugin host"
    _NEW_FN = "qc_plugin_host_new"
    _FREE_FN = "qc_plugin_host_free"
    _LOG_SETTER = "qc_plugin_host_set_log_callback"
    _LIVE = closed_at_exit()

    def __init__(
        self,
        plugins_dir=None,  # type: Optional[Any]
        node=None,  # type: Optional[str]
        node_is_electron=None,  # type: Optional[bool]
        call_timeout_ms=None,  # type: Optional[int]
        max_message_bytes=None,  # type: Optional[int]
        start_timeout_ms=None,  # type: Optional[int]
        kill_grace_ms=None,  # type: Optional[int]
        probe_timeout_ms=None,  # type: Optional[int]
        host_request_timeout_ms=None,  # type: Optional[int]
        workspace_root=None,  # type: Optional[Any]
        crash_loop_max_exits=None,  # type: Optional[int]
        crash_loop_window_ms=None,  # type: Optional[int]
        restart_backoff_ms=None,  # type: Optional[int]
        reply_poll_us=None,  # type: Optional[int]
        config=None,  # type: Optional[Union[str, Dict[str, Any]]]
        on_event=None,  # type: Optional[JsonCallable]
        log=None,  # type: Optional[LogCallable]
        log_level=LOG_INFO,  # type: int
        library=None,  # type: Optional[Any]
    ):
        # type: (...) -> None
        self._init_handle(library)
        self._capability_handlers = {}  # type: Dict[str, Callable[[Dict[str, Any]], Any]]
        values = {
            "plugins_dir": None if plugins_dir is None else _text(plugins_dir, "plugins_dir"),
            "node": node,
            "node_is_electron": node_is_electron,
            "call_timeout_ms": call_timeout_ms,
            "max_message_bytes": max_message_bytes,
            "start_timeout_ms": start_timeout_ms,
            "kill_grace_ms": kill_grace_ms,
            "probe_timeout_ms": probe_timeout_ms,
            "host_request_timeout_ms": host_request_timeout_ms,
            "workspace_root": None if workspace_root is None else _text(workspace_root, "workspace_root"),
            "crash_loop_max_exits": crash_loop_max_exits,
            "crash_loop_window_ms": crash_loop_window_ms,
            "restart_backoff_ms": restart_backoff_ms,
            "reply_poll_us": reply_poll_us,
        }
        given = dict((camel(k), v) for k, v in values.items() if v is not None)
        config_json = _config_json(config, given)[0]

        def setup():
            # type: () -> None
            self.set_log_callback(log, log_level)
            if on_event is not None:
                self.on_event(on_event)

        self._create(config_json, setup)

    def close(self):
        # type: () -> None
        """Frees the host: ends every plugin, answers waiting capability
        requests with an error, completes running :meth:`call_async` calls
        with kind ``host``. Safe to call more than once, from any thread and
        from inside a callable. Any later call raises :class:`ClosedError`."""
        self._free()

    def _repr_state(self):
        # type: () -> str
        try:
            return "plugins_dir={!r}".format(self.plugins_dir)
        except CompanionError:
            return "closed"

    # ------------------------------------------------------------------
    # calls with an error document

    def _call_ej(self, base, fname, args, out=True):
        # type: (type, str, Tuple[Any, ...], bool) -> str
        """``fname(handle, *args, [&out,] &error_json, &error)``: returns
        ``out`` or raises ``base`` built from ``error_json``."""
        lib = self._lib
        out_p = ctypes.c_void_p()
        ej = ctypes.c_void_p()
        err = ctypes.c_void_p()
        tail = (ctypes.byref(out_p),) if out else ()
        tail += (ctypes.byref(ej), ctypes.byref(err))
        status = getattr(lib, fname)(*((self._h(),) + tuple(args) + tail))
        result = lib.take_string(out_p)
        error_json = lib.take_string(ej)
        message = lib.take_string(err)
        if status == _native.QC_OK:
            return result
        if status == _native.QC_INVALID_HANDLE and self._handle is None:
            raise self._closed_error()
        raise _error_from_json(base, status, error_json, message or "{} failed".format(fname))

    # ------------------------------------------------------------------
    # the plugins directory

    @property
    def plugins_dir(self):
        # type: () -> str
        """The plugins directory in use (absolute)."""
        return self._call_string("qc_plugin_host_plugins_dir")

    def install(self, src):
        # type: (Any) -> Dict[str, Any]
        """Installs the plugin folder or ``.zip`` at ``src`` (validated before
        anything is replaced; an installed version is replaced, its data
        kept) and returns its summary (``id``, ``name``, ``version``,
        ``tools``, ``replaced``, ``previousVersion``, ``warnings``...).
        Raises :class:`PluginInstallError`."""
        out = self._call_ej(PluginInstallError, "qc_plugin_host_install", (encode(src, "src"),))
        return json.loads(out)

    def uninstall(self, plugin_id, remove_data=False):
        # type: (str, bool) -> Dict[str, Any]
        """Ends and removes plugin ``plugin_id``; with ``remove_data`` also its
        data folder and state. Returns ``{"id", "dataRemoved"}``."""
        out = self._call_ej(
            PluginInstallError,
            "qc_plugin_host_uninstall",
            (encode(plugin_id, "plugin_id"), 1 if remove_data else 0),
        )
        return json.loads(out)

    def list(self):
        # type: () -> List[Dict[str, Any]]
        """Every installed plugin, sorted by id (``id``, ``name``,
        ``version``, ``enabled``, ``tools``...; a broken one has ``error``)."""
        return json.loads(self._call_ej(PluginInstallError, "qc_plugin_host_list", ()))

    def reload(self):
        # type: () -> None
        """Re-reads the plugins directory (after changes made behind the host's back)."""
        self._call("qc_plugin_host_reload")

    def stats(self, plugin_id):
        # type: (str) -> Dict[str, Any]
        """Counters of plugin ``plugin_id`` (``starts``, ``running``...), for debugging."""
        return self._call_json("qc_plugin_host_stats", encode(plugin_id, "plugin_id"))

    # ------------------------------------------------------------------
    # lifecycle

    def startup_finished(self):
        # type: () -> List[Dict[str, Any]]
        """Starts every enabled ``onStartupFinished`` plugin; one
        ``{"plugin", "ok", "error"?}`` per plugin."""
        return self._call_json("qc_plugin_host_startup_finished")

    def unload(self, plugin_id):
        # type: (str) -> None
        """Ends plugin ``plugin_id``'s process; its next call starts it again."""
        self._call_ej(PluginCallError, "qc_plugin_host_unload", (encode(plugin_id, "plugin_id"),), out=False)

    def enable(self, plugin_id):
        # type: (str) -> None
        """Enables the plugin (persisted) and clears its crash-loop breaker."""
        self._call("qc_plugin_host_enable", encode(plugin_id, "plugin_id"))

    def disable(self, plugin_id):
        # type: (str) -> None
        """Disables the plugin (persisted) and ends it; its calls fail ``disabled``."""
        self._call("qc_plugin_host_disable", encode(plugin_id, "plugin_id"))

    def set_config_value(self, plugin_id, key, value):
        # type: (str, str, Any) -> None
        """Sets configuration value ``key`` (``None`` restores the default)."""
        self._call(
            "qc_plugin_host_set_config_value",
            encode(plugin_id, "plugin_id"),
            encode(key, "key"),
            _json_or_null(value, "value"),
        )

    # ------------------------------------------------------------------
    # calls

    @staticmethod
    def _call_options(cwd, timeout_ms):
        # type: (Optional[Any], Optional[int]) -> Optional[bytes]
        options = {}  # type: Dict[str, Any]
        if cwd is not None:
            options["cwd"] = _text(cwd, "cwd")
        if timeout_ms is not None:
            options["timeoutMs"] = timeout_ms
        return json.dumps(options).encode("utf-8") if options else None

    def call(self, plugin_id, tool, params=None, cwd=None, timeout_ms=None):
        # type: (str, str, Optional[Dict[str, Any]], Optional[Any], Optional[int]) -> Dict[str, Any]
        """Calls ``tool`` of ``plugin_id`` with ``params`` (checked against the
        tool's schema first) and waits: returns ``{"content": [...],
        "details"?: ...}`` or raises :class:`PluginCallError`. ``cwd`` is the
        call's ``context.cwd``; ``timeout_ms`` overrides ``call_timeout_ms``."""
        out = self._call_ej(
            PluginCallError,
            "qc_plugin_host_call",
            (
                encode(plugin_id, "plugin_id"),
                encode(tool, "tool"),
                _json_or_null({} if params is None else params, "params"),
                self._call_options(cwd, timeout_ms),
            ),
        )
        return json.loads(out)

    def call_async(self, plugin_id, tool, params=None, callback=None, cwd=None, timeout_ms=None):
        # type: (str, str, Optional[Dict[str, Any]], Optional[Callable[[Optional[Dict[str, Any]], Optional[PluginCallError]], Any]], Optional[Any], Optional[int]) -> None
        """Starts a call and returns at once; ``callback(result, error)`` runs
        exactly once on the library thread: ``(result_dict, None)`` or
        ``(None, PluginCallError)``. Argument errors raise here and then the
        callback never runs."""
        if not callable(callback):
            raise TypeError("callback must be callable, not {}".format(type(callback).__name__))
        report = self._error_reporter("the call_async callback")

        def thunk(_user_data, data):
            # type: (Any, Optional[bytes]) -> None
            def run():
                # type: () -> None
                doc = json.loads(_native.decode(data))
                if doc.get("ok"):
                    callback(doc.get("result"), None)
                else:
                    details = doc.get("error") or {}
                    status = _STATUS_OF_KIND.get(details.get("kind"), _native.QC_REFUSED)
                    callback(None, _with_status(PluginCallError, status)(details, status))

            run_guarded("the call_async callback", run, report)

        fn = _native.JSON_FN(thunk)
        lib = self._lib
        key = lib.callbacks.add(fn)
        try:
            self._call(
                "qc_plugin_host_call_async",
                encode(plugin_id, "plugin_id"),
                encode(tool, "tool"),
                _json_or_null({} if params is None else params, "params"),
                self._call_options(cwd, timeout_ms),
                fn,
                key,
                lib.callbacks.free_thunk,
            )
        except BaseException:
            lib.callbacks.discard(key)
            raise

    def visible(self, plugin_id, cwd):
        # type: (str, Any) -> bool
        """Whether the plugin's session action shows for session folder ``cwd``."""
        out = ctypes.c_int32()
        self._call_ej(
            PluginCallError,
            "qc_plugin_host_visible",
            (encode(plugin_id, "plugin_id"), encode(cwd, "cwd"), ctypes.byref(out)),
            out=False,
        )
        return bool(out.value)

    def options(self, plugin_id, config_id):
        # type: (str, str) -> List[Dict[str, Any]]
        """The options of ``select`` entry ``config_id``: ``Auto`` first, then
        what its ``optionsTool`` returned."""
        out = self._call_ej(
            PluginCallError,
            "qc_plugin_host_options",
            (encode(plugin_id, "plugin_id"), encode(config_id, "config_id")),
        )
        return json.loads(out)

    def parse_document(self, mime, data):
        # type: (str, bytes) -> Dict[str, Any]
        """Parses a dropped file (``bytes``) with the plugin whose
        ``documentParsers`` lists ``mime``: ``{"success": True, "text"}`` or
        ``{"success": False, "reason"}``."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError("data must be bytes, not {}".format(type(data).__name__))
        raw = bytes(data)
        out = self._call_ej(
            PluginCallError,
            "qc_plugin_host_parse_document",
            (encode(mime, "mime"), raw, len(raw)),
        )
        return json.loads(out)

    # ------------------------------------------------------------------
    # events

    def on_event(self, fn):
        # type: (Optional[JsonCallable]) -> None
        """Sets (``None`` removes) ``fn(event)``: ``plugin_started`` (``plugin``,
        ``pid``), ``plugin_exit`` (``code``, ``signal``, ``expected``,
        ``stderrTail``), ``plugin_disabled`` (``reason``) and ``ui_push``
        (``plugin``, ``channel``, ``payload``), as dicts with a ``type``."""
        if fn is not None and not callable(fn):
            raise TypeError("on_event must be callable, not {}".format(type(fn).__name__))

        def make_thunk():
            # type: () -> Callable[[Any, Optional[bytes]], None]
            report = self._error_reporter("the on_event callable")

            def thunk(_user_data, data):
                # type: (Any, Optional[bytes]) -> None
                run_guarded("the on_event callable", lambda: fn(json.loads(_native.decode(data))), report)

            return thunk

        self._set_callback("qc_plugin_host_set_event_callback", _native.JSON_FN, fn, make_thunk)

    # ------------------------------------------------------------------
    # capabilities

    def set_capability(self, name, handler):
        # type: (str, Optional[Callable[[Dict[str, Any]], Any]]) -> None
        """Offers capability ``name`` answered by ``handler(request)`` (see the
        module docs); ``None`` removes it (the library default applies again;
        requests the old handler left waiting are answered with an error)."""
        name_b = encode(name, "name")
        if handler is None:
            self._call("qc_plugin_host_set_capability_callback", name_b, _native.CAPABILITY_FN(), None, _native.FREE_FN())
            return
        if not callable(handler):
            raise TypeError("handler must be callable, not {}".format(type(handler).__name__))
        what = "the {} capability handler".format(name)
        report = self._error_reporter(what)
        host = _WeakHost(self)

        def thunk(_user_data, request_id, data):
            # type: (Any, int, Optional[bytes]) -> None
            def failed(e):
                # type: (BaseException) -> None
                report(e)
                h = host()
                if h is not None:
                    h._respond_quietly(request_id, None, "{}: {}".format(what, _native.describe_exception(e)))

            def run():
                # type: () -> None
                request = json.loads(_native.decode(data))
                answer = handler(request)
                h = host()
                if h is None:
                    return
                if isinstance(answer, Pending):
                    answer._bind(h, int(request_id))
                    return
                result = _json_or_null(answer, "the result of " + what)
                h._respond_raw(int(request_id), result, None)

            run_guarded(what, run, failed)

        self._register_callback_named("qc_plugin_host_set_capability_callback", name_b, _native.CAPABILITY_FN(thunk))

    def _register_callback_named(self, setter, name_b, thunk):
        # type: (str, bytes, Any) -> None
        lib = self._lib
        key = lib.callbacks.add(thunk)
        try:
            self._call(setter, name_b, thunk, key, lib.callbacks.free_thunk)
        except BaseException:
            lib.callbacks.discard(key)
            raise

    def respond(self, request_id, result=None, error=None):
        # type: (int, Any, Optional[str]) -> None
        """Answers capability request ``request_id`` (from a handler's
        ``request["id"]`` or a pulled ``host_request`` event): with ``error``
        (a message) the plugin gets ``host_error``, else ``result``. Raises
        :class:`~qwen_companion.NotFoundError` when the request no longer waits."""
        data = None if error is not None else _json_or_null(result, "result")
        self._respond_raw(int(request_id), data, None if error is None else str(error))

    def _respond_raw(self, request_id, result_json, error):
        # type: (int, Optional[bytes], Optional[str]) -> None
        self._call(
            "qc_plugin_host_respond",
            ctypes.c_uint64(request_id),
            result_json,
            None if error is None else encode(error, "error"),
        )

    def _respond_quietly(self, request_id, result, error):
        # type: (int, Any, Optional[str]) -> bool
        """:meth:`respond` for :class:`Pending`: ``False`` instead of raising
        when the request or the host is gone."""
        try:
            if error is not None:
                self._respond_raw(request_id, None, error)
            else:
                try:
                    data = _json_or_null(result, "the result")
                except TypeError as e:
                    self._respond_raw(request_id, None, str(e))
                    raise
                self._respond_raw(request_id, data, None)
            return True
        except (_native.NotFoundError, InvalidHandleError):
            return False

    # ------------------------------------------------------------------
    # pull mode

    def enable_events(self):
        # type: () -> int
        """Switches to pull mode and returns the event handle (owned by the
        library): on Linux and macOS a file descriptor that is readable while
        events wait, on Windows an event ``HANDLE`` carried in the
        ``int32_t`` (signalled while events wait). Then no event or
        capability callable runs: wait with :meth:`wait_event` (or your own
        loop) and take events with :meth:`next_event`."""
        fd = ctypes.c_int32()
        self._call("qc_plugin_host_enable_events", ctypes.byref(fd))
        self._event_handle = int(fd.value)
        return self._event_handle

    def wait_event(self, timeout=None):
        # type: (Optional[float]) -> bool
        """Waits (at most ``timeout`` seconds; ``None``: no limit) until events
        wait in pull mode: ``select`` on the descriptor on Linux and macOS,
        ``WaitForSingleObject`` on the event handle on Windows. Returns
        ``True`` when events wait. Raises :class:`~qwen_companion.RefusedError`
        before :meth:`enable_events`."""
        value = getattr(self, "_event_handle", None)
        if value is None:
            raise _native.RefusedError("wait_event needs pull mode: call enable_events first", _native.QC_REFUSED)
        return platforms.wait_event_handle(value, timeout)

    def next_event(self):
        # type: () -> Optional[Dict[str, Any]]
        """The next queued event (pull mode) or ``None``: the events of
        :meth:`on_event`, and ``{"type": "host_request", "id", "plugin",
        "capability", "params"}`` to answer with :meth:`respond`."""
        text = self._call_string("qc_plugin_host_next_event")
        return json.loads(text) if text else None

    # ------------------------------------------------------------------
    # the plugin MCP server

    def mcp_start(self, config=None):
        # type: (Optional[Dict[str, Any]]) -> Dict[str, Any]
        """Starts the host's plugin MCP server and returns :meth:`mcp_info`.
        ``config`` (a dict, every key optional): ``workspacePaths``
        (absolute folders for the lock file; default the host's
        ``workspace_root``), ``lockDir``, ``maxBodyBytes``, ``keepAliveMs``,
        ``http``, ``sessionGraceMs``, ``maxSessions``. Raises
        :class:`~qwen_companion.AlreadyRunningError` when it runs. The server
        stops with :meth:`mcp_stop` or when the host is closed."""
        self._call(
            "qc_plugin_host_mcp_start",
            None if config is None else encode(json.dumps(config), "config"),
        )
        return self.mcp_info()

    def mcp_stop(self):
        # type: () -> None
        """Stops the plugin MCP server (its lock file is removed, connected
        bridges end). Raises :class:`~qwen_companion.NotRunningError` when
        it does not run."""
        self._call("qc_plugin_host_mcp_stop")

    def mcp_info(self):
        # type: () -> Dict[str, Any]
        """``{"url", "port", "headers": {"Authorization": "Bearer ..."},
        "env": {"QWEN_COMPANION_PLUGINS_PID": PID}, "lockFile", "serverName", "tools": [names], "sessions"}``
        of the running server (``env`` is empty: Qwen Code reaches the server
        through the bridge). Raises :class:`~qwen_companion.NotRunningError`."""
        return self._call_json("qc_plugin_host_mcp_info")

    # ------------------------------------------------------------------
    # the view server (plugin pages with window.pluginHost)

    def views_start(self, config=None):
        # type: (Optional[Dict[str, Any]]) -> Dict[str, Any]
        """Starts the host's view server on ``127.0.0.1`` and returns
        :meth:`views`. ``config`` (a dict, every key optional):
        ``colorScheme`` (``"light"``/``"dark"``; default the last
        :meth:`set_color_scheme`), ``maxBodyBytes``, ``keepAliveMs``,
        ``http``. Raises :class:`~qwen_companion.AlreadyRunningError` when it
        runs. It stops with :meth:`views_stop` or when the host is closed."""
        return json.loads(
            self._call_string(
                "qc_plugin_host_views_start",
                None if config is None else encode(json.dumps(config), "config"),
            )
        )

    def views_stop(self):
        # type: () -> None
        """Stops the view server (open pages stop working). Raises
        :class:`~qwen_companion.NotRunningError` when it does not run."""
        self._call("qc_plugin_host_views_stop")

    def views(self):
        # type: () -> Dict[str, Any]
        """``{"url", "views": [{"plugin", "id", "title", "icon", "width",
        "url"}], "panels": [{"plugin", "title", "url"}], "colorScheme"}`` for
        every enabled plugin. Each page URL carries its own capability: open
        it in any browser. Raises :class:`~qwen_companion.NotRunningError`."""
        return self._call_json("qc_plugin_host_views_json")

    def view_url(self, plugin_id, view_id=None):
        # type: (str, Optional[str]) -> str
        """The URL of view ``view_id`` of ``plugin_id`` (``None``: its ``ui``
        panel). Raises :class:`~qwen_companion.NotFoundError` for an unknown
        or disabled plugin or page, :class:`~qwen_companion.NotRunningError`
        when the server does not run."""
        return self._call_string(
            "qc_plugin_host_view_url",
            encode(plugin_id, "plugin_id"),
            None if view_id is None else encode(view_id, "view_id"),
        )

    def set_color_scheme(self, scheme):
        # type: (str) -> None
        """Sets the scheme pages see (``"light"`` or ``"dark"``; anything
        else raises :class:`~qwen_companion.InvalidArgumentError`); open pages'
        ``onColorSchemeChange`` callbacks get it. Allowed before
        :meth:`views_start`."""
        self._call("qc_plugin_host_set_color_scheme", encode(scheme, "scheme"))

    def offer_capability(self, name):
        # type: (str) -> None
        """Offers capability ``name`` to plugins in pull mode (its requests
        come as ``host_request`` events)."""
        self._call("qc_plugin_host_offer_capability", encode(name, "name"))


class _WeakHost(object):
    """A weak reference to a host (a capability thunk must not keep it alive)."""

    def __init__(self, host):
        # type: (PluginHost) -> None
        import weakref

        self._ref = weakref.ref(host)

    def __call__(self):
        # type: () -> Optional[PluginHost]
        h = self._ref()
        if h is None or h.closed:
            return None
        return h


#: The status the C ABI gives each call error kind (for call_async errors).
_STATUS_OF_KIND = {
    "schema": _native.QC_INVALID_ARGUMENT,
    "unknown_tool": _native.QC_NOT_FOUND,
    "not_found": _native.QC_NOT_FOUND,
    "host": _native.QC_IO,
}


def _mcp_options(scope, project, bridge, always_load_tools):
    # type: (str, Any, Any, bool) -> bytes
    options = {"scope": scope, "alwaysLoadTools": bool(always_load_tools)}  # type: Dict[str, Any]
    if project is not None:
        options["project"] = _text(project, "project")
    if bridge is not None:
        options["bridge"] = _text(bridge, "bridge")
    return encode(json.dumps(options), "options")


def register_mcp(scope, project=None, bridge=None, always_load_tools=False, library=None):
    # type: (str, Any, Any, bool, Any) -> Dict[str, Any]
    """Adds (or replaces) the ``qwen-companion-plugins`` entry of Qwen Code's
    ``mcpServers`` in one settings file and returns the library's outcome
    ``{"ok", "scope", "settings", "change", "created", ...}`` (with
    ``"approve"`` for the project scope: tell the user to run it once).
    ``scope`` is ``"user"`` (``$QWEN_HOME/settings.json``) or ``"project"``
    (``<project>/.qwen/settings.json``; ``project`` is then an absolute
    folder). ``bridge`` is the absolute path of the ``qc-mcp-bridge``
    executable the entry starts. Every other key and comment of the file
    stays; a file Qwen Code could not read raises
    :class:`~qwen_companion.InvalidJsonError` and is left untouched."""
    lib = _native.load(library)
    return json.loads(
        lib.call_string("qc_mcp_register", _mcp_options(scope, project, bridge, always_load_tools))
    )


def unregister_mcp(scope, project=None, bridge=None, always_load_tools=False, library=None):
    # type: (str, Any, Any, bool, Any) -> Dict[str, Any]
    """Removes the ``qwen-companion-plugins`` entry (``"change"`` is
    ``"removed"``, or ``"absent"`` when there was none); arguments as for
    :func:`register_mcp` (``bridge`` and ``always_load_tools`` are ignored)."""
    lib = _native.load(library)
    return json.loads(
        lib.call_string("qc_mcp_unregister", _mcp_options(scope, project, bridge, always_load_tools))
    )


def _text(value, name):
    # type: (Any, str) -> str
    return encode(value, name).decode("utf-8")
