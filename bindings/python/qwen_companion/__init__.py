"""Python binding (ctypes) of qwen-companion, the native Qwen Code IDE companion.

    from qwen_companion import Companion

    with Companion(workspace_roots=["/home/me/project"], ide_name="My Editor",
                   open_diff=show_diff) as c:
        print(c.terminal_env())          # {"QWEN_CODE_IDE_SERVER_PORT": "...", ...}
        c.file_focused("/home/me/project/main.py")
        c.set_cursor(None, 3, 1)

Callables (``open_diff``, ``close_diff``, ``log``) run on a library thread,
never on the caller's (UI) thread; see :mod:`qwen_companion.companion`.

Cross-session messaging (join ``qwen sessions`` as a peer, send messages and
follow their receipts) is :class:`Participant`; see :mod:`qwen_companion.sessions`.
Running the desktop app's plugins (install, call their tools, answer their
capability requests) is :class:`PluginHost`; see :mod:`qwen_companion.plugins`.

Works on Python 3.8+ (Sublime Text's plugin host). The shared library is
found as described in :func:`load_library` (an installed platform wheel
carries it, and :func:`bridge_path` gives its ``qc-mcp-bridge``).
"""

from ._native import (
    ABI_VERSION,
    BRIDGE_ENV,
    LIBRARY_ENV,
    LOG_DEBUG,
    LOG_ERROR,
    LOG_INFO,
    LOG_TRACE,
    LOG_WARN,
    AbiMismatchError,
    AlreadyRunningError,
    BridgeNotFoundError,
    ClosedError,
    CompanionError,
    InternalError,
    InvalidArgumentError,
    InvalidHandleError,
    InvalidJsonError,
    InvalidUtf8Error,
    IoError,
    LibraryLoadError,
    NotFoundError,
    NotRunningError,
    NullParameterError,
    PanicError,
    RefusedError,
    bridge_path,
    error_class,
)
from ._native import load as load_library
from . import platforms
from .companion import Companion, RefuseDiff
from .health import health, report_lines as health_report_lines
from .plugins import Pending, PluginCallError, PluginHost, PluginInstallError, register_mcp, unregister_mcp
from .sessions import UNSET, Participant

__version__ = "0.1.0"


def library_version(library=None):
    """The version string of the loaded shared library (e.g. ``"0.1.0"``)."""
    return load_library(library).version


__all__ = [
    "platforms",
    "ABI_VERSION",
    "BRIDGE_ENV",
    "LIBRARY_ENV",
    "LOG_DEBUG",
    "LOG_ERROR",
    "LOG_INFO",
    "LOG_TRACE",
    "LOG_WARN",
    "AbiMismatchError",
    "AlreadyRunningError",
    "BridgeNotFoundError",
    "ClosedError",
    "Companion",
    "CompanionError",
    "InternalError",
    "InvalidArgumentError",
    "InvalidHandleError",
    "InvalidJsonError",
    "InvalidUtf8Error",
    "IoError",
    "LibraryLoadError",
    "NotFoundError",
    "NotRunningError",
    "NullParameterError",
    "PanicError",
    "Participant",
    "Pending",
    "PluginCallError",
    "PluginHost",
    "PluginInstallError",
    "RefuseDiff",
    "RefusedError",
    "UNSET",
    "bridge_path",
    "error_class",
    "health",
    "health_report_lines",
    "library_version",
    "load_library",
    "register_mcp",
    "unregister_mcp",
]
