"""Shared fixtures: the library path, a private lock directory, companions
that are always closed, and MCP clients (the official Python SDK)."""

import os
import sys
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
#: $QC_SUBLIME_PACKAGE_DIR: the Sublime tests run against that installed
#: release package (tests/sublime/run.sh: the package as Package Control
#: unpacks it), with its own binding (lib/) and the library it ships for this
#: machine; otherwise against examples/sublime/QwenCompanion and bindings/python.
PACKAGED = bool(os.environ.get("QC_SUBLIME_PACKAGE_DIR"))
if PACKAGED:
    SUBLIME_PACKAGE_DIR = os.path.abspath(os.environ["QC_SUBLIME_PACKAGE_DIR"])
    BINDING_DIR = os.path.join(SUBLIME_PACKAGE_DIR, "lib")
else:
    SUBLIME_PACKAGE_DIR = os.path.join(REPO, "examples", "sublime", "QwenCompanion")
    BINDING_DIR = os.path.join(REPO, "bindings", "python")

# Installed-package mode (tests/python/run_wheel.sh): QC_TEST_INSTALLED=1
# tests the qwen_companion that a platform wheel installed into this
# interpreter's site-packages, with the library bundled in it; the checkout's
# bindings/python stays off sys.path.
INSTALLED = os.environ.get("QC_TEST_INSTALLED") == "1"

for _p in ((HERE,) if INSTALLED else (BINDING_DIR, HERE)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

# Never touch the real ~/.qwen: a companion created without lockDir lands
# under this throwaway QWEN_HOME (set before any library call).
os.environ["QWEN_HOME"] = tempfile.mkdtemp(prefix="qc-pytest-qwen-home-")

if PACKAGED:
    # As in Sublime Text, the plugin and these tests share one binding: the
    # package's own QwenCompanion.lib.qwen_companion (also as qwen_companion).
    from sublime_package import shared_binding  # noqa: E402

    shared_binding()

import qwen_companion  # noqa: E402

#: The directory of the qwen_companion package under test.
PACKAGE_DIR = os.path.dirname(os.path.abspath(qwen_companion.__file__))


def _check_installed():
    import sysconfig

    site = {os.path.realpath(sysconfig.get_paths()[k]) for k in ("purelib", "platlib")}
    where = os.path.realpath(os.path.dirname(PACKAGE_DIR))
    if where not in site:
        raise RuntimeError("QC_TEST_INSTALLED=1, but qwen_companion comes from {}, not from this "
                           "interpreter's site-packages {}".format(PACKAGE_DIR, sorted(site)))
    for var in ("QWEN_COMPANION_LIB", "QWEN_COMPANION_BRIDGE"):
        if os.environ.get(var):
            raise RuntimeError("QC_TEST_INSTALLED=1 tests the bundled library: unset {}".format(var))


if INSTALLED:
    _check_installed()


def wait_for(predicate, timeout=10.0, interval=0.01):
    """Polls ``predicate`` until it returns a true value (returned at once)
    or ``timeout`` seconds pass (then its last value): a readiness poll for
    state the test cannot be told about directly."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return predicate()


def _packaged_lib_path():
    """The library the installed package ships for this machine (its
    lib/platforms.json, as the plugin picks it)."""
    import json
    import platform

    with open(os.path.join(SUBLIME_PACKAGE_DIR, "lib", "platforms.json"), encoding="utf-8") as f:
        table = json.load(f)["platforms"]
    machine = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine().lower(), "x32")
    system = {"darwin": "osx", "win32": "windows"}.get(sys.platform, "linux")
    for name in (system + "-" + machine, system):
        if name in table:
            return os.path.join(SUBLIME_PACKAGE_DIR, "lib", name, table[name]["library"])
    return os.path.join(SUBLIME_PACKAGE_DIR, "lib", "(none for {}-{})".format(system, machine))


def _default_lib_path():
    if PACKAGED:
        if os.environ.get("QWEN_COMPANION_LIB"):
            raise RuntimeError("QC_SUBLIME_PACKAGE_DIR tests load the package's own library: unset QWEN_COMPANION_LIB")
        return _packaged_lib_path()
    if INSTALLED:
        return os.path.join(PACKAGE_DIR, "_lib", qwen_companion._native.platform_library_name())
    env = os.environ.get("QWEN_COMPANION_LIB")
    if env:
        return env
    return os.path.join(REPO, "target", "release", qwen_companion._native.platform_library_name())


LIB_PATH = _default_lib_path()


@pytest.fixture(scope="session")
def lib_path():
    if not os.path.exists(LIB_PATH):
        if PACKAGED:
            pytest.fail("the package ships no library for this machine: {}".format(LIB_PATH))
        if INSTALLED:
            pytest.fail("the installed wheel has no library: {}".format(LIB_PATH))
        pytest.fail("library not built: {} (run cargo build --release)".format(LIB_PATH))
    return LIB_PATH


@pytest.fixture
def lock_dir(tmp_path):
    return str(tmp_path / "ide")


@pytest.fixture
def workspace(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "main.py").write_text("import os\n\nprint('hello')\n", encoding="utf-8")
    (ws / "README.md").write_text("# readme\n", encoding="utf-8")
    return str(ws)


@pytest.fixture
def make_companion(lib_path, lock_dir):
    """Creates companions (private lock dir, short debounce); all closed at the end."""
    made = []

    def make(**kwargs):
        if not isinstance(kwargs.get("config"), str):
            kwargs.setdefault("lock_dir", lock_dir)
            kwargs.setdefault("debounce_ms", 5)
            kwargs.setdefault("max_wait_ms", 20)
        kwargs.setdefault("library", lib_path)
        c = qwen_companion.Companion(**kwargs)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


@pytest.fixture
def mcp_connect():
    """Connects MCP SDK clients to a companion's lock file; all closed at the end."""
    from mcp_client import McpClient

    clients = []

    def connect(lock_file, **kwargs):
        client = McpClient(lock_file, **kwargs)
        clients.append(client)
        return client

    yield connect
    for client in clients:
        try:
            client.close()
        except BaseException:
            pass
