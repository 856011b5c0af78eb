"""A small stand-in for Sublime Text's ``sublime`` module, for tests.

It models what the QwenCompanion plugin uses, plus a test harness:

- the UI thread is the thread that imported this module (the test's main
  thread); calls that change views or windows assert they run on it, like
  the real editor's rule that UI work belongs on the main thread (reading
  text is allowed from any thread, as in Sublime Text);
- ``set_timeout`` queues callbacks; :func:`pump` runs them on the UI thread;
- ``set_timeout_async`` callbacks and the listeners' ``on_*_async`` events
  run on one "async" thread, in order, as in Sublime Text (:func:`pump` and
  ``sublime_plugin.emit`` wait for that work before they return);
- settings objects call their ``add_on_change`` callbacks on ``set``/``erase``;
- :func:`load_keymap` reads a package's ``.sublime-keymap`` and
  :meth:`Editor.press` resolves a key press against it (contexts included);
- :class:`Editor` opens files, moves the cursor, edits, saves, renames and
  closes views, and sends the matching events to the plugin's listeners.
"""

import itertools
import os
import queue
import threading
import time

import sublime_plugin

UI_THREAD = threading.current_thread()
ASYNC_THREAD_NAME = "sublime-async"

_ids = itertools.count(1)
_timeouts = queue.Queue()  # (due, fn) from set_timeout
_later = []  # (due, fn) taken from the queue but not yet due
_windows = []
_settings_files = {}
_clipboard = [""]
_resources = []
_keymaps = []  # (path, bindings) loaded with load_keymap, in load order
status_messages = []
error_messages = []
ui_violations = []


def _ui(what):
    if threading.current_thread() is not UI_THREAD:
        ui_violations.append((what, threading.current_thread().name))
        raise AssertionError("{} called off the UI thread ({})".format(what, threading.current_thread().name))


def reset():
    """Fresh editor state (between tests)."""
    del _windows[:]
    _settings_files.clear()
    _clipboard[0] = ""
    del _resources[:]
    del _keymaps[:]
    del status_messages[:]
    del error_messages[:]
    del ui_violations[:]
    while True:
        try:
            _timeouts.get_nowait()
        except queue.Empty:
            break
    del _later[:]
    sublime_plugin.reset()


# --------------------------------------------------------------------------
# module API


def version():
    return "4180"


def platform():
    return "linux"


