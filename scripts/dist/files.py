#!/usr/bin/env python3
"""The release's archives, manifest and checksums (used by scripts/dist.sh and
tests/dist/run.sh):

  files.py archive OUT --version V --triple T [--add FILE]...
      OUT/qwen-companion-V-T.tar.gz (Windows: .zip): a folder of that name
      with OUT/native/T/* and the added files. Byte-for-byte reproducible:
      sorted entries, owner 0, times from $SOURCE_DATE_EPOCH.
  files.py write OUT --version V --commit C [--tool NAME=VERSION]...
      OUT/SHA256SUMS (`sha256sum -c` reads it) and OUT/manifest.json over
      every other file in OUT.
  files.py verify OUT
      every file matches SHA256SUMS and the manifest, nothing is missing or
      extra, and every archive holds exactly its platform's native files.
"""
import argparse
import gzip
import hashlib
import io
import json
import os
import sys
import tarfile
import time
import zipfile

import packing  # scripts/dist/packing.py (this folder): reproducible zips

# What each platform needs at least (the floors scripts/dist/check_native.py checks).
REQUIRES = {
    "x86_64-unknown-linux-gnu": "Linux x86_64, glibc 2.28 or later",
    "aarch64-unknown-linux-gnu": "Linux arm64, glibc 2.28 or later",
    "x86_64-pc-windows-gnu": "Windows 10 or later, x64",
    "aarch64-apple-darwin": "macOS 11 or later, Apple silicon",
    "x86_64-apple-darwin": "macOS 11 or later, Intel",
    "universal-apple-darwin": "macOS 11 or later, Apple silicon and Intel",
}
SUMS, MANIFEST = "SHA256SUMS", "manifest.json"


def epoch():
    return int(os.environ.get("SOURCE_DATE_EPOCH") or 1577836800)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def archive_name(version, triple):
    ext = ".zip" if "-windows-" in triple else ".tar.gz"
    return "qwen-companion-%s-%s%s" % (version, triple, ext)


def archive(out, version, triple, added):
    native = os.path.join(out, "native", triple)
    if not os.path.isdir(native):
        raise SystemExit("files.py: no %s" % native)
    top = "qwen-companion-%s-%s" % (version, triple)
    entries = [(os.path.join(native, f), f) for f in sorted(os.listdir(native))]
    entries += [(a, os.path.basename(a)) for a in added]
    entries.sort(key=lambda e: e[1])
    name = archive_name(version, triple)
    path = os.path.join(out, name)
    when = epoch()
    if name.endswith(".zip"):
        files = []
        for src, rel in entries:
            with open(src, "rb") as f:
                files.append(("%s/%s" % (top, rel), f.read(), 0o100755 if os.access(src, os.X_OK) else 0o100644))
        packing.write_zip(path, files, time.gmtime(max(when, 315532800))[:6])
    else:
        raw = io.BytesIO()
        with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as t:
            d = tarfile.TarInfo(top)
            d.type, d.mode, d.mtime = tarfile.DIRTYPE, 0o755, when
            t.addfile(d)
            for src, rel in entries:
                info = tarfile.TarInfo("%s/%s" % (top, rel))
                info.size = os.path.getsize(src)
                info.mode = 0o755 if os.access(src, os.X_OK) else 0o644
                info.mtime = when
                with open(src, "rb") as f:
                    t.addfile(info, f)
        with open(path + ".tmp", "wb") as f:
            with gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=0, compresslevel=9) as g:
                g.write(raw.getvalue())
        os.replace(path + ".tmp", path)
    print("dist: %s (%.1f MB)" % (name, os.path.getsize(path) / 1e6))


def listed(out):
    """Every file under OUT but the two this writes, sorted by path."""
    files = []
    for d, dirs, names in os.walk(out):
        dirs.sort()
        for n in sorted(names):
            rel = os.path.relpath(os.path.join(d, n), out).replace(os.sep, "/")
            if rel not in (SUMS, MANIFEST):
                files.append(rel)
    return sorted(files)


