"""The :class:`Companion`: a Qwen Code IDE companion for one editor window.

Threading
---------
Every method may be called from any thread. The callables given for
open-diff, close-diff and log run on the companion's own **library thread**
(named ``qc-cb``), one at a time, never on the thread that created the
companion. GUI toolkits must hop to their UI thread from there (Sublime Text:
``sublime.set_timeout``) and must not block that thread waiting for a thread
that may be calling :meth:`Companion.close` (``close`` waits for a running
callback to return, unless it is called from inside one).
"""

import atexit
import ctypes
import json
import logging
import threading
import weakref

from typing import Any, Callable, Dict, List, Optional, Sequence, Union  # noqa: F401 (type comments)

from . import _native
from ._native import (
    ClosedError,
    CompanionError,
    InvalidHandleError,
    LOG_ERROR,
    LOG_INFO,
    PY_LOG_LEVELS,
    describe_exception,
    encode,
    encode_text,
    run_guarded,
    set_reply_text,
)

OpenDiffCallable = Callable[[str, str], Any]
CloseDiffCallable = Callable[[str], Optional[str]]
LogCallable = Callable[[int, str], Any]

library_logger = logging.getLogger("qwen_companion.library")
logger = logging.getLogger("qwen_companion")


class RefuseDiff(Exception):
    """Raise inside an open-diff or close-diff callable to refuse the request.

    The message goes back to the CLI as the tool's error text. Unlike any
    other exception it is not logged as a bug.
    """


_live = weakref.WeakSet()  # type: weakref.WeakSet


@atexit.register
def _close_all_at_exit():
    # type: () -> None
    # Library threads must not call into an interpreter that is shutting down.
    for companion in list(_live):
        try:
            companion.close()
        except BaseException:
            pass


def _camel(name):
    # type: (str) -> str
    head, _, tail = name.partition("_")
    parts = tail.split("_") if tail else []
    return head + "".join(p[:1].upper() + p[1:] for p in parts)


