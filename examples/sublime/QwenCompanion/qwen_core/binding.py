"""Finds and imports the ``qwen_companion`` Python binding without touching
the plugin host's global ``sys.path``.

Package Control 4 installs the libraries a package names in its
``dependencies.json`` into ``Packages/../Lib/python38``: one folder on the
global ``sys.path`` shared by every package of the plugin host. The binding
must match the native library it loads (their ABI version is checked), so a
shared copy would tie every package to one release. This package therefore
ships its copy inside itself, in ``lib/`` (the release package and
``package.py --install`` put it there), and imports it as its own
subpackage (``QwenCompanion.lib.qwen_companion``), the way Package Control's
libraries are imported but in the package's own namespace.

Where the binding comes from, in order:

1. ``lib/qwen_companion`` of the package (the release package);
2. the folder the setting ``binding_path`` names (it holds ``qwen_companion/``);
3. an importable ``qwen_companion`` (e.g. a Package Control library);
4. in a development checkout (the package folder is, or links to,
   ``<repo>/examples/sublime/QwenCompanion``), ``<repo>/bindings/python``.

2 and 4 are loaded under the package's private name
(``QwenCompanion._qwen_companion``), never through ``sys.path``.

The native library and ``qc-mcp-bridge`` of every platform sit in
``lib/<platform>/`` (``lib/platforms.json``, written by ``package.py``, lists
them): :func:`bundled_library` picks this machine's, named as Package
Control names platforms (``linux-x64``, ``linux-arm64``, ``windows-x64``,
``osx`` for the universal macOS build), and the plugin passes its path to
the binding explicitly.
"""

import importlib
import importlib.util
import json
import os
import platform as _platform
import sys

BINDING = "qwen_companion"

#: In ``lib/``: which platforms the package ships, written by ``package.py``.
PLATFORMS_FILE = "platforms.json"

#: ``platform.machine()`` values -> Sublime Text's ``sublime.arch()`` names.
_MACHINE_ARCH = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64",
                 "i386": "x32", "i686": "x32", "x86": "x32"}


class MissingLibraryError(Exception):
    """The package cannot give this machine a native library (the message
    says why and what to do)."""


def host_arch(sublime_module=None):
    """``sublime.arch()`` (``x64``, ``arm64``, ``x32``), else the same name
    from ``platform.machine()``."""
    arch = getattr(sublime_module, "arch", None)
    if arch is not None:
        return arch()
    machine = _platform.machine().lower()
    return _MACHINE_ARCH.get(machine, machine)


def platform_names(platform, arch):
    """The folder names to try for a machine, as Package Control's platform
    selectors go: ``<platform>-<arch>`` first, then ``<platform>``."""
    return [platform + "-" + arch, platform]


def shipped_platforms(package_dir):
    """``lib/platforms.json`` of the package (None when it has none: a
    development checkout, where the binding's own search applies)."""
    path = os.path.join(package_dir, "lib", PLATFORMS_FILE)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def check_unpacked(package_dir):
    """Raises :class:`MissingLibraryError` when the package runs zipped
    (``Installed Packages/QwenCompanion.sublime-package``)."""
    if os.path.isfile(package_dir):
        raise MissingLibraryError(
            "the package runs from a zipped .sublime-package ({}), and a native library cannot "
            "load from a zip: install it with Package Control, or unzip it into "
            "Packages/QwenCompanion (see its README)".format(package_dir))


def bundled_library(package_dir, platform, arch):
    """The native library the package ships for ``platform``/``arch``
    (``sublime.platform()``, ``sublime.arch()``), or None when the package
    ships none. Raises :class:`MissingLibraryError` when the package runs
    zipped, or ships libraries but none for this machine."""
    check_unpacked(package_dir)
    shipped = shipped_platforms(package_dir)
    if shipped is None:
        return None
    table = shipped.get("platforms") or {}
    for name in platform_names(platform, arch):
        entry = table.get(name)
        if entry:
            path = os.path.join(package_dir, "lib", name, entry["library"])
            if not os.path.isfile(path):
                raise MissingLibraryError(
                    "{} is missing from the package: reinstall QwenCompanion".format(path))
            return path
    raise MissingLibraryError(
        "this package ({}) has no native library for {}-{}; it ships {}. Set library_path "
        "to a qwen-companion library built for this machine".format(
            shipped.get("version", "?"), platform, arch, ", ".join(sorted(table)) or "none"))


def _load_from(folder, name):
    """Imports ``folder/qwen_companion`` as the module ``name``."""
    pkg_dir = os.path.join(folder, BINDING)
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(pkg_dir, "__init__.py"), submodule_search_locations=[pkg_dir])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def candidates(package_dir, configured):
    """``(how, folder)`` for the places 2 and 4 of the module docs."""
    out = []
    if configured:
        out.append(("binding_path", os.path.abspath(os.path.expanduser(configured))))
    real = os.path.dirname(os.path.realpath(os.path.join(package_dir, "plugin.py")))
    out.append(("checkout", os.path.normpath(os.path.join(real, "..", "..", "..", "bindings", "python"))))
    return out


def import_binding(package, package_dir, configured=None):
    """The ``qwen_companion`` module (see the module docs); ``package`` is the
    Sublime package's module name (``__package__`` of plugin.py). A zipped
    package raises :class:`MissingLibraryError` (it must be unpacked)."""
    check_unpacked(package_dir)
    if package and os.path.isfile(os.path.join(package_dir, "lib", BINDING, "__init__.py")):
        return importlib.import_module(package + ".lib." + BINDING)
    private = (package + "._" + BINDING) if package else "_qwen_companion_binding"
    if private in sys.modules:
        return sys.modules[private]
    found = [(how, d) for how, d in candidates(package_dir, configured)
             if os.path.isfile(os.path.join(d, BINDING, "__init__.py"))]
    if found and found[0][0] == "binding_path":
        return _load_from(found[0][1], private)
    try:
        return importlib.import_module(BINDING)
    except ImportError:
        if not found:
            raise ImportError(
                "the qwen_companion binding was not found: install the QwenCompanion release "
                "package, or set binding_path to the folder that contains qwen_companion/")
    return _load_from(found[0][1], private)
