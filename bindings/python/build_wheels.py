#!/usr/bin/env python3
"""Builds the platform wheels of the Python binding from the release's native builds.

    python3 bindings/python/build_wheels.py --native DIST/native --version 0.1.0 --out DIST/python

For each target triple present under ``--native`` (a directory holding the
library and ``qc-mcp-bridge`` of that target), one wheel
``qwen_companion-<version>-py3-none-<platform>.whl``:

==========================  ==============================
triple                      platform tag
==========================  ==============================
x86_64-unknown-linux-gnu    manylinux_2_28_x86_64 (1)
aarch64-unknown-linux-gnu   manylinux_2_28_aarch64 (1)
x86_64-pc-windows-gnu       win_amd64
aarch64-apple-darwin        macosx_11_0_arm64
x86_64-apple-darwin         macosx_11_0_x86_64
==========================  ==============================

(1) ``$QC_MANYLINUX_GLIBC`` (e.g. ``2.35``) changes the promised glibc; a
library or bridge needing a newer ``GLIBC_`` symbol version fails the build.

``universal-apple-darwin`` (the lipo of the two macOS builds) is not packed:
one wheel per macOS architecture halves each download, and pip picks the
right one on each Mac, an x86_64 Python under Rosetta included. Both are
built for macOS 11, the oldest that runs the Node.js Qwen Code needs. A directory of another
name under ``--native`` is an error (a typo must not drop a platform).

The binding is pure ``ctypes`` (no CPython ABI), hence ``py3-none``. The
wheel holds the ``qwen_companion`` package with the library and the bridge
in ``qwen_companion/_lib/`` (the bridge with its execute bit), and
``.dist-info`` METADATA (PEP 566), WHEEL and RECORD (sha256, PEP 376/427).

Each native file is checked before it is packed: the executable format and
CPU of its triple (ELF x86_64/aarch64, PE AMD64 DLL/EXE, Mach-O
x86_64/arm64), no GLIBC symbol version above the manylinux tag's, a
macOS deployment target no newer than the tag's, on Windows and macOS no
DLL/dylib outside the system's. A wrong or missing file fails the build with
a message naming it.

The output is byte-for-byte reproducible: sorted entries, fixed modes, one
timestamp (``$SOURCE_DATE_EPOCH``, else 1980-01-01). Standard library only
(Python 3.8+). Wheels of this package already in ``--out`` are replaced or,
when this build makes no such wheel, removed; other files are left alone.
"""

import argparse
import base64
import csv
import hashlib
import io
import os
import re
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "dist"))
import packing  # noqa: E402  (scripts/dist/packing.py: reproducible zips)

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = "qwen_companion"
DIST_NAME = "qwen_companion"  # PEP 427 escaped form of qwen-companion/qwen_companion
LIB_DIR = PACKAGE + "/_lib"
#: The glibc the Linux wheels promise (manylinux_2_28); $QC_MANYLINUX_GLIBC
#: ("2.31") changes it, for a build that cannot meet 2.28.
DEFAULT_GLIBC = "2.28"


def manylinux_glibc():
    text = os.environ.get("QC_MANYLINUX_GLIBC") or DEFAULT_GLIBC
    m = re.match(r"^(\d+)[._](\d+)$", text)
    if not m:
        raise BuildError("QC_MANYLINUX_GLIBC={!r} is not a glibc version such as 2.28".format(text))
    return (int(m.group(1)), int(m.group(2)))


class Target(object):
    def __init__(self, triple, tag, library, bridge, fmt, cpu, os_name, min_macos=None):
        self.triple = triple
        self.tag = tag
        self.library = library
        self.bridge = bridge
        self.fmt = fmt  # "elf" | "pe" | "macho"
        self.cpu = cpu
        self.os_name = os_name
        self.min_macos = min_macos


