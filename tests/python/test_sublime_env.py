"""The Sublime plugin's terminal environment lines ("Qwen Companion: Terminal
Environment"): the shell of the ``terminal_shell`` setting, its quoting, and
the values a shell cannot carry."""

import sys

import pytest

from sublime_harness import st  # noqa: F401 (the fixture; puts the stubs on sys.path)

import sublime  # noqa: E402  (the stub)


def test_show_env_command_copies_export_lines(st, workspace):
    st.window.run_command("qwen_companion_show_env")
    port = st.wc().companion.port
    clip = sublime.get_clipboard()
    assert "export QWEN_CODE_IDE_SERVER_PORT='{}'\n".format(port) in clip
    assert "export QWEN_CODE_IDE_WORKSPACE_PATH='{}'\n".format(workspace) in clip
    panel = st.window.find_output_panel("qwen_companion")
    assert clip in panel.substr(sublime.Region(0, panel.size()))
    assert ("show_panel", {"panel": "output.qwen_companion"}) in st.window.commands


def test_env_lines_quote_for_the_shell(st):
    env = {"QWEN_CODE_IDE_WORKSPACE_PATH": "/a b/c:/d'e", "QWEN_CODE_IDE_SERVER_PORT": "1"}
    assert st.plugin.env_lines(env, "posix") == [
        "export QWEN_CODE_IDE_SERVER_PORT='1'",
        "export QWEN_CODE_IDE_WORKSPACE_PATH='/a b/c:/d'\\''e'",
    ]
    assert st.plugin.env_lines(env, "powershell") == [
        "$env:QWEN_CODE_IDE_SERVER_PORT = '1'",
        "$env:QWEN_CODE_IDE_WORKSPACE_PATH = '/a b/c:/d''e'",
    ]


def test_env_lines_follow_the_terminal_shell_setting(st, workspace, monkeypatch):
    s = sublime.load_settings("QwenCompanion.sublime-settings")
    port = st.wc().companion.port
    try:
        s.set("terminal_shell", "cmd")
        st.window.run_command("qwen_companion_show_env")
        assert 'set "QWEN_CODE_IDE_SERVER_PORT={}"\n'.format(port) in sublime.get_clipboard()
        s.set("terminal_shell", "auto")
        monkeypatch.setattr(sys, "platform", "win32")
        st.window.run_command("qwen_companion_show_env")
        assert "$env:QWEN_CODE_IDE_SERVER_PORT = '{}'\n".format(port) in sublime.get_clipboard()
        monkeypatch.setattr(sys, "platform", "linux")
        monkeypatch.setenv("SHELL", "/usr/bin/fish")
        st.window.run_command("qwen_companion_show_env")
        assert "set -gx QWEN_CODE_IDE_SERVER_PORT '{}'\n".format(port) in sublime.get_clipboard()
        # what cmd cannot carry is an error shown to the user, not a broken line
        s.set("terminal_shell", "cmd")
        with pytest.raises(ValueError, match="cmd cannot set K"):
            st.plugin.env_lines({"K": "50%"})
        sublime.set_clipboard("before")
        monkeypatch.setattr(st.wc(), "terminal_env", lambda: {"K": "a\nb"})
        st.window.run_command("qwen_companion_show_env")
        assert sublime.get_clipboard() == "before"
        assert "line break" in sublime.error_messages[-1] and "PowerShell" in sublime.error_messages[-1]
    finally:
        s.set("terminal_shell", "auto")
