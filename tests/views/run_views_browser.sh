#!/usr/bin/env bash
# The view server in a real headless browser:
#   bash tests/views/run_views_browser.sh
# 1. Debian's chromium + chromium-driver (apt-get when missing);
# 2. a venv under target/views/venv with tests/views/requirements.txt (selenium);
# 3. the library (cargo build --release --lib) and target/c/qcdemo (make) when missing;
# 4. tests/views/views_browser.py: `qcdemo plugins serve` with the example
#    plugins and tests/plugins/fixtures/view-probe, driven by headless Chromium.
# Artefacts: target/views/todo-quadrant-view.png (and view-probe-dark.png).
# Its last line is `views-browser: N passed, M failed`; exits non-zero on failure.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"

if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  echo "== views-browser: installing chromium and chromium-driver"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
fi
command -v node >/dev/null 2>&1 || { echo "views-browser: 0 passed, 1 failed (node is missing)"; exit 1; }

venv=$root/target/views/venv
req=$root/tests/views/requirements.txt
stamp=$venv/.requirements.sha256
want=$( (cat "$req"; python3 --version) | sha256sum | cut -d' ' -f1)
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "== views-browser: creating $venv"
  rm -rf "$venv"
  mkdir -p "$root/target/views"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req"
  echo "$want" > "$stamp"
fi

if [ ! -f target/release/libqwen_companion.so ]; then
  echo "== views-browser: building the library"
  nice -n 10 cargo build --release --lib
fi
make -s -C examples/c NO_CARGO=1 >/dev/null

exec "$venv/bin/python" tests/views/views_browser.py "$root"
