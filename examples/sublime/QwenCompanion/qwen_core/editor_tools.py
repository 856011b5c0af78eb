"""The editor's tools for Qwen Code: the four editor capabilities.

The plugin host offers them to the library (``PluginHost.set_capability``)
before its plugin MCP server starts, so ``qwen`` sees them as the MCP tools
``mcp__qwen-companion-plugins__editor-diagnostics``, ``editor-open-file``,
``editor-open-editors`` and ``editor-selection``. A request comes on the
library's callback thread; the handler returns a ``Pending`` at once and the
answer is computed on Sublime Text's main thread (``sublime.set_timeout``),
so the library thread never waits for the UI. Every request is answered:
with a result, or with an error message.

Lines and columns are 1-based; columns count characters (Sublime Text's
points are characters too).
"""

import os

from . import diagnostics as _diag

CAPABILITIES = ("editor_diagnostics", "editor_open_file", "editor_open_editors", "editor_selection")

#: The selected text sent back is capped (the library bounds it again).
MAX_SELECTION_CHARS = 100000


class ToolError(Exception):
    """A request the editor cannot carry out (the message goes to the model)."""


def syntax_name(view):
    """The view's syntax name in lower case (``python``), or None."""
    syntax = view.syntax() if hasattr(view, "syntax") else None
    name = getattr(syntax, "name", None) if syntax is not None else None
    if not name and syntax is not None and getattr(syntax, "path", None):
        name = os.path.splitext(os.path.basename(syntax.path))[0]
    return name.lower() if name else None


def file_views(sublime):
    """``(window, view)`` for every view with a file name, window order."""
    out = []
    for window in sublime.windows():
        for view in window.views():
            if view.file_name() and not view.settings().get("qwen_companion_is_diff"):
                out.append((window, view))
    return out


def open_editors(sublime, params):
    window = sublime.active_window()
    active = window.active_view() if window is not None else None
    editors = []
    for _, view in file_views(sublime):
        entry = {"path": view.file_name(), "active": active is not None and active.id() == view.id(),
                 "dirty": bool(view.is_dirty())}
        language = syntax_name(view)
        if language:
            entry["language"] = language
        editors.append(entry)
    return {"editors": editors}


def selection(sublime, params):
    window = sublime.active_window()
    view = window.active_view() if window is not None else None
    if view is None or not view.file_name() or view.settings().get("qwen_companion_is_diff"):
        return {"selection": None}
    regions = [r for r in view.sel() if not r.empty()]
    if not regions:
        return {"selection": None}
    first = regions[0]
    start = view.rowcol(first.begin())
    end = view.rowcol(first.end())
    text = view.substr(sublime.Region(first.begin(), min(first.end(), first.begin() + MAX_SELECTION_CHARS)))
    return {"selection": {"path": view.file_name(), "text": text,
                          "start": {"line": start[0] + 1, "column": start[1] + 1},
                          "end": {"line": end[0] + 1, "column": end[1] + 1}}}


def _window_for(sublime, path):
    """The window whose folder holds ``path`` (deepest folder), else the active one."""
    best, depth = None, -1
    for window in sublime.windows():
        for folder in window.folders():
            f = os.path.normpath(folder)
            if (path == f or path.startswith(f.rstrip(os.sep) + os.sep)) and len(f) > depth:
                best, depth = window, len(f)
    return best or sublime.active_window()


def open_file(sublime, params):
    path = params.get("path")
    if not isinstance(path, str) or not os.path.isabs(path):
        raise ToolError("path must be an absolute path")
    if os.path.isdir(path):
        raise ToolError("{} is a folder, not a file".format(path))
    if not os.path.isfile(path):
        raise ToolError("{} does not exist (the editor creates no file)".format(path))
    window = _window_for(sublime, path)
    if window is None:
        raise ToolError("Sublime Text has no window open")
    line, column = params.get("line"), params.get("column")
    spec = path
    flags = 0
    if line is not None:
        spec = "{}:{}:{}".format(path, int(line), int(column or 1))
        flags = sublime.ENCODED_POSITION
    view = window.open_file(spec, flags)
    end_line = params.get("endLine")
    if line is not None and end_line is not None:
        _select_when_loaded(sublime, view, int(line), int(column or 1), int(end_line),
                            int(params.get("endColumn") or 1))
    window.focus_view(view)
    return {"opened": True}


def _select_when_loaded(sublime, view, line, column, end_line, end_column, tries=100):
    """Selects the range once the view has loaded (main thread; polls the load)."""
    if not view.is_valid():
        return
    if view.is_loading():
        if tries > 0:
            sublime.set_timeout(lambda: _select_when_loaded(sublime, view, line, column, end_line, end_column,
                                                            tries - 1), 50)
        return
    a = view.text_point(line - 1, column - 1)
    b = view.text_point(end_line - 1, end_column - 1)
    view.sel().clear()
    view.sel().add(sublime.Region(a, b))
    if hasattr(view, "show_at_center"):
        view.show_at_center(a)


def editor_diagnostics(sublime, params, store=None, log=None):
    path = params.get("path")
    severity = params.get("severity")
    if severity is not None and severity not in _diag.SEVERITIES:
        raise ToolError("severity must be one of {}".format(", ".join(_diag.SEVERITIES)))
    views = dict((os.path.normcase(v.file_name()), v) for _, v in file_views(sublime))

    def line_text_of(fpath):
        view = views.get(os.path.normcase(fpath))
        if view is None:
            return None

        def line_text(row):
            return view.substr(view.line(view.text_point(row, 0)))

        return line_text

    found = _diag.collect(sublime.windows(), path, severity, store, line_text_of=line_text_of, log=log)
    return {"diagnostics": found}


def make_handlers(sublime, pending_type, store=None, log=None):
    """``{capability: handler(request)}``: each returns a ``pending_type()``
    (the binding's ``Pending``) settled on the main thread."""
    work = {
        "editor_diagnostics": lambda params: editor_diagnostics(sublime, params, store, log),
        "editor_open_file": lambda params: open_file(sublime, params),
        "editor_open_editors": lambda params: open_editors(sublime, params),
        "editor_selection": lambda params: selection(sublime, params),
    }

    def handler_for(name):
        def handler(request):
            pending = pending_type()
            params = request.get("params") or {}

            def answer():
                try:
                    result = work[name](params)
                except ToolError as e:
                    pending.reject(str(e))
                    return
                except Exception as e:  # never leave the request unanswered
                    if log is not None:
                        log("{} failed: {}: {}".format(name, type(e).__name__, e))
                    pending.reject("{} failed in Sublime Text: {}".format(name, e))
                    return
                pending.resolve(result)

            sublime.set_timeout(answer, 0)
            return pending

        handler.__name__ = name
        return handler

    return dict((name, handler_for(name)) for name in CAPABILITIES)
