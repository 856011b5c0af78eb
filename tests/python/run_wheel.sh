#!/usr/bin/env bash
# The Python wheels of a release (bindings/python/build_wheels.py, run by
# scripts/dist.sh), checked and then tested as a user installs them:
#   bash tests/python/run_wheel.sh [pytest args...]
# 1. $QC_DIST_DIR (default target/dist) must hold the wheels: one per target
#    triple under $QC_DIST_DIR/native (else: run bash scripts/dist.sh first);
# 2. a fresh venv (target/wheel-test/venv) with tests/python/wheel-requirements.txt,
#    installed offline from a wheelhouse (target/wheel-test/wheelhouse,
#    downloaded once per requirements change);
# 3. check_wheels.py (RECORD, WHEEL, METADATA, the native files' formats and
#    execute bits, reproducible bytes), check-wheel-contents on every wheel,
#    auditwheel show on the Linux ones (the manylinux tag is honest);
# 4. pip must refuse every other platform's wheel (their tags);
# 5. pip install --no-index of this machine's wheel, then the binding's tests
#    (every tests/python/test_*.py but the Sublime plugin's and the Python 3.8
#    run, which use the checkout) with QC_TEST_INSTALLED=1: the package and
#    library come from the venv's site-packages, no QWEN_COMPANION_LIB.
# Env: PYTHON (default python3), QC_DIST_DIR, QC_MANYLINUX_GLIBC (as given to
# build_wheels.py). Exits non-zero on any failure; pytest's summary is last.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"

python=${PYTHON:-python3}
dist=${QC_DIST_DIR:-$root/target/dist}
dist=$(cd "$dist" 2>/dev/null && pwd) || { echo "!! no dist directory ${QC_DIST_DIR:-target/dist}: run bash scripts/dist.sh first"; exit 1; }
work=$root/target/wheel-test
venv=$work/venv
wheelhouse=$work/wheelhouse
req=$root/tests/python/wheel-requirements.txt

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) host=x86_64-unknown-linux-gnu ;;
  Linux-aarch64) host=aarch64-unknown-linux-gnu ;;
  *) echo "!! the wheel tests run on Linux x86_64 or aarch64, not $(uname -s) $(uname -m)"; exit 1 ;;
esac
if [ ! -d "$dist/native/$host" ]; then
  echo "!! no $dist/native/$host (this machine's build): run bash scripts/dist.sh first"; exit 1
fi
version=$(cat "$dist/VERSION" 2>/dev/null) || { echo "!! no $dist/VERSION: run bash scripts/dist.sh first"; exit 1; }
shopt -s nullglob
wheels=("$dist"/python/qwen_companion-"$version"-*.whl)
if [ ${#wheels[@]} -eq 0 ]; then
  echo "!! no wheels in $dist/python: run bash scripts/dist.sh first"; exit 1
fi

# 2. The venv, made anew each run; its packages come from the wheelhouse.
mkdir -p "$work"
. "$root/tests/lib/venv.sh"
qc_make_venv "$python" "$venv" || exit 1
py=$venv/bin/python
pipi() { "$py" -m pip --disable-pip-version-check "$@"; }
stamp=$wheelhouse/.requirements.sha256
want=$( (cat "$req" "$root/tests/python/requirements.txt"; "$py" --version) | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "== wheel: downloading the test tools into $wheelhouse"
  rm -rf "$wheelhouse"
  pipi download -q -r "$req" -d "$wheelhouse"
  echo "$want" > "$stamp"
fi
pipi install -q --no-index --find-links "$wheelhouse" -r "$req"

# 3. The wheels' contents.
echo "== wheel: checking ${#wheels[@]} wheel(s) of $version in $dist/python"
"$py" "$root/tests/python/check_wheels.py" "$dist"
"$venv/bin/check-wheel-contents" "${wheels[@]}"
glibc=${QC_MANYLINUX_GLIBC:-2.28}
for w in "${wheels[@]}"; do
  case "$w" in
    *-manylinux_*) ;;
    *) continue ;;
  esac
  out=$("$venv/bin/auditwheel" show "$w" 2>&1) || { echo "$out"; echo "!! auditwheel show failed on $w"; exit 1; }
  # "... is consistent with the following platform tag: "manylinux_2_17_x86_64"."
  tag=$(printf '%s\n' "$out" | tr '\n' ' ' | sed -n 's/.*consistent with the following platform tag: *"\([^"]*\)".*/\1/p')
  need=$(printf '%s\n' "$tag" | sed -n 's/^manylinux_\([0-9]*\)_\([0-9]*\)_.*/\1.\2/p')
  if [ -z "$need" ]; then echo "$out"; echo "!! auditwheel gave no manylinux tag for $w"; exit 1; fi
  if [ "$(printf '%s\n%s\n' "$need" "$glibc" | sort -V | tail -1)" != "$glibc" ]; then
    echo "$out"; echo "!! $(basename "$w") claims glibc $glibc, but auditwheel finds it needs $tag"; exit 1
  fi
  echo "ok: auditwheel: $(basename "$w") needs at most $tag"
done

# 4. Other platforms' wheels are refused by pip.
host_wheel=""
foreign=()
for w in "${wheels[@]}"; do
  case "$(basename "$w")" in
    *-manylinux_*_"${host%%-*}".whl) host_wheel=$w ;;
    *) foreign+=("$w") ;;
  esac
