"""Low-level access to the qwen-companion C library (ctypes).

This module knows the C ABI and nothing about editors:

- finding and loading the shared library, and checking its ABI version;
- the prototypes (``argtypes``/``restype``) of every ``qc_`` function;
- turning ``qc_status`` codes and owned error messages into
  :class:`CompanionError` subclasses;
- string helpers (owned strings are taken as ``c_void_p`` and freed with
  ``qc_string_free``; a ``c_char_p`` restype would lose the pointer);
- a registry that keeps ctypes callback objects alive until the library
  says it no longer needs them (the ``qc_free_fn`` finalizer).

It must stay importable by Sublime Text's plugin host (Python 3.8): no 3.9+
syntax or standard-library APIs here.
"""

import ctypes
import ctypes.util
import itertools
import logging
import os
import sys
import threading

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Type, Union  # noqa: F401 (type comments)

from . import platforms

#: The ABI version this binding was written for (``QC_ABI_VERSION``).
ABI_VERSION = 1

#: Environment variable naming the shared library to load.
LIBRARY_ENV = "QWEN_COMPANION_LIB"

logger = logging.getLogger("qwen_companion")

# --------------------------------------------------------------------------
# Status codes and log levels (values fixed by the C ABI).

QC_OK = 0
QC_NULL_PARAMETER = 1
QC_INVALID_UTF8 = 2
QC_INVALID_JSON = 3
QC_INVALID_ARGUMENT = 4
QC_INVALID_HANDLE = 5
QC_NOT_RUNNING = 6
QC_ALREADY_RUNNING = 7
QC_NOT_FOUND = 8
QC_IO = 9
QC_PANIC = 10
QC_INTERNAL = 11
QC_REFUSED = 12

LOG_ERROR = 1
LOG_WARN = 2
LOG_INFO = 3
LOG_DEBUG = 4
LOG_TRACE = 5

#: Library log level -> ``logging`` level.
PY_LOG_LEVELS = {
    LOG_ERROR: logging.ERROR,
    LOG_WARN: logging.WARNING,
    LOG_INFO: logging.INFO,
    LOG_DEBUG: logging.DEBUG,
    LOG_TRACE: 5,  # below DEBUG; logging has no TRACE
}

# --------------------------------------------------------------------------
# Errors


class CompanionError(Exception):
    """An error reported by the library (or detected by this binding).

    ``status`` is the ``qc_status`` code (an ``int``), ``status_name`` its C
    name (``"QC_NOT_FOUND"``...), ``message`` the library's message.
    """

    status = None  # type: Optional[int]
    status_name = "QC_UNKNOWN"

    def __init__(self, message, status=None):
        # type: (str, Optional[int]) -> None
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status
            self.status_name = _STATUS_NAMES.get(status, "QC_UNKNOWN")

    def __str__(self):
        # type: () -> str
        return "{}: {}".format(self.status_name, self.message)


class NullParameterError(CompanionError, ValueError):
    """``QC_NULL_PARAMETER``: a required argument was missing."""

    status = QC_NULL_PARAMETER
    status_name = "QC_NULL_PARAMETER"


class InvalidUtf8Error(CompanionError, ValueError):
    """``QC_INVALID_UTF8``: a string argument was not valid UTF-8."""

    status = QC_INVALID_UTF8
    status_name = "QC_INVALID_UTF8"


class InvalidJsonError(CompanionError, ValueError):
    """``QC_INVALID_JSON``: a JSON argument (config, context...) was rejected."""

    status = QC_INVALID_JSON
    status_name = "QC_INVALID_JSON"


class InvalidArgumentError(CompanionError, ValueError):
    """``QC_INVALID_ARGUMENT``: an argument was out of its allowed range."""

    status = QC_INVALID_ARGUMENT
    status_name = "QC_INVALID_ARGUMENT"


class InvalidHandleError(CompanionError):
    """``QC_INVALID_HANDLE``: the native object is unknown or already freed."""

    status = QC_INVALID_HANDLE
    status_name = "QC_INVALID_HANDLE"


class ClosedError(InvalidHandleError):
    """The Python object was closed; it cannot be used any more."""


class NotRunningError(CompanionError):
    """``QC_NOT_RUNNING``: the operation needs a started object."""

    status = QC_NOT_RUNNING
    status_name = "QC_NOT_RUNNING"


