"""The release package and repository.json that examples/sublime/package.py
builds from a dist (tests/sublime/run.sh builds them and sets
$QC_SUBLIME_BUILD to the output folder, $QC_DIST_DIR to the dist).

What Package Control needs is read from its own code (wbond/package_control
4.2 and sublimehq/package_control 4.2.8: package_manager.py, the
repository provider, and the JSON schema "repository/4.0.0" in its
sublime-package.json); pc_install.py reproduces its install."""

import hashlib
import json
import os
import re
import shutil
import stat
import struct
import subprocess
import sys
import zipfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PACKAGER = os.path.join(REPO, "examples", "sublime", "package.py")
SOURCE = os.path.join(REPO, "examples", "sublime", "QwenCompanion")
BINDING = os.path.join(REPO, "bindings", "python", "qwen_companion")
sys.path.insert(0, HERE)

import pc_install  # noqa: E402

#: folder in lib/ -> (dist triple, library, bridge, header check, Package Control platforms)
EXPECTED = {
    "linux-x64": ("x86_64-unknown-linux-gnu", "libqwen_companion.so", "qc-mcp-bridge", ("elf", 62), ["linux-x64"]),
    "linux-arm64": ("aarch64-unknown-linux-gnu", "libqwen_companion.so", "qc-mcp-bridge", ("elf", 183),
                    ["linux-arm64"]),
    "windows-x64": ("x86_64-pc-windows-gnu", "qwen_companion.dll", "qc-mcp-bridge.exe", ("pe", 0x8664),
                    ["windows-x64"]),
    "osx": ("universal-apple-darwin", "libqwen_companion.dylib", "qc-mcp-bridge",
            ("fat", (0x01000007, 0x0100000C)), ["osx-x64", "osx-arm64"]),
}


def _env(name):
    value = os.environ.get(name)
    if not value:
        pytest.fail("${} is not set: run bash tests/sublime/run.sh".format(name))
    return value


@pytest.fixture(scope="module")
def build():
    return _env("QC_SUBLIME_BUILD")


@pytest.fixture(scope="module")
def zf(build):
    with zipfile.ZipFile(os.path.join(build, "QwenCompanion.sublime-package")) as z:
        yield z


@pytest.fixture(scope="module")
def repo_json(build):
    with open(os.path.join(build, "repository.json"), encoding="utf-8") as f:
        return json.load(f)


def header(data):
    """An independent read of the first bytes: (format, machine)."""
    if data[:4] == b"\x7fELF":
        return "elf", struct.unpack("<H", data[18:20])[0]
    if data[:2] == b"MZ":
        pe = struct.unpack("<I", data[60:64])[0]
        assert data[pe:pe + 4] == b"PE\0\0"
        return "pe", struct.unpack("<H", data[pe + 4:pe + 6])[0]
    if data[:4] == b"\xca\xfe\xba\xbe":
        n = struct.unpack(">I", data[4:8])[0]
        return "fat", tuple(sorted(struct.unpack(">I", data[8 + 20 * i:12 + 20 * i])[0] for i in range(n)))
    return "unknown", data[:4]


# -- the package ---------------------------------------------------------------


def test_every_platform_library_and_bridge_inside_in_its_format(zf):
    names = set(zf.namelist())
    for folder, (triple, lib, bridge, want, _) in EXPECTED.items():
        for f in (lib, bridge):
            rel = "lib/{}/{}".format(folder, f)
            assert rel in names, rel
            assert header(zf.read(rel)[:4096]) == want, rel
    dist = os.path.join(_env("QC_DIST_DIR"), "native")
    for folder, (triple, lib, bridge, _, _) in EXPECTED.items():  # byte for byte the dist's builds
        for f in (lib, bridge):
            with open(os.path.join(dist, triple, f), "rb") as src:
                assert hashlib.sha256(src.read()).digest() == hashlib.sha256(
                    zf.read("lib/{}/{}".format(folder, f))).digest(), (folder, f)
    with zf.open("lib/platforms.json") as f:
        table = json.load(f)
    assert sorted(table["platforms"]) == sorted(EXPECTED)
    for folder, entry in table["platforms"].items():
        assert (entry["triple"], entry["library"], entry["bridge"]) == EXPECTED[folder][:3]
    with open(os.path.join(_env("QC_DIST_DIR"), "VERSION")) as f:
        assert table["version"] == f.read().strip()


def test_executables_keep_their_bit_for_package_control(zf):
    """Package Control sets S_IXUSR only on entries made on Unix with it."""
    for folder, (_, lib, bridge, _, _) in EXPECTED.items():
        info = zf.getinfo("lib/{}/{}".format(folder, bridge))
        assert info.create_system == 3 and (info.external_attr >> 16) & stat.S_IXUSR, folder
    for info in zf.infolist():
        mode = info.external_attr >> 16
        assert stat.S_ISREG(mode), info.filename
        if not info.filename.startswith("lib/") or info.filename.endswith((".py", ".json")):
            assert not mode & 0o111, info.filename


