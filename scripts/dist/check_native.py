#!/usr/bin/env python3
"""Checks one platform's native files of a release (scripts/dist.sh runs it on
each platform before archiving it; tests/dist/run.sh on a finished release):

  check_native.py --header H --version V [--glibc 2.28] [--macos 11.0] TRIPLE DIR

- the file format and architecture of the library and of qc-mcp-bridge;
- every `qc_` function of the C header exported by the library;
- stripped: no symbol table (ELF, PE); no local symbols (Mach-O);
- the platform floor: the newest glibc symbol version needed (Linux); the
  minimum macOS, the install name `@rpath/...`, only system libraries, and a
  valid ad-hoc code signature on every page of arm64 code (Apple silicon
  refuses to load code whose signature is missing or does not match; a
  signature on x86_64 code must match too); no MinGW runtime DLL (Windows);
- where this machine runs the platform (x86_64 Linux): the library loaded,
  `qc_version()` and `qc-mcp-bridge --version` give the version.

Reads the files with LLVM's tools (llvm-readobj, llvm-objdump, llvm-nm,
llvm-lipo). Prints one line per platform; exits 1 with the reasons on failure.
"""
import argparse
import glob
import hashlib
import os
import platform
import re
import shutil
import struct
import subprocess
import sys
import tempfile

LIB = {"windows": "qwen_companion.dll", "apple": "libqwen_companion.dylib", "linux": "libqwen_companion.so"}
ELF_MACHINE = {"x86_64": "EM_X86_64", "aarch64": "EM_AARCH64"}
MACHO_CPU = {"x86_64": "X86_64", "aarch64": "ARM64"}
# Windows DLLs a user's machine has; a MinGW runtime (libgcc_s_seh-1.dll,
# libwinpthread-1.dll, libstdc++-6.dll) would have to be shipped too.
WINDOWS_SYSTEM = re.compile(
    r"^(kernel32|ntdll|advapi32|ws2_32|userenv|bcrypt|bcryptprimitives|msvcrt|ucrtbase|shell32|"
    r"ole32|oleaut32|secur32|crypt32|user32|synchronization|api-ms-win-[a-z0-9-]+)\.dll$",
    re.I,
)


def tool(name):
    """An LLVM tool by its plain or versioned Debian name (llvm-lipo-14, ...)."""
    found = shutil.which(name) or next(iter(sorted(glob.glob("/usr/bin/%s-[0-9]*" % name), reverse=True)), None)
    if not found:
        raise SystemExit("no %s (Debian package llvm)" % name)
    return found