class AlreadyRunningError(CompanionError):
    """``QC_ALREADY_RUNNING``: ``start`` on an object that already runs."""

    status = QC_ALREADY_RUNNING
    status_name = "QC_ALREADY_RUNNING"


class NotFoundError(CompanionError, LookupError):
    """``QC_NOT_FOUND``: the named item (e.g. an open diff) does not exist."""

    status = QC_NOT_FOUND
    status_name = "QC_NOT_FOUND"


class IoError(CompanionError):
    """``QC_IO``: an operating-system I/O operation failed in the library."""

    status = QC_IO
    status_name = "QC_IO"


class PanicError(CompanionError):
    """``QC_PANIC``: a panic was caught inside the library."""

    status = QC_PANIC
    status_name = "QC_PANIC"


class InternalError(CompanionError):
    """``QC_INTERNAL``: an unexpected internal failure."""

    status = QC_INTERNAL
    status_name = "QC_INTERNAL"


class RefusedError(CompanionError):
    """``QC_REFUSED``: the call is not allowed here."""

    status = QC_REFUSED
    status_name = "QC_REFUSED"


class LibraryLoadError(OSError):
    """The shared library could not be found or loaded."""


class AbiMismatchError(LibraryLoadError):
    """The loaded library speaks another ABI version than this binding."""


_ERROR_CLASSES = {
    QC_NULL_PARAMETER: NullParameterError,
    QC_INVALID_UTF8: InvalidUtf8Error,
    QC_INVALID_JSON: InvalidJsonError,
    QC_INVALID_ARGUMENT: InvalidArgumentError,
    QC_INVALID_HANDLE: InvalidHandleError,
    QC_NOT_RUNNING: NotRunningError,
    QC_ALREADY_RUNNING: AlreadyRunningError,
    QC_NOT_FOUND: NotFoundError,
    QC_IO: IoError,
    QC_PANIC: PanicError,
    QC_INTERNAL: InternalError,
    QC_REFUSED: RefusedError,
}  # type: Dict[int, Type[CompanionError]]

_STATUS_NAMES = dict((code, cls.status_name) for code, cls in _ERROR_CLASSES.items())
_STATUS_NAMES[QC_OK] = "QC_OK"


def error_class(status):
    # type: (int) -> Type[CompanionError]
    """The :class:`CompanionError` subclass for ``status`` (the base for unknown codes)."""
    return _ERROR_CLASSES.get(status, CompanionError)


def make_error(status, message):
    # type: (int, str) -> CompanionError
    """Builds the exception for a failed call."""
    return error_class(status)(message, status)


# --------------------------------------------------------------------------
# ctypes types

c_status = ctypes.c_uint32
c_handle = ctypes.c_void_p  # opaque handles are never dereferenced
c_error_out = ctypes.POINTER(ctypes.c_void_p)  # char **error (owned message)
c_string_out = ctypes.POINTER(ctypes.c_void_p)  # char **out (owned string)

LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_char_p)
FREE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
# new_content is (pointer, length): it may contain NUL bytes, so not c_char_p.
OPEN_DIFF_FN = ctypes.CFUNCTYPE(
    ctypes.c_int32, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p
)
CLOSE_DIFF_FN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)
# qc_json_fn: one JSON document, borrowed for the call.
JSON_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p)
# qc_plugin_capability_fn: (user_data, request_id, request_json borrowed for the call).
CAPABILITY_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_char_p)

# Functions of newer libraries that the binding uses when present (a method
# needing one raises NotFoundError without it): name -> (restype, argtypes).
OPTIONAL_PROTOTYPES = {
    "qc_companion_connected_clients": (c_status, [c_handle, ctypes.POINTER(ctypes.c_uint32), c_error_out]),
    # health report and the open diffs with their sessions (issue 21)
    "qc_health_json": (c_status, [ctypes.c_char_p, c_handle, c_handle, c_handle, c_string_out, c_error_out]),
    "qc_companion_open_diffs_json": (c_status, [c_handle, c_string_out, c_error_out]),
    # log lines as pulled events, for pull-mode hosts (this binding's classes take
    # log callables; prototyped for hosts that poll, like the *_enable_events)
    "qc_companion_enable_log_events": (c_status, [c_handle, ctypes.c_uint32, c_error_out]),
    "qc_plugin_host_enable_log_events": (c_status, [c_handle, ctypes.c_uint32, c_error_out]),
    "qc_participant_enable_log_events": (c_status, [c_handle, ctypes.c_uint32, c_error_out]),
    # the discovery file of each CLI served, Qwen Code and Gemini CLI (issue 22)
    "qc_companion_discovery_files_json": (c_status, [c_handle, c_string_out, c_error_out]),
}

