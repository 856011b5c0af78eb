#!/usr/bin/env bash
# The Sublime Text release package (issue 20), from a dist that
# scripts/dist.sh made ($QC_DIST_DIR, default target/dist):
#   bash tests/sublime/run.sh [pytest args for the package tests...]
# 1. examples/sublime/package.py builds QwenCompanion.sublime-package and
#    repository.json from the dist's native builds (every platform's);
# 2. tests/sublime/pc_install.py installs it as Package Control does, into a
#    temporary data folder (Packages/QwenCompanion, unpacked);
# 3. on the installed package: vermin (Python 3.8, the plugin host before
#    build 4205) and removed_apis.py (nothing Python 3.9-3.14 removed or
#    deprecated: the 3.14 host from build 4205);
# 4. pytest tests/sublime: the package's contents, repository.json against
#    Package Control's schema, the packager's errors, the lint;
# 5. the Sublime plugin tests (tests/python/test_sublime_*.py) against the
#    installed package, loading the library it ships (QWEN_COMPANION_LIB
#    unset): on this machine's python3, then on the newest Python here
#    (3.13 or later: $QC_PYTHON_NEWEST, python3.14, python3.13, pyenv's);
# 6. py38_smoke.py on a real Python 3.8 against the installed package, when
#    one is here ($QC_PYTHON38, python3.8, pyenv's 3.8).
# venvs: target/pyenv-sublime-<version> (tests/python/requirements.txt).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
unset QWEN_COMPANION_LIB

dist=${QC_DIST_DIR:-$root/target/dist}
dist=$(cd "$dist" 2>/dev/null && pwd) || { echo "!! sublime: no dist at ${QC_DIST_DIR:-target/dist}: run bash scripts/dist.sh first"; exit 1; }
if [ ! -f "$dist/VERSION" ] || [ ! -d "$dist/native" ]; then
  echo "!! sublime: $dist has no VERSION or native/: run bash scripts/dist.sh first"; exit 1
fi
version=$(cat "$dist/VERSION")

req=$root/tests/python/requirements.txt
. "$root/tests/lib/venv.sh"
venv_for() {  # venv_for PYTHON -> prints the venv's python
  local py=$1 ver venv want
  ver=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  venv=$root/target/pyenv-sublime-$ver
  want=$( (cat "$req"; "$py" --version) | sha256sum | cut -d' ' -f1)
  if [ ! -x "$venv/bin/python" ] || [ "$(cat "$venv/.requirements.sha256" 2>/dev/null)" != "$want" ]; then
    echo "== sublime: creating $venv" >&2
    qc_make_venv "$py" "$venv" || return 1
    "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req" >&2
    echo "$want" > "$venv/.requirements.sha256"
  fi
  echo "$venv/bin/python"
}

version_of() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null; }

newest_python() {
  local best="" best_minor=0 c minor
  for c in "${QC_PYTHON_NEWEST:-}" python3.14 python3.13 "$HOME"/.pyenv/versions/3.1[3-9]*/bin/python3; do
    [ -n "$c" ] || continue
    command -v "$c" >/dev/null 2>&1 || [ -x "$c" ] || continue
    minor=$("$c" -c 'import sys; print(sys.version_info[1] if sys.version_info[0] == 3 else 0)' 2>/dev/null) || continue
    if [ "$minor" -gt "$best_minor" ]; then best=$c; best_minor=$minor; fi
  done
  if [ "$best_minor" -lt 13 ]; then
    echo "!! sublime: no Python 3.13 or later here (Sublime Text 4205+ runs plugins on 3.14): set QC_PYTHON_NEWEST" >&2
    return 1
  fi
  echo "$best"
}

python38() {
  local c
  for c in "${QC_PYTHON38:-}" python3.8 "$HOME"/.pyenv/versions/3.8*/bin/python3.8; do
    [ -n "$c" ] || continue
    if [ "$(version_of "$c")" = "3.8" ]; then echo "$c"; return 0; fi
  done
  return 1
}

work=$(mktemp -d "${TMPDIR:-/tmp}/qc-sublime.XXXXXX")
trap 'rm -rf "$work"' EXIT

base=python3
py=$(venv_for "$base")
newest=$(newest_python)
py_new=$(venv_for "$newest")

echo "== sublime: package.py (dist $dist, version $version)"
"$py" examples/sublime/package.py --native "$dist/native" --version "$version" --out "$work/build" \
  --base-url "https://github.com/example/qwen-companion/releases/download/v{version}"

echo "== sublime: installing it as Package Control does"
pkg=$("$py" tests/sublime/pc_install.py "$work/build/QwenCompanion.sublime-package" "$work/data")
case "$pkg" in "$work/data/Packages/QwenCompanion") ;; *) echo "!! sublime: installed as $pkg, not unpacked"; exit 1 ;; esac

echo "== sublime: vermin (Python 3.8 host) on the installed package"
"$(dirname "$py")/vermin" --target=3.8- --no-tips --violations --eval-annotations "$pkg"

echo "== sublime: removed and deprecated standard-library APIs (Python 3.9-3.14 host) on the installed package"
"$py" tests/sublime/removed_apis.py "$pkg"

export QC_DIST_DIR=$dist QC_SUBLIME_BUILD=$work/build
echo "== sublime: package tests ($("$py" --version))"
timeout --foreground 600 "$py" -m pytest -p no:cacheprovider -o console_output_style=classic \
  --rootdir tests/sublime -q tests/sublime "$@"

if py38=$(python38); then
  echo "== sublime: the installed package on $("$py38" --version 2>&1) (py38_smoke.py)"
  lib=$("$py" - "$pkg" <<'PY'
import json, os, platform, sys
pkg = sys.argv[1]
table = json.load(open(os.path.join(pkg, "lib", "platforms.json")))["platforms"]
name = "linux-" + {"x86_64": "x64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
print(os.path.join(pkg, "lib", name, table[name]["library"]))
PY
)
  # Its own HOME: the smoke test starts a plugin host under ~/.qwen.
  mkdir -p "$work/home"
  env -u PYTHONPATH -u PYTHONHOME -u QWEN_HOME HOME="$work/home" QC_SUBLIME_PACKAGE_DIR=$pkg \
    timeout 120 "$py38" tests/python/py38_smoke.py "$lib"
else
  echo "== sublime: no Python 3.8 here (\$QC_PYTHON38): vermin above checked the 3.8 syntax"
fi

sublime_tests=(tests/python/test_sublime_*.py)
for p in "$py" "$py_new"; do
  echo "== sublime: plugin tests on the installed package ($("$p" --version))"
  QC_SUBLIME_PACKAGE_DIR=$pkg timeout --foreground 900 "$p" -m pytest -p no:cacheprovider \
    -o console_output_style=classic --rootdir tests/python -q "${sublime_tests[@]}"
done
