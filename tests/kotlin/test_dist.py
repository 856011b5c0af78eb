#!/usr/bin/env python3
"""The Kotlin distribution jar and the IntelliJ plugin zip (bindings/kotlin/build-dist.sh),
built from the native builds of scripts/dist.sh in $QC_DIST_DIR (default target/dist):

- build-dist.sh refuses bad input with a clear message;
- the jar carries each target's library and qc-mcp-bridge under its JNA prefix, in the
  right format (checked here by magic bytes), with their SHA-256 in the index;
- a JVM with only the jar, jna.jar and kotlin-stdlib on its classpath (no jna.library.path,
  no QWEN_COMPANION_LIB, no LD_LIBRARY_PATH, an empty HOME, a working directory without the
  library) loads the library from the jar and installs the bridge in ~/.qwen/companion/bin
  (0700 folder, 0700 file, runs); a second run reuses both; a corrupted or replaced-by-a-link
  file is rewritten; a bin folder that is a link is refused;
- the IntelliJ zip has the layout IntelliJ installs from disk, plugin.xml with version and
  since-build, every class plugin.xml names, the jar above, and no Kotlin stdlib or JNA.

Prints "kotlin-dist: N passed, M failed"; exit status 1 when something failed.
"""
import atexit
import hashlib
import os
import re
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import zipfile
import xml.etree.ElementTree as ET

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DIST = os.path.abspath(os.environ.get("QC_DIST_DIR") or os.path.join(ROOT, "target", "dist"))
OUT = os.path.join(ROOT, "target", "kotlin", "dist-test")
BUILD = os.path.join(ROOT, "bindings", "kotlin", "build-dist.sh")
JNA = "/usr/share/java/jna.jar"
STDLIB = "/usr/share/java/kotlin-stdlib.jar"
JAVA = os.environ.get("JAVA", "java")

# triple -> (prefix, library, bridge, magic check)  (written independently of pack_dist.py)
ELF = lambda machine: lambda b: b[:4] == b"\x7fELF" and b[4] == 2 and struct.unpack_from("<H", b, 18)[0] == machine
def PE(b):
    if b[:2] != b"MZ":
        return False
    off = struct.unpack_from("<I", b, 0x3C)[0]
    return b[off:off + 4] == b"PE\0\0" and struct.unpack_from("<H", b, off + 4)[0] == 0x8664
MACHO = lambda cpu: lambda b: b[:4] == b"\xcf\xfa\xed\xfe" and struct.unpack_from("<I", b, 4)[0] == cpu
TARGETS = {
    "x86_64-unknown-linux-gnu": ("linux-x86-64", "libqwen_companion.so", "qc-mcp-bridge", ELF(0x3E)),
    "aarch64-unknown-linux-gnu": ("linux-aarch64", "libqwen_companion.so", "qc-mcp-bridge", ELF(0xB7)),
    "x86_64-pc-windows-gnu": ("win32-x86-64", "qwen_companion.dll", "qc-mcp-bridge.exe", PE),
    "aarch64-apple-darwin": ("darwin-aarch64", "libqwen_companion.dylib", "qc-mcp-bridge", MACHO(0x0100000C)),
    "x86_64-apple-darwin": ("darwin-x86-64", "libqwen_companion.dylib", "qc-mcp-bridge", MACHO(0x01000007)),
}
HOST = "x86_64-unknown-linux-gnu"

passed, failed = 0, 0


def test(name):
    def run(fn):
        global passed, failed
        try:
            fn()
            passed += 1
            print("ok   %s" % name)
        except Exception as e:  # a failed check or an unexpected error both fail the test
            failed += 1
            print("FAIL %s: %s: %s" % (name, type(e).__name__, e))
        return fn
    return run


def check(cond, message):
    if not cond:
        raise AssertionError(message)


def sha(data):
    return hashlib.sha256(data).hexdigest()