def test_markers_sources_and_nothing_else(zf):
    names = zf.namelist()
    assert zf.read(".no-sublime-package") == b""  # Package Control unpacks it into Packages/
    assert zf.read(".python-version").decode().strip() == "3.8"
    assert "__init__.py" not in names  # Package Control never extracts a root __init__.py
    assert not [n for n in names if "__pycache__" in n or n.endswith((".pyc", ".sh", ".bat", ".ps1"))]
    assert len(names) == len(set(names)) and names == sorted(names)
    assert pc_install.common_folder(zf) == ""
    for folder, _, files in os.walk(SOURCE):
        for f in files:
            if "__pycache__" in folder:
                continue
            rel = os.path.relpath(os.path.join(folder, f), SOURCE).replace(os.sep, "/")
            with open(os.path.join(folder, f), "rb") as src:
                assert zf.read(rel) == src.read(), rel
    for f in os.listdir(BINDING):
        if f.endswith(".py"):
            with open(os.path.join(BINDING, f), "rb") as src:
                assert zf.read("lib/qwen_companion/" + f) == src.read(), f
    expected = {"lib/__init__.py", "lib/platforms.json"}
    expected |= {"lib/{}/{}".format(d, f) for d, e in EXPECTED.items() for f in e[1:3]}
    extra = [n for n in names if n.startswith("lib/") and not n.startswith("lib/qwen_companion/")
             and n not in expected]
    assert extra == []


def test_installs_like_package_control_into_packages(build, tmp_path):
    dest = pc_install.install(os.path.join(build, "QwenCompanion.sublime-package"), str(tmp_path))
    assert dest == str(tmp_path / "Packages" / "QwenCompanion")
    assert not (tmp_path / "Installed Packages").exists()
    for folder, (_, lib, bridge, _, _) in EXPECTED.items():
        assert os.access(os.path.join(dest, "lib", folder, bridge), os.X_OK), folder
    assert open(os.path.join(dest, ".python-version")).read().strip() == "3.8"


def test_without_the_marker_package_control_would_keep_it_zipped(build, tmp_path):
    """Why .no-sublime-package: without it the files stay in a zip."""
    src = os.path.join(build, "QwenCompanion.sublime-package")
    stripped = str(tmp_path / "stripped.zip")
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(stripped, "w") as zout:
        for info in zin.infolist():
            if info.filename != ".no-sublime-package":
                zout.writestr(info, zin.read(info))
    got = pc_install.install(stripped, str(tmp_path / "data"))
    assert got.endswith(os.path.join("Installed Packages", "QwenCompanion.sublime-package"))


# -- repository.json (Package Control's schema 4.0.0) ---------------------------

PC_PLATFORMS = {"*", "linux", "linux-arm64", "linux-x64", "linux-x32", "osx", "osx-arm64", "osx-x64",
                "windows", "windows-arm64", "windows-x64", "windows-x32"}
PC_PYTHONS = {"3.3", "3.8", "3.13", "3.14"}
VERSION_RE = (r"^v?\d+(?:\.\d+){2}(?:[-._]?(?:alpha|a|beta|b|preview|pre|c|rc)\.?\d*)?"
              r"(?:-\d+|(?:[-._]?(?:rev|r|post)\.?\d*))?(?:[-._]?dev\.?\d*)?$")
DATE_RE = r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$"
ST_RE = r"^(?:\*|(?:>=?|<=?)\d{4}|\d{4} - \d{4})$"
PACKAGE_KEYS = {"name", "description", "author", "homepage", "issues", "readme", "buy", "donate", "labels",
                "last_modified", "previous_names", "releases"}
RELEASE_KEYS = {"sublime_text", "platforms", "python_versions", "libraries", "url", "version", "date"}


