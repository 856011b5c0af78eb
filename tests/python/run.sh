#!/usr/bin/env bash
# Tests of the Python binding (bindings/python) and the Sublime Text plugin
# (examples/sublime/QwenCompanion):
#   bash tests/python/run.sh [pytest args...]
# 1. a venv under target/pyenv with tests/python/requirements.txt (pytest, the
#    official MCP Python SDK, vermin); the machine's Python stays untouched;
# 2. the library (cargo build --release) if target/release lacks it and
#    QWEN_COMPANION_LIB is not set;
# 3. vermin: the binding and the plugin must run on Python 3.8 (Sublime Text);
# 4. pytest; its summary line is the last line printed. Exits non-zero on failure.
# Env: PYTHON (default python3), QC_PYENV (default target/pyenv).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"

python=${PYTHON:-python3}
venv=${QC_PYENV:-$root/target/pyenv}
req=$root/tests/python/requirements.txt
stamp=$venv/.requirements.sha256
want=$( (cat "$req"; "$python" --version) | sha256sum | cut -d' ' -f1)

. "$root/tests/lib/venv.sh"
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "== python: creating $venv"
  qc_make_venv "$python" "$venv" || exit 1
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req"
  echo "$want" > "$stamp"
fi
export PATH="$venv/bin:$PATH"
py="$venv/bin/python"

lib_name=libqwen_companion.so
case "$(uname -s)" in Darwin) lib_name=libqwen_companion.dylib ;; esac
if [ -z "${QWEN_COMPANION_LIB:-}" ] && [ ! -f "target/release/$lib_name" ]; then
  echo "== python: building the library (cargo build --release)"
  cargo build --release
fi

echo "== python: vermin (Python 3.8 compatibility of the binding and the Sublime plugin)"
vermin --target=3.8- --no-tips --violations --eval-annotations bindings/python examples/sublime

echo "== python: pytest"
exec timeout --foreground 900 "$py" -m pytest -p no:cacheprovider -o console_output_style=classic \
  --rootdir tests/python -q tests/python "$@"
