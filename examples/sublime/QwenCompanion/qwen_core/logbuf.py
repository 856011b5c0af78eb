"""The package's log: every line it prints to the console (its own messages
and the library's log lines at the ``log_level`` setting) is also kept here,
the newest :data:`MAX_LINES`, for the "Qwen: Show Log" output panel."""

import collections
import threading
import time

MAX_LINES = 2000

_lock = threading.Lock()
_lines = collections.deque(maxlen=MAX_LINES)
_dropped = [0]


def add(message):
    """Keeps ``message`` (any thread), stamped with the local time."""
    stamp = time.strftime("%H:%M:%S")
    with _lock:
        if len(_lines) == _lines.maxlen:
            _dropped[0] += 1
        for line in str(message).splitlines() or [""]:
            _lines.append("{} {}".format(stamp, line))


def text():
    """The kept lines, oldest first (with a note of how many were dropped)."""
    with _lock:
        lines = list(_lines)
        dropped = _dropped[0]
    head = ["({} older lines dropped: the log keeps the last {})".format(dropped, MAX_LINES)] if dropped else []
    return "\n".join(head + lines) + ("\n" if lines else "")


def clear():
    with _lock:
        _lines.clear()
        _dropped[0] = 0