def schema_problems(doc):
    """What Package Control's repository schema 4.0.0 (a package without
    "details", releases with an explicit url) refuses in ``doc``."""
    out = []
    if set(doc) - {"$schema", "schema_version", "packages", "libraries", "includes"}:
        out.append("top-level keys {}".format(sorted(set(doc) - {"$schema", "schema_version", "packages"})))
    if doc.get("schema_version") != "4.0.0":
        out.append("schema_version")
    packages = doc.get("packages")
    if not isinstance(packages, list) or not packages:
        return out + ["packages"]
    for p in packages:
        out += ["package key " + k for k in sorted(set(p) - PACKAGE_KEYS)]
        out += ["package lacks " + k for k in ("name", "description", "author", "releases") if k not in p]
        for k in ("name", "description"):
            if not isinstance(p.get(k), str) or not p.get(k):
                out.append("package " + k)
        for k in ("homepage", "issues"):
            if k in p and not re.match(r"^https://[^\s/]+/\S*$", p[k]):
                out.append("package " + k)
        for r in p.get("releases") or []:
            out += ["release key " + k for k in sorted(set(r) - RELEASE_KEYS)]
            out += ["release lacks " + k for k in ("url", "version") if k not in r]
            if not re.match(VERSION_RE, str(r.get("version"))):
                out.append("version {!r}".format(r.get("version")))
            if "date" in r and not re.match(DATE_RE, r["date"]):
                out.append("date {!r}".format(r["date"]))
            if not re.match(ST_RE, str(r.get("sublime_text", "*"))):
                out.append("sublime_text {!r}".format(r.get("sublime_text")))
            platforms = r.get("platforms", ["*"])
            platforms = [platforms] if isinstance(platforms, str) else platforms
            if set(platforms) - PC_PLATFORMS or len(set(platforms)) != len(platforms):
                out.append("platforms {}".format(platforms))
            pythons = r.get("python_versions", ["3.3"])
            if not isinstance(pythons, list) or set(pythons) - PC_PYTHONS or len(set(pythons)) != len(pythons):
                out.append("python_versions {}".format(pythons))
            url = str(r.get("url"))
            if not url.startswith("https://"):  # http would need a sha256, which 4.0.0 packages cannot carry
                out.append("url {!r}".format(url))
    return out


def test_repository_json_follows_package_control_schema(repo_json, zf):
    assert schema_problems(repo_json) == []
    (pkg,) = repo_json["packages"]
    assert pkg["name"] == "QwenCompanion"
    (release,) = pkg["releases"]
    with zf.open("lib/platforms.json") as f:
        assert release["version"] == json.load(f)["version"]
    assert sorted(release["platforms"]) == sorted(p for e in EXPECTED.values() for p in e[4])
    assert release["python_versions"] == ["3.8", "3.14"]
    assert release["sublime_text"] == ">=4107"
    assert release["url"] == "https://github.com/example/qwen-companion/releases/download/v{}/" \
                             "QwenCompanion.sublime-package".format(release["version"])
    assert pkg["homepage"] == "https://github.com/example/qwen-companion"
    assert pkg["issues"] == "https://github.com/example/qwen-companion/issues"


def test_the_schema_check_refuses_what_package_control_refuses(repo_json):
    bad = json.loads(json.dumps(repo_json))
    release = bad["packages"][0]["releases"][0]
    release.update(platforms=["linux-amd64"], python_versions=["3.15"], version="1.0", sublime_text=">=4.1",
                   url="http://x/QwenCompanion.sublime-package", sha256="0" * 64, date="2026-01-01")
    del bad["packages"][0]["author"]
    problems = schema_problems(bad)
    for part in ("platforms", "python_versions", "version", "sublime_text", "url", "release key sha256", "date",
                 "package lacks author"):
        assert [p for p in problems if p.startswith(part)], (part, problems)


# -- the packager's errors --------------------------------------------------------


def run_packager(*args, env=None):
    return subprocess.run([sys.executable, PACKAGER] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, env=env)


def test_packager_refuses_a_missing_or_wrong_native_build(tmp_path):
    dist = os.path.join(_env("QC_DIST_DIR"), "native")
    base = ["--version", "1.2.3", "--out", str(tmp_path / "out"), "--base-url", "https://example.com/r"]
    out = run_packager("--native", str(tmp_path / "nothing"), *base)
    assert out.returncode == 1 and "run bash scripts/dist.sh first" in out.stdout, out.stdout
    fake = tmp_path / "native"
    shutil.copytree(dist, str(fake))
    shutil.rmtree(str(fake / "aarch64-unknown-linux-gnu"))
    out = run_packager("--native", str(fake), *base)
    assert out.returncode == 1 and "aarch64-unknown-linux-gnu" in out.stdout and "dist.sh first" in out.stdout
    shutil.copytree(os.path.join(dist, "x86_64-unknown-linux-gnu"), str(fake / "aarch64-unknown-linux-gnu"))
    out = run_packager("--native", str(fake), *base)
    assert out.returncode == 1 and "is elf x86_64, not elf aarch64 (linux-arm64)" in out.stdout, out.stdout
    assert not (tmp_path / "out" / "QwenCompanion.sublime-package").exists()