# name -> (restype, argtypes). Every fallible function ends with c_error_out.
PROTOTYPES = {
    "qc_version": (ctypes.c_char_p, []),  # static string: never freed
    "qc_abi_version": (ctypes.c_uint32, []),
    "qc_status_name": (ctypes.c_char_p, [c_status]),  # static string
    "qc_string_free": (None, [ctypes.c_void_p]),
    "qc_reply_set_text": (c_status, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, c_error_out]),
    # companion
    "qc_companion_new": (c_status, [ctypes.c_char_p, ctypes.POINTER(c_handle), c_error_out]),
    "qc_companion_free": (c_status, [c_handle]),
    "qc_companion_start": (c_status, [c_handle, c_error_out]),
    "qc_companion_stop": (c_status, [c_handle, c_error_out]),
    "qc_companion_port": (c_status, [c_handle, ctypes.POINTER(ctypes.c_uint16), c_error_out]),
    "qc_companion_connected_clients": (c_status, [c_handle, ctypes.POINTER(ctypes.c_uint32), c_error_out]),
    "qc_companion_lock_file_path": (c_status, [c_handle, c_string_out, c_error_out]),
    "qc_companion_terminal_env_json": (c_status, [c_handle, c_string_out, c_error_out]),
    "qc_companion_set_workspace_roots_json": (c_status, [c_handle, ctypes.c_char_p, c_error_out]),
    "qc_companion_file_opened": (c_status, [c_handle, ctypes.c_char_p, c_error_out]),
    "qc_companion_file_focused": (c_status, [c_handle, ctypes.c_char_p, c_error_out]),
    "qc_companion_file_closed": (c_status, [c_handle, ctypes.c_char_p, c_error_out]),
    "qc_companion_file_renamed": (c_status, [c_handle, ctypes.c_char_p, ctypes.c_char_p, c_error_out]),
    "qc_companion_set_cursor": (
        c_status,
        [c_handle, ctypes.c_char_p, ctypes.c_uint32, ctypes.c_uint32, c_error_out],
    ),
    "qc_companion_set_selection": (
        c_status,
        [c_handle, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t, c_error_out],
    ),
    "qc_companion_set_trusted": (c_status, [c_handle, ctypes.c_int32, c_error_out]),
    "qc_companion_set_context_json": (c_status, [c_handle, ctypes.c_char_p, c_error_out]),
    "qc_companion_context_json": (c_status, [c_handle, c_string_out, c_error_out]),
    "qc_companion_diff_accept": (
        c_status,
        [c_handle, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t, c_error_out],
    ),
    "qc_companion_diff_reject": (c_status, [c_handle, ctypes.c_char_p, c_error_out]),
    "qc_companion_diff_closed": (c_status, [c_handle, ctypes.c_char_p, c_error_out]),
    "qc_companion_set_log_callback": (
        c_status,
        [c_handle, LOG_FN, ctypes.c_void_p, FREE_FN, ctypes.c_uint32, c_error_out],
    ),
    "qc_companion_set_open_diff_callback": (
        c_status,
        [c_handle, OPEN_DIFF_FN, ctypes.c_void_p, FREE_FN, c_error_out],
    ),
    "qc_companion_set_close_diff_callback": (
        c_status,
        [c_handle, CLOSE_DIFF_FN, ctypes.c_void_p, FREE_FN, c_error_out],
    ),
    # companion, pull mode (prototyped for hosts that poll; Companion does not use it)
    "qc_companion_enable_events": (c_status, [c_handle, ctypes.POINTER(ctypes.c_int32), c_error_out]),
    "qc_companion_next_event": (c_status, [c_handle, c_string_out, c_error_out]),
    "qc_companion_respond": (
        c_status,
        [c_handle, ctypes.c_uint64, ctypes.c_int32, ctypes.c_char_p, ctypes.c_size_t, c_error_out],
    ),
    # participant (cross-session messaging; see sessions.py)
    "qc_participant_new": (c_status, [ctypes.c_char_p, ctypes.POINTER(c_handle), c_error_out]),
    "qc_participant_free": (c_status, [c_handle]),
    "qc_participant_close": (c_status, [c_handle, c_error_out]),
    "qc_participant_register": (c_status, [c_handle, ctypes.c_char_p, c_string_out, c_error_out]),
    "qc_participant_unregister": (c_status, [c_handle, ctypes.c_char_p, c_error_out]),
    "qc_participant_rotate_session_id": (
        c_status,
        [c_handle, ctypes.c_char_p, ctypes.c_char_p, c_string_out, c_error_out],
    ),
    "qc_participant_sessions_json": (c_status, [c_handle, c_string_out, c_error_out]),
    "qc_participant_child_env_json": (c_status, [c_handle, ctypes.c_char_p, c_string_out, c_error_out]),
    "qc_participant_list_json": (c_status, [c_handle, c_string_out, c_error_out]),
    "qc_participant_peers_json": (c_status, [c_handle, ctypes.c_char_p, c_string_out, c_error_out]),
    "qc_participant_resolve_json": (
        c_status,
        [c_handle, ctypes.c_char_p, ctypes.c_char_p, c_string_out, c_error_out],
    ),
    "qc_participant_send": (c_status, [c_handle, ctypes.c_char_p, c_string_out, c_error_out]),
    "qc_participant_send_to_parent": (c_status, [c_handle, ctypes.c_char_p, c_string_out, c_error_out]),
    "qc_participant_send_state_json": (c_status, [c_handle, ctypes.c_char_p, c_string_out, c_error_out]),
    "qc_participant_wait": (
        c_status,
        [c_handle, ctypes.c_char_p, ctypes.c_uint32, ctypes.c_int32, c_string_out, c_error_out],
    ),
    "qc_participant_held_json": (c_status, [c_handle, c_string_out, c_error_out]),
    "qc_participant_release": (c_status, [c_handle, ctypes.c_char_p, c_error_out]),
    "qc_participant_deny": (c_status, [c_handle, ctypes.c_char_p, c_error_out]),
    "qc_participant_ack": (c_status, [c_handle, ctypes.c_char_p, c_error_out]),
    "qc_participant_inbound_settings_json": (
        c_status,
        [c_handle, ctypes.c_char_p, c_string_out, c_error_out],
    ),
    "qc_participant_update_inbound": (c_status, [c_handle, ctypes.c_char_p, ctypes.c_char_p, c_error_out]),
    "qc_participant_ipc_path": (c_status, [c_handle, c_string_out, c_error_out]),
    "qc_participant_enable_events": (c_status, [c_handle, ctypes.POINTER(ctypes.c_int32), c_error_out]),
    "qc_participant_next_event": (c_status, [c_handle, c_string_out, c_error_out]),
    "qc_participant_set_log_callback": (
        c_status,
        [c_handle, LOG_FN, ctypes.c_void_p, FREE_FN, ctypes.c_uint32, c_error_out],
    ),
    "qc_participant_set_message_callback": (c_status, [c_handle, JSON_FN, ctypes.c_void_p, FREE_FN, c_error_out]),
    "qc_participant_set_receipt_callback": (c_status, [c_handle, JSON_FN, ctypes.c_void_p, FREE_FN, c_error_out]),
    "qc_participant_set_held_callback": (c_status, [c_handle, JSON_FN, ctypes.c_void_p, FREE_FN, c_error_out]),
    # plugin host (see plugins.py); `c_error_out` before the last is `char **error_json`
    "qc_plugin_host_new": (c_status, [ctypes.c_char_p, ctypes.POINTER(c_handle), c_error_out]),
    "qc_plugin_host_free": (c_status, [c_handle]),
    "qc_plugin_host_plugins_dir": (c_status, [c_handle, c_string_out, c_error_out]),
    "qc_plugin_host_reload": (c_status, [c_handle, c_error_out]),
    "qc_plugin_host_startup_finished": (c_status, [c_handle, c_string_out, c_error_out]),
    "qc_plugin_host_unload": (c_status, [c_handle, ctypes.c_char_p, c_error_out, c_error_out]),
    "qc_plugin_host_enable": (c_status, [c_handle, ctypes.c_char_p, c_error_out]),
    "qc_plugin_host_disable": (c_status, [c_handle, ctypes.c_char_p, c_error_out]),
    "qc_plugin_host_set_config_value": (
        c_status,
        [c_handle, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, c_error_out],
    ),
    "qc_plugin_host_install": (c_status, [c_handle, ctypes.c_char_p, c_string_out, c_error_out, c_error_out]),
    "qc_plugin_host_uninstall": (
        c_status,
        [c_handle, ctypes.c_char_p, ctypes.c_int32, c_string_out, c_error_out, c_error_out],
    ),
    "qc_plugin_host_list": (c_status, [c_handle, c_string_out, c_error_out, c_error_out]),
    "qc_plugin_host_call": (
        c_status,
        [
            c_handle, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
            c_string_out, c_error_out, c_error_out,
        ],
    ),
    "qc_plugin_host_call_async": (
        c_status,
        [
            c_handle, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
            JSON_FN, ctypes.c_void_p, FREE_FN, c_error_out,
        ],
    ),
    "qc_plugin_host_call_queued": (
        c_status,
        [
            c_handle, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
            ctypes.POINTER(ctypes.c_uint64), c_error_out,
        ],
    ),
    "qc_plugin_host_visible": (
        c_status,
        [c_handle, ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int32), c_error_out, c_error_out],
    ),
    "qc_plugin_host_options": (
        c_status,
        [c_handle, ctypes.c_char_p, ctypes.c_char_p, c_string_out, c_error_out, c_error_out],
    ),
    "qc_plugin_host_parse_document": (
        c_status,
        [c_handle, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t, c_string_out, c_error_out, c_error_out],
    ),
    "qc_plugin_host_set_event_callback": (c_status, [c_handle, JSON_FN, ctypes.c_void_p, FREE_FN, c_error_out]),
    "qc_plugin_host_set_log_callback": (
        c_status,
        [c_handle, LOG_FN, ctypes.c_void_p, FREE_FN, ctypes.c_uint32, c_error_out],
    ),
    "qc_plugin_host_set_capability_callback": (
        c_status,
        [c_handle, ctypes.c_char_p, CAPABILITY_FN, ctypes.c_void_p, FREE_FN, c_error_out],
    ),
    "qc_plugin_host_offer_capability": (c_status, [c_handle, ctypes.c_char_p, c_error_out]),
    "qc_plugin_host_respond": (
        c_status,
        [c_handle, ctypes.c_uint64, ctypes.c_char_p, ctypes.c_char_p, c_error_out],
    ),
    "qc_plugin_host_enable_events": (c_status, [c_handle, ctypes.POINTER(ctypes.c_int32), c_error_out]),
    "qc_plugin_host_next_event": (c_status, [c_handle, c_string_out, c_error_out]),
    "qc_plugin_host_stats": (c_status, [c_handle, ctypes.c_char_p, c_string_out, c_error_out]),
    "qc_plugin_host_mcp_start": (c_status, [c_handle, ctypes.c_char_p, c_error_out]),
    "qc_plugin_host_mcp_stop": (c_status, [c_handle, c_error_out]),
    "qc_plugin_host_mcp_info": (c_status, [c_handle, c_string_out, c_error_out]),
    "qc_plugin_host_views_start": (
        c_status,
        [c_handle, ctypes.c_char_p, c_string_out, c_error_out],
    ),
    "qc_plugin_host_views_stop": (c_status, [c_handle, c_error_out]),
    "qc_plugin_host_views_json": (c_status, [c_handle, c_string_out, c_error_out]),
    "qc_plugin_host_view_url": (
        c_status,
        [c_handle, ctypes.c_char_p, ctypes.c_char_p, c_string_out, c_error_out],
    ),
    "qc_plugin_host_set_color_scheme": (c_status, [c_handle, ctypes.c_char_p, c_error_out]),
    "qc_mcp_register": (c_status, [ctypes.c_char_p, c_string_out, c_error_out]),
    "qc_mcp_unregister": (c_status, [ctypes.c_char_p, c_string_out, c_error_out]),
}  # type: Dict[str, Tuple[Any, List[Any]]]


