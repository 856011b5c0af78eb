#!/usr/bin/env bash
# Real-CLI end-to-end test of plugin tools in Qwen Code: the real Qwen Code CLI (pinned)
# reaches a plugin tool through our `qwen-companion-plugins` mcpServers entry, the stdio
# bridge (target/debug/qc-mcp-bridge) and the plugin host's MCP server, run by the example
# host examples/plugins_mcp_host.rs with the fixture plugin tests/plugins/fixtures/hello.
#
#   tests/e2e/run_mcp_e2e.sh
#
# Checks:
#   register      the host installs the plugin, starts its MCP server, writes
#                 $HOME/.qwen/companion/plugins-mcp/<pid>.lock and registers our entry
#                 (mcp_bridge::settings::register) in $HOME/.qwen/settings.json
#   list-connected  `qwen mcp list` shows qwen-companion-plugins as Connected
#   tools         a headless `qwen -p` declares the plugin tool
#                 mcp__qwen-companion-plugins__hello_say_hello (and plugins-status) to
#                 the model (the entry sets alwaysLoadTools)
#   call          the fake model calls the plugin tool (--approval-mode yolo); its result
#                 "Hello, World!" reaches the model's next request and the final answer
#   stopped       `stop` makes the host stop its server: the lock file is gone
#   list-disconnected `qwen mcp list` then shows the server Disconnected, promptly, with
#                 no OAuth / authentication wording; the bridge alone says why:
#                 "no running IDE with qwen-companion plugins"
#
# Setup: the CLI is installed once into <repo>/target/e2e/qwen (npm, pinned);
#   `cargo build --bin qc-mcp-bridge --example plugins_mcp_host` runs every time
#   (incremental). Isolated HOME, no TERM_PROGRAM, a scripted model
#   (tests/e2e/fake_model.py, "E2E_CALL name=... args=...").
# Environment knobs: E2E_TURN_TIMEOUT (45 s per step), E2E_TOTAL_TIMEOUT (180 s after
#   setup), E2E_KEEP=1 (keep the run directory), E2E_NO_BUILD=1 (use the binaries as
#   they are), E2E_DIR (cache root, default <repo>/target/e2e).
# Last line of output: `mcp-e2e: N passed, M failed`; exit status 0 only if nothing failed.
set -u -o pipefail
# shellcheck source=../lib/harness.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"

case ${1:-} in
  -h|--help) usage; exit 0 ;;
  "") ;;
  *) echo "run_mcp_e2e.sh: unknown argument: $1" >&2; usage >&2; exit 2 ;;
esac

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
E2E_DIR=${E2E_DIR:-$ROOT/target/e2e}
QWEN_CACHE=$E2E_DIR/qwen
STEP_TIMEOUT=${E2E_TURN_TIMEOUT:-45}
TOTAL_TIMEOUT=${E2E_TOTAL_TIMEOUT:-180}
KEEP_RUN=${E2E_KEEP:-0}
BRIDGE=$ROOT/target/debug/qc-mcp-bridge
HOST_BIN=$ROOT/target/debug/examples/plugins_mcp_host
SERVER=qwen-companion-plugins
TOOL=mcp__${SERVER}__hello_say_hello
CHECKS=(register list-connected tools call stopped list-disconnected)
HOST_PID=""
harness_init mcp-e2e named