TARGETS = [
    Target("x86_64-unknown-linux-gnu", "manylinux_{}_{}_x86_64", "libqwen_companion.so", "qc-mcp-bridge",
           "elf", "x86_64", "POSIX :: Linux"),
    Target("aarch64-unknown-linux-gnu", "manylinux_{}_{}_aarch64", "libqwen_companion.so", "qc-mcp-bridge",
           "elf", "aarch64", "POSIX :: Linux"),
    Target("x86_64-pc-windows-gnu", "win_amd64", "qwen_companion.dll", "qc-mcp-bridge.exe",
           "pe", "x86_64", "Microsoft :: Windows"),
    Target("aarch64-apple-darwin", "macosx_11_0_arm64", "libqwen_companion.dylib", "qc-mcp-bridge",
           "macho", "arm64", "MacOS", (11, 0)),
    Target("x86_64-apple-darwin", "macosx_11_0_x86_64", "libqwen_companion.dylib", "qc-mcp-bridge",
           "macho", "x86_64", "MacOS", (11, 0)),
]
BY_TRIPLE = dict((t.triple, t) for t in TARGETS)
#: Triples dist.sh produces that have no wheel of their own (see the module docstring).
NOT_PACKED = {"universal-apple-darwin"}


class BuildError(Exception):
    pass


# --------------------------------------------------------------------------
# Checking the native files


ELF_MACHINES = {"x86_64": 62, "aarch64": 183}
PE_MACHINES = {"x86_64": 0x8664}
MACHO_CPUS = {"x86_64": 0x01000007, "arm64": 0x0100000C}


def check_elf(data, target, what, glibc):
    if data[:4] != b"\x7fELF":
        raise BuildError("{}: not an ELF file".format(what))
    if data[4] != 2 or data[5] != 1:
        raise BuildError("{}: not a 64-bit little-endian ELF file".format(what))
    machine = struct.unpack_from("<H", data, 18)[0]
    if machine != ELF_MACHINES[target.cpu]:
        raise BuildError("{}: ELF machine {} is not {} ({})".format(what, machine, target.cpu,
                                                                    ELF_MACHINES[target.cpu]))
    needed = set()
    for m in re.finditer(rb"GLIBC_(\d+)\.(\d+)(?:\.(\d+))?", data):
        needed.add((int(m.group(1)), int(m.group(2))))
    too_new = sorted(v for v in needed if v > glibc)
    if too_new:
        raise BuildError("{}: needs GLIBC_{}.{}, newer than the glibc {}.{} of the wheel's manylinux tag "
                         "(build for glibc {}.{}, or set QC_MANYLINUX_GLIBC)".format(
                             what, too_new[-1][0], too_new[-1][1], glibc[0], glibc[1], glibc[0], glibc[1]))


#: DLLs every Windows 10 has; anything else (libgcc_s_seh-1.dll,
#: libwinpthread-1.dll, vcruntime140.dll...) would be missing on a user's machine.
WINDOWS_SYSTEM_DLLS = {
    "advapi32.dll", "bcrypt.dll", "bcryptprimitives.dll", "crypt32.dll", "dbghelp.dll", "iphlpapi.dll",
    "kernel32.dll", "msvcrt.dll", "ncrypt.dll", "ntdll.dll", "ole32.dll", "oleaut32.dll", "psapi.dll",
    "rpcrt4.dll", "secur32.dll", "shell32.dll", "shlwapi.dll", "synchronization.dll", "ucrtbase.dll",
    "user32.dll", "userenv.dll", "winmm.dll", "ws2_32.dll",
}


def _cstring(data, off):
    end = data.index(b"\0", off)
    return data[off:end].decode("ascii", "replace")


