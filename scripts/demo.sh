#!/usr/bin/env bash
# Runs the demo companion: the library driven by the C example (`qcdemo ide`),
# serving a real workspace (default: the current directory).
#   bash scripts/demo.sh [WORKSPACE_DIR[:DIR...]] [--ide-name NAME]
# Then, in a terminal inside that workspace, run `qwen` with the env printed in
# the first line (or nothing at all: Qwen Code finds the lock file by cwd).
# Type commands on stdin (open PATH, focus PATH, cursor L C, select TEXT,
# accept PATH, reject PATH, ... see `target/c/qcdemo --help`); EOF or Ctrl-C stops.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ws=${1:-$PWD}
[ $# -gt 0 ] && shift
ws=$(cd "$ws" && pwd)
if ! command -v cc >/dev/null 2>&1 || ! command -v make >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq build-essential >/dev/null
fi
cargo build --release --manifest-path "$root/Cargo.toml" >&2
make -s -C "$root/examples/c" NO_CARGO=1 >&2
echo "qcdemo: serving $ws (stop with Ctrl-D or Ctrl-C)" >&2
exec "$root/target/c/qcdemo" ide --workspace "$ws" "$@"
