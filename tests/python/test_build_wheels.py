"""bindings/python/build_wheels.py on small synthetic native files (ELF, PE,
Mach-O headers carrying just what the builder reads): one wheel per triple
with the right tag, reproducible bytes, and a clear error (and no wheel
written) for a wrong CPU, a too-new glibc or macOS, a non-system DLL/dylib,
a missing file or an unknown triple. tests/python/run_wheel.sh checks the
wheels of the real release build."""

import importlib.util
import os
import struct
import zipfile

import pytest

from conftest import REPO

_spec = importlib.util.spec_from_file_location("build_wheels", os.path.join(REPO, "bindings", "python", "build_wheels.py"))
bw = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bw)

VERSION = bw.package_version(bw.package_files())


def elf(machine, extra=b""):
    h = bytearray(64)
    h[0:4] = b"\x7fELF"
    h[4], h[5], h[6] = 2, 1, 1
    struct.pack_into("<HH", h, 16, 3, machine)
    return bytes(h) + extra


def pe(dll, imports):
    data = bytearray(0x400)
    data[0:2] = b"MZ"
    struct.pack_into("<I", data, 0x3C, 0x40)
    off = 0x40
    data[off:off + 4] = b"PE\0\0"
    struct.pack_into("<HH", data, off + 4, 0x8664, 1)
    struct.pack_into("<HH", data, off + 20, 240, 0x2022 if dll else 0x22)
    opt = off + 24
    struct.pack_into("<H", data, opt, 0x20B)
    struct.pack_into("<II", data, opt + 120, 0x1000, 20 * (len(imports) + 1))
    struct.pack_into("<IIII", data, opt + 240 + 8, 0x200, 0x1000, 0x200, 0x200)
    names = 0x1000 + 20 * (len(imports) + 1)
    for i, name in enumerate(imports):
        struct.pack_into("<IIIII", data, 0x200 + 20 * i, 0, 0, 0, names, 0)
        raw = 0x200 + names - 0x1000
        data[raw:raw + len(name) + 1] = name.encode("ascii") + b"\0"
        names += len(name) + 1
    return bytes(data)


def macho(cpu, filetype, minos, dylibs=("/usr/lib/libSystem.B.dylib",)):
    cmds = struct.pack("<IIIIII", 0x32, 24, 1, (minos[0] << 16) | (minos[1] << 8), 0, 0)
    for name in dylibs:
        raw = name.encode("ascii") + b"\0"
        size = (24 + len(raw) + 7) // 8 * 8
        cmds += struct.pack("<IIIIII", 0xC, size, 24, 0, 0, 0) + raw.ljust(size - 24, b"\0")
    return struct.pack("<IiiIIIII", 0xFEEDFACF, cpu, 0, filetype, 1 + len(dylibs), len(cmds), 0, 0) + cmds


GOOD = {
    "x86_64-unknown-linux-gnu": {"libqwen_companion.so": elf(62, b"GLIBC_2.17\0GLIBC_2.28\0"),
                                 "qc-mcp-bridge": elf(62, b"GLIBC_2.2.5\0")},
    "aarch64-unknown-linux-gnu": {"libqwen_companion.so": elf(183), "qc-mcp-bridge": elf(183)},
    "x86_64-pc-windows-gnu": {"qwen_companion.dll": pe(True, ["KERNEL32.dll", "api-ms-win-core-synch-l1-2-0.dll"]),
                              "qc-mcp-bridge.exe": pe(False, ["ws2_32.dll"])},
    "aarch64-apple-darwin": {"libqwen_companion.dylib": macho(0x0100000C, 6, (11, 0)),
                             "qc-mcp-bridge": macho(0x0100000C, 2, (11, 0))},
    "x86_64-apple-darwin": {"libqwen_companion.dylib": macho(0x01000007, 6, (11, 0)),
                            "qc-mcp-bridge": macho(0x01000007, 2, (11, 0))},
    "universal-apple-darwin": {"libqwen_companion.dylib": b"\xca\xfe\xba\xbe", "qc-mcp-bridge": b"\xca\xfe\xba\xbe"},
}

TAGS = {
    "manylinux_2_28_x86_64", "manylinux_2_28_aarch64", "win_amd64", "macosx_11_0_arm64", "macosx_11_0_x86_64",
}


def make_native(root, files=GOOD):
    native = root / "native"
    for triple, contents in files.items():
        (native / triple).mkdir(parents=True)
        for name, data in contents.items():
            (native / triple / name).write_bytes(data)
    return str(native)


def build(native, out):
    return bw.build(native, VERSION, str(out), log=lambda _line: None)


@pytest.fixture(autouse=True)
def _default_env(monkeypatch):
    monkeypatch.delenv("QC_MANYLINUX_GLIBC", raising=False)
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)


def test_one_wheel_per_triple_with_its_tag(tmp_path):
    native = make_native(tmp_path)
    built = build(native, tmp_path / "out")
    names = sorted(os.path.basename(p) for p in built)
    assert names == sorted("qwen_companion-{}-py3-none-{}.whl".format(VERSION, t) for t in TAGS)
    with zipfile.ZipFile(str(tmp_path / "out" / "qwen_companion-{}-py3-none-win_amd64.whl".format(VERSION))) as z:
        modes = dict((i.filename, i.external_attr >> 16) for i in z.infolist())
        assert z.read("qwen_companion/_lib/qwen_companion.dll") == GOOD["x86_64-pc-windows-gnu"]["qwen_companion.dll"]
        assert "Tag: py3-none-win_amd64" in z.read("qwen_companion-{}.dist-info/WHEEL".format(VERSION)).decode()
    assert modes["qwen_companion/_lib/qc-mcp-bridge.exe"] == 0o100755
    assert modes["qwen_companion/_lib/qwen_companion.dll"] == 0o100644


