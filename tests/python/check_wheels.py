"""Checks the Python wheels of a dist directory (tests/python/run_wheel.sh):

    python tests/python/check_wheels.py DIST

- DIST/python holds exactly one wheel per target triple under DIST/native
  (the names and tags below, written independently of build_wheels.py);
- each wheel: a valid ZIP whose RECORD lists every other entry once with
  its sha256 and size; WHEEL (1.0, Root-Is-Purelib false, the file name's
  tag); METADATA (name, DIST/VERSION, Requires-Python >=3.8, Apache-2.0,
  the README as Markdown); the library and bridge in qwen_companion/_lib/
  in the platform's format (ELF x86_64/aarch64, PE AMD64 DLL/EXE, thin
  Mach-O x86_64/arm64), the bridge with its execute bit, the bytes equal to
  DIST/native's; sorted entries, one timestamp;
- rebuilding from DIST/native gives the same bytes (reproducible).

Prints one line per check and exits non-zero on the first failure.
"""

import base64
import calendar
import csv
import hashlib
import io
import os
import struct
import subprocess
import sys
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
BUILDER = os.path.join(REPO, "bindings", "python", "build_wheels.py")


def glibc_tag():
    return (os.environ.get("QC_MANYLINUX_GLIBC") or "2.28").replace(".", "_")


# triple -> (platform tag, library, bridge, format, machine)
def expected_targets():
    g = glibc_tag()
    return {
        "x86_64-unknown-linux-gnu": ("manylinux_{}_x86_64".format(g), "libqwen_companion.so", "qc-mcp-bridge",
                                     "elf", 62),
        "aarch64-unknown-linux-gnu": ("manylinux_{}_aarch64".format(g), "libqwen_companion.so", "qc-mcp-bridge",
                                      "elf", 183),
        "x86_64-pc-windows-gnu": ("win_amd64", "qwen_companion.dll", "qc-mcp-bridge.exe", "pe", 0x8664),
        "aarch64-apple-darwin": ("macosx_11_0_arm64", "libqwen_companion.dylib", "qc-mcp-bridge", "macho",
                                 0x0100000C),
        "x86_64-apple-darwin": ("macosx_11_0_x86_64", "libqwen_companion.dylib", "qc-mcp-bridge", "macho",
                                0x01000007),
    }


NO_WHEEL = {"universal-apple-darwin"}  # covered by the two per-architecture macOS wheels


class CheckError(Exception):
    pass


def need(cond, msg):
    if not cond:
        raise CheckError(msg)


def check_format(data, fmt, machine, what, is_library):
    if fmt == "elf":
        need(data[:4] == b"\x7fELF" and data[4] == 2, "{}: not a 64-bit ELF file".format(what))
        need(struct.unpack_from("<H", data, 18)[0] == machine, "{}: wrong ELF machine".format(what))
        need(struct.unpack_from("<H", data, 16)[0] == 3, "{}: not an ELF shared object/PIE".format(what))
    elif fmt == "pe":
        need(data[:2] == b"MZ", "{}: not a PE file".format(what))
        off = struct.unpack_from("<I", data, 0x3C)[0]
        need(data[off:off + 4] == b"PE\0\0", "{}: no PE signature".format(what))
        need(struct.unpack_from("<H", data, off + 4)[0] == machine, "{}: wrong PE machine".format(what))
        is_dll = bool(struct.unpack_from("<H", data, off + 22)[0] & 0x2000)
        need(is_dll == is_library, "{}: DLL flag is {}".format(what, is_dll))
    else:
        need(data[:4] == b"\xcf\xfa\xed\xfe", "{}: not a thin 64-bit Mach-O file".format(what))
        need(struct.unpack_from("<i", data, 4)[0] == machine, "{}: wrong Mach-O CPU".format(what))
        need(struct.unpack_from("<I", data, 12)[0] == (6 if is_library else 2),
             "{}: Mach-O file type is not {}".format(what, "MH_DYLIB" if is_library else "MH_EXECUTE"))


