"""Loads the Sublime package (examples/sublime/QwenCompanion) as a package
under the stub ``sublime`` modules, the way Sublime Text imports it, so that
its modules' ``from . import plugin as core`` works.

When ``plugin.py`` has no ``register_window_hook`` yet (the companion's seam),
a :class:`FakeCore` stands in for it: same names, same calls, windows opened
and closed by the stub editor fire the hooks. Used by
test_sublime_participant.py and tests/interop/sublime_participant_driver.py.
"""

import importlib
import os
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PACKAGE_DIR = os.path.join(REPO, "examples", "sublime", "QwenCompanion")
STUBS = os.path.join(HERE, "stubs")
BINDING_DIR = os.path.join(REPO, "bindings", "python")
for _p in (STUBS, BINDING_DIR):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import sublime  # noqa: E402  (the stub)
import sublime_plugin  # noqa: E402


def plugin_has_window_hook():
    with open(os.path.join(PACKAGE_DIR, "plugin.py"), encoding="utf-8") as f:
        return "def register_window_hook" in f.read()


class FakeCore(types.ModuleType):
    """plugin.py's seam: ``register_window_hook``, ``companion_for``,
    ``import_binding``; a window "has a companion" from on_new_window (or
    :meth:`open`) until on_pre_close_window."""

    def __init__(self, name):
        super().__init__(name)
        self.hooks = []
        self.windows = set()

    def register_window_hook(self, on_open, on_close):
        self.hooks.append((on_open, on_close))

    def companion_for(self, window, create=True):
        if window is None:
            return None
        if window.id() not in self.windows and create:
            self.open(window)
        return object() if window.id() in self.windows else None

    def import_binding(self):
        import qwen_companion

        return qwen_companion

    def open(self, window):
        if window.id() in self.windows:
            return
        self.windows.add(window.id())
        for on_open, _ in list(self.hooks):
            on_open(window)

    def close(self, window):
        self.windows.discard(window.id())
        for _, on_close in list(self.hooks):
            on_close(window)

    def plugin_loaded(self):
        for w in sublime.windows():
            self.open(w)

    def plugin_unloaded(self):
        pass


def load_package(name="QwenCompanionUnderTest"):
    """Fresh package module ``name`` -> (core, participant module). Call
    after ``sublime.reset()`` (the modules' listeners register on import)."""
    for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
        del sys.modules[key]
    pkg = types.ModuleType(name)
    pkg.__path__ = [PACKAGE_DIR]
    pkg.__package__ = name
    sys.modules[name] = pkg
    if plugin_has_window_hook():
        core = importlib.import_module(name + ".plugin")
    else:
        core = FakeCore(name + ".plugin")
        sys.modules[name + ".plugin"] = core
        pkg.plugin = core

        class FakeCoreListener(sublime_plugin.EventListener):
            def on_new_window(self, window):
                core.open(window)

            def on_pre_close_window(self, window):
                core.close(window)

    participant = importlib.import_module(name + ".participant")
    return core, participant


class Ui(object):
    """Records the quick panels, input panels and opened files of the stub
    windows (the stub has none of these) and lets a test answer them."""

    def __init__(self):
        self.quick = []  # (window, items, on_select)
        self.inputs = []  # (window, caption, initial, on_done)
        self.opened = []  # (window, "path:line:col", flags)

    def install(self, monkeypatch=None):
        ui = self

        def show_quick_panel(window, items, on_select, flags=0, selected_index=-1, on_highlight=None):
            ui.quick.append((window, items, on_select))

        def show_input_panel(window, caption, initial, on_done, on_change, on_cancel):
            ui.inputs.append((window, caption, initial, on_done))

        def open_file(window, fname, flags=0):
            ui.opened.append((window, fname, flags))

        for attr, fn in (("show_quick_panel", show_quick_panel), ("show_input_panel", show_input_panel),
                         ("open_file", open_file)):
            if monkeypatch is not None:
                monkeypatch.setattr(sublime.Window, attr, fn, raising=False)
            else:
                setattr(sublime.Window, attr, fn)
        if not hasattr(sublime, "ENCODED_POSITION"):
            if monkeypatch is not None:
                monkeypatch.setattr(sublime, "ENCODED_POSITION", 1, raising=False)
            else:
                sublime.ENCODED_POSITION = 1
        return self

    def pick(self, predicate):
        """Answers the newest quick panel with its first item matching ``predicate(item)``."""
        window, items, on_select = self.quick.pop()
        for i, item in enumerate(items):
            if predicate(item):
                on_select(i)
                return item
        raise AssertionError("no quick panel item matches; items: {!r}".format(items))

    def type(self, text):
        """Answers the newest input panel with ``text``."""
        window, caption, initial, on_done = self.inputs.pop()
        on_done(text)
        return caption, initial
