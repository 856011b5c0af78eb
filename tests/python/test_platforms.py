"""qwen_companion.platforms: file names, shell lines and the pull-mode wait of
every OS, each checked here by passing the OS name (these run on Linux)."""

import ctypes
import os
import subprocess
import sys

import pytest

from qwen_companion import platforms
from qwen_companion import _native

HOSTILE = "it's a \"test\" ; $HOME `id` %PATH% ^& | <x> \\ \u2019 ! *"


@pytest.mark.parametrize(
    "os_name, lib, bridge",
    [
        ("linux", "libqwen_companion.so", "qc-mcp-bridge"),
        ("darwin", "libqwen_companion.dylib", "qc-mcp-bridge"),
        ("win32", "qwen_companion.dll", "qc-mcp-bridge.exe"),
        ("cygwin", "qwen_companion.dll", "qc-mcp-bridge.exe"),
        ("freebsd13", "libqwen_companion.so", "qc-mcp-bridge"),
    ],
)
def test_file_names(os_name, lib, bridge):
    assert platforms.library_file_name(os_name) == lib
    assert platforms.bridge_file_name(os_name) == bridge
    assert _native.platform_library_name(os_name) == lib


def test_file_names_default_to_this_os():
    assert platforms.library_file_name() == platforms.library_file_name(sys.platform)
    assert platforms.bridge_file_name() == platforms.bridge_file_name(sys.platform)


def test_shell_choice():
    assert platforms.shell_for("auto", "win32", {"SHELL": "/bin/bash"}) == "powershell"
    assert platforms.shell_for("auto", "linux", {"SHELL": "/usr/bin/fish"}) == "fish"
    assert platforms.shell_for("", "darwin", {"SHELL": "/bin/zsh"}) == "posix"
    assert platforms.shell_for(None, "linux", {}) == "posix"
    assert platforms.shell_for("auto", "linux", {"SHELL": "/opt/microsoft/powershell/pwsh"}) == "powershell"
    assert platforms.shell_for("CMD", "linux", {}) == "cmd"
    for shell in platforms.SHELLS:
        assert platforms.shell_for(shell, "win32", {}) == shell
    with pytest.raises(ValueError, match="unknown terminal shell 'tcsh'"):
        platforms.shell_for("tcsh", "linux", {})


def test_lines_of_each_shell():
    env = {"QWEN_CODE_IDE_SERVER_PORT": "4711", "QWEN_CODE_IDE_WORKSPACE_PATH": "C:\\a b;D:\\c"}
    assert platforms.env_lines(env, "posix") == [
        "export QWEN_CODE_IDE_SERVER_PORT='4711'",
        "export QWEN_CODE_IDE_WORKSPACE_PATH='C:\\a b;D:\\c'",
    ]
    assert platforms.env_lines(env, "fish") == [
        "set -gx QWEN_CODE_IDE_SERVER_PORT '4711'",
        "set -gx QWEN_CODE_IDE_WORKSPACE_PATH 'C:\\\\a b;D:\\\\c'",
    ]
    assert platforms.env_lines(env, "powershell") == [
        "$env:QWEN_CODE_IDE_SERVER_PORT = '4711'",
        "$env:QWEN_CODE_IDE_WORKSPACE_PATH = 'C:\\a b;D:\\c'",
    ]
    assert platforms.env_lines(env, "cmd") == [
        'set "QWEN_CODE_IDE_SERVER_PORT=4711"',
        'set "QWEN_CODE_IDE_WORKSPACE_PATH=C:\\a b;D:\\c"',
    ]


def test_powershell_doubles_every_single_quote():
    assert platforms.env_line("K", "it's \u2018x\u2019 $a `b", "powershell") == (
        "$env:K = 'it''s \u2018\u2018x\u2019\u2019 $a `b'"
    )


def test_cmd_carries_what_it_can_and_refuses_the_rest():
    assert platforms.env_line("K", "a ^& b | c <d> (e); f' $g !h", "cmd") == 'set "K=a ^& b | c <d> (e); f\' $g !h"'
    for bad, what in (("a\nb", "line break"), ("a\rb", "line break"), ('a"b', "double quote"), ("50%", "percent")):
        with pytest.raises(ValueError, match="cmd cannot set K to a value with .*" + what):
            platforms.env_line("K", bad, "cmd")


def test_bad_names_values_and_shells_are_refused():
    for name in ("", "1A", "A B", "A=B", "A;B", "$A"):
        with pytest.raises(ValueError, match="not an environment variable name"):
            platforms.env_line(name, "v", "posix")
    with pytest.raises(ValueError, match="NUL"):
        platforms.env_line("K", "a\0b", "posix")
    with pytest.raises(TypeError, match="must be str"):
        platforms.env_line("K", 5, "posix")
    with pytest.raises(ValueError, match="unknown shell 'csh'"):
        platforms.env_line("K", "v", "csh")


@pytest.mark.parametrize("value", [HOSTILE, "line one\nline two", "", "'", "'\\''", "\\"])
def test_posix_line_round_trips_through_sh(value):
    line = platforms.env_line("QC_TEST_VALUE", value, "posix")
    out = subprocess.run(
        ["sh", "-c", line + '\nprintf %s "$QC_TEST_VALUE"'], stdout=subprocess.PIPE, check=True
    ).stdout.decode("utf-8")
    assert out == value


def test_wait_method_per_os():
    assert platforms.event_wait_method("linux") == "select"
    assert platforms.event_wait_method("darwin") == "select"
    assert platforms.event_wait_method("win32") == "WaitForSingleObject"


def test_handle_is_sign_extended():
    assert platforms.handle_from_int32(0x1A4, 64) == 0x1A4
    assert platforms.handle_from_int32(-1, 64) == 0xFFFFFFFFFFFFFFFF
    assert platforms.handle_from_int32(-2, 32) == 0xFFFFFFFE
    assert platforms.handle_from_int32(-(1 << 31), 64) == 0xFFFFFFFF80000000
    with pytest.raises(ValueError, match="not an int32_t"):
        platforms.handle_from_int32(1 << 31, 64)


class FakeKernel32(object):
    def __init__(self, result):
        self.result = result
        self.calls = []

    def WaitForSingleObject(self, handle, ms):  # noqa: N802 (the Win32 name)
        self.calls.append((handle.value, ms.value))
        return self.result


def test_windows_wait_calls_wait_for_single_object():
    k = FakeKernel32(platforms.WAIT_OBJECT_0)
    assert platforms.wait_event_handle(-5, 0.25, "win32", kernel32=k) is True
    mask = (1 << (8 * ctypes.sizeof(ctypes.c_void_p))) - 1
    assert k.calls == [((-5) & mask, 250)]
    k = FakeKernel32(platforms.WAIT_TIMEOUT)
    assert platforms.wait_event_handle(8, None, "win32", kernel32=k) is False
    assert k.calls == [(8, platforms.INFINITE)]
    with pytest.raises(OSError, match="WaitForSingleObject .* failed"):
        platforms.wait_event_handle(8, 1, "win32", kernel32=FakeKernel32(0xFFFFFFFF))


def test_posix_wait_uses_the_descriptor():
    r, w = os.pipe()
    try:
        assert platforms.wait_event_handle(r, 0, "linux") is False
        os.write(w, b"x")
        assert platforms.wait_event_handle(r, 1, "linux") is True
    finally:
        os.close(r)
        os.close(w)
