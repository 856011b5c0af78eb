"""Drives Qwen Sessions (the package's participant.py) under the stub
``sublime`` modules: the package loaded as Sublime Text loads it
(sublime_package.py), and :class:`Ui`, which stands in for the quick panels,
input panels and ``open_file`` the stub windows do not have. Used by
test_sublime_participant.py and tests/interop/sublime_participant_driver.py."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
#: $QC_SUBLIME_PACKAGE_DIR: an installed release package with its binding in lib/ (conftest.py).
PACKAGED = os.environ.get("QC_SUBLIME_PACKAGE_DIR")
PACKAGE_DIR = os.path.abspath(PACKAGED or os.path.join(REPO, "examples", "sublime", "QwenCompanion"))
STUBS = os.path.join(HERE, "stubs")
BINDING_DIR = os.path.join(PACKAGE_DIR, "lib") if PACKAGED else os.path.join(REPO, "bindings", "python")
for _p in (HERE, STUBS, BINDING_DIR):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import sublime  # noqa: E402  (the stub)
from sublime_package import load_package  # noqa: E402


def load():
    """A fresh import of the package -> (Package, plugin module, participant
    module). Call after ``sublime.reset()``; then ``Package.loaded()``."""
    pkg = load_package()
    return pkg, pkg.plugin, pkg.participant


class Ui(object):
    """Records the quick panels, input panels and opened files of the stub
    windows and lets a test (or the interop driver) answer them."""

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

        patches = [(sublime.Window, "show_quick_panel", show_quick_panel),
                   (sublime.Window, "show_input_panel", show_input_panel),
                   (sublime.Window, "open_file", open_file)]
        if not hasattr(sublime, "ENCODED_POSITION"):
            patches.append((sublime, "ENCODED_POSITION", 1))
        for target, attr, value in patches:
            if monkeypatch is not None:
                monkeypatch.setattr(target, attr, value, raising=False)
            else:
                setattr(target, attr, value)
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
        """Answers the newest input panel with ``text``; returns (caption, initial)."""
        window, caption, initial, on_done = self.inputs.pop()
        on_done(text)
        return caption, initial
