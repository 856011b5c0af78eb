"""The Sublime Text package's seams for its other modules (plugin_host,
register_window_hook) and the process-wide plugin host: started next to the
companions with its MCP server, registered once in an isolated HOME's
~/.qwen/settings.json, its env in the terminals, stopped on unload."""

import json
import sys
import os

import pytest

from sublime_harness import st  # noqa: F401 (the fixture; puts the stubs on sys.path)

import sublime  # noqa: E402  (the stub)

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


def test_registration_is_written_once_and_kept(st, home):
    host = start_host(st)
    settings_file = home / ".qwen" / "settings.json"
    before = settings_file.read_bytes()
    os.utime(str(settings_file), (1000000000, 1000000000))
    st.plugin.plugin_unloaded()
    assert host.closed
    st.plugin.plugin_loaded()  # the next Sublime Text session
    again = st.plugin.plugin_host()
    assert again is not None and again is not host
    assert st.plugin._hosts.registration["change"] == "unchanged"
    assert settings_file.read_bytes() == before
    assert os.stat(str(settings_file)).st_mtime == 1000000000  # not even rewritten


def test_user_settings_keep_their_comments_and_keys(st, home):
    qwen = home / ".qwen"
    qwen.mkdir()
    (qwen / "settings.json").write_text('{\n  // mine\n  "ide": {"enabled": true}\n}\n', encoding="utf-8")
    start_host(st)
    text = (qwen / "settings.json").read_text(encoding="utf-8")
    assert "// mine" in text and '"enabled": true' in text and "qwen-companion-plugins" in text


def test_an_unreadable_settings_file_is_reported_and_left_alone(st, home):
    qwen = home / ".qwen"
    qwen.mkdir()
    (qwen / "settings.json").write_text("{ not json", encoding="utf-8")
    host = start_host(st)  # the host and its server still run
    assert host.mcp_info()["serverName"] == "qwen-companion-plugins"
    assert (qwen / "settings.json").read_text(encoding="utf-8") == "{ not json"
    assert "Qwen Code settings not updated" in st.plugin._hosts.error
    sublime.pump()
    assert sum("Qwen Code settings not updated" in m for m in sublime.status_messages) == 1


def test_register_mcp_off_writes_nothing(st, home):
    settings().set("register_mcp", False)
    host = start_host(st)
    assert host.mcp_info()["port"] > 0
    assert not (home / ".qwen" / "settings.json").exists()


def test_a_host_that_cannot_start_is_none_and_said_once(st, home, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x", encoding="utf-8")
    settings().set("plugins_dir", str(blocker / "plugins"))
    settings().set("plugins_enabled", True)
    assert st.plugin.plugin_host() is None
    assert st.plugin.plugin_host() is None  # no retry storm: failed once
    sublime.pump()
    shown = [m for m in sublime.status_messages if "cannot start the plugin host" in m]
    assert len(shown) == 1
    assert st.wc().companion.port > 0  # the companions are not affected

    settings().set("plugins_dir", str(tmp_path / "plugins"))  # fixed: the change restarts it
    host = st.plugin.plugin_host(create=False)
    assert host is not None and host.plugins_dir == str(tmp_path / "plugins")


def test_changing_plugins_dir_restarts_the_host(st, home, tmp_path):
    host = start_host(st)
    lock_file = host.mcp_info()["lockFile"]
    settings().set("plugins_dir", str(tmp_path / "elsewhere"))
    new = st.plugin.plugin_host(create=False)
    assert host.closed and new is not None and new.plugins_dir == str(tmp_path / "elsewhere")
    assert new.mcp_info()["lockFile"] == lock_file  # same place, new server
    settings().set("plugins_enabled", False)
    assert new.closed and st.plugin.plugin_host() is None


def test_show_notification_from_a_plugin_pops_up_in_the_editor(st, home, workspace):
    main = os.path.join(workspace, "main.py")
    view = st.editor.open_file(st.window, main)
    host = start_host(st)
    fixtures = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "plugins", "fixtures")
    host.install(os.path.join(fixtures, "todo-quadrant"))
    host.call("local.todo-quadrant", "manage_todo_quadrant", {"action": "add", "content": "water <the> plants"})
    out = host.call("local.todo-quadrant", "manage_todo_quadrant", {"action": "remind_now"})
    assert out["content"][0]["text"] == "Reminder shown."  # the plugin got {"shown": true}
    assert st.pump_until(lambda: view.popups)  # the digest of today's todos
    assert view.popups == ["<b>1 todo for today</b><br>\u2022 water &lt;the&gt; plants"]  # text escaped
    assert "1 todo for today: \u2022 water <the> plants" in sublime.status_messages


