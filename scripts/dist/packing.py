"""What the release's packagers share: a native file's format and CPU read
from its header, and a reproducible zip. Used by scripts/dist/files.py and
each editor's packager (bindings/python/build_wheels.py,
bindings/kotlin/pack_dist.py, examples/sublime/package.py), which import it
by path: standard library only, Python 3.8 and later.
"""
import os
import struct
import zipfile

ELF_MACHINES = {0x3E: "x86_64", 0xB7: "aarch64"}
PE_MACHINES = {0x8664: "x86_64", 0xAA64: "aarch64"}
MACHO_CPUS = {0x01000007: "x86_64", 0x0100000C: "aarch64"}


def image(data):
    """``(format, cpu, kind)`` of an executable or shared library from its
    first bytes. format: ``elf``, ``pe``, ``macho``, ``macho-universal``,
    ``mz`` (DOS, no PE header) or ``unknown``; cpu: ``x86_64``, ``aarch64``
    (a universal file: its CPUs, sorted, joined by ``+``), else what the header
    says; kind: ``lib``, ``exe``, ``lib-or-pie`` (an ELF shared object, which
    a PIE program also is) or ``?``."""
    if data[:4] == b"\x7fELF" and len(data) >= 20:
        if data[4] != 2 or data[5] != 1:
            return ("elf", "not 64-bit little-endian", "?")
        e_type, machine = struct.unpack_from("<HH", data, 16)
        return ("elf", ELF_MACHINES.get(machine, "machine 0x%x" % machine),
                {2: "exe", 3: "lib-or-pie"}.get(e_type, "?"))
    if data[:2] == b"MZ" and len(data) >= 64:
        (off,) = struct.unpack_from("<I", data, 0x3C)
        if data[off:off + 4] != b"PE\0\0" or len(data) < off + 24:
            return ("mz", "?", "?")
        (machine,) = struct.unpack_from("<H", data, off + 4)
        (chars,) = struct.unpack_from("<H", data, off + 22)
        return ("pe", PE_MACHINES.get(machine, "machine 0x%x" % machine), "lib" if chars & 0x2000 else "exe")
    if data[:4] == b"\xcf\xfa\xed\xfe" and len(data) >= 16:
        cputype, _sub, filetype = struct.unpack_from("<iII", data, 4)
        return ("macho", MACHO_CPUS.get(cputype & 0xFFFFFFFF, "cputype 0x%x" % (cputype & 0xFFFFFFFF)),
                {2: "exe", 6: "lib"}.get(filetype, "?"))
    if data[:4] == b"\xca\xfe\xba\xbe" and len(data) >= 8:
        (count,) = struct.unpack_from(">I", data, 4)
        cpus = [struct.unpack_from(">I", data, 8 + 20 * i)[0] for i in range(min(count, 16))
                if len(data) >= 12 + 20 * i]
        return ("macho-universal", "+".join(sorted(MACHO_CPUS.get(c, hex(c)) for c in cpus)), "?")
    return ("unknown", "?", "?")


def image_of(path):
    """``image()`` of the file at ``path`` (its first 4 KiB)."""
    with open(path, "rb") as f:
        return image(f.read(4096))


def write_zip(path, entries, date_time):
    """Writes ``entries`` [(name, bytes, st_mode)] in that order to the zip
    ``path``, every entry dated ``date_time`` (a 6-tuple, 1980 or later) and
    made on Unix (so its mode, e.g. ``0o100755``, travels with it); a name
    ending in ``/`` is a folder, stored. Atomic: a temporary file renamed
    into place."""
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    tmp = path + ".tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data, mode in entries:
            info = zipfile.ZipInfo(name, date_time=date_time)
            info.create_system = 3
            info.external_attr = (mode & 0xFFFF) << 16
            info.compress_type = zipfile.ZIP_STORED if name.endswith("/") else zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    os.replace(tmp, path)
