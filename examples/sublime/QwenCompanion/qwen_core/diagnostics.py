"""Diagnostics for the ``editor_diagnostics`` tool, from what Sublime Text has.

Sublime Text has no diagnostics API of its own; this module reads the three
places diagnostics live in it, each only when it is there:

1. **SublimeLinter** (4.x): its public event API,
   ``SublimeLinter.lint.events.subscribe("lint_result", fn)``, hands every
   lint's errors per file and linter (``line``/``start``/``end`` 0-based,
   ``error_type``, ``msg``, ``code``, ``linter``). :class:`LinterStore`
   keeps the latest result of each (file, linter), bounded.
2. **LSP** (sublimelsp/LSP 2.x): each session of a window keeps the
   diagnostics the server published in ``session.diagnostics`` (an ordered
   mapping of ``(scheme, path)`` to LSP ``Diagnostic`` objects), reached
   through ``LSP.plugin.core.registry.windows.lookup(window).get_sessions()``.
   That is LSP's internal structure, read defensively: a version where it is
   shaped differently is skipped (and logged), never an error for the model.
   LSP columns count UTF-16 units; they are turned into characters with the
   line's text when the file is open.
3. **The build output** (``exec`` panel: Tools > Build): the results its
   ``file_regex``/``line_regex`` matched, from
   ``view.find_all_results_with_text()`` -> ``(file, line, column, message)``,
   reported as errors with source ``build``.

Every entry is ``{"path", "line", "column", "endLine"?, "endColumn"?,
"severity", "message", "source"?, "code"?}``, 1-based, columns in characters.
"""

import os
import sys
import threading

SEVERITIES = ("error", "warning", "information", "hint")
_RANK = dict((s, i) for i, s in enumerate(SEVERITIES))
_LSP_SEVERITY = {1: "error", 2: "warning", 3: "information", 4: "hint"}
_LINTER_SEVERITY = {"error": "error", "warning": "warning", "info": "information", "information": "information",
                    "hint": "hint"}

#: At most this many files are remembered from SublimeLinter, and this many
#: entries per (file, linter): the library bounds what reaches the model again.
MAX_LINTED_FILES = 500
MAX_PER_RESULT = 1000


def wanted(severity, least):
    """True when ``severity`` is at least as severe as ``least`` (None: all)."""
    return least is None or _RANK.get(severity, 3) <= _RANK.get(least, 3)


def utf16_to_chars(line_text, col16):
    """A UTF-16 column on ``line_text`` as a character (code point) column."""
    if line_text is None:
        return col16
    units = 0
    for i, ch in enumerate(line_text):
        if units >= col16:
            return i
        units += 2 if ord(ch) > 0xFFFF else 1
    return len(line_text) + max(0, col16 - units)


class LinterStore(object):
    """The latest SublimeLinter result per (file, linter), fed by its
    ``lint_result`` event (any thread), bounded by :data:`MAX_LINTED_FILES`."""

    def __init__(self):
        self._lock = threading.Lock()
        self._files = {}  # filename -> {linter: [error dicts]}
        self._order = []  # filenames, oldest result first

    def on_lint_result(self, filename=None, linter_name=None, errors=None, **unused):
        if not filename:
            return
        kept = list(errors or [])[:MAX_PER_RESULT]
        with self._lock:
            linters = self._files.setdefault(filename, {})
            if kept:
                linters[linter_name] = kept
            else:
                linters.pop(linter_name, None)
            if filename in self._order:
                self._order.remove(filename)
            if linters:
                self._order.append(filename)
            else:
                self._files.pop(filename, None)
            while len(self._order) > MAX_LINTED_FILES:
                self._files.pop(self._order.pop(0), None)

    def entries(self, path=None):
        with self._lock:
            items = [(f, dict(l)) for f, l in self._files.items() if path is None or same_path(f, path)]
        out = []
        for filename, linters in items:
            for linter, errors in sorted(linters.items(), key=lambda kv: str(kv[0])):
                for e in errors:
                    entry = linter_entry(filename, linter, e)
                    if entry is not None:
                        out.append(entry)
        return out


def same_path(a, b):
    return os.path.normcase(os.path.normpath(a)) == os.path.normcase(os.path.normpath(b))


def _int(value, default=0):
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def linter_entry(filename, linter, e):
    """One SublimeLinter error dict as a diagnostic (None when unusable)."""
    if not isinstance(e, dict) or not e.get("msg"):
        return None
    line = _int(e.get("line")) + 1
    entry = {"path": filename, "line": line, "column": _int(e.get("start")) + 1,
             "severity": _LINTER_SEVERITY.get(str(e.get("error_type", "error")).lower(), "warning"),
             "message": str(e.get("msg")), "source": str(e.get("linter") or linter or "SublimeLinter")}
    if e.get("end") is not None:
        entry["endLine"] = line
        entry["endColumn"] = max(entry["column"], _int(e.get("end")) + 1)
    if e.get("code"):
        entry["code"] = str(e.get("code"))
    return entry