done
[ -n "$host_wheel" ] || { echo "!! no wheel for $host in $dist/python"; exit 1; }
if [ ${#foreign[@]} -eq 0 ]; then
  # Only this machine's build so far: a copy under a foreign tag is refused the same way.
  mkdir -p "$work/foreign"
  foreign=("$work/foreign/qwen_companion-$version-py3-none-win_amd64.whl")
  cp "$host_wheel" "${foreign[0]}"
fi
for w in "${foreign[@]}"; do
  if out=$(pipi install --dry-run --no-index --no-deps "$w" 2>&1); then
    echo "$out"; echo "!! pip accepted $(basename "$w") on $host"; exit 1
  fi
  printf '%s\n' "$out" | grep -q "is not a supported wheel on this platform" \
    || { echo "$out"; echo "!! pip refused $(basename "$w") for another reason"; exit 1; }
  echo "ok: pip refuses $(basename "$w") here"
done
rm -rf "$work/foreign"

# 5. Install this machine's wheel and test the installed package.
echo "== wheel: pip install $(basename "$host_wheel") into a fresh venv"
pipi install -q --no-index --no-deps "$host_wheel"
run=$work/run
rm -rf "$run"; mkdir -p "$run"
cd "$run"
unset PYTHONPATH QWEN_COMPANION_LIB QWEN_COMPANION_BRIDGE
"$py" - <<'EOF'
import os, sysconfig
import qwen_companion
pkg = os.path.dirname(os.path.realpath(qwen_companion.__file__))
site = os.path.realpath(sysconfig.get_paths()["platlib"])
assert os.path.dirname(pkg) == site, (pkg, site)
lib = qwen_companion.load_library()
assert lib.path == os.path.join(qwen_companion.__path__[0], "_lib", os.path.basename(lib.path)), lib.path
bridge = qwen_companion.bridge_path()
assert os.access(bridge, os.X_OK), bridge
print("ok: installed {} {} loads {} (library {}); bridge {}".format(
    qwen_companion.__name__, qwen_companion.__version__, lib.path, lib.version, bridge))
EOF
tests=()
for t in "$root"/tests/python/test_*.py; do
  case "$(basename "$t")" in
    test_sublime_*|test_py38.py) ;;
    *) tests+=("$t") ;;
  esac
done
echo "== wheel: pytest against the installed package (${#tests[@]} files)"
export PATH="$venv/bin:$PATH"
status=0
QC_TEST_INSTALLED=1 timeout --foreground 600 "$py" -m pytest -p no:cacheprovider -o console_output_style=classic \
  --rootdir "$root/tests/python" -q "${tests[@]}" "$@" || status=$?
cd "$root"
rm -rf "$run"
exit $status