def test_a_capability_registered_by_another_module_replaces_the_default(st, home, workspace):
    seen = []
    st.plugin.register_host_capability("show_notification", lambda r: seen.append(r) or {"shown": False})
    host = start_host(st)
    fixtures = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "plugins", "fixtures")
    host.install(os.path.join(fixtures, "todo-quadrant"))
    host.call("local.todo-quadrant", "manage_todo_quadrant", {"action": "add", "content": "x"})
    host.call("local.todo-quadrant", "manage_todo_quadrant", {"action": "remind_now"})
    assert seen and seen[0]["params"]["viewId"] == "quadrant"


def test_terminals_get_the_mcp_servers_env(st, home, workspace):
    """Every terminal the package starts carries the companion's env merged
    with the plugin MCP server's (the library's is empty today: the bridge
    finds the server by its lock file; a variable it adds must still reach
    the terminals)."""
    sublime.add_resource("Packages/Terminus/Terminus.sublime-settings")
    host = start_host(st)
    assert st.wc().terminal_env() == dict(st.wc().companion.terminal_env(), **host.mcp_info()["env"])
    st.plugin._hosts.mcp = dict(st.plugin._hosts.mcp, env={"QWEN_PLUGINS_TEST": "on"})
    port = str(st.wc().companion.port)

    st.window.run_command("qwen_companion_run_qwen")
    env = st.window.commands[-1][1]["env"]
    assert env["QWEN_PLUGINS_TEST"] == "on" and env["QWEN_CODE_IDE_SERVER_PORT"] == port

    st.window.run_command("terminus_open", {"cmd": ["bash"]})
    assert st.window.commands[-1][1]["env"]["QWEN_PLUGINS_TEST"] == "on"

    st.window.run_command("qwen_companion_show_env")
    assert "export QWEN_PLUGINS_TEST='on'\n" in sublime.get_clipboard()


def test_the_bridge_copy_is_skipped_when_unchanged(tmp_path):
    from QwenCompanion.qwen_core import host as host_mod

    src = tmp_path / "qc-mcp-bridge"
    src.write_bytes(b"#!/bin/sh\nexit 0\n")
    dest = tmp_path / "bin" / "qc-mcp-bridge"
    host_mod.install_bridge(str(src), str(dest))
    assert dest.read_bytes() == src.read_bytes() and os.access(str(dest), os.X_OK)
    assert oct(os.stat(str(dest.parent)).st_mode & 0o777) == "0o700"
    ino = os.stat(str(dest)).st_ino
    host_mod.install_bridge(str(src), str(dest))
    assert os.stat(str(dest)).st_ino == ino  # same bytes: not copied again
    src.write_bytes(b"#!/bin/sh\nexit 1\n")  # a newer bridge
    host_mod.install_bridge(str(src), str(dest))
    assert dest.read_bytes() == b"#!/bin/sh\nexit 1\n" and os.stat(str(dest)).st_ino != ino


def test_a_running_bridge_is_moved_aside_on_windows(tmp_path, monkeypatch):
    """Windows refuses to overwrite a running executable but renames it: the
    install moves the old bridge aside, and removes such copies once free."""
    from QwenCompanion.qwen_core import host as host_mod

    src = tmp_path / "qc-mcp-bridge.exe"
    src.write_bytes(b"new")
    dest = tmp_path / "bin" / "qc-mcp-bridge.exe"
    dest.parent.mkdir()
    dest.write_bytes(b"old, running")
    raw_replace = os.replace

    def replace(a, b):
        if str(b) == str(dest) and dest.exists() and str(a).endswith(".tmp-{}".format(os.getpid())):
            raise PermissionError(13, "Access is denied", str(b))
        return raw_replace(a, b)

    monkeypatch.setattr(host_mod.os, "replace", replace)
    with pytest.raises(PermissionError):
        host_mod.install_bridge(str(src), str(dest), windows=False)  # elsewhere the error stands
    assert dest.read_bytes() == b"old, running"
    host_mod.install_bridge(str(src), str(dest), windows=True)
    assert dest.read_bytes() == b"new"
    assert sorted(p.name for p in dest.parent.iterdir()) == ["qc-mcp-bridge.exe"]


def test_the_bridge_name_follows_the_os(st, monkeypatch):
    from QwenCompanion.qwen_core import host as host_mod

    qc = st.plugin.import_binding()
    assert host_mod.bridge_name(qc) == "qc-mcp-bridge"
    monkeypatch.setattr(sys, "platform", "win32")
    assert host_mod.bridge_name(qc) == "qc-mcp-bridge.exe"


def test_plugin_loaded_starts_the_host_off_the_ui_thread(st, home, monkeypatch):
    st.plugin.plugin_unloaded()
    settings().set("plugins_enabled", True)
    threads = []
    raw_start = st.plugin._hosts._start

    def start(folders):
        threads.append(__import__("threading").current_thread().name)
        return raw_start(folders)

    monkeypatch.setattr(st.plugin._hosts, "_start", start)
    st.plugin.plugin_loaded()
    sublime.wait_async()
    host = st.plugin.plugin_host(create=False)
    assert host is not None and threads == [sublime.ASYNC_THREAD_NAME]
    assert (home / ".qwen" / "settings.json").is_file()
