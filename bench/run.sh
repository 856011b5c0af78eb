#!/usr/bin/env bash
# Runs the IDE companion benchmark (benches/ide.rs) after installing what it needs:
# node + npm (Debian packages, only when missing) and the Node baseline's pinned
# dependencies (npm ci from bench/node-baseline/package-lock.json).
#
#   bench/run.sh                  # full run (~1 min on 2 cores, plus the release build)
#   QC_BENCH_N=500 bench/run.sh   # fewer round trips; see the knobs at the top of benches/ide.rs
#
# A missed target is reported, never a failure: the exit code is non-zero only when
# something could not be built or installed.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
baseline="$here/node-baseline"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "bench/run.sh: installing node and npm (apt-get)" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
  else
    echo "bench/run.sh: node/npm missing; the Node baseline will be skipped" >&2
    export QC_BENCH_SKIP_NODE=1
  fi
fi

if [ "${QC_BENCH_SKIP_NODE:-0}" != 1 ]; then
  major="$(node -p 'process.versions.node.split(".")[0]')"
  if [ "$major" -lt 20 ]; then
    echo "bench/run.sh: node $(node --version) is too old for the baseline (needs >= 20)" >&2
    exit 1
  fi
  # npm ci when node_modules is missing or older than the lock file
  stamp="$baseline/node_modules/.package-lock.json"
  if [ ! -f "$stamp" ] || [ "$baseline/package-lock.json" -nt "$stamp" ]; then
    (cd "$baseline" && npm ci --no-audit --no-fund --loglevel=error)
  fi
fi

cd "$root"
exec cargo bench --bench ide "$@"