def read(path):
    with open(path, "rb") as f:
        return f.read()


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def finish():
    print("kotlin-dist: %d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


native = os.path.join(DIST, "native")
if not os.path.isdir(native) or not os.path.isfile(os.path.join(DIST, "VERSION")):
    print("kotlin-dist: 0 passed, 1 failed (no %s/native or VERSION: run bash scripts/dist.sh first, or set QC_DIST_DIR)" % DIST)
    sys.exit(1)
VERSION = read(os.path.join(DIST, "VERSION")).decode().strip()
TRIPLES = sorted(t for t in os.listdir(native) if t in TARGETS)
shutil.rmtree(OUT, ignore_errors=True)
os.makedirs(OUT)
TMP = tempfile.mkdtemp(prefix="qc-kt-dist-test.")
atexit.register(shutil.rmtree, TMP, True)


def build(*args, **kw):
    return subprocess.run(["bash", BUILD] + list(args), capture_output=True, text=True, timeout=kw.get("timeout", 60))


@test("build-dist.sh refuses bad input with a clear message (before compiling)")
def _():
    def fails(args, expect):
        r = build(*args)
        check(r.returncode != 0, "%s: exit status 0" % (args,))
        check(expect in r.stderr, "%s: %r not in %r" % (args, expect, r.stderr[-400:]))
    fails([], "usage:")
    fails(["--native", os.path.join(TMP, "none"), "--version", "0.1.0", "--out", TMP], "run bash scripts/dist.sh first")
    fails(["--native", native, "--version", "one", "--out", TMP], "is not a version")
    fails(["--native", native, "--version", "0.1.0", "--out", TMP, "--bogus"], "unknown argument '--bogus'")
    host_lib = os.path.join(native, HOST, "libqwen_companion.so")
    for name, files, expect in [
        ("unknown", {"sparc-sun-solaris/libqwen_companion.so": None}, "unknown target sparc-sun-solaris"),
        ("incomplete", {"x86_64-unknown-linux-gnu/libqwen_companion.so": host_lib}, "qc-mcp-bridge is missing"),
        ("wrong-format", {"x86_64-pc-windows-gnu/qwen_companion.dll": host_lib,
                          "x86_64-pc-windows-gnu/qc-mcp-bridge.exe": host_lib}, "is elf/x86_64, expected pe/x86_64"),
        ("empty", {}, "holds no target folder"),
    ]:
        d = os.path.join(TMP, "bad-" + name)
        os.makedirs(d)
        for rel, src in files.items():
            os.makedirs(os.path.dirname(os.path.join(d, rel)), exist_ok=True)
            if src:
                shutil.copyfile(src, os.path.join(d, rel))
            else:
                open(os.path.join(d, rel), "wb").close()
        fails(["--native", d, "--version", "0.1.0", "--out", os.path.join(TMP, "o-" + name)], expect)


r = build("--native", native, "--version", VERSION, "--out", os.path.join(OUT, "kotlin"), timeout=600)
if r.returncode != 0:
    print(r.stderr)
    print("kotlin-dist: %d passed, %d failed (build-dist.sh failed)" % (passed, failed + 1))
    sys.exit(1)
JAR = os.path.join(OUT, "kotlin", "qwen-companion-kotlin-%s.jar" % VERSION)
ZIP = os.path.join(OUT, "intellij", "qwen-companion-intellij-%s.zip" % VERSION)


@test("the jar carries every target's library and bridge under its JNA prefix, right format, digests indexed")
def _():
    check(TRIPLES, "no known target in %s" % native)
    with zipfile.ZipFile(JAR) as z:
        names = set(z.namelist())
        index = dict(l.split("=", 1) for l in z.read("qwen-companion-natives.properties").decode().splitlines()
                     if l and not l.startswith("#"))
        check(index.get("version") == VERSION, "index version %r" % index.get("version"))
        check("qwen/companion/QcBundled.class" in names and "qwen/companion/QwenCompanion.class" in names, "binding classes missing")
        check("Main-Class: qwen.companion.QcBundled" in z.read("META-INF/MANIFEST.MF").decode(), "Main-Class")
        for t in TRIPLES:
            prefix, lib, bridge, ok = TARGETS[t]
            for f in (lib, bridge):
                entry = "%s/%s" % (prefix, f)
                check(entry in names, "%s missing" % entry)
                data = z.read(entry)
                check(data == read(os.path.join(native, t, f)), "%s differs from %s/%s" % (entry, t, f))
                check(ok(data), "%s has the wrong format (magic %r)" % (entry, data[:8]))
                check(index.get(entry) == sha(data), "%s: index digest %r" % (entry, index.get(entry)))
        carried = {n.split("/")[0] for n in names if "/" in n and n.split("/")[0] in {v[0] for v in TARGETS.values()}}
        check(carried == {TARGETS[t][0] for t in TRIPLES}, "prefixes %s for targets %s" % (sorted(carried), TRIPLES))
        check(len([k for k in index if k != "version"]) == 2 * len(TRIPLES), "index entries %s" % sorted(index))


@test("packing is reproducible: the jar's own classes and the same natives give the same bytes")
def _():
    again = os.path.join(TMP, "again.jar")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bindings", "kotlin", "pack_dist.py"), "jar", native, VERSION, JAR, again],
                       capture_output=True, text=True, timeout=300)
    check(r.returncode == 0, "pack_dist.py: %s" % r.stderr)
    check(read(again) == read(JAR), "a second packing differs")