def pe_imports(data, off):
    """The DLL names a PE32+ file imports (its import directory)."""
    nsections, = struct.unpack_from("<H", data, off + 6)
    opt_size, = struct.unpack_from("<H", data, off + 20)
    opt = off + 24
    if struct.unpack_from("<H", data, opt)[0] != 0x20B:
        raise ValueError("not PE32+")
    import_rva, _size = struct.unpack_from("<II", data, opt + 112 + 8)
    sections = []
    for i in range(nsections):
        vsize, vaddr, rawsize, rawptr = struct.unpack_from("<IIII", data, opt + opt_size + 40 * i + 8)
        sections.append((vaddr, max(vsize, rawsize), rawptr))

    def at(rva):
        for vaddr, size, rawptr in sections:
            if vaddr <= rva < vaddr + size:
                return rva - vaddr + rawptr
        raise ValueError("RVA {:#x} outside the sections".format(rva))

    names = []
    if import_rva == 0:
        return names
    desc = at(import_rva)
    while True:
        fields = struct.unpack_from("<IIIII", data, desc)
        if fields == (0, 0, 0, 0, 0):
            return names
        names.append(_cstring(data, at(fields[3])))
        desc += 20


def check_pe(data, target, what, is_dll):
    if data[:2] != b"MZ" or len(data) < 0x40:
        raise BuildError("{}: not a PE file (no MZ header)".format(what))
    off = struct.unpack_from("<I", data, 0x3C)[0]
    if data[off:off + 4] != b"PE\0\0":
        raise BuildError("{}: not a PE file (no PE signature)".format(what))
    machine, = struct.unpack_from("<H", data, off + 4)
    characteristics, = struct.unpack_from("<H", data, off + 22)
    if machine != PE_MACHINES[target.cpu]:
        raise BuildError("{}: PE machine {:#x} is not {}".format(what, machine, target.cpu))
    if bool(characteristics & 0x2000) != is_dll:
        raise BuildError("{}: is {}a DLL".format(what, "not " if is_dll else ""))
    try:
        imports = pe_imports(data, off)
    except (ValueError, struct.error) as e:
        raise BuildError("{}: unreadable import table ({})".format(what, e))
    foreign = sorted(set(n for n in imports if n.lower() not in WINDOWS_SYSTEM_DLLS
                         and not n.lower().startswith(("api-ms-win-", "ext-ms-win-"))))
    if foreign:
        raise BuildError("{}: needs {}, not part of Windows (link it statically)".format(what, ", ".join(foreign)))


def macho_min_os(data, ncmds):
    """The deployment target of a thin 64-bit Mach-O (LC_BUILD_VERSION or
    LC_VERSION_MIN_MACOSX), as (major, minor), or None."""
    off = 32
    for _ in range(ncmds):
        cmd, size = struct.unpack_from("<II", data, off)
        if cmd == 0x32:  # LC_BUILD_VERSION: platform, minos (xxxx.yy.zz)
            minos, = struct.unpack_from("<I", data, off + 12)
            return (minos >> 16, (minos >> 8) & 0xFF)
        if cmd == 0x24:  # LC_VERSION_MIN_MACOSX: version
            version, = struct.unpack_from("<I", data, off + 8)
            return (version >> 16, (version >> 8) & 0xFF)
        off += size
    return None


def macho_dylibs(data, ncmds):
    """The install names of the dylibs a thin 64-bit Mach-O loads."""
    names = []
    off = 32
    for _ in range(ncmds):
        cmd, size = struct.unpack_from("<II", data, off)
        if cmd in (0xC, 0x80000018, 0x8000001F):  # LC_LOAD_DYLIB, LC_LOAD_WEAK_DYLIB, LC_REEXPORT_DYLIB
            name_off, = struct.unpack_from("<I", data, off + 8)
            names.append(_cstring(data, off + name_off))
        off += size
    return names


