#!/usr/bin/env bash
# Runs the benchmarks after installing what they need: node + npm (Debian packages, only
# when missing) and each Node baseline's pinned dependencies (npm ci from its lock file):
#   benches/ide.rs       IDE companion vs bench/node-baseline (express + MCP SDK)
#   benches/sessions.rs  cross-session messaging vs bench/sdk-baseline (@qwen-code/sdk PeerEndpoint)
#   benches/plugins.rs   plugin host vs bench/plugins-baseline (plain child_process.fork; no npm deps)
#   benches/mcp.rs       plugin tools over MCP (PluginMcpServer) vs bench/mcp-baseline
#                        (@modelcontextprotocol/sdk server + child_process.fork of the same plugin)
#
#   bench/run.sh                          # all four (~1 min + ~20 s + ~10 s + ~15 s on 2 cores, plus the release build)
#   QC_BENCH_ONLY=sessions bench/run.sh   # some of them (ide | sessions | plugins | mcp)
#   QC_BENCH_N=500 bench/run.sh           # knobs: see the top of benches/ide.rs, sessions.rs, plugins.rs and mcp.rs
#
# A missed target is reported, never a failure: the exit code is non-zero only when
# something could not be built or installed.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "bench/run.sh: installing node and npm (apt-get)" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
  else
    echo "bench/run.sh: node/npm missing; the Node baselines will be skipped" >&2
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
  for baseline in "$here/node-baseline" "$here/sdk-baseline" "$here/mcp-baseline"; do
    stamp="$baseline/node_modules/.package-lock.json"
    if [ ! -f "$stamp" ] || [ "$baseline/package-lock.json" -nt "$stamp" ]; then
      (cd "$baseline" && npm ci --no-audit --no-fund --loglevel=error)
    fi
  done
fi

cd "$root"
for bench in ${QC_BENCH_ONLY:-ide sessions plugins mcp}; do
  cargo bench --bench "$bench" "$@"
done