# --------------------------------------------------------------------------
# String helpers

PathLike = Union[str, "os.PathLike[str]"]


def encode(value, name="argument"):
    # type: (Any, str) -> bytes
    """A ``str`` (or path-like) as NUL-terminated UTF-8 for a ``const char *``.

    Raises :class:`InvalidArgumentError` for an embedded NUL (C would cut the
    string there) and ``TypeError`` for anything that is not text.
    """
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if isinstance(value, bytes):
        raise TypeError("{} must be str, not bytes".format(name))
    if not isinstance(value, str):
        raise TypeError("{} must be str, not {}".format(name, type(value).__name__))
    if "\0" in value:
        raise InvalidArgumentError("{} contains a NUL character".format(name), QC_INVALID_ARGUMENT)
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as e:  # lone surrogates
        raise InvalidUtf8Error("{} is not valid Unicode: {}".format(name, e), QC_INVALID_UTF8)


def encode_text(value, name="text"):
    # type: (Any, str) -> bytes
    """A ``str`` as UTF-8 for a (pointer, length) argument; NUL bytes are allowed."""
    if not isinstance(value, str):
        raise TypeError("{} must be str, not {}".format(name, type(value).__name__))
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidUtf8Error("{} is not valid Unicode: {}".format(name, e), QC_INVALID_UTF8)


