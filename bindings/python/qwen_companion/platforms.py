"""What differs between Linux, macOS and Windows for a host of the library.

One function for each question, each taking the OS name explicitly
(``sys.platform`` values: ``"linux"``, ``"darwin"``, ``"win32"``) so that
every platform's answer can be tested on any machine:

- :func:`library_file_name` and :func:`bridge_file_name`: the file names of
  the shared library and of the ``qc-mcp-bridge`` executable;
- :func:`shell_for`, :func:`env_lines`: "set these in your shell" lines in
  the syntax of POSIX shells (sh/bash/zsh), fish, PowerShell and cmd;
- :func:`event_wait_method`, :func:`wait_event_handle`: waiting on the
  pull-mode event handle of ``*_enable_events`` (a file descriptor on Linux
  and macOS, an event ``HANDLE`` on Windows).

Works on Python 3.8+.
"""

import ctypes
import os
import re
import sys

from typing import Any, Dict, List, Mapping, Optional  # noqa: F401 (type comments)

#: The shells :func:`env_lines` writes for.
SHELLS = ("posix", "fish", "powershell", "cmd")

_NAME = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*\Z")


def _os(os_name):
    # type: (Optional[str]) -> str
    return sys.platform if os_name is None else os_name


def is_windows(os_name=None):
    # type: (Optional[str]) -> bool
    """``True`` for ``"win32"`` (and ``"cygwin"``, which loads Windows DLLs)."""
    return _os(os_name) in ("win32", "cygwin")


def library_file_name(os_name=None):
    # type: (Optional[str]) -> str
    """``libqwen_companion.so`` (Linux and other Unix), ``libqwen_companion.dylib``
    (macOS), ``qwen_companion.dll`` (Windows, msvc and gnu builds alike)."""
    name = _os(os_name)
    if is_windows(name):
        return "qwen_companion.dll"
    if name == "darwin":
        return "libqwen_companion.dylib"
    return "libqwen_companion.so"


def bridge_file_name(os_name=None):
    # type: (Optional[str]) -> str
    """``qc-mcp-bridge``, or ``qc-mcp-bridge.exe`` on Windows."""
    return "qc-mcp-bridge.exe" if is_windows(os_name) else "qc-mcp-bridge"


# --------------------------------------------------------------------------
# shell lines


def shell_for(setting="auto", os_name=None, environ=None):
    # type: (Optional[str], Optional[str], Optional[Mapping[str, str]]) -> str
    """The shell to write lines for: ``setting`` when it names one of
    :data:`SHELLS`; for ``"auto"`` (or empty), PowerShell on Windows (the
    default shell of Windows Terminal and of most editors' terminals there),
    else fish or PowerShell when ``$SHELL`` is one of them, else ``"posix"``.
    Raises ``ValueError`` for any other setting."""
    choice = (setting or "auto").strip().lower()
    if choice in SHELLS:
        return choice
    if choice != "auto":
        raise ValueError(
            "unknown terminal shell {!r}: use one of auto, {}".format(setting, ", ".join(SHELLS))
        )
    if is_windows(os_name):
        return "powershell"
    env = os.environ if environ is None else environ
    base = os.path.basename(env.get("SHELL") or "")
    if base == "fish":
        return "fish"
    if base in ("pwsh", "powershell"):
        return "powershell"
    return "posix"


def _posix(value):
    # type: (str) -> str
    return "'" + value.replace("'", "'\\''") + "'"


def _fish(value):
    # type: (str) -> str
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


# PowerShell ends a single-quoted string at any of these (U+0027 and the
# typographic single quotes); doubling one makes it literal.
_PS_QUOTES = "'\u2018\u2019\u201a\u201b"


def _powershell(value):
    # type: (str) -> str
    return "'" + "".join(c + c if c in _PS_QUOTES else c for c in value) + "'"


def _cmd(key, value):
    # type: (str, str) -> str
    for bad, why in (
        ("\n", "a line break"),
        ("\r", "a line break"),
        ('"', 'a double quote (")'),
        ("%", "a percent sign (%), which cmd expands as a variable reference"),
    ):
        if bad in value:
            raise ValueError(
                "cmd cannot set {} to a value with {}: use PowerShell (terminal shell "
                "\"powershell\") for this variable".format(key, why)
            )
    # Inside set "K=v" cmd takes & | < > ^ ( ) ; and spaces literally.
    return 'set "{}={}"'.format(key, value)


