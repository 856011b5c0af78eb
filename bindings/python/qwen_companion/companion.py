"""The :class:`Companion`: an IDE companion for one editor window, for Qwen
Code, Gemini CLI or both (``cli``).

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

import ctypes
import json

from typing import Any, Callable, Dict, List, Optional, Sequence, Union  # noqa: F401 (type comments)

from . import _native
from ._handle import LogCallable, NativeHandle, camel, closed_at_exit
from ._handle import config_json as _config_json
from ._handle import library_logger, logger  # noqa: F401 (still this module's names)
from ._native import (
    CompanionError,
    LOG_INFO,
    describe_exception,
    encode,
    encode_text,
    run_guarded,
    set_reply_text,
)

OpenDiffCallable = Callable[[str, str], Any]
CloseDiffCallable = Callable[[str], Optional[str]]


class RefuseDiff(Exception):
    """Raise inside an open-diff or close-diff callable to refuse the request.

    The message goes back to the CLI as the tool's error text. Unlike any
    other exception it is not logged as a bug.
    """


class Companion(NativeHandle):
    """An IDE companion: an MCP server on ``127.0.0.1`` at ``/mcp`` for the Qwen
    Code CLI, Gemini CLI or both (``cli``), plus the discovery file of each CLI
    served: Qwen Code's lock file ``<lockDir>/<port>.lock``, Gemini CLI's
    ``<geminiDir>/gemini-ide-server-<pid>-<port>.json``. Both CLIs share the
    one server (one port, one token).

    ``with Companion(...) as c:`` closes it on exit. By default the companion
    starts listening at construction (``start=False`` to start it later with
    :meth:`start`; the callables are registered before it listens either way).

    Arguments (all optional) map to the library's JSON configuration:
    ``workspace_roots`` (absolute paths), ``ide_name``, ``ide_display_name``,
    ``ide_id``, ``lock_dir`` (default ``$QWEN_HOME/ide`` or ``~/.qwen/ide``),
    ``ppid`` (default: this process, which lives as long as the editor),
    ``trusted``, ``debounce_ms``, ``max_wait_ms``, ``max_body_bytes``,
    ``keep_alive_ms`` (SSE keep-alive interval, at most 30000),
    ``request_timeout_ms`` (how long ``openDiff`` / ``closeDiff`` wait for
    the callables before the CLI gets an error; 100..600000, default 30000),
    ``cli`` (the CLIs served: ``"qwen"``, the default, ``"gemini"`` or
    ``"both"``; another value is an :class:`InvalidArgumentError` naming it),
    ``gemini_dir`` (the folder of Gemini CLI's discovery file; default
    ``gemini/ide`` in the temporary folder Node.js's ``os.tmpdir()`` gives,
    where Gemini CLI looks).
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

    _NAME = "Companion"
    _WHAT = "the companion"
    _NEW_FN = "qc_companion_new"
    _FREE_FN = "qc_companion_free"
    _LOG_SETTER = "qc_companion_set_log_callback"
    _LIVE = closed_at_exit()

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
        request_timeout_ms=None,  # type: Optional[int]
        cli=None,  # type: Optional[str]
        gemini_dir=None,  # type: Optional[Any]
        config=None,  # type: Optional[Union[str, Dict[str, Any]]]
        open_diff=None,  # type: Optional[OpenDiffCallable]
        close_diff=None,  # type: Optional[CloseDiffCallable]
        log=None,  # type: Optional[LogCallable]
        log_level=LOG_INFO,  # type: int
        start=True,  # type: bool
        library=None,  # type: Optional[Any]
    ):
        # type: (...) -> None
        self._init_handle(library)
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
            "request_timeout_ms": request_timeout_ms,
            "cli": cli,
            "gemini_dir": None if gemini_dir is None else _native.encode(gemini_dir, "gemini_dir").decode("utf-8"),
        }
        given = dict((camel(k), v) for k, v in options.items() if v is not None)
        config_json, settings = _config_json(config, given)
        self._roots = list(settings.get("workspaceRoots") or [])  # type: List[str]
        self._ide_name = settings.get("ideName")  # type: Optional[str]

        def setup():
            # type: () -> None
            self.set_log_callback(log, log_level)
            if open_diff is not None:
                self.set_open_diff_callback(open_diff)
            if close_diff is not None:
                self.set_close_diff_callback(close_diff)
            if start:
                self.start()

        self._create(config_json, setup)

    # ------------------------------------------------------------------
    # lifetime

    def _repr_state(self):
        # type: () -> str
        try:
            return "port={}".format(self.port)
        except CompanionError:
            return "not running"

    def close(self):
        # type: () -> None
        """Stops the server (the discovery files are removed) and frees the companion.

        Safe to call more than once, from any thread, and from inside one of
        this companion's callbacks. Outside a callback it waits for a
        running callback to return. Any later call raises :class:`ClosedError`.
        """
        self._free()

    # ------------------------------------------------------------------
    # server

    def start(self):
        # type: () -> None
        """Listens on a free port of 127.0.0.1 and writes the discovery file of
        each CLI served (all or none).

        :class:`AlreadyRunningError` when running; may be called again after
        :meth:`stop`."""
        self._call("qc_companion_start")

    def stop(self):
        # type: () -> None
        """Closes every client session and removes the discovery files
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

    def connected_clients(self):
        # type: () -> int
        """How many Qwen Code CLIs are connected now (MCP sessions with an
        open notification stream; 0 when stopped). Raises
        :class:`~qwen_companion.NotFoundError` with a library too old to
        count them (``qc_companion_connected_clients`` missing)."""
        if not hasattr(self._lib, "qc_companion_connected_clients"):
            raise _native.NotFoundError(
                "this library does not count connected clients (no qc_companion_connected_clients)",
                _native.QC_NOT_FOUND,
            )
        out = ctypes.c_uint32()
        self._call("qc_companion_connected_clients", ctypes.byref(out))
        return int(out.value)

    @property
    def lock_file(self):
        # type: () -> str
        """Path of the lock file: Qwen Code's, or Gemini CLI's discovery file
        when only Gemini CLI is served (:class:`NotRunningError` when stopped;
        :meth:`discovery_files` gives each)."""
        return self._call_string("qc_companion_lock_file_path")

    def discovery_files(self):
        # type: () -> Dict[str, Optional[str]]
        """The discovery file of each CLI, ``None`` for a CLI not served:
        ``{"qwen": "/home/u/.qwen/ide/41234.lock", "gemini":
        "/tmp/gemini/ide/gemini-ide-server-123-41234.json"}``.
        :class:`NotRunningError` when stopped. Raises
        :class:`~qwen_companion.NotFoundError` with a library too old to serve
        Gemini CLI (``qc_companion_discovery_files_json`` missing)."""
        if not hasattr(self._lib, "qc_companion_discovery_files_json"):
            raise _native.NotFoundError(
                "this library ({}) cannot list discovery files and serves Qwen Code only "
                "(no qc_companion_discovery_files_json): update the package".format(self._lib.version),
                _native.QC_NOT_FOUND,
            )
        return self._call_json("qc_companion_discovery_files_json")

    def terminal_env(self):
        # type: () -> Dict[str, str]
        """Environment variables for terminals that run a CLI: those of every
        CLI served, e.g. ``{"QWEN_CODE_IDE_SERVER_PORT": "41234",
        "QWEN_CODE_IDE_WORKSPACE_PATH": "/a"}``, with Gemini CLI also
        ``GEMINI_CLI_IDE_SERVER_PORT``, ``GEMINI_CLI_IDE_WORKSPACE_PATH`` and
        ``GEMINI_CLI_IDE_PID``. Put all of them into every terminal."""
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
        """Replaces the workspace roots; the discovery files are rewritten when running."""
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

    def open_diffs(self):
        # type: () -> Dict[str, Any]
        """The diffs waiting for a decision and which CLI proposed each:
        ``{"clients": 2, "diffs": [{"filePath": "/abs/x.py", "session":
        {"id": "<mcp session id>", "label": "CLI #2"}}]}``. Sessions are
        labelled by connection order (``CLI #1``, ``CLI #2``...): Qwen Code
        sends no name of its own. Show a label only when ``clients`` > 1.
        May be called from inside the open-diff callable (the diff is recorded
        then). Raises :class:`~qwen_companion.NotFoundError` with a library
        too old to tell (``qc_companion_open_diffs_json`` missing)."""
        if not hasattr(self._lib, "qc_companion_open_diffs_json"):
            raise _native.NotFoundError(
                "this library does not list open diffs (no qc_companion_open_diffs_json)",
                _native.QC_NOT_FOUND,
            )
        return self._call_json("qc_companion_open_diffs_json")

    # ------------------------------------------------------------------
    # callables

    def _set_diff_callback(self, setter, fn_type, fn, what, refused, failure, decide):
        # type: (str, Any, Optional[Any], str, str, str, Callable[..., int]) -> None
        """What the open-diff and close-diff callables share. The thunk's last
        argument is the reply; ``decide(reply, *the others)`` runs ``fn`` on
        the library thread and returns 0 (done) or 1 (refused).
        :class:`RefuseDiff` answers 1 with its message (or ``refused``); any
        other exception answers 1 with ``failure`` plus the exception and goes
        to the log callable. Nothing escapes into the library."""
        lib = self._lib

        def make_thunk():
            # type: () -> Callable[..., int]
            report = self._error_reporter(what)

            def thunk(_user_data, *args):
                # type: (Any, *Any) -> int
                reply = args[-1]

                def run():
                    # type: () -> int
                    try:
                        return decide(reply, *args[:-1])
                    except RefuseDiff as e:
                        set_reply_text(lib, reply, str(e) or refused)
                        return 1

                def failed(e):
                    # type: (BaseException) -> int
                    report(e)
                    set_reply_text(lib, reply, failure + describe_exception(e))
                    return 1

                rc = run_guarded(what, run, failed)
                return rc if isinstance(rc, int) else 1

            return thunk

        self._set_callback(setter, fn_type, fn, make_thunk)

    def set_open_diff_callback(self, fn):
        # type: (Optional[OpenDiffCallable]) -> None
        """Sets (``None`` removes) the open-diff callable ``fn(path, new_content)``
        (runs on the library thread)."""
        lib = self._lib
        refused = "the IDE refused to open the diff"

        def decide(reply, path, content, length):
            # type: (Optional[int], Optional[bytes], Optional[int], int) -> int
            text = ctypes.string_at(content, length).decode("utf-8") if length else ""
            if fn(_native.decode(path), text) is False:
                set_reply_text(lib, reply, refused)
                return 1
            return 0

        self._set_diff_callback(
            "qc_companion_set_open_diff_callback",
            _native.OPEN_DIFF_FN,
            fn,
            "the open-diff callable",
            refused,
            "the IDE failed to open the diff: ",
            decide,
        )

    def set_close_diff_callback(self, fn):
        # type: (Optional[CloseDiffCallable]) -> None
        """Sets (``None`` removes) the close-diff callable ``fn(path) -> str | None``
        (runs on the library thread)."""
        lib = self._lib

        def decide(reply, path):
            # type: (Optional[int], Optional[bytes]) -> int
            result = fn(_native.decode(path))
            if result is not None:
                if not isinstance(result, str):
                    raise TypeError(
                        "the close-diff callable must return str or None, not " + type(result).__name__
                    )
                set_reply_text(lib, reply, result)
            return 0

        self._set_diff_callback(
            "qc_companion_set_close_diff_callback",
            _native.CLOSE_DIFF_FN,
            fn,
            "the close-diff callable",
            "the IDE could not close the diff",
            "the IDE failed to close the diff: ",
            decide,
        )


def _u32(value, name):
    # type: (Any, str) -> int
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("{} must be int, not {}".format(name, type(value).__name__))
    if not 0 <= value <= 0xFFFFFFFF:
        raise _native.InvalidArgumentError(
            "{} {} is out of range".format(name, value), _native.QC_INVALID_ARGUMENT
        )
    return value