def arch():
    """``x64``, ``arm64`` or ``x32``, like Sublime Text's, for this machine."""
    import platform as _platform

    machine = _platform.machine().lower()
    return {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(machine, "x32")


def set_timeout(fn, delay=0):
    _timeouts.put((time.monotonic() + delay / 1000.0, fn))


def set_timeout_async(fn, delay=0):
    """Runs ``fn`` on the async thread (after ``delay`` ms: the next
    :func:`pump` at or after that time hands it over)."""
    if delay <= 0:
        run_async(fn)
    else:
        _timeouts.put((time.monotonic() + delay / 1000.0, _Async(fn)))


class _Async(object):
    """A delayed ``set_timeout_async`` callback waiting in the UI queue."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self):
        run_async(self.fn)


_async_queue = queue.Queue()
_async_thread = [None]
async_errors = []  # exceptions raised by async callbacks (printed, as Sublime Text does)


def _async_loop():
    while True:
        fn = _async_queue.get()
        try:
            fn()
        except Exception:
            import traceback

            traceback.print_exc()
            async_errors.append(traceback.format_exc())


def run_async(fn):
    """Queues ``fn`` for the async thread (started on first use)."""
    if _async_thread[0] is None:
        t = threading.Thread(target=_async_loop, name=ASYNC_THREAD_NAME, daemon=True)
        _async_thread[0] = t
        t.start()
    _async_queue.put(fn)


def on_async_thread():
    return threading.current_thread() is _async_thread[0]


def wait_async(timeout=30.0):
    """Waits until the async thread has run everything queued so far (no-op
    on the async thread itself)."""
    if _async_thread[0] is None or on_async_thread():
        return
    done = threading.Event()
    _async_queue.put(done.set)
    if not done.wait(timeout):
        raise AssertionError("the async thread is stuck")


def pump(timeout=0.0, advance=0.0):
    """Runs the due ``set_timeout`` callbacks on the UI thread. With
    ``timeout``, first waits up to that long for a new one to be queued;
    ``advance`` (seconds) pretends that much more time has passed.
    Returns how many ran."""
    _ui("pump")
    wait_async()
    if timeout:
        try:
            _later.append(_timeouts.get(timeout=timeout))
        except queue.Empty:
            pass
    n = 0
    while True:
        while True:
            try:
                _later.append(_timeouts.get_nowait())
            except queue.Empty:
                break
        now = time.monotonic() + advance
        due = [item for item in _later if item[0] <= now]
        if not due:
            return n
        for item in due:
            _later.remove(item)
        for _, fn in due:
            fn()
            n += 1
        wait_async()  # the async work they queued, before the next round
        advance = 0.0  # callbacks queued by these run on a later pump


def windows():
    return list(_windows)


def active_window():
    return _windows[0] if _windows else None


def load_settings(name):
    if name not in _settings_files:
        _settings_files[name] = Settings()
    return _settings_files[name]


def set_clipboard(text):
    _clipboard[0] = text


def get_clipboard():
    return _clipboard[0]


def find_resources(pattern):
    return [r for r in _resources if r.endswith(pattern)]


def add_resource(path):
    _resources.append(path)


def status_message(msg):
    status_messages.append(msg)


def error_message(msg):
    error_messages.append(msg)


ENCODED_POSITION = 1
TRANSIENT = 4

#: The layout of a window with one group (Sublime Text's default).
ONE_GROUP = {"cols": [0.0, 1.0], "rows": [0.0, 1.0], "cells": [[0, 0, 1, 1]]}


class Syntax(object):
    def __init__(self, path, name=None):
        self.path = path
        self.name = name or os.path.splitext(os.path.basename(path))[0]


def find_syntax_for_file(path, first_line=""):
    if path.endswith(".py"):
        return Syntax("Packages/Python/Python.sublime-syntax")
    return None


# --------------------------------------------------------------------------
# values


class Region(object):
    def __init__(self, a, b=None):
        self.a = a
        self.b = a if b is None else b

    def begin(self):
        return min(self.a, self.b)

    def end(self):
        return max(self.a, self.b)

    def size(self):
        return self.end() - self.begin()

    def empty(self):
        return self.a == self.b

    def __eq__(self, other):
        return isinstance(other, Region) and (self.a, self.b) == (other.a, other.b)

    def __repr__(self):
        return "Region({}, {})".format(self.a, self.b)


class Selection(object):
    def __init__(self):
        self._regions = [Region(0)]

    def clear(self):
        self._regions = []

    def add(self, region):
        if isinstance(region, int):
            region = Region(region)
        self._regions.append(region)

    def __len__(self):
        return len(self._regions)

    def __getitem__(self, i):
        return self._regions[i]

    def __iter__(self):
        return iter(list(self._regions))


class Settings(object):
    def __init__(self, values=None):
        self._values = dict(values or {})
        self._on_change = []  # (tag, callback)

    def get(self, key, default=None):
        return self._values.get(key, default)

    def set(self, key, value):
        self._values[key] = value
        self._changed()

    def has(self, key):
        return key in self._values

    def erase(self, key):
        self._values.pop(key, None)
        self._changed()

    def add_on_change(self, tag, callback):
        self._on_change.append((tag, callback))

    def clear_on_change(self, tag):
        self._on_change = [(t, c) for t, c in self._on_change if t != tag]

    def _changed(self):
        for _, callback in list(self._on_change):
            callback()


class Edit(object):
    pass


# --------------------------------------------------------------------------
# views and windows


class View(object):
    def __init__(self, window, file_name=None, text=""):
        self._id = next(_ids)
        self._window = window
        self._file_name = file_name
        self._text = text
        self._sel = Selection()
        self._settings = Settings()
        self._scratch = False
        self._name = ""
        self._valid = True
        self._syntax = find_syntax_for_file(file_name) if file_name else None  # as Sublime Text picks it
        self._line_endings = "Unix"
        self.reference_document = None
        self.panel_name = None
        self._group = 0  # the group of its window it sits in
        self._dirty = False
        self.results = []  # find_all_results_with_text of an output panel (tests fill it)
        self._status = {}
        self.popups = []  # the content of each show_popup

    def __repr__(self):
        return "<View {} {}>".format(self._id, self._file_name or self._name)

    def id(self):
        return self._id

    def buffer_id(self):
        return self._id

    def is_valid(self):
        return self._valid

    def is_loading(self):
        return False

    def window(self):
        return self._window if self._valid else None

    def file_name(self):
        return self._file_name

    def settings(self):
        return self._settings

    def sel(self):
        return self._sel

    def size(self):
        return len(self._text)

    def substr(self, x):  # readable from any thread, as in Sublime Text
        if isinstance(x, Region):
            return self._text[x.begin():x.end()]
        return self._text[x:x + 1]

    def rowcol(self, point):
        before = self._text[:point]
        row = before.count("\n")
        col = point - (before.rfind("\n") + 1)
        return row, col

    def rowcol_utf16(self, point):
        """(row, column) of ``point``, the column in UTF-16 code units (a
        character outside the BMP, such as most emoji, counts 2)."""
        row, col = self.rowcol(point)
        line = self._text[point - col:point]
        return row, sum(2 if ord(ch) > 0xFFFF else 1 for ch in line)

    def is_dirty(self):
        return self._dirty

    def line(self, x):
        point = x.begin() if isinstance(x, Region) else x
        start = self._text.rfind("\n", 0, point) + 1
        end = self._text.find("\n", point)
        return Region(start, len(self._text) if end < 0 else end)

    def show_at_center(self, x):
        _ui("View.show_at_center")

    def find_all_results_with_text(self):
        return list(self.results)

    def set_status(self, key, value):
        self._status[key] = value

    def get_status(self, key):
        return self._status.get(key, "")

    def erase_status(self, key):
        self._status.pop(key, None)

    def show_popup(self, content, flags=0, location=-1, max_width=320, max_height=240, on_navigate=None, on_hide=None):
        _ui("View.show_popup")
        self.popups.append(content)

    def text_point(self, row, col):
        lines = self._text.split("\n")
        row = min(row, len(lines) - 1)
        return sum(len(l) + 1 for l in lines[:row]) + min(col, len(lines[row]))

    def set_scratch(self, scratch):
        _ui("View.set_scratch")
        self._scratch = scratch

    def is_scratch(self):
        return self._scratch

    def set_name(self, name):
        _ui("View.set_name")
        self._name = name

    def name(self):
        return self._name

    def assign_syntax(self, syntax):
        _ui("View.assign_syntax")
        self._syntax = syntax

    def syntax(self):
        return self._syntax

    def set_line_endings(self, value):
        _ui("View.set_line_endings")
        self._line_endings = value.capitalize()

    def line_endings(self):
        return self._line_endings

    def set_reference_document(self, text):
        _ui("View.set_reference_document")
        self.reference_document = text

    def replace(self, edit, region, text):
        _ui("View.replace")
        assert isinstance(edit, Edit), "replace needs the Edit of a running TextCommand"
        self._text = self._text[:region.begin()] + text + self._text[region.end():]

    def insert(self, edit, point, text):
        _ui("View.insert")
        assert isinstance(edit, Edit)
        self._text = self._text[:point] + text + self._text[point:]
        return len(text)

    def run_command(self, name, args=None):
        _ui("View.run_command")
        cls = sublime_plugin.text_command(name)
        if cls is None:
            raise AssertionError("unknown text command " + name)
        cmd = cls(self)
        if not cmd.is_enabled():
            return
        cmd.run(Edit(), **(args or {}))

    def close(self):
        _ui("View.close")
        if not self._valid:
            return False
        sublime_plugin.emit("on_pre_close", self)
        w = self._window
        if self in w._views:
            w._views.remove(self)
            if w._active is self:
                w._active = w._views[-1] if w._views else None
        self._valid = False
        sublime_plugin.emit("on_close", self)
        if w._active is not None:
            sublime_plugin.emit("on_activated", w._active)
        return True


class Window(object):
    def __init__(self, folders=()):
        self._id = next(_ids)
        self._folders = list(folders)
        self._views = []
        self._active = None
        self._panels = {}
        self._layout = dict(ONE_GROUP)
        self._active_group = 0
        self.commands = []  # (name, args) of commands no plugin class handled

    def id(self):
        return self._id

    def is_valid(self):
        return self in _windows

    def folders(self):
        return list(self._folders)

    def views(self, include_transient=False):  # Sublime Text 4 (4081+) signature
        return list(self._views)

    def active_view(self):
        return self._active

    # groups (the layout)

    def get_layout(self):
        return {"cols": list(self._layout["cols"]), "rows": list(self._layout["rows"]),
                "cells": [list(c) for c in self._layout["cells"]]}

    def set_layout(self, layout):
        """As in Sublime Text: views of groups that no longer exist move to the last group."""
        _ui("Window.set_layout")
        self._layout = {"cols": list(layout["cols"]), "rows": list(layout["rows"]),
                        "cells": [list(c) for c in layout["cells"]]}
        last = self.num_groups() - 1
        for v in self._views:
            if v._group > last:
                v._group = last
        self._active_group = min(self._active_group, last)

    def num_groups(self):
        return len(self._layout["cells"])

    def active_group(self):
        return self._active_group

    def focus_group(self, group):
        _ui("Window.focus_group")
        self._active_group = group

    def views_in_group(self, group):
        return [v for v in self._views if v._group == group]

    def get_view_index(self, view):
        if view not in self._views:
            return (-1, -1)
        return (view._group, self.views_in_group(view._group).index(view))

    def set_view_index(self, view, group, index):
        _ui("Window.set_view_index")
        assert 0 <= group < self.num_groups(), "no group {}".format(group)
        self._views.remove(view)
        view._group = group
        others = self.views_in_group(group)
        at = self._views.index(others[index]) if index < len(others) else len(self._views)
        self._views.insert(at, view)

    def open_file(self, path, flags=0, group=-1):
        """Opens (or focuses) ``path``; with ``ENCODED_POSITION`` the path is
        ``file:line:col`` and the caret goes there. Loads at once."""
        _ui("Window.open_file")
        row = col = None
        if flags & ENCODED_POSITION:
            parts = path.rsplit(":", 2)
            path, row, col = parts[0], int(parts[1]) - 1, int(parts[2]) - 1
        view = None
        for v in self._views:
            if v.file_name() == path:
                view = v
        if view is None:
            with open(path, "rb") as f:
                text = f.read().decode("utf-8", "replace")
            view = View(self, file_name=path, text=text)
            view._group = self._active_group if group < 0 else group
            self._views.append(view)
            sublime_plugin.emit("on_load", view)
        if row is not None:
            point = view.text_point(row, col)
            view._sel._regions = [Region(point)]
        self.focus_view(view)
        return view

    def focus_view(self, view):
        _ui("Window.focus_view")
        if view is self._active:
            return
        if view in self._views:
            self._active_group = view._group
        if self._active is not None:
            sublime_plugin.emit("on_deactivated", self._active)
        self._active = view
        sublime_plugin.emit("on_activated", view)

    def new_file(self):
        _ui("Window.new_file")
        view = View(self)
        view._group = self._active_group
        self._views.append(view)
        sublime_plugin.emit("on_new", view)
        self.focus_view(view)
        return view

    def create_output_panel(self, name):
        _ui("Window.create_output_panel")
        if name not in self._panels:
            panel = View(self)
            panel.panel_name = name
            self._panels[name] = panel
        return self._panels[name]

    def find_output_panel(self, name):
        return self._panels.get(name)

    def status_message(self, msg):
        status_messages.append(msg)

    def run_command(self, name, args=None):
        _ui("Window.run_command")
        for listener in sublime_plugin.listeners():
            hook = getattr(listener, "on_window_command", None)
            if hook is None:
                continue
            rewritten = hook(self, name, args)
            if rewritten is not None:
                name, args = rewritten
        cls = sublime_plugin.window_command(name)
        if cls is not None:
            cmd = cls(self)
            if cmd.is_enabled():
                cmd.run(**(args or {}))
        else:
            self.commands.append((name, args))
        sublime_plugin.emit("on_post_window_command", self, name, args)


def _strip_json_comments(text):
    out, i, n, in_str = [], 0, len(text), False
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\":
                out.append(text[i + 1:i + 2])
                i += 1
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
            out.append(c)
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        elif text.startswith("/*", i):
            i = text.index("*/", i) + 2
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


def load_keymap(path):
    """Loads a ``.sublime-keymap`` (JSON with comments and trailing commas),
    as Sublime Text loads every package's keymap; later ones win."""
    import json
    import re as _re

    with open(path, encoding="utf-8") as f:
        text = _strip_json_comments(f.read())
    text = _re.sub(r",(\s*[\]}])", r"\1", text)
    _keymaps.append((path, json.loads(text)))


def _context_matches(view, ctx):
    key = ctx.get("key", "")
    operator = ctx.get("operator", "equal")
    operand = ctx.get("operand", True)
    if key.startswith("setting."):
        value = view.settings().get(key[len("setting."):])
    else:
        return False  # a context this stub does not model never matches
    if operator == "equal":
        return value == operand
    if operator == "not_equal":
        return value != operand
    return False


def resolve_key(view, keys):
    """The binding Sublime Text would run for ``keys`` (e.g. ``"ctrl+s"``)
    in ``view``: the last loaded one whose keys match and whose every
    context holds; None when only the editor's default applies."""
    found = None
    for _, bindings in _keymaps:
        for b in bindings:
            if "+".join(b.get("keys", [])) == keys or b.get("keys") == keys.split(" "):
                if all(_context_matches(view, c) for c in b.get("context", [])):
                    found = b
    return found


class Editor(object):
    """Drives the stub like a user would, sending the editor's events."""

    def press(self, view, keys):
        """A key press in ``view``: the resolved binding's command runs (a
        text command on the view, else a window command); without one, the
        editor's default runs (``ctrl+s``/``super+s``: ``save``, recorded in
        the window's ``commands`` as ``("save", None)``). Returns the binding."""
        binding = resolve_key(view, keys)
        if binding is None:
            defaults = {"ctrl+s": "save", "super+s": "save"}
            if keys in defaults:
                view.window().commands.append((defaults[keys], None))
            return None
        name, args = binding["command"], binding.get("args")
        if sublime_plugin.text_command(name) is not None:
            view.run_command(name, args)
        else:
            view.window().run_command(name, args)
        return binding

    def new_window(self, folders=()):
        w = Window(folders)
        _windows.append(w)
        sublime_plugin.emit("on_new_window", w)
        return w

    def close_window(self, window):
        sublime_plugin.emit("on_pre_close_window", window)
        for v in list(window._views):
            v.close()
        _windows.remove(window)

    def move_view(self, view, to_window):
        """Drags a tab to another window (Sublime Text 4 sends on_pre_move and
        on_post_move; the view keeps its id)."""
        sublime_plugin.emit("on_pre_move", view)
        w = view._window
        w._views.remove(view)
        if w._active is view:
            w._active = w._views[-1] if w._views else None
        view._window = to_window
        view._group = to_window._active_group
        to_window._views.append(view)
        sublime_plugin.emit("on_post_move", view)
        to_window.focus_view(view)

    def open_file(self, window, path):
        _ui("open_file")
        with open(path, encoding="utf-8") as f:
            text = f.read()
        view = View(window, file_name=path, text=text)
        view._group = window._active_group
        window._views.append(view)
        sublime_plugin.emit("on_load", view)
        window.focus_view(view)
        return view

    def move_cursor(self, view, row, col, select_to=None):
        """Puts the caret at (row, col), 0-based; with ``select_to`` selects up to that (row, col)."""
        a = view.text_point(row, col)
        b = a if select_to is None else view.text_point(*select_to)
        view._sel._regions = [Region(b if select_to is None else a, b)]
        sublime_plugin.emit("on_selection_modified", view)

    def type_text(self, view, text, at_end=True):
        """Inserts ``text`` as the user would (at the end by default)."""
        point = view.size() if at_end else view.sel()[0].b
        view._text = view._text[:point] + text + view._text[point:]
        sublime_plugin.emit("on_modified", view)

    def save(self, view, new_path=None):
        if new_path is not None:
            view._file_name = new_path
        with open(view._file_name, "w", encoding="utf-8") as f:
            f.write(view._text)
        sublime_plugin.emit("on_post_save", view)

    def rename(self, window, view, new_path):
        """The side bar's rename: the file moves and the view follows."""
        os.rename(view._file_name, new_path)
        view._file_name = new_path
        window.run_command("rename_path", {"paths": [new_path]})

    def set_folders(self, window, folders):
        window._folders = list(folders)
        window.run_command("prompt_add_folder")  # what the menu runs; then on_post_window_command