HOME = os.path.join(TMP, "home")
CWD = os.path.join(TMP, "cwd")
os.makedirs(HOME)
os.makedirs(CWD)
QWEN = os.path.join(HOME, ".qwen", "companion")
BIN = os.path.join(QWEN, "bin")
BRIDGE = os.path.join(BIN, "qc-mcp-bridge")
HOST_LIB = os.path.join(native, HOST, "libqwen_companion.so")
HOST_BRIDGE = os.path.join(native, HOST, "qc-mcp-bridge")


def clean_env(**extra):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": HOME, "LANG": "C.UTF-8"}
    if os.environ.get("JAVA_HOME"):
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    env.update(extra)
    return env


def probe(*jvm, env=None, expect_ok=True):
    """Runs QcBundled's main with the jar alone; returns {library, version, bridge} or the result."""
    # Java takes user.home from the passwd entry, not $HOME: both point at the isolated home.
    cmd = [JAVA, "-Duser.home=" + HOME] + list(jvm) + ["-cp", ":".join([JAR, JNA, STDLIB]), "qwen.companion.QcBundled"]
    r = subprocess.run(cmd, cwd=CWD, env=env or clean_env(), capture_output=True, text=True, timeout=120)
    if not expect_ok:
        return r
    check(r.returncode == 0, "exit %d: %s" % (r.returncode, r.stderr.strip()[-600:]))
    return dict(l.split(" ", 1) for l in r.stdout.splitlines())


def snapshot(path):
    s = os.lstat(path)
    return (s.st_ino, s.st_mtime_ns)


state = {}


@test("a JVM with only the jar, jna.jar and kotlin-stdlib loads the library from the jar and installs the bridge")
def _():
    check(HOST in TRIPLES, "%s is not in %s: the Linux x86_64 build is needed to run the jar here" % (HOST, native))
    out = probe()
    libsha = sha(read(HOST_LIB))
    lib = os.path.join(QWEN, "lib", libsha[:16], "libqwen_companion.so")
    check(out.get("library") == lib, "library %r, expected %r" % (out.get("library"), lib))
    check(out.get("version") == VERSION, "qc_version %r, expected %r" % (out.get("version"), VERSION))
    check(out.get("bridge") == BRIDGE, "bridge %r, expected %r" % (out.get("bridge"), BRIDGE))
    for d in (BIN, os.path.dirname(lib)):
        check(mode(d) == 0o700, "%s has mode %o" % (d, mode(d)))
    for f, src in ((lib, HOST_LIB), (BRIDGE, HOST_BRIDGE)):
        check(stat.S_ISREG(os.lstat(f).st_mode) and mode(f) == 0o700, "%s has mode %o" % (f, mode(f)))
        check(sha(read(f)) == sha(read(src)), "%s differs from %s" % (f, src))
    check(sorted(os.listdir(BIN)) == ["qc-mcp-bridge"], "bin holds %s" % os.listdir(BIN))
    check(not os.listdir(CWD), "the working directory got %s" % os.listdir(CWD))
    # The copied bridge runs: with no IDE running it says so on stderr and exits 1.
    r = subprocess.run([BRIDGE], stdin=subprocess.DEVNULL, cwd=CWD, env=clean_env(), capture_output=True, text=True, timeout=30)
    check(r.returncode == 1 and r.stderr.startswith("qc-mcp-bridge: "), "bridge run: %d %r" % (r.returncode, r.stderr))
    state["lib"] = lib