def test_packager_refuses_bad_arguments(tmp_path):
    dist = os.path.join(_env("QC_DIST_DIR"), "native")
    env = dict(os.environ)
    env.pop("QC_RELEASE_BASE_URL", None)
    common = ["--native", dist, "--out", str(tmp_path)]
    out = run_packager(*common, "--version", "1.2", "--base-url", "https://x", env=env)
    assert out.returncode == 1 and "is not a version Package Control accepts" in out.stdout
    out = run_packager(*common, "--version", "1.2.3", env=env)
    assert out.returncode == 1 and "no --base-url" in out.stdout
    out = run_packager(*common, "--version", "1.2.3", "--base-url", "http://insecure.example/x", env=env)
    assert out.returncode == 1 and "must be an https URL" in out.stdout
    out = run_packager(*common, "--version", "1.2.3", "--base-url", "https://x", "--platforms", "linux-x64,beos",
                       env=env)
    assert out.returncode == 1 and "unknown --platforms beos" in out.stdout
    out = run_packager("--native", dist, "--version", "1.2.3", env=env)
    assert out.returncode == 2 and "--out" in out.stdout


def test_packager_is_reproducible(tmp_path):
    dist = os.path.join(_env("QC_DIST_DIR"), "native")
    env = dict(os.environ, SOURCE_DATE_EPOCH="1767225600")
    digests = []
    for n in (1, 2):
        out = run_packager("--native", dist, "--version", "1.2.3", "--out", str(tmp_path / str(n)),
                           "--base-url", "https://example.com/v{version}", "--platforms", "linux-x64", env=env)
        assert out.returncode == 0, out.stdout
        with open(str(tmp_path / str(n) / "QwenCompanion.sublime-package"), "rb") as f:
            digests.append(hashlib.sha256(f.read()).hexdigest())
        with open(str(tmp_path / str(n) / "repository.json")) as f:
            release = json.load(f)["packages"][0]["releases"][0]
        assert release["date"] == "2026-01-01 00:00:00"
        assert release["url"] == "https://example.com/v1.2.3/QwenCompanion.sublime-package"
        assert release["platforms"] == ["linux-x64"]
    assert digests[0] == digests[1]


# -- the contributor's install (no zip, no bash) -------------------------------------


def test_install_puts_this_machines_library_and_the_binding_in_lib(tmp_path):
    lib = os.path.join(_env("QC_DIST_DIR"), "native", "x86_64-unknown-linux-gnu", "libqwen_companion.so")
    out = run_packager("--install", str(tmp_path / "Packages"), "--library", lib)
    assert out.returncode == 0, out.stdout
    pkg = tmp_path / "Packages" / "QwenCompanion"
    table = json.loads((pkg / "lib" / "platforms.json").read_text())["platforms"]
    assert list(table) == ["linux-x64"]
    assert (pkg / "lib" / "linux-x64" / "libqwen_companion.so").read_bytes() == open(lib, "rb").read()
    assert os.access(str(pkg / "lib" / "linux-x64" / "qc-mcp-bridge"), os.X_OK)
    assert (pkg / "lib" / "qwen_companion" / "__init__.py").is_file() and (pkg / "plugin.py").is_file()
    assert (pkg / ".no-sublime-package").is_file() and (pkg / ".python-version").read_text().strip() == "3.8"
    (pkg / "stale.txt").write_text("x")
    out = run_packager("--install", str(tmp_path / "Packages"), "--library", str(tmp_path / "nope.so"))
    assert out.returncode == 1 and "nope.so: build it with cargo build --release" in out.stdout
    assert (pkg / "stale.txt").exists()  # a failed install leaves the old one alone
    out = run_packager("--install", str(tmp_path / "Packages"), "--library", lib)
    assert out.returncode == 0 and not (pkg / "stale.txt").exists()


# -- what scripts/dist.sh packaged --------------------------------------------------


def test_dist_has_the_sublime_package(zf):
    """scripts/dist.sh ran package.py into DIST/sublime/: the same files, a
    valid repository.json naming the asset of that version."""
    dist = _env("QC_DIST_DIR")
    folder = os.path.join(dist, "sublime")
    assert os.path.isfile(os.path.join(folder, "QwenCompanion.sublime-package")), \
        "{} has no QwenCompanion.sublime-package: run bash scripts/dist.sh".format(folder)
    with zipfile.ZipFile(os.path.join(folder, "QwenCompanion.sublime-package")) as theirs:
        assert theirs.namelist() == zf.namelist()
        for name in zf.namelist():
            assert theirs.read(name) == zf.read(name), name
    with open(os.path.join(folder, "repository.json"), encoding="utf-8") as f:
        doc = json.load(f)
    assert schema_problems(doc) == []
    (release,) = doc["packages"][0]["releases"]
    with open(os.path.join(dist, "VERSION")) as f:
        version = f.read().strip()
    assert release["version"] == version
    assert release["url"].endswith("/QwenCompanion.sublime-package") and version in release["url"]
