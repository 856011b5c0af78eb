"""The shared harness of the Sublime Text package's tests: the package
loaded as Sublime Text loads it (sublime_package.py) on the stub editor, one
window, and a recorder of the library calls the plugin makes.

    from sublime_harness import st, St, Recorder  # noqa: F401 (the fixture)

The fixture loads QwenCompanion.plugin (and its qwen_events and
qwen_commands modules), with the plugin host off
(``plugins_enabled`` false: set it true, then ``st.plugin.plugin_host()``,
in an isolated HOME as test_sublime_host.py does). The stub runs the
``*_async`` handlers on its async thread; ``sublime_plugin.emit`` and
``sublime.pump`` wait for that work, ``Recorder.threads`` says where each
library call ran.
"""

import json
import os
import sys
import threading
import time

import pytest

from conftest import HERE, PACKAGED, SUBLIME_PACKAGE_DIR

STUBS = os.path.join(HERE, "stubs")
if STUBS not in sys.path:
    sys.path.insert(0, STUBS)

import sublime  # noqa: E402  (the stub)
import sublime_plugin  # noqa: E402,F401
from sublime_package import load_package  # noqa: E402

PLUGIN_FILE = os.path.join(SUBLIME_PACKAGE_DIR, "plugin.py")
#: The companion's plugin modules: plugin.py, its events (qwen_events.py) and
#: its window commands (qwen_commands.py); the others have their own tests.
PLUGIN_MODULES = ("plugin", "qwen_commands", "qwen_events")


def load_plugin():
    """QwenCompanion.plugin (with its events and commands modules), freshly
    imported as Sublime Text imports them."""
    return load_package(only=PLUGIN_MODULES).plugin


class Recorder:
    """Forwards to a Companion and records the public calls made on it."""

    def __init__(self, target):
        self._target = target
        self.calls = []
        self.threads = []  # the thread of each call

    def __getattr__(self, name):
        attr = getattr(self._target, name)
        if name.startswith("_") or not callable(attr):
            return attr

        def call(*args):
            self.calls.append((name,) + args)
            self.threads.append(threading.current_thread().name)
            return attr(*args)

        return call

    def events(self):
        keep = ("file_", "set_cursor", "set_selection", "set_workspace_roots", "diff_")
        return [c for c in self.calls if c[0].startswith(keep)]


class St:
    """One test's editor: plugin module, stub editor, first window."""

    def __init__(self, plugin, editor, window, lock_dir):
        self.plugin = plugin
        self.editor = editor
        self.window = window
        self.lock_dir = lock_dir

    def wc(self, window=None):
        return self.plugin._companions[(window or self.window).id()]

    def record(self, window=None):
        wc = self.wc(window)
        wc.companion = Recorder(wc.companion)
        return wc.companion

    def lock(self, window=None):
        with open(self.wc(window).companion.lock_file, encoding="utf-8") as f:
            return json.load(f)

    def diff_views(self, window=None):
        return [v for v in (window or self.window).views() if v.settings().get("qwen_companion_is_diff")]

    def pump_until(self, predicate, timeout=10.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            sublime.pump(timeout=0.05)
            if predicate():
                return True
        return predicate()


@pytest.fixture
def st(lib_path, lock_dir, workspace):
    sublime.reset()
    s = sublime.load_settings("QwenCompanion.sublime-settings")
    if not PACKAGED:  # an installed package finds the library it ships itself
        s.set("library_path", lib_path)
    s.set("lock_dir", lock_dir)
    s.set("debounce_ms", 5)
    s.set("max_wait_ms", 20)
    s.set("plugins_enabled", False)  # the plugin host has its own tests
    editor = sublime.Editor()
    window = editor.new_window([workspace])
    plugin = load_plugin()
    plugin.plugin_loaded()
    env = St(plugin, editor, window, lock_dir)
    try:
        yield env
    finally:
        plugin.plugin_unloaded()
        assert sublime.ui_violations == [], "UI touched off the UI thread"




def open_terminal(st, command):
    """Runs a "Run ..." command of the package (e.g. qwen_companion_run_qwen) and makes
    the terminal Terminus would open for it; returns (view, terminus_open args)."""
    st.window.run_command(command)
    name, args = st.window.commands[-1]
    assert name == "terminus_open"
    term = st.window.new_file()
    term.set_scratch(True)
    term.settings().set("terminus_view.tag", args["tag"])
    return term, args


def sent(st):
    """The terminus_send_string arguments of the window's commands so far."""
    return [a for n, a in st.window.commands if n == "terminus_send_string"]
