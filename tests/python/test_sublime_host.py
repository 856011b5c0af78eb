"""The Sublime Text package's seams for its other modules (plugin_host,
register_window_hook) and the process-wide plugin host: started next to the
companions with its MCP server, registered once in an isolated HOME's
~/.qwen/settings.json, its env in the terminals, stopped on unload."""

import json
import os

import pytest

from sublime_harness import st  # noqa: F401 (the fixture; puts the stubs on sys.path)

import sublime  # noqa: E402  (the stub)

HELLO = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                     "examples", "plugins", "hello")


@pytest.fixture
def home(tmp_path, monkeypatch):
    """An isolated HOME (no QWEN_HOME): ~/.qwen is tmp_path/home/.qwen."""
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("HOME", str(h))
    monkeypatch.delenv("QWEN_HOME", raising=False)
    return h


def settings():
    return sublime.load_settings("QwenCompanion.sublime-settings")


def start_host(st):
    settings().set("plugins_enabled", True)
    host = st.plugin.plugin_host()
    assert host is not None, st.plugin._hosts.error
    return host


# -- window hooks ------------------------------------------------------------


def test_window_hooks_see_companions_start_and_close(st, tmp_path):
    opened, closed = [], []
    remove = st.plugin.register_window_hook(lambda w, wc: opened.append((w.id(), wc)), closed.append)
    sublime.pump()  # the window already running is announced (queued to the main thread)
    assert opened == [(st.window.id(), st.wc())]

    other = tmp_path / "other"
    other.mkdir()
    second = st.editor.new_window([str(other)])
    sublime.pump()
    assert opened[-1] == (second.id(), st.wc(second))
    assert opened[-1][1].companion.port > 0

    st.editor.close_window(second)
    assert closed == [second.id()]

    st.window.run_command("qwen_companion_restart")  # a new companion for the same window
    sublime.pump()
    assert closed == [second.id(), st.window.id()]
    assert opened[-1] == (st.window.id(), st.wc())

    remove()
    st.plugin.plugin_unloaded()
    assert closed == [second.id(), st.window.id()]


def test_a_hook_that_raises_does_not_stop_the_others(st):
    seen = []

    def bad(window, wc):
        raise RuntimeError("boom")

    st.plugin.register_window_hook(bad, None)
    st.plugin.register_window_hook(lambda w, wc: seen.append(w.id()), None)
    sublime.pump()
    assert seen == [st.window.id()]


def test_on_open_is_not_called_for_a_companion_closed_before_it_ran(st):
    opened = []
    st.plugin.register_window_hook(lambda w, wc: opened.append(wc), None)
    st.plugin.close_window_companion(st.window.id())  # before the queued on_open runs
    sublime.pump()
    assert opened == []


# -- the plugin host -----------------------------------------------------------


def test_plugin_host_is_off_when_disabled(st):
    assert settings().get("plugins_enabled") is False
    assert st.plugin.plugin_host() is None
    assert st.plugin.plugin_host(create=False) is None


def test_plugin_host_starts_once_with_its_mcp_server_registered(st, home, workspace):
    host = start_host(st)
    assert st.plugin.plugin_host() is host and st.plugin.plugin_host(create=False) is host
    assert host.plugins_dir == str(home / ".qwen" / "companion" / "plugins")

    mcp = host.mcp_info()
    assert mcp["serverName"] == "qwen-companion-plugins"
    with open(mcp["lockFile"], encoding="utf-8") as f:
        lock = json.load(f)
    assert lock["workspacePaths"] == [workspace] and lock["pid"] == os.getpid()

    bridge = home / ".qwen" / "companion" / "bin" / "qc-mcp-bridge"
    assert bridge.is_file() and os.access(str(bridge), os.X_OK)
    settings_file = home / ".qwen" / "settings.json"
    with open(str(settings_file), encoding="utf-8") as f:
        entry = json.load(f)["mcpServers"]["qwen-companion-plugins"]
    assert entry["command"] == str(bridge) and entry["args"] == ["plugins"]
    assert st.plugin._hosts.registration["change"] == "added"

    st.plugin.plugin_unloaded()
    assert host.closed and not os.path.exists(mcp["lockFile"])
    assert st.plugin.plugin_host(create=False) is None