class Companion(object):
    """An IDE companion: an MCP server on ``127.0.0.1`` at ``/mcp`` for the Qwen
    Code CLI, plus its lock file ``<lockDir>/<port>.lock``.

    ``with Companion(...) as c:`` closes it on exit. By default the companion
    starts listening at construction (``start=False`` to start it later with
    :meth:`start`; the callables are registered before it listens either way).

    Arguments (all optional) map to the library's JSON configuration:
    ``workspace_roots`` (absolute paths), ``ide_name``, ``ide_display_name``,
    ``ide_id``, ``lock_dir`` (default ``$QWEN_HOME/ide`` or ``~/.qwen/ide``),
    ``ppid`` (default: this process, which lives as long as the editor),
    ``trusted``, ``debounce_ms``, ``max_wait_ms``, ``max_body_bytes``,
    ``keep_alive_ms`` (SSE keep-alive interval, at most 30000).
    ``config`` is either a dict merged under those, or a JSON string passed
    to the library verbatim (then the other configuration arguments must be
    left out).

    Callables (run on the library thread, see the module docs):

    ``open_diff(path, new_content)``
        Show a diff of ``path`` (absolute) with the proposed ``new_content``.
        Return normally once it is shown (the CLI gets success); return
        ``False`` or raise :class:`RefuseDiff` to refuse. The decision is
        reported later with :meth:`diff_accept` / :meth:`diff_reject` /
        :meth:`diff_closed`. Without it, ``openDiff`` fails ("no diff view").
    ``close_diff(path)``
        The CLI closes the diff of ``path``: close the view and return the
        buffer's final text (or ``None``). Without it the CLI gets the
        proposed text.
    ``log(level, message)``
        Library log lines up to ``log_level`` (``LOG_ERROR`` .. ``LOG_TRACE``).
        Without it they go to the ``logging`` logger
        ``qwen_companion.library``.

    An exception escaping a callable never reaches the library: it is logged
    (``logging`` logger ``qwen_companion``, plus the ``log`` callable) and the
    CLI gets an error reply.

    ``library`` is the path of the shared library (see :func:`load_library`).
    """

    def __init__(
        self,
        workspace_roots=None,  # type: Optional[Sequence[Any]]
        ide_name=None,  # type: Optional[str]
        ide_display_name=None,  # type: Optional[str]
        ide_id=None,  # type: Optional[str]
        lock_dir=None,  # type: Optional[Any]
        ppid=None,  # type: Optional[int]
        trusted=None,  # type: Optional[bool]
        debounce_ms=None,  # type: Optional[int]
        max_wait_ms=None,  # type: Optional[int]
        max_body_bytes=None,  # type: Optional[int]
        keep_alive_ms=None,  # type: Optional[int]
        config=None,  # type: Optional[Union[str, Dict[str, Any]]]
        open_diff=None,  # type: Optional[OpenDiffCallable]
        close_diff=None,  # type: Optional[CloseDiffCallable]
        log=None,  # type: Optional[LogCallable]
        log_level=LOG_INFO,  # type: int
        start=True,  # type: bool
        library=None,  # type: Optional[Any]
    ):
        # type: (...) -> None
        self._handle = None  # type: Optional[int]
        self._lock = threading.RLock()
        self._lib = _native.load(library)
        self._log_fn = None  # type: Optional[LogCallable]
        options = {
            "workspace_roots": None
            if workspace_roots is None
            else _native.json_array_of_paths(workspace_roots, "workspace_roots"),
            "ide_name": ide_name,
            "ide_display_name": ide_display_name,
            "ide_id": ide_id,
            "lock_dir": None if lock_dir is None else _native.encode(lock_dir, "lock_dir").decode("utf-8"),
            "ppid": ppid,
            "trusted": trusted,
            "debounce_ms": debounce_ms,
            "max_wait_ms": max_wait_ms,
            "max_body_bytes": max_body_bytes,
            "keep_alive_ms": keep_alive_ms,
        }
        given = dict((_camel(k), v) for k, v in options.items() if v is not None)
        if isinstance(config, str):
            if given:
                raise TypeError("config given as a JSON string: pass no other configuration arguments")
            config_json = config
            try:
                parsed = json.loads(config)
            except ValueError:
                parsed = None
            settings = parsed if isinstance(parsed, dict) else {}
        else:
            settings = dict(config or {})
            settings.update(given)
            config_json = json.dumps(settings)
        self._roots = list(settings.get("workspaceRoots") or [])  # type: List[str]
        self._ide_name = settings.get("ideName")  # type: Optional[str]

        out = ctypes.c_void_p()
        self._lib.call("qc_companion_new", encode(config_json, "config"), ctypes.byref(out))
        self._handle = out.value
        _live.add(self)
        try:
            self.set_log_callback(log, log_level)
            if open_diff is not None:
                self.set_open_diff_callback(open_diff)
            if close_diff is not None:
                self.set_close_diff_callback(close_diff)
            if start:
                self.start()
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------
    # lifetime

    def __enter__(self):
        # type: () -> Companion
        return self

    def __exit__(self, *exc):
        # type: (*Any) -> None
        self.close()

    def __del__(self):
        # type: () -> None
        try:
            self.close()
        except BaseException:
            pass

    def __repr__(self):
        # type: () -> str
        if self._handle is None:
            return "<qwen_companion.Companion closed>"
        try:
            return "<qwen_companion.Companion port={}>".format(self.port)
        except CompanionError:
            return "<qwen_companion.Companion not running>"

    @property
    def closed(self):
        # type: () -> bool
        """True once :meth:`close` was called."""
        return self._handle is None

    def close(self):
        # type: () -> None
        """Stops the server (the lock file is removed) and frees the companion.

        Safe to call more than once, from any thread, and from inside one of
        this companion's callbacks. Outside a callback it waits for a
        running callback to return. Any later call raises :class:`ClosedError`.
        """
        with self._lock:
            handle, self._handle = self._handle, None
        if handle is None:
            return
        _live.discard(self)
        status = self._lib.qc_companion_free(handle)
        if status not in (_native.QC_OK, _native.QC_INVALID_HANDLE):
            raise _native.make_error(status, "qc_companion_free failed")

    def _h(self):
        # type: () -> int
        handle = self._handle
        if handle is None:
            raise ClosedError("the companion is closed", _native.QC_INVALID_HANDLE)
        return handle

    def _call(self, fname, *args):
        # type: (str, *Any) -> None
        try:
            self._lib.call(fname, self._h(), *args)
        except InvalidHandleError:
            if self._handle is None:  # closed by another thread meanwhile
                raise ClosedError("the companion is closed", _native.QC_INVALID_HANDLE)
            raise

    def _call_string(self, fname):
        # type: (str) -> str
        try:
            return self._lib.call_string(fname, self._h())
        except InvalidHandleError:
            if self._handle is None:
                raise ClosedError("the companion is closed", _native.QC_INVALID_HANDLE)
            raise

    # ------------------------------------------------------------------
    # server

    def start(self):
        # type: () -> None
        """Listens on a free port of 127.0.0.1 and writes the lock file.

        :class:`AlreadyRunningError` when running; may be called again after
        :meth:`stop`."""
        self._call("qc_companion_start")

    def stop(self):
        # type: () -> None
        """Closes every client session and removes the lock file
        (:class:`NotRunningError` when not running)."""
        self._call("qc_companion_stop")

    @property
    def running(self):
        # type: () -> bool
        """True while the server listens."""
        try:
            self.port
        except _native.NotRunningError:
            return False
        return True

    @property
    def port(self):
        # type: () -> int
        """The listening port (:class:`NotRunningError` when stopped)."""
        out = ctypes.c_uint16()
        self._call("qc_companion_port", ctypes.byref(out))
        return int(out.value)

    @property
    def lock_file(self):
        # type: () -> str
        """Path of the lock file (:class:`NotRunningError` when stopped)."""
        return self._call_string("qc_companion_lock_file_path")

    def terminal_env(self):
        # type: () -> Dict[str, str]
        """Environment variables for terminals that run ``qwen``, e.g.
        ``{"QWEN_CODE_IDE_SERVER_PORT": "41234", "QWEN_CODE_IDE_WORKSPACE_PATH": "/a"}``."""
        return json.loads(self._call_string("qc_companion_terminal_env_json"))

    @property
    def ide_name(self):
        # type: () -> Optional[str]
        """The configured IDE name (``None`` = the library's default)."""
        return self._ide_name

    @property
    def workspace_roots(self):
        # type: () -> List[str]
        """The workspace roots (absolute paths); assign to replace them."""
        return list(self._roots)

    @workspace_roots.setter
    def workspace_roots(self, roots):
        # type: (Sequence[Any]) -> None
        self.set_workspace_roots(roots)

    def set_workspace_roots(self, roots):
        # type: (Sequence[Any]) -> None
        """Replaces the workspace roots; the lock file is rewritten when running."""
        paths = _native.json_array_of_paths(roots, "roots")
        for p in paths:
            encode(p, "workspace root")
        self._call("qc_companion_set_workspace_roots_json", encode(json.dumps(paths), "roots"))
        self._roots = paths

    # ------------------------------------------------------------------
    # editor events (non-blocking; clients get a debounced ide/contextUpdate)

    def file_opened(self, path):
        # type: (Any) -> None
        """The editor opened ``path`` (only real files on disk are sent)."""
        self._call("qc_companion_file_opened", encode(path, "path"))

    def file_focused(self, path):
        # type: (Any) -> None
        """``path`` got the focus: it becomes the active file."""
        self._call("qc_companion_file_focused", encode(path, "path"))

    def file_closed(self, path):
        # type: (Any) -> None
        """The editor closed ``path``."""
        self._call("qc_companion_file_closed", encode(path, "path"))

    def file_renamed(self, old_path, new_path):
        # type: (Any, Any) -> None
        """``old_path`` was renamed (or saved as) ``new_path``."""
        self._call("qc_companion_file_renamed", encode(old_path, "old_path"), encode(new_path, "new_path"))

    def set_cursor(self, path, line, character):
        # type: (Optional[Any], int, int) -> None
        """Cursor of ``path`` (``None`` = the active file), 1-based ``line`` and
        ``character``. Another file than the active one gets the focus.
        :class:`InvalidArgumentError` for 0, :class:`NotFoundError` for
        ``path=None`` with no active file."""
        cpath = None if path is None else encode(path, "path")
        self._call("qc_companion_set_cursor", cpath, _u32(line, "line"), _u32(character, "character"))

    def set_selection(self, path, text):
        # type: (Optional[Any], Optional[str]) -> None
        """Selected text of ``path`` (``None`` = the active file); ``None`` or
        ``""`` clears it. Long text is truncated by the library."""
        cpath = None if path is None else encode(path, "path")
        if text is None:
            self._call("qc_companion_set_selection", cpath, None, 0)
        else:
            data = encode_text(text, "text")
            self._call("qc_companion_set_selection", cpath, data, len(data))

    def set_trusted(self, trusted):
        # type: (bool) -> None
        """Whether the workspace is trusted (``isTrusted``)."""
        self._call("qc_companion_set_trusted", 1 if trusted else 0)

    def set_context(self, context):
        # type: (Union[str, Dict[str, Any]]) -> None
        """Replaces the whole editor state with an ``IdeContext`` (dict or JSON):
        ``{"workspaceState": {"openFiles": [...], "isTrusted": true}}``."""
        data = context if isinstance(context, str) else json.dumps(context)
        self._call("qc_companion_set_context_json", encode(data, "context"))

    def context(self):
        # type: () -> Dict[str, Any]
        """The normalised ``IdeContext`` as clients receive it."""
        return json.loads(self._call_string("qc_companion_context_json"))

    # ------------------------------------------------------------------
    # diffs

    def diff_accept(self, path, content=None):
        # type: (Any, Optional[str]) -> None
        """The user accepted the diff of ``path``: clients get
        ``ide/diffAccepted`` with ``content`` (the buffer as the user may have
        edited it; ``None`` = the proposed text). :class:`NotFoundError` when
        no diff is open for ``path``."""
        if content is None:
            self._call("qc_companion_diff_accept", encode(path, "path"), None, 0)
        else:
            data = encode_text(content, "content")
            self._call("qc_companion_diff_accept", encode(path, "path"), data, len(data))

    def diff_reject(self, path):
        # type: (Any) -> None
        """The user rejected the diff of ``path`` (``ide/diffRejected``)."""
        self._call("qc_companion_diff_reject", encode(path, "path"))

    def diff_closed(self, path):
        # type: (Any) -> None
        """The user closed the diff view of ``path`` without deciding
        (``ide/diffClosed``; the CLI treats it as a rejection)."""
        self._call("qc_companion_diff_closed", encode(path, "path"))

    # ------------------------------------------------------------------
    # callables

    def _report_callback_error(self, what, e):
        # type: (str, BaseException) -> None
        log_fn = self._log_fn
        if log_fn is None:
            return  # already logged through `logging` by run_guarded
        try:
            log_fn(LOG_ERROR, "exception in {}: {}".format(what, describe_exception(e)))
        except BaseException:
            logger.error("exception in the log callable", exc_info=True)

    def _register(self, setter, thunk, *extra):
        # type: (str, Any, *Any) -> None
        lib = self._lib
        key = lib.callbacks.add(thunk)
        try:
            self._call(setter, thunk, key, lib.callbacks.free_thunk, *extra)
        except BaseException:
            lib.callbacks.discard(key)
            raise

    def _unregister(self, setter, fn_type):
        # type: (str, Any) -> None
        # fn_type() is a NULL function pointer (ctypes refuses None here).
        self._call(setter, fn_type(), None, _native.FREE_FN())

    def set_open_diff_callback(self, fn):
        # type: (Optional[OpenDiffCallable]) -> None
        """Sets (``None`` removes) the open-diff callable ``fn(path, new_content)``
        (runs on the library thread)."""
        if fn is None:
            self._unregister("qc_companion_set_open_diff_callback", _native.OPEN_DIFF_FN)
            return
        lib = self._lib
        me = weakref.ref(self)

        def thunk(_user_data, path, content, length, reply):
            # type: (Any, Optional[bytes], Optional[int], int, Optional[int]) -> int
            def run():
                # type: () -> int
                text = ctypes.string_at(content, length).decode("utf-8") if length else ""
                try:
                    result = fn(_native.decode(path), text)
                except RefuseDiff as e:
                    set_reply_text(lib, reply, str(e) or "the IDE refused to open the diff")
                    return 1
                if result is False:
                    set_reply_text(lib, reply, "the IDE refused to open the diff")
                    return 1
                return 0

            def failed(e):
                # type: (BaseException) -> int
                owner = me()
                if owner is not None:
                    owner._report_callback_error("the open-diff callable", e)
                set_reply_text(lib, reply, "the IDE failed to open the diff: " + describe_exception(e))
                return 1

            rc = run_guarded("the open-diff callable", run, failed)
            return rc if isinstance(rc, int) else 1

        self._register("qc_companion_set_open_diff_callback", _native.OPEN_DIFF_FN(thunk))

    def set_close_diff_callback(self, fn):
        # type: (Optional[CloseDiffCallable]) -> None
        """Sets (``None`` removes) the close-diff callable ``fn(path) -> str | None``
        (runs on the library thread)."""
        if fn is None:
            self._unregister("qc_companion_set_close_diff_callback", _native.CLOSE_DIFF_FN)
            return
        lib = self._lib
        me = weakref.ref(self)

        def thunk(_user_data, path, reply):
            # type: (Any, Optional[bytes], Optional[int]) -> int
            def run():
                # type: () -> int
                try:
                    result = fn(_native.decode(path))
                except RefuseDiff as e:
                    set_reply_text(lib, reply, str(e) or "the IDE could not close the diff")
                    return 1
                if result is not None:
                    if not isinstance(result, str):
                        raise TypeError(
                            "the close-diff callable must return str or None, not "
                            + type(result).__name__
                        )
                    set_reply_text(lib, reply, result)
                return 0

            def failed(e):
                # type: (BaseException) -> int
                owner = me()
                if owner is not None:
                    owner._report_callback_error("the close-diff callable", e)
                set_reply_text(lib, reply, "the IDE failed to close the diff: " + describe_exception(e))
                return 1

            rc = run_guarded("the close-diff callable", run, failed)
            return rc if isinstance(rc, int) else 1

        self._register("qc_companion_set_close_diff_callback", _native.CLOSE_DIFF_FN(thunk))

    def set_log_callback(self, fn, level=LOG_INFO):
        # type: (Optional[LogCallable], int) -> None
        """Sets the log callable ``fn(level, message)`` for library lines up to
        ``level``; ``None`` forwards them to the ``logging`` logger
        ``qwen_companion.library``. Runs on the library thread."""
        if level not in PY_LOG_LEVELS:
            raise _native.InvalidArgumentError(
                "level must be LOG_ERROR (1) .. LOG_TRACE (5), got {!r}".format(level),
                _native.QC_INVALID_ARGUMENT,
            )
        if fn is None:
            def sink(lvl, message):
                # type: (int, str) -> None
                library_logger.log(PY_LOG_LEVELS.get(lvl, logging.INFO), "%s", message)
        else:
            sink = fn

        def thunk(_user_data, lvl, message):
            # type: (Any, int, Optional[bytes]) -> None
            def failed(e):
                # type: (BaseException) -> None
                return None  # logged by run_guarded; never re-enter the log callable

            run_guarded("the log callable", lambda: sink(int(lvl), _native.decode(message)), failed)

        self._register("qc_companion_set_log_callback", _native.LOG_FN(thunk), level)
        self._log_fn = fn


def _u32(value, name):
    # type: (Any, str) -> int
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("{} must be int, not {}".format(name, type(value).__name__))
    if not 0 <= value <= 0xFFFFFFFF:
        raise _native.InvalidArgumentError(
            "{} {} is out of range".format(name, value), _native.QC_INVALID_ARGUMENT
        )
    return value