def env_line(key, value, shell):
    # type: (str, str, str) -> str
    """One line that sets ``key`` to ``value`` in ``shell`` (one of :data:`SHELLS`):
    ``export K='v'``, ``set -gx K 'v'``, ``$env:K = 'v'`` or ``set "K=v"``.
    Every character of ``value`` arrives verbatim. Raises ``ValueError`` for a
    name that is not a variable name, and for cmd, which cannot carry a line
    break, a ``"`` or a ``%`` (see :func:`_cmd`)."""
    if not isinstance(key, str) or not _NAME.match(key):
        raise ValueError("not an environment variable name: {!r}".format(key))
    if not isinstance(value, str):
        raise TypeError("the value of {} must be str, not {}".format(key, type(value).__name__))
    if "\0" in value:
        raise ValueError("the value of {} contains a NUL character".format(key))
    if shell == "posix":
        return "export {}={}".format(key, _posix(value))
    if shell == "fish":
        return "set -gx {} {}".format(key, _fish(value))
    if shell == "powershell":
        return "$env:{} = {}".format(key, _powershell(value))
    if shell == "cmd":
        return _cmd(key, value)
    raise ValueError("unknown shell {!r}: use one of {}".format(shell, ", ".join(SHELLS)))


def env_lines(env, shell):
    # type: (Mapping[str, str], str) -> List[str]
    """:func:`env_line` for each variable of ``env``, sorted by name."""
    return [env_line(k, env[k], shell) for k in sorted(env)]


# --------------------------------------------------------------------------
# the pull-mode event handle

WAIT_OBJECT_0 = 0
WAIT_TIMEOUT = 0x102
INFINITE = 0xFFFFFFFF


def event_wait_method(os_name=None):
    # type: (Optional[str]) -> str
    """How to wait on the ``int32_t`` of ``*_enable_events``:
    ``"WaitForSingleObject"`` on Windows (it carries an event ``HANDLE``),
    ``"select"`` elsewhere (a file descriptor, readable while events wait)."""
    return "WaitForSingleObject" if is_windows(os_name) else "select"


def handle_from_int32(value, pointer_bits=None):
    # type: (int, Optional[int]) -> int
    """The Windows ``HANDLE`` an ``int32_t`` carries, as ``(HANDLE)(intptr_t)value``:
    sign-extended to the pointer width (``-1`` is ``0xFFFF…FFFF``)."""
    bits = pointer_bits if pointer_bits is not None else 8 * ctypes.sizeof(ctypes.c_void_p)
    if not -(1 << 31) <= value < (1 << 31):
        raise ValueError("{} is not an int32_t".format(value))
    return value & ((1 << bits) - 1)


def wait_event_handle(value, timeout=None, os_name=None, kernel32=None):
    # type: (int, Optional[float], Optional[str], Any) -> bool
    """Waits until the pull-mode handle ``value`` (what ``enable_events``
    returned) signals that events wait, or ``timeout`` seconds pass (``None``:
    no limit). Returns ``True`` when events wait; call ``next_event`` until it
    gives ``None`` either way. ``kernel32`` replaces ``ctypes.windll.kernel32``
    (tests)."""
    if event_wait_method(os_name) == "select":
        import select

        readable, _, _ = select.select([value], [], [], timeout)
        return bool(readable)
    if kernel32 is None:
        kernel32 = ctypes.windll.kernel32  # type: ignore[attr-defined]
    ms = INFINITE if timeout is None else max(0, min(int(timeout * 1000), INFINITE - 1))
    rc = kernel32.WaitForSingleObject(ctypes.c_void_p(handle_from_int32(value)), ctypes.c_uint32(ms))
    if rc == WAIT_OBJECT_0:
        return True
    if rc == WAIT_TIMEOUT:
        return False
    raise OSError("WaitForSingleObject on the event handle {} failed (result {:#x})".format(value, rc))
