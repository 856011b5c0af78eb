"""Builds the QwenCompanion Sublime Text package (standard library only).

Release (what ``scripts/dist.sh`` runs after the native builds)::

    python3 examples/sublime/package.py --native DIST/native --version 0.1.0 \\
        --out DIST/sublime --base-url https://github.com/OWNER/REPO/releases/download/v{version}

writes ``QwenCompanion.sublime-package`` (one zip with every platform's
library and ``qc-mcp-bridge`` inside) and ``repository.json`` (a Package
Control repository, schema 4.0.0, whose release ``url`` is
``<base-url>/QwenCompanion.sublime-package``; ``{version}`` in the base URL
becomes the version). ``--base-url`` defaults to ``$QC_RELEASE_BASE_URL``.

Development (a checkout, no zip)::

    python3 examples/sublime/package.py --install [PACKAGES_DIR] [--library PATH]

copies the package into ``PACKAGES_DIR/QwenCompanion`` (default: Sublime Text
4's Packages folder of this user) with the binding and, for this machine
only, the library (``--library``, ``$QWEN_COMPANION_LIB``, else
``target/release``) and the ``qc-mcp-bridge`` next to it.

Inside the package::

    .no-sublime-package       Package Control unpacks it to Packages/QwenCompanion
    .python-version           3.8 (Sublime Text 4205+ runs it on its 3.14 host)
    plugin.py ...             the package (examples/sublime/QwenCompanion)
    lib/__init__.py
    lib/qwen_companion/       the Python binding (bindings/python)
    lib/platforms.json        {"version", "platforms": {name: {library, bridge, triple}}}
    lib/<name>/<library> <bridge>   name: linux-x64, linux-arm64, windows-x64, osx

The folder names are Package Control's platform names; the plugin picks
``<sublime.platform()>-<sublime.arch()>``, then ``<sublime.platform()>``.
"""

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import stat
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "dist"))
import packing  # noqa: E402  (scripts/dist/packing.py: formats, reproducible zips)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PACKAGE_NAME = "QwenCompanion"
PACKAGE_SOURCE = os.path.join(HERE, PACKAGE_NAME)
BINDING_SOURCE = os.path.join(REPO, "bindings", "python", "qwen_companion")
PACKAGE_FILE = PACKAGE_NAME + ".sublime-package"

#: (folder / Package Control platform, dist triple, library, bridge,
#:  repository.json platforms, expected binary format)
PLATFORMS = (
    ("linux-x64", "x86_64-unknown-linux-gnu", "libqwen_companion.so", "qc-mcp-bridge",
     ("linux-x64",), ("elf", "x86_64")),
    ("linux-arm64", "aarch64-unknown-linux-gnu", "libqwen_companion.so", "qc-mcp-bridge",
     ("linux-arm64",), ("elf", "aarch64")),
    ("windows-x64", "x86_64-pc-windows-gnu", "qwen_companion.dll", "qc-mcp-bridge.exe",
     ("windows-x64",), ("pe", "x86_64")),
    ("osx", "universal-apple-darwin", "libqwen_companion.dylib", "qc-mcp-bridge",
     ("osx-x64", "osx-arm64"), ("macho-universal", "aarch64+x86_64")),
)

#: Sublime Text builds: 4107 is the first stable Sublime Text 4 (the package
#: uses the 3.8 plugin host, the incremental diff's reference document,
#: UTF-16 columns and find_syntax_for_file, all from 4050-4081 dev builds).
SUBLIME_TEXT = ">=4107"
#: The plugin hosts it runs on: 3.8 before build 4205, 3.14 from 4205 on
#: (Sublime Text runs a ``.python-version`` 3.8 package on the 3.14 host there).
PYTHON_VERSIONS = ["3.8", "3.14"]
DESCRIPTION = ("Makes every window a Qwen Code IDE companion: context, diffs you can edit "
               "then accept, terminals, the desktop app's plugins and cross-session messages")
AUTHOR = "qwen-companion contributors"
LABELS = ["ai", "diff/merge", "terminal/shell/repl"]

#: Package Control's release version pattern (repository schema 4.0.0).
VERSION_RE = re.compile(r"^v?\d+(?:\.\d+){2}(?:[-._]?(?:alpha|a|beta|b|preview|pre|c|rc)\.?\d*)?"
                        r"(?:-\d+|(?:[-._]?(?:rev|r|post)\.?\d*))?(?:[-._]?dev\.?\d*)?$")

LIB_INIT = b'"""The binding, the native libraries and qc-mcp-bridge shipped with the package."""\n'


class PackageError(Exception):
    """Bad input: the message says what and how to fix it."""


# --------------------------------------------------------------------------
# binary formats (the packager refuses a library built for another platform)

def binary_format(path):
    """``(format, cpu)`` of an executable or shared library, from its header
    (scripts/dist/packing.py): ``("elf", "x86_64")``, ``("pe", "x86_64")``,
    ``("macho", "aarch64")``, ``("macho-universal", "aarch64+x86_64")``."""
    return packing.image_of(path)[:2]


