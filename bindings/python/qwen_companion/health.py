"""The library's health report (``qc_health_json``).

:func:`health` asks the library to check itself and what it works with: its
version and ABI, ``qwen`` and ``node`` found (``PATH`` or the paths given)
with their versions against the ones tested, ``gemini`` too when the
companion serves Gemini CLI (or ``options["cli"]`` names it), the discovery
files of a companion,
the CLIs connected to it, a plugin host's MCP server and its ``settings.json``
registration, and a participant. The answer is one JSON document::

    {"library": {"version": "0.x.y", "abi": 1, "platform": "linux-x86_64"},
     "checks": [{"id": "qwen", "status": "ok", "summary": "qwen 0.24.4 (tested: 0.24.4)",
                 "detail": "...", ...}, ...]}

``status`` is ``"ok"``, ``"warn"``, ``"error"`` or ``"off"``; show the checks
in the order given, one line each (:func:`report_lines`).

It blocks while it runs ``qwen --version``, ``node --version`` (and
``gemini --version``; each at most 5 s): call it off an editor's UI thread.

It must stay importable by Sublime Text's plugin host (Python 3.8).
"""

import json

from typing import Any, Dict, List, Optional  # noqa: F401 (type comments)

from . import _native
from ._native import InvalidHandleError, encode

#: The statuses a check may have, each with the mark :func:`report_lines` shows.
STATUS_MARKS = {"ok": "OK", "warn": "WARN", "error": "ERROR", "off": "OFF"}


def _handle_of(obj, what):
    # type: (Any, str) -> Optional[int]
    if obj is None:
        return None
    h = getattr(obj, "_h", None)
    if h is None:
        raise TypeError("{} must be a qwen_companion object or None, not {}".format(what, type(obj).__name__))
    return h()  # ClosedError when closed


def health(options=None, companion=None, plugin_host=None, participant=None, library=None):
    # type: (Optional[Dict[str, Any]], Any, Any, Any, Any) -> Dict[str, Any]
    """The health report (see the module docs). ``options``: ``{"qwen": cmd
    or path, "gemini": cmd or path, "node": cmd or path, "path": PATH to
    search, "cli": "qwen" | "gemini" | "both"}`` (each optional; ``cli``
    asks for the ``gemini`` check without a companion serving Gemini CLI);
    ``companion``, ``plugin_host``, ``participant``: the objects to check
    (``None``: that check is ``"off"``). ``library`` is the library to load
    when no object is given (the objects' own library otherwise).

    Raises :class:`~qwen_companion.NotFoundError` with a library too old to
    report (``qc_health_json`` missing), :class:`~qwen_companion.ClosedError`
    for a closed object."""
    if options is not None and not isinstance(options, dict):
        raise TypeError("options must be a dict or None, not {}".format(type(options).__name__))
    lib = None
    for obj in (companion, plugin_host, participant):
        if obj is not None and getattr(obj, "_lib", None) is not None:
            lib = obj._lib
            break
    if lib is None:
        lib = _native.load(library)
    if not hasattr(lib, "qc_health_json"):
        raise _native.NotFoundError(
            "this library ({}) has no health report (no qc_health_json): update the package".format(lib.version),
            _native.QC_NOT_FOUND,
        )
    options_b = None if options is None else encode(json.dumps(options), "options")
    handles = (_handle_of(companion, "companion"), _handle_of(plugin_host, "plugin_host"),
               _handle_of(participant, "participant"))
    try:
        return json.loads(lib.call_string("qc_health_json", options_b, *handles))
    except InvalidHandleError:
        for obj in (companion, plugin_host, participant):
            if obj is not None and obj.closed:  # closed by another thread meanwhile
                raise obj._closed_error()
        raise


def report_lines(report):
    # type: (Dict[str, Any]) -> List[str]
    """The report as text lines: the library line, then one line per check
    (``[OK] qwen: qwen 0.24.4 ...``) with its ``detail`` indented below it."""
    lib = report.get("library") or {}
    lines = ["qwen-companion {} (ABI {}, {})".format(lib.get("version", "?"), lib.get("abi", "?"),
                                                      lib.get("platform", "?"))]
    for check in report.get("checks") or []:
        status = str(check.get("status", "?"))
        mark = STATUS_MARKS.get(status, status.upper())
        lines.append("[{}] {}: {}".format(mark, check.get("id", "?"), check.get("summary", "")))
        detail = check.get("detail")
        if detail:
            lines.extend("      " + line for line in str(detail).splitlines())
    return lines