@test("a second run reuses the library and the bridge (same file, not rewritten)")
def _():
    lib = state["lib"]
    before = (snapshot(lib), snapshot(BRIDGE))
    probe()
    check((snapshot(lib), snapshot(BRIDGE)) == before, "rewritten")


@test("library folders of other releases unused for 30 days are removed; recent ones, other names and the own one stay")
def _():
    import time
    libroot = os.path.dirname(os.path.dirname(state["lib"]))
    now = time.time()
    made = {}
    for name, age_days in (("0123456789abcdef", 40), ("fedcba9876543210", 20), ("keep-me", 40)):
        d = os.path.join(libroot, name)
        os.makedirs(d)
        with open(os.path.join(d, "libqwen_companion.so"), "w") as f:
            f.write("old")
        os.utime(d, (now - age_days * 86400, now - age_days * 86400))
        made[name] = d
    own = os.path.dirname(state["lib"])
    os.utime(own, (now - 40 * 86400, now - 40 * 86400))
    probe()
    check(sorted(os.listdir(libroot)) == sorted([os.path.basename(own), "fedcba9876543210", "keep-me"]), "lib holds %s" % os.listdir(libroot))
    check(os.path.getmtime(own) > now - 60, "the folder in use was not marked as used")
    for d in made.values():
        shutil.rmtree(d, ignore_errors=True)


