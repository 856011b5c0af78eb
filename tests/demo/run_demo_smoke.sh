#!/usr/bin/env bash
# The README's run command works as a newcomer runs it: `bash scripts/demo.sh WS`
# in an isolated HOME starts the whole thing together, and the real Qwen Code CLI
# (pinned) sees its parts.
#
#   tests/demo/run_demo_smoke.sh
#
# Checks:
#   ready         the companion, the plugin host and the participant each print
#                 their ready line
#   ide-lock      the companion's lock file is in $HOME/.qwen/ide
#   mcp-list      `qwen mcp list` in the workspace shows qwen-companion-plugins
#                 Connected (the plugin host's MCP server, through the bridge the
#                 demo registered in $HOME/.qwen/settings.json)
#   sessions-ps   `qwen sessions ps --json` lists the participant `qcdemo`
#   stop          `stop` ends every part: no lock file, no process of the demo left
# Last line of output: `demo: N passed, M failed`.
set -u -o pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
QWEN_PKG=$ROOT/target/e2e/qwen/node_modules/@qwen-code/qwen-code
QWEN_VERSION=0.24.4
PASSED=0 FAILED=0
pass() { PASSED=$((PASSED + 1)); echo "PASS $1: $2"; }
fail() { FAILED=$((FAILED + 1)); echo "FAIL $1: $2"; }
finish() { echo "demo: $PASSED passed, $FAILED failed"; [ "$FAILED" = 0 ]; exit $?; }

NODE=$(command -v node) || { fail setup "node not found"; finish; }
if [ "$("$NODE" -p "require('$QWEN_PKG/package.json').version" 2>/dev/null)" != "$QWEN_VERSION" ]; then
  mkdir -p "$ROOT/target/e2e/qwen"
  [ -f "$ROOT/target/e2e/qwen/package.json" ] || echo '{ "name": "qwen-companion-e2e", "private": true }' > "$ROOT/target/e2e/qwen/package.json"
  timeout 900 npm install --prefix "$ROOT/target/e2e/qwen" --no-audit --no-fund --save-exact \
    --loglevel=error "@qwen-code/qwen-code@$QWEN_VERSION" >/dev/null || { fail setup "npm install failed"; finish; }
fi

RUN=$(mktemp -d "${TMPDIR:-/tmp}/qc-demo-smoke.XXXXXX")
WS=$RUN/ws HOME_DIR=$RUN/home
mkdir -p "$WS" "$HOME_DIR/.qwen"
echo 'fn main() {}' > "$WS/main.rs"
# The demo builds with cargo: keep the toolchain where it is.
export RUSTUP_HOME=${RUSTUP_HOME:-$HOME/.rustup} CARGO_HOME=${CARGO_HOME:-$HOME/.cargo}
DEMO_IN=$RUN/demo.in
mkfifo "$DEMO_IN"
HOME=$HOME_DIR setsid bash "$ROOT/scripts/demo.sh" "$WS" < "$DEMO_IN" > "$RUN/demo.out" 2> "$RUN/demo.err" &
DEMO_PID=$!
exec 3> "$DEMO_IN"
cleanup() {
  exec 3>&- 2>/dev/null
  kill -- -"$DEMO_PID" 2>/dev/null
  wait "$DEMO_PID" 2>/dev/null
  [ "${KEEP:-0}" = 1 ] || rm -rf "$RUN"
}
trap cleanup EXIT

ready=0
for _ in $(seq 1 1800); do   # the first run builds the release binaries
  if grep -q '"event":"ready"' "$RUN/demo.out" 2>/dev/null; then ready=1; break; fi
  kill -0 "$DEMO_PID" 2>/dev/null || break
  sleep 0.5
done
if [ $ready = 1 ] && grep -q "plugin host ready" "$RUN/demo.err" && grep -q "participant ready" "$RUN/demo.err"; then
  pass ready "companion, plugin host and participant started"
else
  fail ready "not all parts started: $(grep -v '^ ' "$RUN/demo.err" | tail -n 5 | tr '\n' '|')"
  finish
fi
LOCK=$(sed -n 's/.*"lockFile":"\([^"]*\)".*/\1/p' "$RUN/demo.out" | head -n 1)
case $LOCK in
  "$HOME_DIR/.qwen/ide/"*.lock) [ -f "$LOCK" ] && pass ide-lock "$LOCK" || fail ide-lock "$LOCK missing" ;;
  *) fail ide-lock "lock file at '$LOCK', not in $HOME_DIR/.qwen/ide" ;;
esac

QWEN=(env -i PATH="$(dirname "$NODE"):/usr/bin:/bin" HOME="$HOME_DIR" LANG=C.UTF-8
  QWEN_USAGE_STATISTICS_ENABLED=0 QWEN_TELEMETRY_ENABLED=0 "$NODE" "$QWEN_PKG/cli-entry.js")
(cd "$WS" && timeout 60 "${QWEN[@]}" mcp list) > "$RUN/mcp.out" 2>&1
if grep -F qwen-companion-plugins "$RUN/mcp.out" | grep -q Connected; then
  pass mcp-list "$(grep -F qwen-companion-plugins "$RUN/mcp.out" | sed 's/\x1b\[[0-9;]*m//g')"
else
  fail mcp-list "$(tr '\n' '|' < "$RUN/mcp.out" | head -c 400)"
fi
(cd "$WS" && timeout 60 "${QWEN[@]}" sessions ps --json) > "$RUN/ps.out" 2>&1
if grep -q '"name": *"qcdemo"' "$RUN/ps.out"; then
  pass sessions-ps "qwen sessions ps lists the participant qcdemo"
else
  fail sessions-ps "$(tr '\n' '|' < "$RUN/ps.out" | head -c 400)"
fi

echo stop >&3
exec 3>&-
for _ in $(seq 1 100); do kill -0 "$DEMO_PID" 2>/dev/null || break; sleep 0.1; done
left=$(pgrep -f "$RUN" || true)
if kill -0 "$DEMO_PID" 2>/dev/null; then
  fail stop "the demo did not exit after stop"
elif [ -n "$left" ]; then
  fail stop "processes left: $(ps -o pid,cmd -p "$(echo "$left" | paste -sd,)" | tail -n +2 | tr '\n' '|')"
elif [ -n "$(ls "$HOME_DIR/.qwen/ide/"*.lock "$HOME_DIR/.qwen/companion/plugins-mcp/"*.lock 2>/dev/null)" ]; then
  fail stop "lock files left: $(ls "$HOME_DIR/.qwen/ide" "$HOME_DIR/.qwen/companion/plugins-mcp" | tr '\n' ' ')"
else
  pass stop "every part ended, no lock file or process left"
fi
finish