def decode(data):
    # type: (Optional[bytes]) -> str
    """UTF-8 from the library (it only hands out valid UTF-8)."""
    if data is None:
        return ""
    return data.decode("utf-8", "replace")


# --------------------------------------------------------------------------
# Loading


def platform_library_name(os_name=None):
    # type: (Optional[str]) -> str
    """``libqwen_companion.so`` / ``libqwen_companion.dylib`` / ``qwen_companion.dll``
    for ``os_name`` (default ``sys.platform``); see :mod:`qwen_companion.platforms`."""
    return platforms.library_file_name(os_name)


def _package_dir():
    # type: () -> str
    return os.path.dirname(os.path.abspath(__file__))


def bundled_dir():
    # type: () -> str
    """``qwen_companion/_lib``: where a platform wheel puts the library and
    ``qc-mcp-bridge`` (absent in a source checkout)."""
    return os.path.join(_package_dir(), "_lib")


def _repo_candidates(name):
    # type: (str) -> List[str]
    """``target/release`` and ``target/debug`` of the repository this package
    sits in (a developer convenience), found by walking up to ``Cargo.toml``."""
    found = []  # type: List[str]
    here = _package_dir()
    for _ in range(6):
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
        if os.path.isfile(os.path.join(here, "Cargo.toml")) and os.path.isdir(
            os.path.join(here, "include")
        ):
            for profile in ("release", "debug"):
                found.append(os.path.join(here, "target", profile, name))
            break
    return found


