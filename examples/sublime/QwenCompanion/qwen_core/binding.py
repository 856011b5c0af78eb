"""Finds and imports the ``qwen_companion`` Python binding without touching
the plugin host's global ``sys.path``.

Package Control 4 installs the libraries a package names in its
``dependencies.json`` into ``Packages/../Lib/python38``: one folder on the
global ``sys.path`` shared by every package of the plugin host. The binding
must match the native library it loads (their ABI version is checked), so a
shared copy would tie every package to one release. This package therefore
ships its copy inside itself, in ``lib/`` (``install.sh`` puts the binding,
the library and ``qc-mcp-bridge`` there), and imports it as its own
subpackage (``QwenCompanion.lib.qwen_companion``), the way Package Control's
libraries are imported but in the package's own namespace.

Where the binding comes from, in order:

1. ``lib/qwen_companion`` of the package (what ``install.sh`` sets up);
2. the folder the setting ``binding_path`` names (it holds ``qwen_companion/``);
3. an importable ``qwen_companion`` (e.g. a Package Control library);
4. in a development checkout (the package folder is, or links to,
   ``<repo>/examples/sublime/QwenCompanion``), ``<repo>/bindings/python``.

2 and 4 are loaded under the package's private name
(``QwenCompanion._qwen_companion``), never through ``sys.path``.
"""

import importlib
import importlib.util
import os
import sys

BINDING = "qwen_companion"


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
    Sublime package's module name (``__package__`` of plugin.py)."""
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
                "the qwen_companion binding was not found: run examples/sublime/install.sh, "
                "or set binding_path to the folder that contains qwen_companion/")
    return _load_from(found[0][1], private)