def check_macho(data, target, what):
    if data[:4] != b"\xcf\xfa\xed\xfe":
        raise BuildError("{}: not a thin 64-bit Mach-O file".format(what))
    cpu, _sub, _ftype, ncmds = struct.unpack_from("<iiII", data, 4)
    if cpu != MACHO_CPUS[target.cpu]:
        raise BuildError("{}: Mach-O CPU {:#x} is not {}".format(what, cpu, target.cpu))
    minos = macho_min_os(data, ncmds)
    if minos is None:
        raise BuildError("{}: no macOS deployment target (LC_BUILD_VERSION)".format(what))
    if minos > target.min_macos:
        raise BuildError("{}: built for macOS {}.{}, newer than the tag {} (set MACOSX_DEPLOYMENT_TARGET={}.{})".format(
            what, minos[0], minos[1], target.tag, target.min_macos[0], target.min_macos[1]))
    foreign = [n for n in macho_dylibs(data, ncmds) if not n.startswith(("/usr/lib/", "/System/Library/"))]
    if foreign:
        raise BuildError("{}: loads {}, not part of macOS (link it statically)".format(what, ", ".join(foreign)))


def check_native(data, target, what, is_library, glibc):
    if target.fmt == "elf":
        check_elf(data, target, what, glibc)
    elif target.fmt == "pe":
        check_pe(data, target, what, is_library)
    else:
        check_macho(data, target, what)


# --------------------------------------------------------------------------
# Wheel contents


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


def package_files():
    """(archive name, bytes) of the binding's Python files, sorted."""
    src = os.path.join(HERE, PACKAGE)
    if not os.path.isfile(os.path.join(src, "__init__.py")):
        raise BuildError("no Python package at {}".format(src))
    out = []
    for name in sorted(os.listdir(src)):
        path = os.path.join(src, name)
        if name.endswith(".py") and os.path.isfile(path):
            out.append((PACKAGE + "/" + name, read_file(path)))
    return out


def package_version(files):
    init = dict(files)[PACKAGE + "/__init__.py"].decode("utf-8")
    m = re.search(r'^__version__ = "([^"]+)"', init, re.M)
    if not m:
        raise BuildError("{}/__init__.py has no __version__".format(PACKAGE))
    return m.group(1)


