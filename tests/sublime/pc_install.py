"""Installs a package zip the way Package Control 4.2 does (package_manager.py,
PackageManager.install_package, _common_folder and _extract_zip), for tests:

- a path that starts with ``/`` or holds ``../``, ``:/``, ``..\\`` or ``:\\``
  refuses the whole archive;
- when every entry sits in one folder, that folder is stripped;
- a ``.no-sublime-package`` at the (stripped) root makes it unpack into
  ``Packages/<name>/``; without it Package Control repacks the files as
  ``Installed Packages/<name>.sublime-package``, which Sublime Text imports
  from the zip (and ctypes cannot load a library from there);
- the root ``__init__.py`` is never extracted;
- a file gets the executable bit only when its entry was made on Unix
  (``create_system == 3``) with ``S_IXUSR`` in its mode: nothing else of
  the mode is kept;
- ``.python-version`` is written only when the archive has none.

    python3 pc_install.py PACKAGE_ZIP DATA_DIR [NAME]   # prints the install path
"""

import os
import shutil
import stat
import sys
import zipfile

UNSAFE = ("../", ":/", "..\\", ":\\")


class InstallError(Exception):
    pass


def common_folder(zf):
    parts = []
    for info in zf.infolist():
        path = info.filename
        if path.startswith("/") or any(u in path for u in UNSAFE):
            raise InstallError("{} may traverse outside of the package root".format(path))
        parts.append([c for c in path.split("/") if c and c != "."])
    low, high = min(parts), max(parts)
    common = low
    for i, c in enumerate(low):
        if c != high[i]:
            common = low[:i]
            break
    return "/".join(common) + "/" if common else ""


def install(package_zip, data_dir, name="QwenCompanion", python_version="3.8"):
    """Installs into ``data_dir``'s ``Packages/`` (unpacked) or ``Installed
    Packages/`` (zipped); returns the path it made."""
    with zipfile.ZipFile(package_zip) as zf:
        root = common_folder(zf)
        try:
            zf.getinfo(root + ".no-sublime-package")
            unpack = True
        except KeyError:
            unpack = False
        dest = os.path.join(data_dir, "Packages", name) if unpack else os.path.join(data_dir, "_work", name)
        if os.path.isdir(dest):
            shutil.rmtree(dest)
        for info in zf.infolist():
            source = info.filename
            if source.endswith("/") or source == root + "__init__.py":
                continue
            target = os.path.join(dest, *source[len(root):].split("/"))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with zf.open(info) as src, open(target, "wb") as out:
                shutil.copyfileobj(src, out)
            if info.create_system == 3 and (info.external_attr >> 16) & stat.S_IXUSR:
                os.chmod(target, os.stat(target).st_mode | stat.S_IXUSR)
    version_file = os.path.join(dest, ".python-version")
    if not os.path.exists(version_file):
        with open(version_file, "w") as f:
            f.write(python_version)
    if unpack:
        return dest
    installed = os.path.join(data_dir, "Installed Packages")
    os.makedirs(installed, exist_ok=True)
    packed = os.path.join(installed, name + ".sublime-package")
    with zipfile.ZipFile(packed, "w", compression=zipfile.ZIP_DEFLATED) as out:
        for folder, _, files in os.walk(dest):
            for f in files:
                full = os.path.join(folder, f)
                out.write(full, os.path.relpath(full, dest))
    shutil.rmtree(os.path.dirname(dest))
    return packed


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    print(install(*sys.argv[1:]))
