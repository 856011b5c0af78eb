"""Loads the QwenCompanion Sublime Text package the way Sublime Text 4 does,
on the stub ``sublime`` / ``sublime_plugin`` modules (tests/python/stubs).

Sublime Text imports a package folder as a Python package named after the
folder and each of its top-level ``.py`` files as a plugin module of it
(``QwenCompanion.plugin``, ``QwenCompanion.<other>``); subfolders are plain
subpackages, never loaded as plugins. So the modules of the package import
each other relatively (``from . import plugin as core``).

    pkg = load_package()          # a fresh import of every top-level module
    pkg.plugin                    # the QwenCompanion.plugin module
    pkg.loaded(); ...; pkg.unloaded()   # plugin_loaded / plugin_unloaded of each
"""

import importlib
import importlib.machinery
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
STUBS = os.path.join(HERE, "stubs")
REPO = os.path.dirname(os.path.dirname(HERE))
#: $QC_SUBLIME_PACKAGE_DIR: an installed release package instead (see conftest.py).
PACKAGE_DIR = os.path.abspath(os.environ.get("QC_SUBLIME_PACKAGE_DIR")
                              or os.path.join(REPO, "examples", "sublime", "QwenCompanion"))
PACKAGE_NAME = "QwenCompanion"

if STUBS not in sys.path:
    sys.path.insert(0, STUBS)


def plugin_modules(package_dir=PACKAGE_DIR):
    """The plugin modules of a package, in Sublime Text's order: ``plugin``
    first here (the others import it), then every other top-level ``.py``
    file by name."""
    if os.path.isfile(package_dir):  # a .sublime-package: Sublime Text imports from the zip
        import zipfile

        with zipfile.ZipFile(package_dir) as zf:
            listing = [n for n in zf.namelist() if "/" not in n]
    else:
        listing = os.listdir(package_dir)
    names = sorted(f[:-3] for f in listing if f.endswith(".py") and not f.startswith("."))
    if "plugin" in names:
        names.remove("plugin")
        names.insert(0, "plugin")
    return names


class Package(object):
    def __init__(self, name, modules):
        self.name = name
        self.modules = modules  # short name -> module, in load order

    def __getattr__(self, short):
        try:
            return self.__dict__["modules"][short]
        except KeyError:
            raise AttributeError(short)

    def loaded(self):
        for module in self.modules.values():
            hook = getattr(module, "plugin_loaded", None)
            if hook is not None:
                hook()

    def unloaded(self):
        for module in reversed(list(self.modules.values())):
            hook = getattr(module, "plugin_unloaded", None)
            if hook is not None:
                hook()


def forget(name=PACKAGE_NAME, package_dir=None):
    """Drops the package's modules, except the ``lib`` of ``package_dir``
    (the binding it ships): Sublime Text reloads a package's plugins, not the
    subpackages they import."""
    keep = name + ".lib"
    lib = sys.modules.get(keep)
    same = package_dir is not None and lib is not None and \
        list(getattr(lib, "__path__", [])) == [os.path.join(package_dir, "lib")]
    for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
        if not same or (key != keep and not key.startswith(keep + ".")):
            del sys.modules[key]


def _package_module(package_dir, name):
    spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
    spec.submodule_search_locations = [package_dir]
    package = importlib.util.module_from_spec(spec)
    package.__path__ = [package_dir]
    sys.modules[name] = package
    return package


def shared_binding(package_dir=PACKAGE_DIR, name=PACKAGE_NAME):
    """The binding an installed package ships (``<name>.lib.qwen_companion``),
    imported once and also registered as ``qwen_companion`` (with its
    submodules), so that tests and plugin raise and catch the same classes."""
    if name not in sys.modules:
        _package_module(package_dir, name)
    binding = importlib.import_module(name + ".lib.qwen_companion")
    prefix = name + ".lib.qwen_companion"
    for key in [k for k in sys.modules if k == prefix or k.startswith(prefix + ".")]:
        sys.modules["qwen_companion" + key[len(prefix):]] = sys.modules[key]
    return binding


def load_package(package_dir=PACKAGE_DIR, name=PACKAGE_NAME, only=None):
    """A fresh import of the package at ``package_dir`` as ``name`` (any
    earlier import of it is forgotten). ``only``: the short names to load
    (default every plugin module)."""
    forget(name, package_dir)
    _package_module(package_dir, name)
    modules = {}
    for short in plugin_modules(package_dir):
        if only is not None and short not in only:
            continue
        modules[short] = importlib.import_module(name + "." + short)
    return Package(name, modules)
