"""The library and qc-mcp-bridge a platform wheel bundles in
qwen_companion/_lib/: found first without configuration, the bridge next to
the library, and clear errors when either is missing. Runs in both modes of
conftest.py: against the checkout (with a wheel-like copy of the package made
here) and against an installed wheel (tests/python/run_wheel.sh)."""

import os
import shutil
import subprocess
import sys

import pytest

import qwen_companion
from qwen_companion import _native, platforms
from conftest import INSTALLED, PACKAGE_DIR

BRIDGE = platforms.bridge_file_name()
LIBRARY = platforms.library_file_name()


def _clean_env(tmp_path, **extra):
    env = dict(os.environ)
    for var in ("QWEN_COMPANION_LIB", "QWEN_COMPANION_BRIDGE", "PYTHONPATH", "LD_LIBRARY_PATH"):
        env.pop(var, None)
    env["QWEN_HOME"] = str(tmp_path / "qwen-home")
    env.update(extra)
    return env


def _copy_package(dest, lib_path=None):
    """A copy of the package under test at dest/qwen_companion, with _lib/
    holding the library and bridge when lib_path is given (a wheel's layout)."""
    pkg = os.path.join(str(dest), "qwen_companion")
    shutil.copytree(PACKAGE_DIR, pkg, ignore=shutil.ignore_patterns("_lib", "__pycache__"))
    if lib_path is not None:
        os.mkdir(os.path.join(pkg, "_lib"))
        shutil.copy2(lib_path, os.path.join(pkg, "_lib", LIBRARY))
        shutil.copy2(os.path.join(os.path.dirname(lib_path), BRIDGE), os.path.join(pkg, "_lib", BRIDGE))
    return pkg


PROBE = """
import qwen_companion
try:
    lib = qwen_companion.load_library()
except qwen_companion.LibraryLoadError as e:
    print("ERROR", e)
else:
    print(lib.path)
    print(qwen_companion.bridge_path())
"""


def _run(site, tmp_path, *args):
    return subprocess.run([sys.executable] + list(args), cwd=str(tmp_path),
                          env=_clean_env(tmp_path, PYTHONPATH=str(site)),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=60)


def _probe(site, tmp_path):
    proc = _run(site, tmp_path, "-c", PROBE)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_the_bridge_is_next_to_the_library(lib_path, monkeypatch):
    monkeypatch.delenv("QWEN_COMPANION_BRIDGE", raising=False)
    expected = os.path.join(os.path.dirname(os.path.abspath(lib_path)), BRIDGE)
    assert qwen_companion.bridge_path(lib_path) == expected
    assert os.access(expected, os.X_OK)
    if INSTALLED:  # no configuration at all: the wheel's own _lib/
        monkeypatch.delenv("QWEN_COMPANION_LIB", raising=False)
        assert qwen_companion.bridge_path() == os.path.join(PACKAGE_DIR, "_lib", BRIDGE)


def test_the_bundled_bridge_runs(lib_path, tmp_path):
    """The bridge starts (execute bit, loader, libc) and says that no IDE runs."""
    bridge = qwen_companion.bridge_path(lib_path)
    proc = subprocess.run([bridge, "plugins"], cwd=str(tmp_path), env=_clean_env(tmp_path),
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=30)
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    assert "qc-mcp-bridge: no running IDE with qwen-companion plugins" in proc.stderr


def test_bridge_env_overrides_and_is_checked(tmp_path, monkeypatch):
    fake = tmp_path / BRIDGE
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setenv("QWEN_COMPANION_BRIDGE", str(fake))
    assert qwen_companion.bridge_path() == str(fake)
    fake.chmod(0o644)
    if sys.platform != "win32":
        with pytest.raises(qwen_companion.BridgeNotFoundError, match="is not executable"):
            qwen_companion.bridge_path()
    monkeypatch.setenv("QWEN_COMPANION_BRIDGE", str(tmp_path / "nope" / BRIDGE))
    with pytest.raises(qwen_companion.BridgeNotFoundError, match=r"not found at .*nope.*\$QWEN_COMPANION_BRIDGE"):
        qwen_companion.bridge_path()


def test_a_library_without_its_bridge_is_a_clear_error(lib_path, tmp_path, monkeypatch):
    monkeypatch.delenv("QWEN_COMPANION_BRIDGE", raising=False)
    lone = tmp_path / "lone" / LIBRARY
    lone.parent.mkdir()
    shutil.copy2(lib_path, str(lone))
    with pytest.raises(qwen_companion.BridgeNotFoundError) as e:
        qwen_companion.bridge_path(str(lone))
    assert str(e.value) == "{} not found at {} (next to {})".format(BRIDGE, str(lone.parent / BRIDGE), str(lone))


def test_a_wheel_layout_loads_its_own_library_first(lib_path, tmp_path):
    """A package with _lib/ (as a wheel installs it) loads that library and
    bridge with no configuration, before anything else."""
    site = tmp_path / "site"
    pkg = _copy_package(site, lib_path)
    # A decoy in the package directory itself: _lib/ comes first.
    with open(os.path.join(pkg, LIBRARY), "wb") as f:
        f.write(b"not a library")
    lines = _probe(site, tmp_path).splitlines()
    assert lines == [os.path.join(pkg, "_lib", LIBRARY), os.path.join(pkg, "_lib", BRIDGE)]
    shown = _run(site, tmp_path, "-m", "qwen_companion")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == [
        "qwen_companion {} (Python binding, ABI 1)".format(qwen_companion.__version__),
        "library: {} (version {})".format(os.path.join(pkg, "_lib", LIBRARY), qwen_companion.__version__),
        "bridge: {}".format(os.path.join(pkg, "_lib", BRIDGE)),
    ]


def test_a_package_without_library_says_what_to_do(tmp_path):
    """Outside a checkout and without _lib/: the error names every place
    tried and how to get the library."""
    site = tmp_path / "site"
    pkg = _copy_package(site)
    out = _probe(site, tmp_path)
    assert out.startswith("ERROR cannot find the qwen-companion library " + LIBRARY), out
    assert "pip install qwen_companion-<version>-py3-none-<platform>.whl" in out
    assert "cargo build --release" in out and "QWEN_COMPANION_LIB" in out
    assert os.path.join(pkg, "_lib", LIBRARY) + " (bundled with the package): not found" in out
    assert "repository build" not in out
    shown = _run(site, tmp_path, "-m", "qwen_companion")
    assert shown.returncode == 1
    assert shown.stderr.startswith("library: not found: cannot find the qwen-companion library"), shown.stderr


def test_a_library_without_bridge_is_shown(lib_path, tmp_path):
    site = tmp_path / "site"
    pkg = _copy_package(site, lib_path)
    os.remove(os.path.join(pkg, "_lib", BRIDGE))
    shown = _run(site, tmp_path, "-m", "qwen_companion")
    assert shown.returncode == 1
    assert shown.stderr == "bridge: not found: {} not found at {} (next to {})\n".format(
        BRIDGE, os.path.join(pkg, "_lib", BRIDGE), os.path.join(pkg, "_lib", LIBRARY))


def test_bundled_dir_is_the_package_lib_folder():
    assert _native.bundled_dir() == os.path.join(PACKAGE_DIR, "_lib")
    assert qwen_companion.BRIDGE_ENV == "QWEN_COMPANION_BRIDGE"