def candidate_paths(path=None):
    # type: (Optional[PathLike]) -> List[Tuple[str, str, bool]]
    """The places :func:`load` tries, in order, as ``(what, path, explicit)``.

    An explicit candidate (argument or environment) that fails to load is an
    error; the others are skipped when absent.
    """
    name = platform_library_name()
    out = []  # type: List[Tuple[str, str, bool]]
    if path is not None:
        out.append(("argument", os.fspath(path), True))
        return out
    env = os.environ.get(LIBRARY_ENV)
    if env:
        out.append(("$" + LIBRARY_ENV, env, True))
        return out
    pkg = _package_dir()
    out.append(("bundled with the package", os.path.join(bundled_dir(), name), False))
    out.append(("package directory", os.path.join(pkg, name), False))
    out.append(("next to the package", os.path.join(os.path.dirname(pkg), name), False))
    out.append(("system loader", name, False))
    found = ctypes.util.find_library("qwen_companion")
    if found and found != name:
        out.append(("system loader (find_library)", found, False))
    for p in _repo_candidates(name):
        out.append(("repository build", p, False))
    return out


class Library(object):
    """A loaded and checked ``qwen_companion`` shared library.

    Attribute access gives the prototyped ctypes functions
    (``lib.qc_companion_start``). :meth:`call` runs a fallible function and
    raises the mapped :class:`CompanionError` on failure.
    """

    def __init__(self, cdll, path):
        # type: (ctypes.CDLL, str) -> None
        self._cdll = cdll
        self.path = path
        missing = []
        for fname, (restype, argtypes) in PROTOTYPES.items():
            try:
                fn = getattr(cdll, fname)
            except AttributeError:
                missing.append(fname)
                continue
            fn.restype = restype
            fn.argtypes = argtypes
            setattr(self, fname, fn)
        for fname, (restype, argtypes) in OPTIONAL_PROTOTYPES.items():
            fn = getattr(cdll, fname, None)
            if fn is not None:
                fn.restype = restype
                fn.argtypes = argtypes
                setattr(self, fname, fn)
        if "qc_abi_version" in missing:
            raise AbiMismatchError(
                "{} is not a qwen-companion library (no qc_abi_version)".format(path)
            )
        abi = int(self.qc_abi_version())
        if abi != ABI_VERSION:
            raise AbiMismatchError(
                "{} has ABI version {}, but this Python binding needs ABI version {}: "
                "use a library and binding from the same release".format(path, abi, ABI_VERSION)
            )
        if missing:
            raise AbiMismatchError(
                "{} (ABI {}) lacks functions this binding needs: {}; use a library and binding "
                "from the same release".format(path, abi, ", ".join(sorted(missing)))
            )
        self.version = decode(self.qc_version())
        self.callbacks = CallbackRegistry(self)

    def __repr__(self):
        # type: () -> str
        return "<qwen_companion.Library {} {!r}>".format(self.version, self.path)

    def status_name(self, status):
        # type: (int) -> str
        return decode(self.qc_status_name(status))

    def call(self, fname, *args):
        # type: (str, *Any) -> None
        """Calls the fallible ``fname(*args, &error)``; raises on a non-zero status."""
        err = ctypes.c_void_p()
        status = getattr(self, fname)(*(args + (ctypes.byref(err),)))
        message = self.take_string(err)
        if status != QC_OK:
            raise make_error(status, message or "{} failed".format(fname))

    def call_string(self, fname, *args):
        # type: (str, *Any) -> str
        """Calls ``fname(*args, &out, &error)`` and returns ``out`` (freed here)."""
        out = ctypes.c_void_p()
        self.call(fname, *(args + (ctypes.byref(out),)))
        return self.take_string(out)

    def take_string(self, ptr):
        # type: (ctypes.c_void_p) -> str
        """Copies an owned library string and frees it (NULL gives ``""``)."""
        if not ptr.value:
            return ""
        try:
            return decode(ctypes.string_at(ptr.value))
        finally:
            self.qc_string_free(ptr.value)
            ptr.value = None