def metadata(version, targets_os):
    with open(os.path.join(HERE, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    lines = [
        "Metadata-Version: 2.1",
        "Name: qwen-companion",
        "Version: " + version,
        "Summary: Python binding (ctypes) of qwen-companion: make an editor a Qwen Code IDE companion",
        "Keywords: qwen,qwen-code,ide,mcp,editor",
        "License: Apache-2.0",
        "Classifier: Development Status :: 3 - Alpha",
        "Classifier: Intended Audience :: Developers",
        "Classifier: License :: OSI Approved :: Apache Software License",
        "Classifier: Operating System :: " + targets_os,
        "Classifier: Programming Language :: Python :: 3",
        "Classifier: Programming Language :: Python :: 3 :: Only",
        "Classifier: Topic :: Text Editors :: Integrated Development Environments (IDE)",
        "Requires-Python: >=3.8",
        "Description-Content-Type: text/markdown; charset=UTF-8",
        "",
        readme,
    ]
    return "\n".join(lines).encode("utf-8")


def wheel_file(version, tag):
    return "\n".join([
        "Wheel-Version: 1.0",
        "Generator: qwen-companion build_wheels.py ({})".format(version),
        "Root-Is-Purelib: false",
        "Tag: py3-none-" + tag,
        "",
    ]).encode("utf-8")


def record_hash(data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode("ascii")


def zip_time():
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch is None:
        return (1980, 1, 1, 0, 0, 0)
    try:
        t = max(int(epoch), 315532800)  # the ZIP format starts in 1980
    except ValueError:
        raise BuildError("SOURCE_DATE_EPOCH={!r} is not a number of seconds".format(epoch))
    return time.gmtime(t)[:6]


def write_wheel(path, entries):
    """Writes ``entries`` [(name, bytes, executable)] and their RECORD as a
    wheel at ``path`` (atomically: a temporary file renamed into place)."""
    dist_info = entries[-1][0].split("/")[0]
    record_name = dist_info + "/RECORD"
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    for name, data, _ in entries:
        w.writerow([name, record_hash(data), len(data)])
    w.writerow([record_name, "", ""])
    entries = entries + [(record_name, buf.getvalue().encode("utf-8"), False)]
    packing.write_zip(path, [(name, data, 0o100755 if executable else 0o100644) for name, data, executable in entries],
                      zip_time())


def read_natives(target, native_dir, glibc):
    """The checked (archive name, bytes, executable) of a target's library and bridge."""
    tdir = os.path.join(native_dir, target.triple)
    natives = []
    for name, is_library in ((target.library, True), (target.bridge, False)):
        path = os.path.join(tdir, name)
        if not os.path.isfile(path):
            raise BuildError("{}: missing (the {} of {})".format(path, "library" if is_library else "bridge",
                                                                target.triple))
        data = read_file(path)
        check_native(data, target, path, is_library, glibc)
        natives.append((LIB_DIR + "/" + name, data, not is_library))
    return natives


def write_one(target, natives, version, py_files, out_dir, glibc):
    dist_info = "{}-{}.dist-info".format(DIST_NAME, version)
    tag = target.tag.format(*glibc)
    entries = sorted([(n, d, False) for n, d in py_files] + natives)
    entries.append((dist_info + "/METADATA", metadata(version, target.os_name), False))
    entries.append((dist_info + "/WHEEL", wheel_file(version, tag), False))
    out = os.path.join(out_dir, "{}-{}-py3-none-{}.whl".format(DIST_NAME, version, tag))
    write_wheel(out, entries)
    return out


def build(native_dir, version, out_dir, log=print):
    if not re.match(r"^\d+(\.\d+)*([abc]|rc)?\d*(\.post\d+)?(\.dev\d+)?$", version):
        raise BuildError("--version {!r} is not a PEP 440 release version".format(version))
    if not os.path.isdir(native_dir):
        raise BuildError("--native {}: no such directory (run bash scripts/dist.sh)".format(native_dir))
    present = sorted(d for d in os.listdir(native_dir) if os.path.isdir(os.path.join(native_dir, d)))
    unknown = [d for d in present if d not in BY_TRIPLE and d not in NOT_PACKED]
    if unknown:
        raise BuildError("{}: unknown target triple(s) {} (known: {})".format(
            native_dir, ", ".join(unknown), ", ".join(sorted(list(BY_TRIPLE) + list(NOT_PACKED)))))
    targets = [t for t in TARGETS if t.triple in present]
    if not targets:
        raise BuildError("{}: no target directory with a library (expected one of {})".format(
            native_dir, ", ".join(BY_TRIPLE)))
    glibc = manylinux_glibc()
    py_files = package_files()
    pkg_version = package_version(py_files)
    if pkg_version != version:
        raise BuildError("{}/__init__.py has __version__ {}, but the release is {}: update it".format(
            PACKAGE, pkg_version, version))
    # Every input is checked before the first wheel is written.
    natives = [read_natives(t, native_dir, glibc) for t in targets]
    os.makedirs(out_dir, exist_ok=True)
    built = []
    for t, n in zip(targets, natives):
        path = write_one(t, n, version, py_files, out_dir, glibc)
        log("wheel: {} ({})".format(os.path.basename(path), t.triple))
        built.append(path)
    for name in sorted(os.listdir(out_dir)):
        stale = os.path.join(out_dir, name)
        if name.startswith(DIST_NAME + "-") and name.endswith(".whl") and stale not in built:
            os.remove(stale)
            log("wheel: removed {} (not part of this build)".format(name))
    skipped = [d for d in present if d in NOT_PACKED]
    if skipped:
        log("wheel: {} not packed (the per-architecture macOS wheels cover it)".format(", ".join(skipped)))
    return built


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--native", required=True, help="DIST/native: one directory per target triple")
    ap.add_argument("--version", required=True, help="the release version (Cargo.toml's)")
    ap.add_argument("--out", required=True, help="where the .whl files go")
    args = ap.parse_args(argv)
    try:
        build(args.native, args.version, args.out)
    except (BuildError, OSError) as e:
        print("build_wheels: error: {}".format(e), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
