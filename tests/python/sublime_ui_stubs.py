"""What the plugin-UI tests need of Sublime Text beyond tests/python/stubs:
quick panels, input panels, popups, ``open_file``, ``packages_path``,
``save_settings``, ``ok_cancel_dialog``. Each is added to the stub only when
the stub lacks it, and records what the plugin did so a test can answer as
the user would (``pick``, ``type_into``)."""

import os
import sys

from conftest import HERE

STUBS = os.path.join(HERE, "stubs")
if STUBS not in sys.path:
    sys.path.insert(0, STUBS)

import sublime  # noqa: E402  (the stub)
import sublime_plugin  # noqa: E402

_packages = [None]
_dialogs = []  # (message, answer)
_dialog_answer = [True]
_saved = []  # settings files saved


def _add(owner, name, value):
    if not hasattr(owner, name):
        setattr(owner, name, value)


def set_packages_path(path):
    _packages[0] = path


def _packages_path():
    assert _packages[0] is not None, "the test did not set a Packages folder"
    return _packages[0]


def _ok_cancel_dialog(message, ok_title="", title=""):
    _dialogs.append(message)
    return _dialog_answer[0]


def _save_settings(name):
    _saved.append(name)


def answer_dialogs(answer):
    _dialog_answer[0] = answer


def dialogs():
    return list(_dialogs)


def saved_settings():
    return list(_saved)


def reset():
    del _dialogs[:]
    del _saved[:]
    _dialog_answer[0] = True


_add(sublime, "packages_path", _packages_path)
_add(sublime, "ok_cancel_dialog", _ok_cancel_dialog)
_add(sublime, "save_settings", _save_settings)
_add(sublime, "HIDE_ON_MOUSE_MOVE_AWAY", 2)


# --- windows ---------------------------------------------------------------


def _quick_panels(window):
    if not hasattr(window, "_qp"):
        window._qp = []
    return window._qp


def _input_panels(window):
    if not hasattr(window, "_ip"):
        window._ip = []
    return window._ip


def _show_quick_panel(self, items, on_select, flags=0, selected_index=-1, on_highlight=None, placeholder=None):
    sublime._ui("Window.show_quick_panel")
    _quick_panels(self).append({"items": items, "on_select": on_select, "selected": selected_index, "placeholder": placeholder})


def _show_input_panel(self, caption, initial_text, on_done, on_change, on_cancel):
    sublime._ui("Window.show_input_panel")
    _input_panels(self).append({"caption": caption, "text": initial_text, "on_done": on_done})


def _open_file(self, path, flags=0, group=-1):
    sublime._ui("Window.open_file")
    for v in self._views:
        if v.file_name() == path:
            self.focus_view(v)
            return v
    with open(path, "rb") as f:
        text = f.read().decode("utf-8", "replace")
    view = sublime.View(self, file_name=path, text=text)
    self._views.append(view)
    sublime_plugin.emit("on_load", view)
    self.focus_view(view)
    return view


_add(sublime.Window, "show_quick_panel", _show_quick_panel)
_add(sublime.Window, "show_input_panel", _show_input_panel)
_add(sublime.Window, "open_file", _open_file)


def last_quick_panel(window):
    panels = _quick_panels(window)
    assert panels, "no quick panel was shown"
    return panels[-1]


def quick_panel_count(window):
    return len(_quick_panels(window))


def rows(window):
    """The rows of the last quick panel as ``[caption, detail]`` lists."""
    return [list(r) if isinstance(r, (list, tuple)) else [r] for r in last_quick_panel(window)["items"]]


def pick(window, caption_part):
    """Picks the first row of the last quick panel whose caption contains
    ``caption_part`` (the panel is then gone)."""
    panel = _quick_panels(window).pop()
    for i, r in enumerate(panel["items"]):
        caption = r[0] if isinstance(r, (list, tuple)) else r
        if caption_part in caption:
            panel["on_select"](i)
            return i
    raise AssertionError("no row {!r} in {}".format(caption_part, panel["items"]))


def last_input_panel(window):
    panels = _input_panels(window)
    assert panels, "no input panel was shown"
    return panels[-1]


def input_panel_count(window):
    return len(_input_panels(window))


def type_into(window, text):
    """Types ``text`` into the last input panel and presses enter."""
    panel = _input_panels(window).pop()
    panel["on_done"](text)


# --- views -----------------------------------------------------------------


_base_show_popup = getattr(sublime.View, "show_popup", None)


def _show_popup(self, content, flags=0, location=-1, max_width=320, max_height=240, on_navigate=None, on_hide=None):
    """Records the popup with its ``on_navigate`` (a test clicks a link by
    calling it), on top of what the base stub records."""
    sublime._ui("View.show_popup")
    if _base_show_popup is not None:
        _base_show_popup(self, content, flags, location, max_width, max_height, on_navigate, on_hide)
    self.popup = {"content": content, "on_navigate": on_navigate}


_base_hide_popup = getattr(sublime.View, "hide_popup", None)


def _hide_popup(self):
    sublime._ui("View.hide_popup")
    if _base_hide_popup is not None:
        _base_hide_popup(self)
    self.popup = None


sublime.View.show_popup = _show_popup
sublime.View.hide_popup = _hide_popup