# --------------------------------------------------------------------------
# what goes into the package


def _source_files(root, skip_dirs=("__pycache__",)):
    """``(relative path, absolute path)`` of the files under ``root``, sorted,
    without caches and compiled files."""
    out = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in skip_dirs and not d.startswith("."))
        for name in sorted(files):
            if name.endswith((".pyc", ".pyo")) or name == ".DS_Store":
                continue
            full = os.path.join(folder, name)
            out.append((os.path.relpath(full, root).replace(os.sep, "/"), full))
    return out


def package_entries(natives, version):
    """The package as ``(path in package, bytes, mode)``, sorted by path.

    ``natives``: ``[(platform entry of PLATFORMS, library path, bridge path)]``."""
    entries = []
    for rel, full in _source_files(PACKAGE_SOURCE):
        if rel.startswith("lib/"):
            raise PackageError("{} has a lib/ folder: remove it (package.py writes lib/)".format(PACKAGE_SOURCE))
        entries.append((rel, _read(full), 0o644))
    entries.append(("lib/__init__.py", LIB_INIT, 0o644))
    for rel, full in _source_files(BINDING_SOURCE):
        if rel.endswith(".py") or rel == "py.typed":
            entries.append(("lib/qwen_companion/" + rel, _read(full), 0o644))
    table = {}
    for entry, library, bridge in natives:
        name, triple, lib_name, bridge_name = entry[:4]
        entries.append(("lib/{}/{}".format(name, lib_name), _read(library), 0o755))
        entries.append(("lib/{}/{}".format(name, bridge_name), _read(bridge), 0o755))
        table[name] = {"library": lib_name, "bridge": bridge_name, "triple": triple}
    manifest = {"version": version, "platforms": table}
    entries.append(("lib/platforms.json", (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode(), 0o644))
    for marker in (".no-sublime-package", ".python-version"):
        if marker not in [e[0] for e in entries]:
            raise PackageError("{} lacks {}".format(PACKAGE_SOURCE, marker))
    return sorted(entries)


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def dist_natives(native_dir, names):
    """``[(entry, library, bridge)]`` for the platforms ``names`` from a dist
    ``native/`` folder; every one must be there and of the right format."""
    if not os.path.isdir(native_dir):
        raise PackageError("no native builds at {}: run bash scripts/dist.sh first".format(native_dir))
    out = []
    for entry in PLATFORMS:
        name, triple, lib_name, bridge_name, _, want = entry
        if name not in names:
            continue
        library = os.path.join(native_dir, triple, lib_name)
        bridge = os.path.join(native_dir, triple, bridge_name)
        for path in (library, bridge):
            if not os.path.isfile(path):
                raise PackageError("{} is missing: run bash scripts/dist.sh first".format(path))
            got = binary_format(path)
            if got != want:
                raise PackageError("{} is {} {}, not {} {} ({})".format(path, got[0], got[1], want[0], want[1], name))
        out.append((entry, library, bridge))
    return out


# --------------------------------------------------------------------------
# the zip and repository.json


def write_zip(entries, path, when):
    """A deterministic zip: sorted entries, one timestamp, Unix modes (Package
    Control restores the executable bit only from a Unix-made entry)."""
    stamp = time.gmtime(max(when, 315532800))[:6]  # zip times start in 1980
    packing.write_zip(path, [(rel, data, stat.S_IFREG | mode) for rel, data, mode in entries], stamp)


def release_date(when):
    return datetime.datetime.fromtimestamp(when, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def repository(version, base_url, platforms, when):
    """Package Control repository (schema 4.0.0) with one explicit release."""
    url = base_url.replace("{version}", version).rstrip("/") + "/" + PACKAGE_FILE
    package = {"name": PACKAGE_NAME, "description": DESCRIPTION, "author": AUTHOR, "labels": LABELS}
    github = re.match(r"^(https://github\.com/[^/]+/[^/]+)/releases/", url)
    if github:
        package["homepage"] = github.group(1)
        package["issues"] = github.group(1) + "/issues"
    package["releases"] = [{
        "version": version,
        "url": url,
        "date": release_date(when),
        "sublime_text": SUBLIME_TEXT,
        "platforms": platforms,
        "python_versions": PYTHON_VERSIONS,
    }]
    return {"$schema": "sublime://packagecontrol.io/schemas/repository", "schema_version": "4.0.0",
            "packages": [package]}


def build(native_dir, version, out_dir, base_url, names, when):
    if not VERSION_RE.match(version):
        raise PackageError("version {!r} is not a version Package Control accepts (like 1.2.3)".format(version))
    if not base_url:
        raise PackageError("no --base-url (nor $QC_RELEASE_BASE_URL): the https URL of the release's "
                           "assets, e.g. https://github.com/OWNER/REPO/releases/download/v{version}")
    if not base_url.startswith("https://"):
        raise PackageError("--base-url must be an https URL, not {!r}".format(base_url))
    natives = dist_natives(native_dir, names)
    os.makedirs(out_dir, exist_ok=True)
    package_path = os.path.join(out_dir, PACKAGE_FILE)
    write_zip(package_entries(natives, version), package_path, when)
    platforms = [p for entry, _, _ in natives for p in entry[4]]
    repo = repository(version, base_url, platforms, when)
    with open(os.path.join(out_dir, "repository.json"), "w", encoding="utf-8") as f:
        json.dump(repo, f, indent=2)
        f.write("\n")
    return package_path


# --------------------------------------------------------------------------
# development install


def this_platform():
    """This machine's PLATFORMS entry (the plugin's choice on it)."""
    raw = platform.machine().lower()
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(raw, raw)
    if sys.platform == "darwin":
        name = "osx"
    elif sys.platform == "win32":
        name = "windows-x64" if machine == "x86_64" else None
    else:
        name = {"x86_64": "linux-x64", "aarch64": "linux-arm64"}.get(machine)
    for entry in PLATFORMS:
        if entry[0] == name:
            return entry
    raise PackageError("no package platform for {} {}".format(sys.platform, machine))


def _runs_here(got, entry):
    """A local build fits: the release's format, or on macOS a single-arch
    Mach-O of this machine (``cargo build`` makes no universal binary)."""
    if got == entry[5]:
        return True
    machine = {"x86_64": "x86_64", "amd64": "x86_64"}.get(platform.machine().lower(), "aarch64")
    return entry[0] == "osx" and got == ("macho", machine)


def default_packages_dir():
    if sys.platform == "darwin":
        return os.path.expanduser("~/Library/Application Support/Sublime Text/Packages")
    if sys.platform == "win32":
        return os.path.join(os.environ.get("APPDATA", os.path.expanduser("~")), "Sublime Text", "Packages")
    return os.path.join(os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config"), "sublime-text", "Packages")


def install(packages_dir, library=None):
    entry = this_platform()
    library = library or os.environ.get("QWEN_COMPANION_LIB") or os.path.join(REPO, "target", "release", entry[2])
    bridge = os.path.join(os.path.dirname(library), entry[3])
    for path in (library, bridge):
        if not os.path.isfile(path):
            raise PackageError("no {}: build it with cargo build --release --lib --bin qc-mcp-bridge "
                               "(or pass --library)".format(path))
        got = binary_format(path)
        if not _runs_here(got, entry):
            raise PackageError("{} is {} {}, not {} {}: this machine is {}".format(
                path, got[0], got[1], entry[5][0], entry[5][1], entry[0]))
    version = _cargo_version()
    dest = os.path.join(packages_dir, PACKAGE_NAME)
    os.makedirs(packages_dir, exist_ok=True)
    if os.path.islink(dest):
        os.unlink(dest)
    elif os.path.isdir(dest):
        shutil.rmtree(dest)
    for rel, data, mode in package_entries([(entry, library, bridge)], version):
        path = os.path.join(dest, *rel.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, mode)
    return dest


def _cargo_version():
    with open(os.path.join(REPO, "Cargo.toml"), encoding="utf-8") as f:
        found = re.search(r'^version\s*=\s*"([^"]+)"', f.read(), re.M)
    return found.group(1) if found else "0.0.0"


# --------------------------------------------------------------------------


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--native", help="the dist native/ folder (release)")
    p.add_argument("--version", help="the release version (release)")
    p.add_argument("--out", help="where to write the package and repository.json (release)")
    p.add_argument("--base-url", default=os.environ.get("QC_RELEASE_BASE_URL"),
                   help="https URL of the release assets; {version} is replaced (default $QC_RELEASE_BASE_URL)")
    p.add_argument("--platforms", default=",".join(e[0] for e in PLATFORMS),
                   help="comma-separated package platforms (default: all of them)")
    p.add_argument("--install", nargs="?", const="", metavar="PACKAGES_DIR",
                   help="development: install this checkout into PACKAGES_DIR (default: Sublime Text's)")
    p.add_argument("--library", help="with --install: the native library (default target/release)")
    args = p.parse_args(argv)
    try:
        if args.install is not None:
            dest = install(args.install or default_packages_dir(), args.library)
            print("installed {}; restart Sublime Text or reload the plugin".format(dest))
            return 0
        missing = [o for o in ("native", "version", "out") if not getattr(args, o)]
        if missing:
            p.error("release needs --" + ", --".join(missing) + " (or use --install)")
        names = [n.strip() for n in args.platforms.split(",") if n.strip()]
        unknown = sorted(set(names) - set(e[0] for e in PLATFORMS))
        if unknown or not names:
            raise PackageError("unknown --platforms {}: choose from {}".format(
                ", ".join(unknown) or "(none)", ", ".join(e[0] for e in PLATFORMS)))
        when = int(os.environ.get("SOURCE_DATE_EPOCH") or time.time())
        path = build(args.native, args.version, args.out, args.base_url, names, when)
        print("wrote {} and {}".format(path, os.path.join(args.out, "repository.json")))
        return 0
    except PackageError as e:
        print("package.py: " + str(e), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
