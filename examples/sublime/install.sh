#!/usr/bin/env bash
# Installs the QwenCompanion package into Sublime Text's Packages folder with
# the Python binding and the native library vendored under QwenCompanion/vendor/:
#   bash examples/sublime/install.sh [PACKAGES_DIR]
# PACKAGES_DIR defaults to Sublime Text 4's user Packages folder. The library
# is $QWEN_COMPANION_LIB, else target/release (built when missing).
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
  (cd "$root" && cargo build --release)
fi

pkg="$dest/QwenCompanion"
mkdir -p "$dest"
rm -rf "$pkg"
cp -R "$here/QwenCompanion" "$pkg"
mkdir -p "$pkg/vendor"
cp -R "$root/bindings/python/qwen_companion" "$pkg/vendor/"
cp "$lib" "$pkg/vendor/$lib_name"
find "$pkg" -name __pycache__ -type d -prune -exec rm -rf {} +
echo "installed $pkg (binding and $(basename "$lib") in vendor/); restart Sublime Text or reload the plugin"