_load_lock = threading.Lock()
_loaded = {}  # type: Dict[str, Library]


def _open(path):
    # type: (str) -> ctypes.CDLL
    if sys.platform == "win32" and os.path.isabs(path):
        return ctypes.CDLL(path, winmode=0)
    return ctypes.CDLL(path)


def load(path=None):
    # type: (Optional[PathLike]) -> Library
    """Finds, loads and checks the library (cached per resolved path).

    Order: ``path``, ``$QWEN_COMPANION_LIB``, the copy bundled in a platform
    wheel (``qwen_companion/_lib/``), the package directory and its parent,
    the platform name through the system loader, then (when this
    package sits inside the source repository) ``target/release`` and
    ``target/debug``. Raises :class:`LibraryLoadError` (or
    :class:`AbiMismatchError`) with every place tried.
    """
    tried = []  # type: List[str]
    with _load_lock:
        for what, candidate, explicit in candidate_paths(path):
            is_file_path = os.path.sep in candidate or (os.altsep and os.altsep in candidate)
            if is_file_path and not os.path.exists(candidate):
                if explicit:
                    raise LibraryLoadError(
                        "qwen-companion library not found at {} (from {})".format(candidate, what)
                    )
                tried.append("{} ({}): not found".format(candidate, what))
                continue
            key = os.path.realpath(candidate) if is_file_path else candidate
            if key in _loaded:
                return _loaded[key]
            try:
                cdll = _open(candidate)
            except OSError as e:
                if explicit:
                    raise LibraryLoadError(
                        "cannot load qwen-companion library {} (from {}): {}".format(candidate, what, e)
                    )
                tried.append("{} ({}): {}".format(candidate, what, e))
                continue
            lib = Library(cdll, candidate)  # AbiMismatchError propagates
            _loaded[key] = lib
            return lib
    raise LibraryLoadError(
        "cannot find the qwen-companion library {}; install the platform wheel "
        "(pip install qwen_companion-<version>-py3-none-<platform>.whl), or build it "
        "(cargo build --release in the repository), or set {} or pass its path. Tried:\n  {}".format(
            platform_library_name(), LIBRARY_ENV, "\n  ".join(tried)
        )
    )


#: Environment variable naming the ``qc-mcp-bridge`` executable.
BRIDGE_ENV = "QWEN_COMPANION_BRIDGE"