def sha256_field(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")


def check_wheel(path, version, triple, native_dir):
    tag, library, bridge, fmt, machine = expected_targets()[triple]
    name = os.path.basename(path)
    dist_info = "qwen_companion-{}.dist-info".format(version)
    with zipfile.ZipFile(path) as z:
        need(z.testzip() is None, "{}: a corrupt entry".format(name))
        infos = z.infolist()
        names = [i.filename for i in infos]
        files = dict((n, z.read(n)) for n in names)
    need(len(set(names)) == len(names), "{}: duplicate entries".format(name))
    body = [n for n in names if not n.startswith(dist_info + "/")]
    need(body == sorted(body) and names[len(body):] == [dist_info + "/" + f for f in ("METADATA", "WHEEL", "RECORD")],
         "{}: entries not sorted with METADATA, WHEEL, RECORD last: {}".format(name, names))
    need(len(set(i.date_time for i in infos)) == 1, "{}: entries have different timestamps".format(name))
    need(all(n == "qwen_companion-{}.dist-info/{}".format(version, n.split("/")[-1]) or n.startswith("qwen_companion/")
             for n in names), "{}: an entry outside the package and its .dist-info".format(name))
    for required in ("qwen_companion/__init__.py", "qwen_companion/_native.py", "qwen_companion/companion.py"):
        need(required in files, "{}: no {}".format(name, required))
    # RECORD
    rows = list(csv.reader(io.StringIO(files[dist_info + "/RECORD"].decode("utf-8"))))
    recorded = dict((r[0], r) for r in rows)
    need(len(recorded) == len(rows) == len(names), "{}: RECORD does not list each entry once".format(name))
    for n in names:
        need(n in recorded, "{}: {} missing from RECORD".format(name, n))
        if n == dist_info + "/RECORD":
            need(recorded[n][1:] == ["", ""], "{}: RECORD lists a hash of itself".format(name))
            continue
        need(recorded[n][1] == sha256_field(files[n]) and recorded[n][2] == str(len(files[n])),
             "{}: RECORD hash/size of {} is wrong".format(name, n))
    # WHEEL
    wheel = files[dist_info + "/WHEEL"].decode("utf-8").splitlines()
    for line in ("Wheel-Version: 1.0", "Root-Is-Purelib: false", "Tag: py3-none-" + tag):
        need(line in wheel, "{}: WHEEL lacks {!r}".format(name, line))
    need(sum(1 for l in wheel if l.startswith("Tag:")) == 1, "{}: WHEEL has more than one Tag".format(name))
    need(name == "qwen_companion-{}-py3-none-{}.whl".format(version, tag), "{}: expected tag {}".format(name, tag))
    # METADATA
    meta = files[dist_info + "/METADATA"].decode("utf-8")
    head, _, description = meta.partition("\n\n")
    fields = head.splitlines()
    for line in ("Metadata-Version: 2.1", "Name: qwen-companion", "Version: " + version,
                 "Requires-Python: >=3.8", "License: Apache-2.0",
                 "Description-Content-Type: text/markdown; charset=UTF-8"):
        need(line in fields, "{}: METADATA lacks {!r}".format(name, line))
    need(any(f.startswith("Summary: ") for f in fields), "{}: METADATA has no Summary".format(name))
    with open(os.path.join(REPO, "bindings", "python", "README.md"), encoding="utf-8") as f:
        need(description == f.read(), "{}: the long description is not bindings/python/README.md".format(name))
    # the natives
    modes = dict((i.filename, i.external_attr >> 16) for i in infos)
    for fname, is_library in ((library, True), (bridge, False)):
        entry = "qwen_companion/_lib/" + fname
        need(entry in files, "{}: no {}".format(name, entry))
        check_format(files[entry], fmt, machine, "{}:{}".format(name, entry), is_library)
        with open(os.path.join(native_dir, triple, fname), "rb") as f:
            need(files[entry] == f.read(), "{}: {} differs from {}".format(name, entry, os.path.join(triple, fname)))
    need(modes["qwen_companion/_lib/" + bridge] & 0o111 == 0o111, "{}: the bridge is not executable".format(name))
    need(modes["qwen_companion/_lib/" + bridge] & 0o170000 == 0o100000, "{}: the bridge is not a regular file".format(name))
    lib_entries = sorted(n for n in names if n.startswith("qwen_companion/_lib/"))
    need(lib_entries == sorted("qwen_companion/_lib/" + f for f in (library, bridge)),
         "{}: _lib/ holds {}".format(name, lib_entries))
    return infos[0].date_time


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    dist = argv[1]
    native = os.path.join(dist, "native")
    wheels_dir = os.path.join(dist, "python")
    try:
        need(os.path.isfile(os.path.join(dist, "VERSION")), "no {}/VERSION: run bash scripts/dist.sh first".format(dist))
        with open(os.path.join(dist, "VERSION"), encoding="utf-8") as f:
            version = f.read().strip()
        need(os.path.isdir(native), "no {}: run bash scripts/dist.sh first".format(native))
        triples = sorted(d for d in os.listdir(native) if os.path.isdir(os.path.join(native, d)))
        targets = expected_targets()
        unknown = [t for t in triples if t not in targets and t not in NO_WHEEL]
        need(not unknown, "{}: unknown triples {}".format(native, unknown))
        packed = [t for t in triples if t in targets]
        need(packed, "{}: no target to pack".format(native))
        expected = dict(("qwen_companion-{}-py3-none-{}.whl".format(version, targets[t][0]), t) for t in packed)
        found = sorted(f for f in os.listdir(wheels_dir) if f.endswith(".whl")) if os.path.isdir(wheels_dir) else []
        missing = sorted(set(expected) - set(found))
        extra = sorted(set(found) - set(expected))
        need(not missing, "missing wheels in {}: {} (run bash scripts/dist.sh first)".format(wheels_dir, missing))
        need(not extra, "unexpected wheels in {}: {}".format(wheels_dir, extra))
        stamps = set()
        for wheel in sorted(expected):
            try:
                stamps.add(check_wheel(os.path.join(wheels_dir, wheel), version, expected[wheel], native))
            except (zipfile.BadZipFile, KeyError, struct.error, UnicodeDecodeError) as e:
                raise CheckError("{}: {}: {}".format(wheel, type(e).__name__, e))
            print("ok: {} ({})".format(wheel, expected[wheel]))
        need(len(stamps) == 1, "the wheels have different timestamps")
        stamp = stamps.pop()
        env = dict(os.environ)
        if stamp != (1980, 1, 1, 0, 0, 0):
            env["SOURCE_DATE_EPOCH"] = str(calendar.timegm(stamp + (0, 0, 0)))
        with tempfile.TemporaryDirectory(prefix="qc-wheels-") as tmp:
            subprocess.run([sys.executable, BUILDER, "--native", native, "--version", version, "--out", tmp],
                           env=env, check=True, stdout=subprocess.DEVNULL)
            rebuilt = sorted(os.listdir(tmp))
            need(rebuilt == sorted(expected), "the rebuild made {}".format(rebuilt))
            for wheel in rebuilt:
                with open(os.path.join(tmp, wheel), "rb") as a, open(os.path.join(wheels_dir, wheel), "rb") as b:
                    need(a.read() == b.read(), "{}: rebuilding it gives other bytes (not reproducible)".format(wheel))
        print("ok: rebuilding {} wheel(s) from {} gives the same bytes".format(len(expected), native))
    except (CheckError, OSError, subprocess.CalledProcessError) as e:
        print("check_wheels: FAILED: {}".format(e), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