@test("a corrupted bridge or library (same mode) is replaced, not reused")
def _():
    lib = state["lib"]
    for f in (BRIDGE, lib):
        data = read(f)
        with open(f, "r+b") as fh:
            fh.truncate(len(data) // 2)
        check(mode(f) == 0o700, "mode changed")
    before = (snapshot(lib), snapshot(BRIDGE))
    out = probe()
    check(out["library"] == lib and out["bridge"] == BRIDGE, "paths %s" % out)
    check(sha(read(BRIDGE)) == sha(read(HOST_BRIDGE)) and sha(read(lib)) == sha(read(HOST_LIB)), "not restored")
    check(snapshot(lib)[0] != before[0][0] and snapshot(BRIDGE)[0] != before[1][0], "rewritten in place, not renamed")


@test("a symbolic link in the bridge's place is replaced by a file; its target is untouched")
def _():
    decoy = os.path.join(TMP, "decoy")
    with open(decoy, "w") as f:
        f.write("decoy")
    os.remove(BRIDGE)
    os.symlink(decoy, BRIDGE)
    probe()
    check(not os.path.islink(BRIDGE) and sha(read(BRIDGE)) == sha(read(HOST_BRIDGE)), "not replaced")
    check(read(decoy) == b"decoy", "the link's target was written")


@test("a loose bin folder or bridge mode is tightened to 0700")
def _():
    os.chmod(BIN, 0o755)
    os.chmod(BRIDGE, 0o755)
    probe()
    check(mode(BIN) == 0o700 and mode(BRIDGE) == 0o700, "modes %o %o" % (mode(BIN), mode(BRIDGE)))


@test("a bin folder that is a symbolic link is refused with a clear message")
def _():
    elsewhere = os.path.join(TMP, "elsewhere")
    os.rename(BIN, elsewhere)
    os.symlink(elsewhere, BIN)
    try:
        r = probe(expect_ok=False)
        check(r.returncode == 1 and "is a symbolic link" in r.stderr, "%d %r" % (r.returncode, r.stderr))
    finally:
        os.remove(BIN)
        os.rename(elsewhere, BIN)


@test("explicit choices still win: QWEN_COMPANION_LIB, then a jna.library.path folder holding the library")
def _():
    out = probe(env=clean_env(QWEN_COMPANION_LIB=HOST_LIB))
    check(out["library"] == HOST_LIB, "QWEN_COMPANION_LIB: %s" % out)
    out = probe("-Djna.library.path=" + os.path.dirname(HOST_LIB))
    check(out["library"] == "qwen_companion", "jna.library.path: %s" % out)
    out = probe("-Djna.library.path=" + CWD)  # a folder without it: the jar's copy
    check(out["library"] == state["lib"], "jna.library.path without the library: %s" % out)


@test("QWEN_HOME moves the copies; a jar without this platform gives a clear error")
def _():
    qh = os.path.join(TMP, "qwen-home")
    out = probe(env=clean_env(QWEN_HOME=qh))
    check(out["bridge"] == os.path.join(qh, "companion", "bin", "qc-mcp-bridge"), "bridge %s" % out)
    check(out["library"].startswith(os.path.join(qh, "companion", "lib") + os.sep), "library %s" % out)
    # A jar without this platform (only another target's files): the message names what it has.
    with zipfile.ZipFile(JAR) as z, zipfile.ZipFile(os.path.join(TMP, "other.jar"), "w") as o:
        for n in z.namelist():
            if n.startswith("linux-x86-64/"):
                continue
            data = z.read(n)
            if n == "qwen-companion-natives.properties":
                data = b"\n".join(l for l in data.splitlines() if not l.startswith(b"linux-x86-64/")) + b"\n"
            o.writestr(n, data)
    cmd = [JAVA, "-Duser.home=" + HOME, "-cp", ":".join([os.path.join(TMP, "other.jar"), JNA, STDLIB]), "qwen.companion.QcBundled"]
    r = subprocess.run(cmd, cwd=CWD, env=clean_env(), capture_output=True, text=True, timeout=120)
    check(r.returncode == 1 and "this jar has none for libqwen_companion.so on linux-x86-64" in r.stderr, "%d %r" % (r.returncode, r.stderr))


@test("the IntelliJ zip: <plugin>/lib with the plugin jar (plugin.xml, every class and icon it names) and the binding jar; no stdlib, no JNA")
def _():
    with zipfile.ZipFile(ZIP) as z:
        names = [n for n in z.namelist() if not n.endswith("/")]
        top = "qwen-companion-intellij/lib/"
        plugin_jar = top + "qwen-companion-intellij-%s.jar" % VERSION
        binding_jar = top + "qwen-companion-kotlin-%s.jar" % VERSION
        check(sorted(names) == sorted([plugin_jar, binding_jar]), "zip holds %s" % names)
        check(z.read(binding_jar) == read(JAR), "the zip's binding jar is not the distribution jar")
        pj = os.path.join(TMP, "plugin.jar")
        with open(pj, "wb") as f:
            f.write(z.read(plugin_jar))
    with zipfile.ZipFile(pj) as p:
        classes = {n[:-6].replace("/", ".") for n in p.namelist() if n.endswith(".class")}
        check(all(c.startswith("qwen.companion.intellij.") for c in classes), "foreign classes: %s" %
              sorted(c for c in classes if not c.startswith("qwen.companion.intellij."))[:5])
        majors = {n: struct.unpack(">H", p.read(n)[6:8])[0] for n in p.namelist() if n.endswith(".class")}
        # Java 11 (55) classes; kotlinc copies inlined stdlib lambdas with their own older version.
        check(max(majors.values()) == 55, "newest class file version %d (expected 55, Java 11)" % max(majors.values()))
        xml = p.read("META-INF/plugin.xml").decode()
        root = ET.fromstring(xml)
        check(root.findtext("id") == "qwen.companion.intellij", "id")
        check(root.findtext("version") == VERSION, "version %r" % root.findtext("version"))
        since = re.search(r'sinceBuild = "(\d+)"', read(os.path.join(ROOT, "examples/intellij/build.gradle.kts")).decode()).group(1)
        check(root.find("idea-version").get("since-build") == since, "since-build")
        named = set()
        for doc in [root] + [ET.fromstring(p.read("META-INF/" + d.get("config-file")).decode())
                             for d in root.findall("depends") if d.get("config-file")]:
            for el in doc.iter():
                for attr in ("implementation", "instance", "class", "factoryClass", "serviceImplementation"):
                    if el.get(attr):
                        named.add(el.get(attr))
        check(len(named) >= 10, "plugin.xml names only %s" % sorted(named))
        check(named <= classes, "plugin.xml names classes the jar lacks: %s" % sorted(named - classes))
        icons = set()
        for doc in [root] + [ET.fromstring(p.read("META-INF/" + d.get("config-file")).decode())
                             for d in root.findall("depends") if d.get("config-file")]:
            for el in doc.iter():
                if el.get("icon", "").startswith("/"):
                    icons.add(el.get("icon")[1:])
        check(icons and icons <= set(p.namelist()), "icons %s, in the jar: %s" % (sorted(icons), sorted(icons & set(p.namelist()))))


finish()
