"""``python -m qwen_companion``: shows which library and ``qc-mcp-bridge``
this installation uses, or why none is found (exit status 1)."""

import sys

from . import __version__, bridge_path, load_library
from ._native import ABI_VERSION, LibraryLoadError


def main():
    # type: () -> int
    print("qwen_companion {} (Python binding, ABI {})".format(__version__, ABI_VERSION))
    try:
        lib = load_library()
    except LibraryLoadError as e:
        print("library: not found: {}".format(e), file=sys.stderr)
        return 1
    print("library: {} (version {})".format(lib.path, lib.version))
    try:
        bridge = bridge_path()
    except OSError as e:
        print("bridge: not found: {}".format(e), file=sys.stderr)
        return 1
    print("bridge: {}".format(bridge))
    return 0


if __name__ == "__main__":
    sys.exit(main())