class BridgeNotFoundError(OSError):
    """No ``qc-mcp-bridge`` executable where :func:`bridge_path` looked."""


def bridge_path(library=None):
    # type: (Optional[PathLike]) -> str
    """The absolute path of the ``qc-mcp-bridge`` executable that goes with
    the library: ``$QWEN_COMPANION_BRIDGE``, else the bridge next to the
    library :func:`load` finds for ``library`` (in an installed wheel:
    ``qwen_companion/_lib/``). Raises :class:`BridgeNotFoundError` naming
    the place it looked when there is no executable file there."""
    name = platforms.bridge_file_name()
    env = os.environ.get(BRIDGE_ENV)
    if env:
        path, what = os.path.abspath(env), "$" + BRIDGE_ENV
    else:
        lib = load(library)
        lib_path = lib.path
        if not (os.path.sep in lib_path or (os.altsep and os.altsep in lib_path)):
            raise BridgeNotFoundError(
                "the qwen-companion library was loaded by name ({}) through the system loader, so "
                "the folder of {} is unknown: set {} or load the library by path".format(lib_path, name, BRIDGE_ENV)
            )
        path, what = os.path.join(os.path.dirname(os.path.abspath(lib_path)), name), "next to " + lib_path
    if not os.path.isfile(path):
        raise BridgeNotFoundError("{} not found at {} ({})".format(name, path, what))
    if sys.platform != "win32" and not os.access(path, os.X_OK):
        raise BridgeNotFoundError("{} ({}) is not executable (chmod +x it)".format(path, what))
    return path


# --------------------------------------------------------------------------
# Callback lifetime


class CallbackRegistry(object):
    """Keeps ctypes callback objects alive exactly as long as the library needs them.

    Each registration gets a fresh integer used as the callback's
    ``user_data``; the library calls the shared ``qc_free_fn`` thunk with it
    when it drops the callback (replaced, or its object freed), and only then
    is the entry released. The free thunk itself lives as long as the
    registry (i.e. the process): it may run on a library thread after the
    Python object that registered the callback is gone.
    """

    def __init__(self, lib):
        # type: (Library) -> None
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._entries = {}  # type: Dict[int, Any]
        self.free_thunk = FREE_FN(self._on_free)

    def add(self, keepalive):
        # type: (Any) -> int
        """Stores ``keepalive`` and returns the ``user_data`` value to pass."""
        with self._lock:
            key = next(self._ids)
            self._entries[key] = keepalive
        return key

    def discard(self, key):
        # type: (int) -> None
        """Drops an entry the library never took (registration failed)."""
        with self._lock:
            self._entries.pop(key, None)

    def __len__(self):
        # type: () -> int
        with self._lock:
            return len(self._entries)

    def _on_free(self, user_data):
        # type: (Optional[int]) -> None
        try:
            with self._lock:
                self._entries.pop(user_data or 0, None)
        except BaseException:  # never unwind into C
            pass


def run_guarded(what, fn, on_error):
    # type: (str, Callable[[], Any], Callable[[BaseException], Any]) -> Any
    """Runs ``fn`` for a C callback: an exception is logged with its traceback
    and handed to ``on_error`` (whose result is returned); nothing escapes."""
    try:
        return fn()
    except BaseException as e:  # noqa: B902 - must never unwind into C
        try:
            logger.error("exception in %s", what, exc_info=True)
        except BaseException:
            pass
        try:
            return on_error(e)
        except BaseException:
            return None


def describe_exception(e):
    # type: (BaseException) -> str
    text = str(e)
    return "{}: {}".format(type(e).__name__, text) if text else type(e).__name__


def set_reply_text(lib, reply, text):
    # type: (Library, Optional[int], str) -> None
    """Sets the reply of the diff callback running on this thread."""
    data = text.encode("utf-8", "replace")
    lib.call("qc_reply_set_text", reply, data, len(data))


def json_array_of_paths(paths, name):
    # type: (Sequence[Any], str) -> List[str]
    if isinstance(paths, (str, bytes)):
        raise TypeError("{} must be a sequence of paths, not a single string".format(name))
    out = []
    for p in paths:
        if isinstance(p, os.PathLike):
            p = os.fspath(p)
        if not isinstance(p, str):
            raise TypeError("{} must contain str paths, not {}".format(name, type(p).__name__))
        out.append(p)
    return out
