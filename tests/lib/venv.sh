# Sourced by the Python suites (tests/python/run.sh, run_wheel.sh,
# tests/sublime/run.sh) and scripts/dist/lib.sh (the zig venv): one way to
# make a venv on a fresh machine.
# qc_make_venv PYTHON DIR: DIR becomes a new venv of PYTHON. Debian ships
# venv/ensurepip separately (python3.X-venv): installed with apt-get when
# missing and this runs as root. Returns 1 with a message if it cannot.
qc_make_venv() {
  local python=$1 dir=$2 pyver
  rm -rf "$dir"
  "$python" -m venv "$dir" >/dev/null 2>&1 && return 0
  pyver=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
  if [ -n "$pyver" ] && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "== installing python$pyver-venv" >&2
    apt-get update -qq >/dev/null 2>&1 || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "python$pyver-venv" >/dev/null 2>&1 \
      || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null 2>&1 || true
  fi
  rm -rf "$dir"
  "$python" -m venv "$dir" >/dev/null 2>&1 && return 0
  echo "!! cannot create a venv with $python in $dir (install python3-venv)" >&2
  return 1
}
