#!/usr/bin/env bash
# Runs the demo: the whole library working together on a real workspace
# (default: the current directory).
#   bash scripts/demo.sh [WORKSPACE_DIR[:DIR...]] [--ide-name NAME]
#
# - the IDE companion (`qcdemo ide`, in the foreground: type editor events on
#   stdin — open PATH, focus PATH, cursor L C, select TEXT, accept PATH,
#   reject PATH, ... see `target/c/qcdemo --help`; EOF or Ctrl-C stops
#   everything);
# - the plugin host serving the example plugins of examples/plugins/ (hello,
#   todo-quadrant): it installs them into ~/.qwen/companion/plugins and
#   registers the `qwen-companion-plugins` MCP server in ~/.qwen/settings.json,
#   so a `qwen` started in the workspace can call their tools
#   (mcp__qwen-companion-plugins__hello_say_hello, ...);
# - a cross-session participant named `qcdemo` (`qcdemo sessions listen`):
#   `send_message` from a Qwen session to `qcdemo` lands in its log.
# Then, in a terminal inside that workspace, run `qwen` with the env printed in
# the first line (or nothing at all: Qwen Code finds the lock file by cwd).
# The plugin host's and the participant's JSON lines go to target/demo/*.log.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ws=${1:-$PWD}
[ $# -gt 0 ] && shift
first_ws=${ws%%:*}
first_ws=$(cd "$first_ws" && pwd)
if ! command -v cc >/dev/null 2>&1 || ! command -v make >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq build-essential >/dev/null
fi
cargo build --release --manifest-path "$root/Cargo.toml" \
  --lib --bin qc-mcp-bridge --example plugins_mcp_host >&2
make -s -C "$root/examples/c" NO_CARGO=1 >&2
logs=$root/target/demo
mkdir -p "$logs"

pids=()
cleanup() {
  # EOF on their stdin stops the plugin host and the participant cleanly
  # (lock file and registry record removed); a part still alive after 5 s
  # is killed.
  exec 3>&- 4>&- 2>/dev/null || true
  for _ in $(seq 1 50); do
    alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && break
    sleep 0.1
  done
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

# The plugin host: its stdin stays open (a fifo) until the demo ends.
plugins_in=$logs/plugins.in
rm -f "$plugins_in" && mkfifo "$plugins_in"
"$root/target/release/examples/plugins_mcp_host" \
  --bridge "$root/target/release/qc-mcp-bridge" --workspace "$first_ws" \
  --install "$root/examples/plugins/hello" --install "$root/examples/plugins/todo-quadrant" \
  --always-load-tools < "$plugins_in" > "$logs/plugins.log" 2>&1 &
pids+=($!)
exec 3> "$plugins_in"   # keeps the host's stdin open; closed when the demo exits

# The participant, with its stdin held open the same way.
part_in=$logs/participant.in
rm -f "$part_in" && mkfifo "$part_in"
"$root/target/c/qcdemo" sessions listen --name qcdemo < "$part_in" > "$logs/participant.log" 2>&1 &
pids+=($!)
exec 4> "$part_in"

for f in plugins participant; do
  for _ in $(seq 1 100); do grep -q '"event":"ready"' "$logs/$f.log" 2>/dev/null && break; sleep 0.1; done
  if ! grep -q '"event":"ready"' "$logs/$f.log"; then
    echo "qcdemo: the $f part did not start: $(tail -c 400 "$logs/$f.log")" >&2
    exit 1
  fi
done
echo "qcdemo: plugin host ready: $(grep -m1 '"event":"ready"' "$logs/plugins.log")" >&2
echo "qcdemo: participant ready: $(grep -m1 '"event":"ready"' "$logs/participant.log")" >&2
echo "qcdemo: serving $ws (stop with Ctrl-D or Ctrl-C); logs in $logs" >&2
"$root/target/c/qcdemo" ide --workspace "$ws" "$@"
