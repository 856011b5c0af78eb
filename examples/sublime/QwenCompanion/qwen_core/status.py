"""The status indicator: one ``view.set_status`` key in the status bar of
the window's active view, e.g. ``Qwen: 2 CLIs | diff pending: main.py``.

It shows how many Qwen Code CLIs are connected to the window's companion
(``Qwen: listening on 41234`` until one connects, or when the library does
not count them), the proposals waiting for Accept/Reject, and the last error
(the window's, else the plugin host's) until the next restart.
"""

import sublime

KEY = "qwen_companion"
MAX_ERROR = 80


def status_text(clients, pending, error, port=None):
    """The indicator's text. ``clients``: connected CLIs (None: unknown);
    ``pending``: file names of the diffs waiting; ``error``: a message or None."""
    if clients is None or clients == 0:
        parts = ["Qwen: listening on {}".format(port) if port else "Qwen: listening"]
        if clients == 0:
            parts[0] = "Qwen: no CLI" + (" (port {})".format(port) if port else "")
    else:
        parts = ["Qwen: {} CLI{}".format(clients, "" if clients == 1 else "s")]
    if pending:
        parts.append("diff pending: " + ", ".join(pending) if len(pending) <= 2
                     else "{} diffs pending".format(len(pending)))
    if error:
        error = " ".join(str(error).split())
        if len(error) > MAX_ERROR:
            error = error[:MAX_ERROR - 1] + "\u2026"
        parts.append("error: " + error)
    return " | ".join(parts)


def show(window, text):
    """Main thread: shows ``text`` in the active view of ``window``."""
    if window is None:
        return
    view = window.active_view()
    if view is not None and view.is_valid():
        view.set_status(KEY, text)


def clear(window):
    if window is None:
        return
    for view in window.views():
        view.erase_status(KEY)
