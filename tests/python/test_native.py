"""Library loading, the ABI check, and status -> exception mapping."""

import ctypes
import ctypes.util
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

import qwen_companion
from qwen_companion import _native
from conftest import INSTALLED, PACKAGE_DIR, REPO, SUBLIME_PACKAGE_DIR

EXPECTED_CLASSES = {
    1: ("QC_NULL_PARAMETER", qwen_companion.NullParameterError),
    2: ("QC_INVALID_UTF8", qwen_companion.InvalidUtf8Error),
    3: ("QC_INVALID_JSON", qwen_companion.InvalidJsonError),
    4: ("QC_INVALID_ARGUMENT", qwen_companion.InvalidArgumentError),
    5: ("QC_INVALID_HANDLE", qwen_companion.InvalidHandleError),
    6: ("QC_NOT_RUNNING", qwen_companion.NotRunningError),
    7: ("QC_ALREADY_RUNNING", qwen_companion.AlreadyRunningError),
    8: ("QC_NOT_FOUND", qwen_companion.NotFoundError),
    9: ("QC_IO", qwen_companion.IoError),
    10: ("QC_PANIC", qwen_companion.PanicError),
    11: ("QC_INTERNAL", qwen_companion.InternalError),
    12: ("QC_REFUSED", qwen_companion.RefusedError),
}


def cargo_version():
    with open(os.path.join(REPO, "Cargo.toml"), encoding="utf-8") as f:
        return re.search(r'^version\s*=\s*"([^"]+)"', f.read(), re.M).group(1)


def test_load_explicit_path_checks_abi_and_reads_version(lib_path):
    lib = qwen_companion.load_library(lib_path)
    assert lib.qc_abi_version() == qwen_companion.ABI_VERSION == 1
    assert lib.version == cargo_version()
    assert qwen_companion.library_version(lib_path) == lib.version
    assert qwen_companion.load_library(lib_path) is lib  # cached


def test_env_variable_is_the_only_candidate(monkeypatch, lib_path):
    monkeypatch.setenv("QWEN_COMPANION_LIB", lib_path)
    assert _native.candidate_paths() == [("$QWEN_COMPANION_LIB", lib_path, True)]
    assert os.path.samefile(qwen_companion.load_library().path, lib_path)


def test_explicit_argument_beats_env(monkeypatch, lib_path):
    monkeypatch.setenv("QWEN_COMPANION_LIB", "/nonexistent/libqwen_companion.so")
    assert _native.candidate_paths(lib_path) == [("argument", lib_path, True)]


def test_search_order_without_env(monkeypatch):
    monkeypatch.delenv("QWEN_COMPANION_LIB", raising=False)
    name = _native.platform_library_name()
    cands = _native.candidate_paths()
    kinds = [c[0] for c in cands]
    assert kinds[:4] == ["bundled with the package", "package directory", "next to the package", "system loader"]
    assert cands[0][1] == os.path.join(PACKAGE_DIR, "_lib", name)
    assert cands[1][1] == os.path.join(PACKAGE_DIR, name)
    assert cands[2][1] == os.path.join(os.path.dirname(PACKAGE_DIR), name)
    assert cands[3][1] == name
    repo_builds = [c[1] for c in cands if c[0] == "repository build"]
    if INSTALLED:  # site-packages is not inside a checkout
        assert repo_builds == []
    else:
        assert repo_builds == [
            os.path.join(REPO, "target", "release", name),
            os.path.join(REPO, "target", "debug", name),
        ]
    assert not any(c[2] for c in cands)


def test_loads_without_configuration(monkeypatch, lib_path):
    """Installed from a wheel: the bundled library; in a checkout: the
    repository's release build (the fallback after the package's places)."""
    if not INSTALLED and os.path.realpath(lib_path) != os.path.realpath(
        os.path.join(REPO, "target", "release", _native.platform_library_name())
    ):
        pytest.skip("the library under test is not the repository's release build")
    monkeypatch.delenv("QWEN_COMPANION_LIB", raising=False)
    lib = qwen_companion.load_library()
    assert lib.qc_abi_version() == 1
    assert os.path.samefile(lib.path, lib_path)


def test_platform_library_name(monkeypatch):
    for platform, name in (
        ("linux", "libqwen_companion.so"),
        ("darwin", "libqwen_companion.dylib"),
        ("win32", "qwen_companion.dll"),
    ):
        monkeypatch.setattr(sys, "platform", platform)
        assert _native.platform_library_name() == name


def test_missing_explicit_library_is_a_clear_error(tmp_path):
    missing = str(tmp_path / "nope" / "libqwen_companion.so")
    with pytest.raises(qwen_companion.LibraryLoadError, match="not found at .*nope"):
        qwen_companion.load_library(missing)


def test_missing_env_library_is_a_clear_error(monkeypatch, tmp_path):
    missing = str(tmp_path / "libqwen_companion.so")
    monkeypatch.setenv("QWEN_COMPANION_LIB", missing)
    with pytest.raises(qwen_companion.LibraryLoadError, match=r"QWEN_COMPANION_LIB"):
        qwen_companion.load_library()


def test_not_a_shared_library(tmp_path):
    bogus = tmp_path / "libqwen_companion.so"
    bogus.write_text("not an ELF file")
    with pytest.raises(qwen_companion.LibraryLoadError, match="cannot load"):
        qwen_companion.load_library(str(bogus))