def test_stale_wheels_are_removed_other_files_kept(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "qwen_companion-0.0.1-py3-none-manylinux_2_35_x86_64.whl").write_bytes(b"old")
    (out / "notes.txt").write_text("mine")
    built = build(make_native(tmp_path, {"aarch64-unknown-linux-gnu": GOOD["aarch64-unknown-linux-gnu"]}), out)
    assert sorted(os.listdir(str(out))) == sorted([os.path.basename(built[0]), "notes.txt"])


def test_same_input_same_bytes_and_source_date_epoch(tmp_path, monkeypatch):
    native = make_native(tmp_path)
    a, b = build(native, tmp_path / "a"), build(native, tmp_path / "b")
    for x, y in zip(a, b):
        assert open(x, "rb").read() == open(y, "rb").read()
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    (c,) = [p for p in build(native, tmp_path / "c") if "win_amd64" in p]
    with zipfile.ZipFile(c) as z:
        assert {i.date_time for i in z.infolist()} == {(2023, 11, 14, 22, 13, 20)}


def test_manylinux_glibc_is_enforced_and_can_be_changed(tmp_path, monkeypatch):
    lib = ("x86_64-unknown-linux-gnu", "libqwen_companion.so")
    native = make_native(tmp_path, {lib[0]: GOOD[lib[0]]})
    with open(os.path.join(native, *lib), "wb") as f:
        f.write(elf(62, b"GLIBC_2.34\0GLIBC_2.35\0"))
    with pytest.raises(bw.BuildError, match=r"libqwen_companion.so: needs GLIBC_2\.35, newer than the glibc 2\.28"):
        build(native, tmp_path / "out")
    assert not os.path.exists(str(tmp_path / "out"))
    monkeypatch.setenv("QC_MANYLINUX_GLIBC", "2.35")
    (p,) = build(native, tmp_path / "out")
    assert p.endswith("-py3-none-manylinux_2_35_x86_64.whl")
    monkeypatch.setenv("QC_MANYLINUX_GLIBC", "latest")
    with pytest.raises(bw.BuildError, match="is not a glibc version"):
        build(native, tmp_path / "out")


@pytest.mark.parametrize("triple,name,data,message", [
    ("aarch64-unknown-linux-gnu", "libqwen_companion.so", elf(62), "ELF machine 62 is not aarch64"),
    ("x86_64-unknown-linux-gnu", "qc-mcp-bridge", b"#!/bin/sh\n", "not an ELF file"),
    ("x86_64-pc-windows-gnu", "qwen_companion.dll", pe(False, []), "is not a DLL"),
    ("x86_64-pc-windows-gnu", "qc-mcp-bridge.exe", pe(False, ["KERNEL32.dll", "libwinpthread-1.dll"]),
     "needs libwinpthread-1.dll, not part of Windows"),
    ("aarch64-apple-darwin", "libqwen_companion.dylib", macho(0x01000007, 6, (11, 0)), "Mach-O CPU 0x1000007 is not arm64"),
    ("aarch64-apple-darwin", "libqwen_companion.dylib", macho(0x0100000C, 6, (15, 0)),
     "built for macOS 15.0, newer than the tag macosx_11_0_arm64"),
    ("x86_64-apple-darwin", "qc-mcp-bridge", macho(0x01000007, 2, (11, 0), ["/opt/homebrew/lib/libz.1.dylib"]),
     "loads /opt/homebrew/lib/libz.1.dylib, not part of macOS"),
    ("x86_64-apple-darwin", "libqwen_companion.dylib", b"\xca\xfe\xba\xbe" + bytes(60), "not a thin 64-bit Mach-O"),
    ("x86_64-apple-darwin", "qc-mcp-bridge", None, "qc-mcp-bridge: missing .the bridge of x86_64-apple-darwin"),
])
def test_a_wrong_native_file_fails_before_any_wheel(tmp_path, triple, name, data, message):
    native = make_native(tmp_path)
    path = os.path.join(native, triple, name)
    os.remove(path)
    if data is not None:
        with open(path, "wb") as f:
            f.write(data)
    with pytest.raises(bw.BuildError, match=message) as e:
        build(native, tmp_path / "out")
    assert path in str(e.value)
    assert not os.path.exists(str(tmp_path / "out"))


def test_bad_directories_and_versions(tmp_path):
    with pytest.raises(bw.BuildError, match="no such directory .run bash scripts/dist.sh"):
        build(str(tmp_path / "nope"), tmp_path / "out")
    native = make_native(tmp_path)
    os.mkdir(os.path.join(native, "armv7-unknown-linux-gnueabihf"))
    with pytest.raises(bw.BuildError, match="unknown target triple.s. armv7-unknown-linux-gnueabihf"):
        build(native, tmp_path / "out")
    with pytest.raises(bw.BuildError, match="is not a PEP 440 release version"):
        bw.build(native, "1.0; rm -rf", str(tmp_path / "out"))
    os.rmdir(os.path.join(native, "armv7-unknown-linux-gnueabihf"))
    with pytest.raises(bw.BuildError, match=r"__version__ {}, but the release is 9\.9\.9: update it".format(VERSION)):
        bw.build(native, "9.9.9", str(tmp_path / "out"))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(bw.BuildError, match="no target directory"):
        build(str(empty), tmp_path / "out")


def test_main_reports_errors_on_stderr(tmp_path, capsys):
    assert bw.main(["--native", str(tmp_path / "nope"), "--version", VERSION, "--out", str(tmp_path / "o")]) == 1
    assert capsys.readouterr().err.startswith("build_wheels: error: --native ")