def run(*args):
    p = subprocess.run(list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    if p.returncode != 0:
        raise Failure("%s: %s" % (" ".join(os.path.basename(a) for a in args[:2]), p.stderr.strip()[-300:]))
    return p.stdout


class Failure(Exception):
    pass


def header_functions(header):
    names = set()
    with open(header, encoding="utf-8") as f:
        for line in f:
            if line[:1] in (" ", "\t", "*", "/", "#", "\n") or line.startswith("typedef"):
                continue
            m = re.search(r"\b(qc_[a-z0-9_]+)\(", line)
            if m:
                names.add(m.group(1))
    if len(names) < 10:
        raise Failure("found only %d qc_ functions in %s" % (len(names), header))
    return names


def version_tuple(s):
    return tuple(int(x) for x in s.split("."))


# --------------------------------------------------------------------- ELF
def check_elf(path, arch, is_lib, glibc_floor, problems):
    hdr = run(tool("llvm-readobj"), "--file-headers", path)
    if ELF_MACHINE[arch] not in hdr:
        problems.append("%s: not an ELF %s file" % (os.path.basename(path), arch))
    if "Name: .symtab" in run(tool("llvm-readobj"), "--sections", path):
        problems.append("%s: not stripped (.symtab present)" % os.path.basename(path))
    needed = set(re.findall(r"GLIBC_([0-9]+(?:\.[0-9]+)+)", run(tool("llvm-objdump"), "-T", path)))
    newest = max(needed, key=version_tuple) if needed else "none"
    if needed and version_tuple(newest) > version_tuple(glibc_floor):
        problems.append("%s needs glibc %s (> %s)" % (os.path.basename(path), newest, glibc_floor))
    exports = set()
    if is_lib:
        for line in run(tool("llvm-nm"), "-D", "--defined-only", path).splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in "TW":
                exports.add(parts[2])
    return exports, "glibc >= %s" % newest


# ---------------------------------------------------------------------- PE
def check_pe(path, is_lib, problems):
    name = os.path.basename(path)
    hdr = run(tool("llvm-readobj"), "--file-headers", path)
    if "IMAGE_FILE_MACHINE_AMD64" not in hdr:
        problems.append("%s: not a PE x86-64 file" % name)
    if is_lib != ("IMAGE_FILE_DLL" in hdr):
        problems.append("%s: DLL flag %s" % (name, "missing" if is_lib else "set"))
    m = re.search(r"SymbolCount: (\d+)", hdr)
    if m and int(m.group(1)) != 0:
        problems.append("%s: not stripped (%s COFF symbols)" % (name, m.group(1)))
    dlls = re.findall(r"^\s*Name: (\S+\.dll)\s*$", run(tool("llvm-readobj"), "--coff-imports", path), re.M | re.I)
    foreign = sorted(set(d for d in dlls if not WINDOWS_SYSTEM.match(d)))
    if foreign:
        problems.append("%s imports DLLs Windows does not have: %s" % (name, ", ".join(foreign)))
    exports = set()
    if is_lib:
        exports = set(re.findall(r"^\s*Name: (\S+)\s*$", run(tool("llvm-readobj"), "--coff-exports", path), re.M))
    return exports, "imports %s" % ", ".join(sorted(set(d.lower() for d in dlls)))


# ------------------------------------------------------------------- Mach-O
def macho_signature_problem(data, required):
    """None if the ad-hoc signature's page hashes match the file (thin Mach-O),
    or if there is none and none is `required` (Apple silicon requires one on
    arm64 code; Intel Macs and Rosetta run unsigned x86_64 code)."""
    magic, ncmds = struct.unpack_from("<II", data, 0)[0], struct.unpack_from("<I", data, 16)[0]
    if magic != 0xFEEDFACF:
        return "not a 64-bit little-endian Mach-O"
    off = 32
    sig = None
    for _ in range(ncmds):
        cmd, size = struct.unpack_from("<II", data, off)
        if cmd == 0x1D:  # LC_CODE_SIGNATURE
            sig = struct.unpack_from("<II", data, off + 8)
        off += size
    if sig is None:
        return "no code signature (Apple silicon refuses unsigned arm64 code)" if required else None
    base = sig[0]
    smagic, _length, count = struct.unpack_from(">III", data, base)
    if smagic != 0xFADE0CC0:
        return "code signature is not a superblob"
    for i in range(count):
        stype, soff = struct.unpack_from(">II", data, base + 12 + 8 * i)
        if stype != 0 and not 0x1000 <= stype < 0x1005:
            continue
        cd = base + soff
        (cmagic, _l, _ver, _flags, hash_off, _ident, _nspecial, ncode, code_limit, hash_size, hash_type, _plat,
         page_log) = struct.unpack_from(">IIIIIIIIIBBBB", data, cd)
        if cmagic != 0xFADE0C02:
            return "code directory missing"
        algo = {1: hashlib.sha1, 2: hashlib.sha256}.get(hash_type)
        if algo is None:
            return "code directory hash type %d unknown" % hash_type
        page = 1 << page_log
        for n in range(ncode):
            want = data[cd + hash_off + n * hash_size: cd + hash_off + (n + 1) * hash_size]
            got = algo(data[n * page: min((n + 1) * page, code_limit)]).digest()[:hash_size]
            if want != got:
                return "code signature does not match page %d (file changed after signing)" % n
        if ncode * page < code_limit:
            return "code signature covers %d of %d bytes" % (ncode * page, code_limit)
        return None
    return "no code directory in the signature"


def check_macho(path, arch, is_lib, macos_floor, problems):
    name = os.path.basename(path)
    heads = run(tool("llvm-objdump"), "--macho", "--private-headers", path)
    m = re.search(r"MH_MAGIC_64\s+(\S+)\s+\S+\s+\S+\s+(\S+)", heads)
    if not m or m.group(1) != MACHO_CPU[arch] or m.group(2) != ("DYLIB" if is_lib else "EXECUTE"):
        problems.append("%s: not a Mach-O %s %s (%s)" % (name, arch, "dylib" if is_lib else "executable",
                                                          m.group(0) if m else "no header"))
    mins = re.findall(r"\bminos (\S+)", heads) + re.findall(r"LC_VERSION_MIN_MACOSX\n.*\n\s+version (\S+)", heads)
    if not mins:
        problems.append("%s: no minimum macOS version" % name)
    elif any(version_tuple(v) > version_tuple(macos_floor) for v in mins):
        problems.append("%s: needs macOS %s (> %s)" % (name, max(mins, key=version_tuple), macos_floor))
    loads = re.findall(r"cmd LC_LOAD(?:_WEAK)?_DYLIB\n.*\n\s+name (\S+)", heads)
    other = [d for d in loads if not d.startswith(("/usr/lib/", "/System/Library/"))]
    if other:
        problems.append("%s links libraries macOS does not have: %s" % (name, ", ".join(other)))
    if is_lib:
        ids = re.findall(r"cmd LC_ID_DYLIB\n.*\n\s+name (\S+)", heads)
        if ids != ["@rpath/libqwen_companion.dylib"]:
            problems.append("%s: install name %s, not @rpath/libqwen_companion.dylib" % (name, ids))
    with open(path, "rb") as f:
        why = macho_signature_problem(f.read(), arch == "aarch64")
    if why:
        problems.append("%s: %s" % (name, why))
    exports, local = set(), 0
    for line in run(tool("llvm-nm"), "--defined-only", path).splitlines():
        parts = line.split()
        if len(parts) == 3:
            if parts[1].islower():
                local += 1
            elif parts[2].startswith("_qc_"):
                exports.add(parts[2][1:])
    if local:
        problems.append("%s: not stripped (%d local symbols)" % (name, local))
    signed = "LC_CODE_SIGNATURE" in heads
    return exports, "macOS >= %s, %s" % (max(mins, key=version_tuple) if mins else "?",
                                         "ad-hoc signature valid" if signed else "unsigned")


def check_universal(directory, problems):
    """The universal files hold exactly the two per-arch files."""
    lipo = tool("llvm-lipo")
    parent = os.path.dirname(os.path.abspath(directory))
    for f in ("libqwen_companion.dylib", "qc-mcp-bridge"):
        path = os.path.join(directory, f)
        archs = run(lipo, "-archs", path).split()
        if sorted(archs) != ["arm64", "x86_64"]:
            problems.append("%s: architectures %s, not arm64 + x86_64" % (f, archs))
            continue
        for arch, triple in (("arm64", "aarch64-apple-darwin"), ("x86_64", "x86_64-apple-darwin")):
            with tempfile.TemporaryDirectory() as tmp:
                thin = os.path.join(tmp, "thin")
                run(lipo, path, "-thin", arch, "-output", thin)
                with open(thin, "rb") as a, open(os.path.join(parent, triple, f), "rb") as b:
                    if a.read() != b.read():
                        problems.append("%s: the %s slice differs from %s/%s" % (f, arch, triple, f))
    return "arm64 + x86_64, slices identical to the per-arch files"


# ------------------------------------------------------------------- run it
def host_runs(triple):
    return triple == "x86_64-unknown-linux-gnu" and sys.platform.startswith("linux") and platform.machine() == "x86_64"


def run_here(lib, bridge, version, problems):
    out = subprocess.run([bridge, "--version"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    if out.returncode != 0 or out.stdout.strip() != "qc-mcp-bridge " + version:
        problems.append("qc-mcp-bridge --version: %r (status %d)" % (out.stdout.strip() or out.stderr.strip(), out.returncode))
    # In a child process: a library that fails to load must not take this one along.
    code = ("import ctypes,sys; l=ctypes.CDLL(sys.argv[1]); l.qc_version.restype=ctypes.c_char_p; "
            "print(l.qc_version().decode(), l.qc_abi_version())")
    got = subprocess.run([sys.executable, "-c", code, lib], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         universal_newlines=True)
    if got.returncode != 0 or got.stdout.split()[:1] != [version]:
        problems.append("loading %s: %s" % (os.path.basename(lib), (got.stdout + got.stderr).strip()[-300:]))
        return ""
    return "loaded: qc_version() = %s, abi %s; bridge --version ok" % tuple(got.stdout.split()[:2])


def check(triple, directory, header, version, glibc, macos):
    problems = []
    kind = "windows" if "-windows-" in triple else "apple" if triple.endswith("-apple-darwin") else "linux"
    lib = os.path.join(directory, LIB[kind])
    bridge = os.path.join(directory, "qc-mcp-bridge.exe" if kind == "windows" else "qc-mcp-bridge")
    present = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
    if present != sorted([os.path.basename(lib), os.path.basename(bridge)]):
        raise Failure("%s holds %s, want %s and %s" % (directory, present, os.path.basename(lib), os.path.basename(bridge)))
    if kind != "windows" and not os.access(bridge, os.X_OK):
        problems.append("qc-mcp-bridge is not executable")
    facts = []
    if triple == "universal-apple-darwin":
        facts.append(check_universal(directory, problems))
        exports = header_functions(header)  # each slice was checked as its own platform
    else:
        arch = triple.split("-")[0]
        if kind == "linux":
            exports, fact = check_elf(lib, arch, True, glibc, problems)
            _, bfact = check_elf(bridge, arch, False, glibc, problems)
            facts.append("lib %s, bridge %s" % (fact, bfact))
        elif kind == "windows":
            exports, fact = check_pe(lib, True, problems)
            check_pe(bridge, False, problems)
            facts.append(fact)
        else:
            exports, fact = check_macho(lib, arch, True, macos, problems)
            check_macho(bridge, arch, False, macos, problems)
            facts.append(fact)
    missing = sorted(header_functions(header) - exports)
    if missing:
        problems.append("%d header functions not exported: %s" % (len(missing), ", ".join(missing[:8])))
    if host_runs(triple) and not problems:
        facts.append(run_here(lib, bridge, version, problems))
    if problems:
        raise Failure("; ".join(problems))
    size = lambda p: "%.1f MB" % (os.path.getsize(p) / 1e6)  # noqa: E731
    return "%s: ok (%d qc_ exports; %s; lib %s, bridge %s)" % (
        triple, len(header_functions(header)), "; ".join(f for f in facts if f), size(lib), size(bridge))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--header", required=True)
    ap.add_argument("--version", required=True)
    ap.add_argument("--glibc", default="2.28")
    ap.add_argument("--macos", default="11.0")
    ap.add_argument("triple")
    ap.add_argument("directory")
    a = ap.parse_args()
    try:
        print(check(a.triple, a.directory, a.header, a.version, a.glibc, a.macos))
    except Failure as e:
        print("%s: %s" % (a.triple, e), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