peer_stop_line() { [ "$1" != host ] || echo quit; }
dump_diag() {
  local f
  dump_begin
  for f in "$HOME_DIR"/.qwen/debug/*.txt; do
    [ -f "$f" ] || continue
    dump_debug_log "$f" "MCP" '\[MCP\]|qwen-companion-plugins|\[ERROR\]'
  done
  dump_model_requests
  dump_outputs
  dump_end
}

# ---------------------------------------------------------------- prerequisites
need_python_and_node
SETUP_T0=$(date +%s%N)
ensure_qwen || abort "could not install @qwen-code/qwen-code@$QWEN_VERSION with npm"
RUN=$(mktemp -d "${TMPDIR:-/tmp}/qc-mcp-e2e.XXXXXX") || abort "mktemp failed"
RUN=$(cd "$RUN" && pwd -P)
if [ "${E2E_NO_BUILD:-0}" != 1 ]; then
  log "building the bridge and the example host (incremental)"
  (cd "$ROOT" && nice -n 10 cargo build --bin qc-mcp-bridge --example plugins_mcp_host) \
    > "$RUN/build.log" 2>&1 || abort "cargo build failed: $(tail -n 5 "$RUN/build.log")"
fi
[ -x "$BRIDGE" ] && [ -x "$HOST_BIN" ] || abort "missing $BRIDGE or $HOST_BIN"
log "setup done in $(since "$SETUP_T0")s; run directory $RUN"

# ---------------------------------------------------------------- the isolated world
DEADLINE_MS=$(( $(ms_now) + TOTAL_TIMEOUT * 1000 ))
HOME_DIR=$RUN/home
WS=$RUN/ws
mkdir -p "$HOME_DIR/.qwen" "$WS"
qwen_settings > "$HOME_DIR/.qwen/settings.json"
BASE_ENV=(PATH="$SYS_PATH" HOME="$HOME_DIR" LANG=C.UTF-8)
QWEN_ENV=("${BASE_ENV[@]}" QWEN_CODE_SUPPRESS_YOLO_WARNING=1)

start_fake_model "$HERE/fake_model.py" env -i "${BASE_ENV[@]}"

qwen_in_ws() { # NAME ARGS...: the CLI in $WS (own session), output in $RUN/NAME.out/.err
  local name=$1; shift
  start_proc "$name" /dev/null bash -c 'cd "$1" && shift && exec "$@"' _ "$WS" \
    env -i "${QWEN_ENV[@]}" "$NODE" "$QWEN_PKG/cli-entry.js" "$@"
}
# run_qwen NAME ARGS...: qwen_in_ws and wait for its exit -> RC (124: no exit in time).
run_qwen() {
  local pid
  qwen_in_ws "$@"
  pid=$LAST_PID
  if wait_until eval '! proc_alive "$pid"'; then wait "$pid"; RC=$?; else RC=124; fi
}

# ---------------------------------------------------------------- register
CUR_CHECK=register
start_peer host env -i "${BASE_ENV[@]}" RUST_BACKTRACE=1 "$HOST_BIN" --bridge "$BRIDGE" \
  --workspace "$WS" --install "$ROOT/tests/plugins/fixtures/hello" --always-load-tools
HOST_PID=${PEER_PID[host]}
wait_json "$RUN/host.out" 0 --eq event=ready || abort "the host printed no ready line ($WHY): $(head -c 400 "$RUN/host.err")"
READY=$JSON_LINE
LOCK_FILE=$(jget "$READY" lockFile)
log "host ready (pid $HOST_PID): $READY"
SETTINGS=$HOME_DIR/.qwen/settings.json
if [ "$LOCK_FILE" != "$HOME_DIR/.qwen/companion/plugins-mcp/$HOST_PID.lock" ]; then
  fail register "lock file at '$LOCK_FILE', expected $HOME_DIR/.qwen/companion/plugins-mcp/$HOST_PID.lock"
elif [ ! -f "$LOCK_FILE" ]; then
  fail register "no lock file at $LOCK_FILE"
elif ! "$PYTHON" - "$SETTINGS" "$BRIDGE" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
e = s["mcpServers"]["qwen-companion-plugins"]
assert e["command"] == sys.argv[2] and e["args"] == ["plugins"] and e["alwaysLoadTools"] is True, e
assert s["security"]["auth"]["selectedType"] == "openai", "other keys kept"
PY
then
  fail register "our entry is not in $SETTINGS as expected"
else
  pass register "lock file and mcpServers entry written"
fi

# ---------------------------------------------------------------- qwen mcp list (connected)
CUR_CHECK=list-connected
run_qwen mcp_list_up mcp list
if [ "$RC" != 0 ]; then
  fail list-connected "qwen mcp list exited with status $RC"
elif grep -F "$SERVER" "$RUN/mcp_list_up.out" | grep -q "Connected"; then
  pass list-connected "$(grep -F "$SERVER" "$RUN/mcp_list_up.out" | tr -d '\033' | sed 's/\[[0-9;]*m//g')"
else
  fail list-connected "not shown connected: $(tr '\n' '|' < "$RUN/mcp_list_up.out")"
fi

# ---------------------------------------------------------------- a headless call
CUR_CHECK=tools
SID=$(new_uuid)
fake_model_args "$SID" yolo e2e-dummy-key
M0=$(lines_of "$RUN/model.jsonl")
run_qwen call "${QWEN_ARGS[@]}" -p "E2E_CALL name=$TOOL args={\"name\":\"World\"}"
if ! wait_json "$RUN/model.jsonl" "$M0" --eq decision.why=call; then
  fail tools "the prompt never reached the model ($WHY)"
elif ! "$PYTHON" - "$JSON_LINE" "$TOOL" "$SERVER" <<'PY'
import json, sys
e = json.loads(sys.argv[1])
names = [t["function"]["name"] for t in e["body"].get("tools", [])]
assert sys.argv[2] in names, names
assert "mcp__%s__plugins-status" % sys.argv[3] in names, names
PY
then
  fail tools "the model was not given $TOOL"
else
  pass tools "$TOOL declared to the model"
fi

CUR_CHECK=call
if [ "$RC" != 0 ]; then
  fail call "headless qwen exited with status $RC: $(tail -c 300 "$RUN/call.err")"
elif ! wait_json "$RUN/model.jsonl" "$M0" --eq "decision.why=tool result" --contains "Hello, World!"; then
  fail call "the plugin's result never reached the model ($WHY)"
elif ! grep -qF "E2E_FINAL_ANSWER tool_result=Hello, World!" "$RUN/call.out"; then
  fail call "final answer: $(head -c 300 "$RUN/call.out")"
else
  pass call "the plugin's result reached the model: $(head -n 1 "$RUN/call.out")"
fi

# ---------------------------------------------------------------- the host stops
CUR_CHECK=stopped
to_peer host stop
if wait_json "$RUN/host.out" 0 --eq event=done --eq command=stop && wait_until file_absent "$LOCK_FILE"; then
  pass stopped "server stopped, lock file removed"
else
  fail stopped "the host did not stop its server ($WHY)"
fi

CUR_CHECK=list-disconnected
T0=$(date +%s%N)
run_qwen mcp_list_down mcp list
ELAPSED=$(since "$T0")
BRIDGE_SAYS=$(cd "$WS" && env -i "${BASE_ENV[@]}" "$BRIDGE" plugins < /dev/null 2>&1 >/dev/null; echo "status $?")
if [ "$RC" != 0 ]; then
  fail list-disconnected "qwen mcp list exited with status $RC"
elif ! grep -F "$SERVER" "$RUN/mcp_list_down.out" | grep -q "Disconnected"; then
  fail list-disconnected "not shown disconnected: $(tr '\n' '|' < "$RUN/mcp_list_down.out")"
elif grep -qiE "oauth|authenticat" "$RUN/mcp_list_down.out" "$RUN/mcp_list_down.err"; then
  fail list-disconnected "OAuth wording: $(grep -iE "oauth|authenticat" "$RUN/mcp_list_down.out" "$RUN/mcp_list_down.err" | head -n 2)"
elif ! printf "%s" "$BRIDGE_SAYS" | tr "\n" " " | grep -q "no running IDE with qwen-companion plugins for $WS.*status 1"; then
  fail list-disconnected "the bridge's own reason: $BRIDGE_SAYS"
else
  pass list-disconnected "Disconnected in ${ELAPSED}s; bridge: $(printf '%s' "$BRIDGE_SAYS" | head -n 1)"
fi

FINISHED=1