def write(out, version, commit, tools):
    files = listed(out)
    sums = {rel: sha256(os.path.join(out, rel)) for rel in files}
    with open(os.path.join(out, SUMS), "w") as f:
        f.writelines("%s  %s\n" % (sums[rel], rel) for rel in files)
    platforms = {}
    for triple in sorted(os.listdir(os.path.join(out, "native"))):
        native = "native/%s/" % triple
        platforms[triple] = {
            "requires": REQUIRES.get(triple, ""),
            "archive": archive_name(version, triple) if archive_name(version, triple) in sums else None,
            "files": {rel[len(native):]: {"sha256": sums[rel], "size": os.path.getsize(os.path.join(out, rel))}
                      for rel in files if rel.startswith(native)},
        }
    manifest = {
        "name": "qwen-companion",
        "version": version,
        "commit": commit,
        "sourceDateEpoch": epoch(),
        "tools": dict(t.split("=", 1) for t in tools),
        "platforms": platforms,
        "files": {rel: {"sha256": sums[rel], "size": os.path.getsize(os.path.join(out, rel))} for rel in files},
    }
    with open(os.path.join(out, MANIFEST), "w") as f:
        json.dump(manifest, f, indent=2, sort_keys=True)
        f.write("\n")
    print("dist: %s and %s: %d files" % (SUMS, MANIFEST, len(files)))


def archive_members(path):
    if path.endswith(".zip"):
        with zipfile.ZipFile(path) as z:
            return {i.filename: (z.read(i), (i.external_attr >> 16) & 0o777) for i in z.infolist() if not i.is_dir()}
    with tarfile.open(path, "r:gz") as t:
        return {m.name: (t.extractfile(m).read(), m.mode) for m in t.getmembers() if m.isfile()}


def verify(out):
    problems = []
    try:
        with open(os.path.join(out, SUMS)) as f:
            sums = dict(reversed(line.rstrip("\n").split("  ", 1)) for line in f if line.strip())
        with open(os.path.join(out, MANIFEST)) as f:
            manifest = json.load(f)
    except (OSError, ValueError) as e:
        raise SystemExit("files.py: %s" % e)
    files = listed(out)
    if set(sums) != set(files):
        problems.append("SHA256SUMS and the folder differ: only listed %s; only in the folder %s" % (
            sorted(set(sums) - set(files)), sorted(set(files) - set(sums))))
    for rel in files:
        digest = sha256(os.path.join(out, rel))
        if sums.get(rel) != digest:
            problems.append("%s: SHA-256 differs from SHA256SUMS" % rel)
        if manifest["files"].get(rel, {}).get("sha256") != digest:
            problems.append("%s: SHA-256 differs from manifest.json" % rel)
    version = manifest.get("version")
    with open(os.path.join(out, "VERSION")) as f:
        if f.read().strip() != version:
            problems.append("VERSION differs from manifest.json")
    for triple, p in sorted(manifest["platforms"].items()):
        if not p.get("archive"):
            problems.append("%s: no archive" % triple)
            continue
        members = archive_members(os.path.join(out, p["archive"]))
        top = p["archive"].rsplit(".zip", 1)[0].rsplit(".tar.gz", 1)[0]
        for name in p["files"]:
            with open(os.path.join(out, "native", triple, name), "rb") as f:
                want = f.read()
            got = members.pop("%s/%s" % (top, name), (None, 0))
            if got[0] != want:
                problems.append("%s: %s in the archive differs from native/" % (p["archive"], name))
            elif name.startswith("qc-mcp-bridge") and not got[1] & 0o100:
                problems.append("%s: %s is not executable in the archive" % (p["archive"], name))
        if sorted(members) != ["%s/qwen_companion.h" % top]:
            problems.append("%s: unexpected members %s" % (p["archive"], sorted(members)))
    if problems:
        print("\n".join("dist verify: " + p for p in problems), file=sys.stderr)
        return 1
    print("dist verify: %d files match SHA256SUMS and manifest.json; %d archives hold their platform's files"
          % (len(files), len(manifest["platforms"])))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("archive")
    a.add_argument("out")
    a.add_argument("--version", required=True)
    a.add_argument("--triple", required=True)
    a.add_argument("--add", action="append", default=[])
    w = sub.add_parser("write")
    w.add_argument("out")
    w.add_argument("--version", required=True)
    w.add_argument("--commit", required=True)
    w.add_argument("--tool", action="append", default=[])
    v = sub.add_parser("verify")
    v.add_argument("out")
    args = ap.parse_args()
    if args.cmd == "archive":
        archive(args.out, args.version, args.triple, args.add)
    elif args.cmd == "write":
        write(args.out, args.version, args.commit, args.tool)
    else:
        return verify(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