def test_nothing_found_lists_every_place_tried(monkeypatch, tmp_path):
    monkeypatch.delenv("QWEN_COMPANION_LIB", raising=False)
    monkeypatch.setattr(
        _native,
        "candidate_paths",
        lambda path=None: [("package directory", str(tmp_path / "a.so"), False), ("system loader", "libqwen_companion_nonexistent.so", False)],
    )
    with pytest.raises(qwen_companion.LibraryLoadError) as info:
        qwen_companion.load_library()
    text = str(info.value)
    assert "QWEN_COMPANION_LIB" in text and "a.so" in text and "libqwen_companion_nonexistent.so" in text


def test_abi_mismatch_refuses_to_load(monkeypatch, lib_path):
    monkeypatch.setattr(_native, "ABI_VERSION", 2)
    monkeypatch.setattr(_native, "_loaded", {})
    with pytest.raises(qwen_companion.AbiMismatchError) as info:
        qwen_companion.load_library(lib_path)
    assert "ABI version 1" in str(info.value) and "needs ABI version 2" in str(info.value)
    assert isinstance(info.value, qwen_companion.LibraryLoadError)


def test_a_library_without_qc_abi_version_is_refused(monkeypatch):
    libc = ctypes.util.find_library("c")
    if not libc:
        pytest.skip("no libc to load")
    monkeypatch.setattr(_native, "_loaded", {})
    with pytest.raises(qwen_companion.AbiMismatchError, match="not a qwen-companion library"):
        _native.Library(ctypes.CDLL(libc), libc)


@pytest.mark.parametrize("status", sorted(EXPECTED_CLASSES))
def test_every_status_maps_to_its_class(lib_path, status):
    name, cls = EXPECTED_CLASSES[status]
    lib = qwen_companion.load_library(lib_path)
    assert lib.status_name(status) == name
    err = _native.make_error(status, "the message")
    assert type(err) is cls
    assert qwen_companion.error_class(status) is cls
    assert isinstance(err, qwen_companion.CompanionError)
    assert err.status == status and err.status_name == name and err.message == "the message"
    assert str(err) == name + ": the message"


def test_unknown_status_is_the_base_class(lib_path):
    lib = qwen_companion.load_library(lib_path)
    assert lib.status_name(99) == "QC_UNKNOWN"
    err = _native.make_error(99, "odd")
    assert type(err) is qwen_companion.CompanionError
    assert err.status == 99 and err.status_name == "QC_UNKNOWN"


def test_status_names_agree_with_the_library(lib_path):
    lib = qwen_companion.load_library(lib_path)
    for status in range(0, 14):
        assert lib.status_name(status) == _native._STATUS_NAMES.get(status, "QC_UNKNOWN")


def test_python_exception_bases():
    assert issubclass(qwen_companion.InvalidJsonError, ValueError)
    assert issubclass(qwen_companion.InvalidArgumentError, ValueError)
    assert issubclass(qwen_companion.NotFoundError, LookupError)
    assert issubclass(qwen_companion.ClosedError, qwen_companion.InvalidHandleError)


def test_every_c_function_has_a_prototype(lib_path):
    """Every function of the families this binding covers (companion, reply,
    participant, utilities) that the header declares is prototyped here, and exists."""
    with open(os.path.join(REPO, "include", "qwen_companion.h"), encoding="utf-8") as f:
        declared = set(re.findall(r"^[a-z].*?\b(qc_[a-z0-9_]+)\(", f.read(), re.M))
    covered = {
        name
        for name in declared
        if name.startswith(("qc_companion_", "qc_reply_", "qc_participant_"))
        or name in ("qc_version", "qc_abi_version", "qc_status_name", "qc_string_free")
    }
    assert "qc_companion_new" in covered and "qc_companion_file_opened" in covered
    bound = set(_native.PROTOTYPES) | set(_native.OPTIONAL_PROTOTYPES)
    assert covered <= bound, sorted(covered - bound)
    lib = qwen_companion.load_library(lib_path)
    # the optional ones too: this library is the header's (an older one may lack them)
    for name in bound:
        assert callable(getattr(lib, name)), name


def test_owned_strings_are_freed_and_not_c_char_p():
    for name, (restype, argtypes) in list(_native.PROTOTYPES.items()) + list(_native.OPTIONAL_PROTOTYPES.items()):
        if restype is ctypes.c_char_p:
            # only static strings may use c_char_p (never freed)
            assert name in ("qc_version", "qc_status_name"), name


@pytest.mark.skipif(shutil.which("vermin") is None, reason="vermin is not installed")
def test_python38_compatible():
    """The binding and the Sublime plugin must run in Sublime Text's Python 3.8."""
    result = subprocess.run(
        ["vermin", "--target=3.8-", "--no-tips", "--violations", "--eval-annotations", PACKAGE_DIR, SUBLIME_PACKAGE_DIR],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        universal_newlines=True,
    )
    assert result.returncode == 0, result.stdout


def test_log_events_are_for_pull_mode_only(make_companion, tmp_path):
    """The optional qc_companion_enable_log_events, called through its
    prototype: refused on a companion that takes callables, then, once the
    companion is in pull mode, its log lines come as pulled log events."""
    c = make_companion(workspace_roots=[str(tmp_path)])
    lib = c._lib
    with pytest.raises(qwen_companion.RefusedError):
        lib.call("qc_companion_enable_log_events", c._h(), 5)
    fd = ctypes.c_int32()
    lib.call("qc_companion_enable_events", c._h(), ctypes.byref(fd))
    lib.call("qc_companion_enable_log_events", c._h(), 5)
    c.set_workspace_roots([str(tmp_path), str(tmp_path / "more")])  # something the library logs about
    c.stop()  # it logs "stopped (port N)"
    kinds = []
    for _ in range(200):
        text = lib.call_string("qc_companion_next_event", c._h())
        if not text:
            break
        kinds.append(json.loads(text).get("type"))
    assert "log" in kinds, kinds
