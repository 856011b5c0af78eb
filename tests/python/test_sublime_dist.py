"""The plugin and the libraries the package ships (lib/<platform>/, chosen
with sublime.platform() and sublime.arch()): the one for this machine is
loaded with no QWEN_COMPANION_LIB, a machine the package has none for gets
one clear message, a zipped package is told to unpack.

Under tests/sublime/run.sh ($QC_SUBLIME_PACKAGE_DIR) this runs on the release
package as Package Control installed it; otherwise on a package that
``examples/sublime/package.py --install`` made from this checkout."""

import json
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

from conftest import HERE, PACKAGED, REPO, SUBLIME_PACKAGE_DIR, wait_for
from sublime_package import load_package  # puts the stubs on sys.path

import sublime  # noqa: E402  (the stub)
import sublime_plugin  # noqa: E402


@pytest.fixture(scope="module")
def package_dir(tmp_path_factory, lib_path):
    """An installed package that ships its libraries."""
    if PACKAGED:
        return SUBLIME_PACKAGE_DIR
    packages = tmp_path_factory.mktemp("Packages")
    out = subprocess.run(
        [sys.executable, os.path.join(REPO, "examples", "sublime", "package.py"), "--install", str(packages),
         "--library", lib_path],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    assert out.returncode == 0, out.stdout
    return str(packages / "QwenCompanion")


LOAD_CHECK = r"""
import os, sys
sys.path.insert(0, {here!r})
from sublime_package import load_package
import sublime
path_before = list(sys.path)
plugin = load_package({package!r}, only=("plugin",)).plugin
qc = plugin.import_binding()
lib = qc.load_library(plugin.library_path())
print(qc.__name__)
print(os.path.abspath(qc.__file__))
print(os.path.abspath(lib.path))
print(sys.path == path_before and "qwen_companion" not in sys.modules)
"""


def test_plugin_loads_the_library_shipped_for_this_machine(package_dir, tmp_path):
    env = dict(os.environ)
    for key in ("QWEN_COMPANION_LIB", "PYTHONPATH"):
        env.pop(key, None)
    out = subprocess.run(
        [sys.executable, "-c", LOAD_CHECK.format(here=HERE, package=package_dir)],
        cwd=str(tmp_path), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    assert out.returncode == 0, out.stderr
    name, binding_file, library, private = out.stdout.split("\n")[:4]
    assert name == "QwenCompanion.lib.qwen_companion"
    assert binding_file == os.path.join(package_dir, "lib", "qwen_companion", "__init__.py")
    with open(os.path.join(package_dir, "lib", "platforms.json"), encoding="utf-8") as f:
        table = json.load(f)["platforms"]
    name = {"x64": "linux-x64", "arm64": "linux-arm64"}[sublime.arch()]
    assert library == os.path.join(package_dir, "lib", name, table[name]["library"])
    assert private == "True"  # nothing on the global sys.path, no global qwen_companion


def test_library_path_order(package_dir, monkeypatch):
    plugin = load_package(package_dir, only=("plugin",)).plugin
    s = sublime.load_settings("QwenCompanion.sublime-settings")
    monkeypatch.delenv("QWEN_COMPANION_LIB", raising=False)
    try:
        s.set("library_path", "~/elsewhere/lib.so")
        assert plugin.library_path() == os.path.expanduser("~/elsewhere/lib.so")
        s.set("library_path", None)
        monkeypatch.setenv("QWEN_COMPANION_LIB", "/from/env.so")
        assert plugin.library_path() is None  # the binding reads the variable
        monkeypatch.delenv("QWEN_COMPANION_LIB")
        assert plugin.library_path().startswith(os.path.join(package_dir, "lib", "linux-"))
    finally:
        s.set("library_path", None)


def test_platform_names_follow_package_control(package_dir):
    plugin = load_package(package_dir, only=("plugin",)).plugin
    b = sys.modules["QwenCompanion.qwen_core.binding"]
    assert b.platform_names("osx", "arm64") == ["osx-arm64", "osx"]
    fake = os.path.join(os.path.dirname(package_dir), "Fake")
    shutil.rmtree(fake, ignore_errors=True)
    os.makedirs(os.path.join(fake, "lib", "osx"))
    os.makedirs(os.path.join(fake, "lib", "windows-x64"))
    try:
        with open(os.path.join(fake, "lib", "platforms.json"), "w") as f:
            json.dump({"version": "9.9.9", "platforms": {
                "osx": {"library": "libqwen_companion.dylib", "bridge": "qc-mcp-bridge"},
                "windows-x64": {"library": "qwen_companion.dll", "bridge": "qc-mcp-bridge.exe"}}}, f)
        for rel in ("osx/libqwen_companion.dylib", "windows-x64/qwen_companion.dll"):
            open(os.path.join(fake, "lib", rel), "wb").close()
        # the universal macOS build serves both arches; Windows is per arch
        for arch in ("x64", "arm64"):
            assert b.bundled_library(fake, "osx", arch) == os.path.join(fake, "lib", "osx", "libqwen_companion.dylib")
        assert b.bundled_library(fake, "windows", "x64").endswith(os.path.join("windows-x64", "qwen_companion.dll"))
        with pytest.raises(b.MissingLibraryError, match=r"9\.9\.9\) has no native library for windows-arm64; "
                                                        r"it ships osx, windows-x64\. Set library_path"):
            b.bundled_library(fake, "windows", "arm64")
        os.unlink(os.path.join(fake, "lib", "osx", "libqwen_companion.dylib"))
        with pytest.raises(b.MissingLibraryError, match="is missing from the package: reinstall"):
            b.bundled_library(fake, "osx", "x64")
        # no lib/platforms.json: a development checkout, the binding searches
        assert b.bundled_library(os.path.join(REPO, "examples", "sublime", "QwenCompanion"), "linux", "x64") is None
    finally:
        shutil.rmtree(fake)
    assert plugin.PACKAGE_DIR == package_dir


def test_zipped_package_says_once_that_it_must_be_unpacked(package_dir, workspace, lock_dir, tmp_path, monkeypatch):
    """Installed Packages/QwenCompanion.sublime-package: Sublime Text imports
    the plugin from the zip; the plugin says to unpack it, once."""
    zipped = str(tmp_path / "Installed Packages" / "QwenCompanion.sublime-package")
    os.makedirs(os.path.dirname(zipped))
    with zipfile.ZipFile(zipped, "w") as zf:
        for folder, dirs, files in os.walk(package_dir):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for f in files:
                full = os.path.join(folder, f)
                zf.write(full, os.path.relpath(full, package_dir))
    sublime.reset()
    monkeypatch.delenv("QWEN_COMPANION_LIB", raising=False)
    s = sublime.load_settings("QwenCompanion.sublime-settings")
    s.set("lock_dir", lock_dir)
    s.set("register_mcp", False)
    editor = sublime.Editor()
    windows = [editor.new_window([workspace]), editor.new_window([workspace])]
    printed = []
    # the binding the other tests share with the unpacked package (conftest) stays theirs
    shared = dict((k, v) for k, v in sys.modules.items() if k.startswith("QwenCompanion.lib"))
    plugin = load_package(zipped, only=("plugin",)).plugin
    assert plugin.PACKAGE_DIR == zipped
    monkeypatch.setattr(plugin, "log", lambda m: printed.append(m))
    plugin.plugin_loaded()
    try:
        for w in windows:
            editor.move_cursor(editor.open_file(w, os.path.join(workspace, "main.py")), 1, 0)
        sublime.pump(timeout=0.2)
        said = [m for m in printed if "zipped" in m]
        assert len(said) == 1, printed
        assert "runs from a zipped .sublime-package" in said[0] and "unzip it into Packages/QwenCompanion" in said[0]
        assert len([m for m in sublime.status_messages if "zipped" in m]) == 1, sublime.status_messages
        assert plugin._companions == {}
        assert not [k for k in sys.modules if k.startswith("QwenCompanion.lib")]  # never imported from the zip
    finally:
        plugin.plugin_unloaded()
        sublime.reset()
        sys.modules.update(shared)


def test_machine_without_a_library_gets_one_message(package_dir, lib_path, workspace, lock_dir, monkeypatch):
    """Two windows and many events, the plugin host too: one console line and
    one status message, no companion, no traceback; the setting library_path
    then brings the companions up."""
    sublime.reset()
    monkeypatch.delenv("QWEN_COMPANION_LIB", raising=False)
    monkeypatch.setattr(sublime, "arch", lambda: "x32")
    s = sublime.load_settings("QwenCompanion.sublime-settings")
    s.set("lock_dir", lock_dir)
    s.set("plugins_dir", os.path.join(lock_dir, "no-plugins"))
    s.set("register_mcp", False)
    editor = sublime.Editor()
    windows = [editor.new_window([workspace]), editor.new_window([workspace])]
    printed = []
    plugin = load_package(package_dir, only=("plugin", "qwen_events")).plugin  # with its event listener
    monkeypatch.setattr(plugin, "log", lambda m: printed.append(m))
    plugin.plugin_loaded()
    try:
        for w in windows:
            view = editor.open_file(w, os.path.join(workspace, "main.py"))
            editor.move_cursor(view, 1, 0)
            editor.move_cursor(view, 2, 0)
        sublime.pump(timeout=0.2)
        assert plugin.plugin_host(create=True) is None
        sublime.pump(timeout=0.2)
        said = [m for m in printed if "no native library" in m]
        assert len(said) == 1, printed
        assert "no native library for linux-x32; it ships" in said[0] and "library_path" in said[0]
        shown = [m for m in sublime.status_messages if "no native library" in m]
        assert len(shown) == 1, sublime.status_messages
        assert not [m for m in printed if "Traceback" in m or "failed:" in m], printed
        assert plugin._companions == {}
        # the user points library_path at a library: the next event starts the companions
        s.set("library_path", lib_path)
        sublime.pump(timeout=0.2)
        sublime_plugin.emit("on_activated_async", windows[0].active_view())
        assert wait_for(lambda: windows[0].id() in plugin._companions)
    finally:
        plugin.plugin_unloaded()
        s.set("library_path", None)
        sublime.reset()


def test_bridge_copy_is_executable_even_if_extraction_lost_the_bit(package_dir, tmp_path):
    """Package Control restores only the owner's x bit, and an unzip by hand
    may drop it: Qwen Code starts the copy in ~/.qwen/companion/bin, made 0700
    (user-only, as every editor installs it)."""
    load_package(package_dir, only=("plugin",))
    host = sys.modules["QwenCompanion.qwen_core.host"]
    with open(os.path.join(package_dir, "lib", "platforms.json"), encoding="utf-8") as f:
        table = json.load(f)["platforms"]
    name = {"x64": "linux-x64", "arm64": "linux-arm64"}[sublime.arch()]
    shipped = os.path.join(package_dir, "lib", name, table[name]["bridge"])
    assert os.access(shipped, os.X_OK), "the package's bridge lost its executable bit"
    plain = tmp_path / "qc-mcp-bridge"
    shutil.copyfile(shipped, str(plain))
    os.chmod(str(plain), 0o644)
    dest = host.install_bridge(str(plain), str(tmp_path / "home" / "bin" / "qc-mcp-bridge"))
    assert os.stat(dest).st_mode & 0o777 == 0o700
    # it runs: with no IDE serving plugins for this folder it says so
    out = subprocess.run([dest], cwd=str(tmp_path), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, universal_newlines=True, timeout=30)
    assert out.stdout.startswith("qc-mcp-bridge: "), out.stdout
