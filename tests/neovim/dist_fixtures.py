"""Makes the release folders the installer test serves (tests/neovim/run.sh).

    dist_fixtures.py DIST TRIPLE WWW

WWW/real      -> DIST (a symlink: the real archives and SHA256SUMS)
WWW/tampered  this platform's archive with one byte changed, DIST's SHA256SUMS
WWW/nosum     the archive, a SHA256SUMS without its line
WWW/noasset   SHA256SUMS only (no archive for this platform)
WWW/wrongver  the archive repacked as version 9.9.9 (same library inside), its SHA256SUMS
Prints the version. Fails (exit 1) with a message when DIST lacks the archive.
"""
import hashlib, io, os, shutil, sys, tarfile

dist, triple, www = sys.argv[1:4]
HINT = "run bash scripts/dist.sh first (or set QC_DIST_DIR)"
if not os.path.isfile(os.path.join(dist, "VERSION")):
    sys.exit("no VERSION in %s: %s" % (dist, HINT))
version = open(os.path.join(dist, "VERSION"), encoding="utf-8").read().strip()
ext = ".zip" if "windows" in triple else ".tar.gz"
name = "qwen-companion-%s-%s%s" % (version, triple, ext)
archive = os.path.join(dist, name)
sums = os.path.join(dist, "SHA256SUMS")
if not os.path.isfile(archive) or not os.path.isfile(sums):
    sys.exit("no %s or SHA256SUMS in %s: %s" % (name, dist, HINT))
os.makedirs(www, exist_ok=True)
os.symlink(os.path.abspath(dist), os.path.join(www, "real"))
lines = open(sums, encoding="utf-8").read().splitlines()
if not any(l.split()[-1].lstrip("*") in (name, "./" + name) for l in lines if l.strip()):
    sys.exit("%s has no line for %s" % (sums, name))

def folder(sub):
    d = os.path.join(www, sub)
    os.makedirs(d)
    return d

d = folder("tampered")
data = bytearray(open(archive, "rb").read())
data[len(data) // 2] ^= 0xFF
open(os.path.join(d, name), "wb").write(data)
shutil.copy(sums, d)

d = folder("nosum")
shutil.copy(archive, d)
open(os.path.join(d, "SHA256SUMS"), "w", encoding="utf-8").write(
    "".join(l + "\n" for l in lines if not l.rstrip().endswith(name)))

d = folder("noasset")
shutil.copy(sums, d)

d = folder("wrongver")
top = "qwen-companion-%s-%s" % (version, triple)
new_top = "qwen-companion-9.9.9-%s" % triple
new_name = new_top + ext
if ext == ".tar.gz":
    out = io.BytesIO()
    with tarfile.open(archive, "r:gz") as src, tarfile.open(fileobj=out, mode="w:gz") as dst:
        for m in src.getmembers():
            f = src.extractfile(m) if m.isfile() else None
            m.name = new_top + m.name[len(top):] if m.name.startswith(top) else m.name
            dst.addfile(m, f)
    blob = out.getvalue()
else:
    import zipfile
    out = io.BytesIO()
    with zipfile.ZipFile(archive) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for i in src.infolist():
            dst.writestr(new_top + i.filename[len(top):], src.read(i))
    blob = out.getvalue()
open(os.path.join(d, new_name), "wb").write(blob)
open(os.path.join(d, "SHA256SUMS"), "w", encoding="utf-8").write(
    "%s  %s\n" % (hashlib.sha256(blob).hexdigest(), new_name))
print(version)