def subscribe_sublime_linter(store, modules=None):
    """Subscribes ``store`` to SublimeLinter's ``lint_result`` when
    SublimeLinter is loaded; returns the unsubscribe function (None when
    there is no SublimeLinter)."""
    modules = sys.modules if modules is None else modules
    events = modules.get("SublimeLinter.lint.events")
    if events is None or not hasattr(events, "subscribe"):
        return None
    events.subscribe("lint_result", store.on_lint_result)

    def unsubscribe():
        try:
            events.unsubscribe("lint_result", store.on_lint_result)
        except Exception:
            pass

    return unsubscribe


def lsp_entry(path, d, line_text=None):
    """One LSP ``Diagnostic`` as a diagnostic (None when unusable)."""
    try:
        start, end = d["range"]["start"], d["range"]["end"]
        message = str(d["message"])
    except (KeyError, TypeError):
        return None
    entry = {"path": path, "line": _int(start.get("line")) + 1,
             "column": utf16_to_chars(line_text(_int(start.get("line"))) if line_text else None,
                                      _int(start.get("character"))) + 1,
             "endLine": _int(end.get("line")) + 1,
             "endColumn": utf16_to_chars(line_text(_int(end.get("line"))) if line_text else None,
                                         _int(end.get("character"))) + 1,
             "severity": _LSP_SEVERITY.get(d.get("severity") or 1, "error"), "message": message}
    if d.get("source"):
        entry["source"] = str(d.get("source"))
    if d.get("code") is not None:
        entry["code"] = str(d.get("code"))
    return entry


def lsp_entries(window, path=None, modules=None, line_text_of=None, log=None):
    """LSP's diagnostics of ``window`` (see the module docs); [] without LSP."""
    modules = sys.modules if modules is None else modules
    registry = modules.get("LSP.plugin.core.registry")
    if registry is None:
        return []
    out = []
    try:
        manager = registry.windows.lookup(window)
        sessions = list(manager.get_sessions()) if manager is not None else []
        for session in sessions:
            storage = getattr(session, "diagnostics", None)
            if storage is None:
                continue
            for key, diagnostics in list(storage.items()):
                scheme, fpath = key
                if scheme != "file" or (path is not None and not same_path(fpath, path)):
                    continue
                line_text = line_text_of(fpath) if line_text_of else None
                for d in list(diagnostics):
                    entry = lsp_entry(fpath, d, line_text)
                    if entry is not None:
                        out.append(entry)
    except Exception as e:  # another LSP version: skip it, say why in the log
        if log is not None:
            log("LSP's diagnostics could not be read ({}: {}); they are left out".format(type(e).__name__, e))
        return []
    return out


def build_entries(window, path=None, folders=()):
    """The ``exec`` (build) panel's results of ``window``; [] without one."""
    panel = window.find_output_panel("exec") if hasattr(window, "find_output_panel") else None
    if panel is None or not hasattr(panel, "find_all_results_with_text"):
        return []
    base = panel.settings().get("result_base_dir") or (folders[0] if folders else "")
    out = []
    for result in panel.find_all_results_with_text():
        fname, line, col, message = result
        full = fname if os.path.isabs(fname) else os.path.join(base, fname)
        full = os.path.normpath(full)
        if path is not None and not same_path(full, path):
            continue
        out.append({"path": full, "line": max(1, _int(line, 1)), "column": max(1, _int(col, 1)),
                    "severity": "error", "message": str(message or "").strip() or "build error",
                    "source": "build"})
    return out


def collect(windows, path=None, severity=None, store=None, modules=None, line_text_of=None, log=None):
    """Every diagnostic of every window (SublimeLinter once, then LSP and the
    build panel per window), filtered by ``path`` and ``severity``, without
    duplicates."""
    found = list(store.entries(path)) if store is not None else []
    for window in windows:
        found.extend(lsp_entries(window, path, modules, line_text_of, log))
        found.extend(build_entries(window, path, list(window.folders())))
    seen = set()
    out = []
    for entry in found:
        if not wanted(entry["severity"], severity):
            continue
        key = (entry["path"], entry["line"], entry["column"], entry["message"], entry.get("source"))
        if key in seen:
            continue
        seen.add(key)
        out.append(entry)
    return out
