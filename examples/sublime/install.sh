#!/usr/bin/env bash
# Installs the QwenCompanion package into Sublime Text's Packages folder with
# the Python binding, the native library and the qc-mcp-bridge executable in
# the package's own lib/ (imported as QwenCompanion.lib.qwen_companion, never
# from the global sys.path):
#   bash examples/sublime/install.sh [PACKAGES_DIR]
# PACKAGES_DIR defaults to Sublime Text 4's user Packages folder. The library
# is $QWEN_COMPANION_LIB, else target/release (built when missing); the
# bridge is the qc-mcp-bridge next to it.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)

case "$(uname -s)" in
  Darwin) default_dest="$HOME/Library/Application Support/Sublime Text/Packages"; lib_name=libqwen_companion.dylib ;;
  *) default_dest="${XDG_CONFIG_HOME:-$HOME/.config}/sublime-text/Packages"; lib_name=libqwen_companion.so ;;
esac
dest=${1:-$default_dest}

lib=${QWEN_COMPANION_LIB:-$root/target/release/$lib_name}
if [ ! -f "$lib" ]; then
  if [ -n "${QWEN_COMPANION_LIB:-}" ]; then echo "no library at $lib" >&2; exit 1; fi
  (cd "$root" && cargo build --release --lib --bin qc-mcp-bridge)
fi
bridge=$(dirname "$lib")/qc-mcp-bridge

pkg="$dest/QwenCompanion"
mkdir -p "$dest"
rm -rf "$pkg"
cp -R "$here/QwenCompanion" "$pkg"
mkdir -p "$pkg/lib"
printf '"""The binding, library and bridge shipped with the package (install.sh)."""\n' > "$pkg/lib/__init__.py"
cp -R "$root/bindings/python/qwen_companion" "$pkg/lib/"
cp "$lib" "$pkg/lib/$lib_name"
if [ -x "$bridge" ]; then
  cp "$bridge" "$pkg/lib/qc-mcp-bridge"
else
  echo "note: no $bridge: plugin tools will not reach Qwen Code (set mcp_bridge_path)" >&2
fi
find "$pkg" -name __pycache__ -type d -prune -exec rm -rf {} +
echo "installed $pkg (binding, $(basename "$lib") and qc-mcp-bridge in lib/); restart Sublime Text or reload the plugin"
