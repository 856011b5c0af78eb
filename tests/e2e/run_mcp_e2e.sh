#!/usr/bin/env bash
# Real-CLI end-to-end test of plugin tools in Qwen Code: the real Qwen Code CLI (pinned)
# reaches plugin tools through our `qwen-companion-plugins` mcpServers entry, the stdio
# bridge (target/release/qc-mcp-bridge) and the plugin host's MCP server, run by the C
# demo `target/c/qcdemo plugins serve` (the public C API) with the example plugins
# examples/plugins/hello and examples/plugins/todo-quadrant.
#
#   tests/e2e/run_mcp_e2e.sh
#
# Checks:
#   register      `qcdemo plugins register-mcp --scope user --always-load-tools` writes
#                 our entry into $HOME/.qwen/settings.json (other keys kept); the demo
#                 (`plugins serve`) writes $HOME/.qwen/companion/plugins-mcp/<pid>.lock and
#                 its ready line carries mcp.env {QWEN_COMPANION_PLUGINS_PID: <pid>}
#   list-connected  `qwen mcp list` shows qwen-companion-plugins as Connected
#   tools         a headless `qwen -p` declares the plugin tools
#                 mcp__qwen-companion-plugins__hello_say_hello, ..._todo-quadrant_manage_todo_quadrant
#                 and plugins-status to the model (the entry sets alwaysLoadTools)
#   call          the fake model calls hello's tool (--approval-mode yolo); "Hello, World!"
#                 reaches the model's next request and the final answer
#   host-request-ide  from "the IDE's terminal" (the demo's mcp.env set), while a second
#                 host (another IDE on the same folder, started later, without
#                 todo-quadrant) also runs: Qwen calls todo-quadrant's remind_now; the
#                 plugin's show_notification host_request reaches the demo while the call
#                 runs (the demo answers {"shown":true}), and the model's next request holds
#                 the plugin's result "Reminder shown." — the env picked our IDE
#   host-request-outside  the same from a terminal outside the IDE (no env at all) whose
#                 cwd is a sub-folder of the workspace, after the second host stopped
#   stopped       `stop` makes the demo stop: it prints stopped, then answers the stop
#                 command ({"event":"result","command":"stop","ok":true}, its last line),
#                 and the lock file is gone
#   no-plugin-left  every plugin process the demos started (their plugin_started events)
#                 is gone
#   list-disconnected `qwen mcp list` then shows the server Disconnected, promptly, with
#                 no OAuth / authentication wording; the bridge alone says why:
#                 "no running IDE with qwen-companion plugins"
#
# Setup: the CLI is installed once into <repo>/target/e2e/qwen (npm, pinned);
#   `make -C examples/c` runs every time (incremental; it rebuilds the release library and
#   the bridge with cargo when the sources changed). Isolated HOME, no TERM_PROGRAM, a
#   scripted model (tests/e2e/fake_model.py, "E2E_CALL name=... args=...").
# Environment knobs: E2E_TURN_TIMEOUT (45 s per step), E2E_TOTAL_TIMEOUT (240 s after
#   setup), E2E_KEEP=1 (keep the run directory), E2E_NO_BUILD=1 (use the binaries as
#   they are), E2E_DIR (cache root, default <repo>/target/e2e).
# Last line of output: `mcp-e2e: N passed, M failed`; exit status 0 only if nothing failed.
set -u -o pipefail
# shellcheck source=../lib/harness.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"

no_args "$@"

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
E2E_DIR=${E2E_DIR:-$ROOT/target/e2e}
QWEN_CACHE=$E2E_DIR/qwen
STEP_TIMEOUT=${E2E_TURN_TIMEOUT:-45}
TOTAL_TIMEOUT=${E2E_TOTAL_TIMEOUT:-240}
KEEP_RUN=${E2E_KEEP:-0}
BRIDGE=$ROOT/target/release/qc-mcp-bridge
DEMO=$ROOT/target/c/qcdemo
SERVER=qwen-companion-plugins
TOOL=mcp__${SERVER}__hello_say_hello
TODO_TOOL=mcp__${SERVER}__todo-quadrant_manage_todo_quadrant
CHECKS=(register list-connected tools call host-request-ide host-request-outside stopped
  no-plugin-left list-disconnected)
HOST_PID=""
harness_init mcp-e2e named

peer_stop_line() { case $1 in host|other) echo stop ;; esac; }
dump_diag() {
  dump_begin
  dump_debug_logs "$HOME_DIR/.qwen/debug" "MCP" '\[MCP\]|qwen-companion-plugins|\[ERROR\]'
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
  log "building the demo, the library and the bridge (incremental): make -C examples/c"
  make_examples_c "$RUN/build.log" || abort "make -C examples/c failed: $(tail -n 5 "$RUN/build.log")"
fi
[ -x "$BRIDGE" ] && [ -x "$DEMO" ] || abort "missing $BRIDGE or $DEMO"
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
SETTINGS=$HOME_DIR/.qwen/settings.json
PLUGINS_A=$HOME_DIR/.qwen/companion/plugins
PLUGINS_B=$RUN/plugins-other
demo_cmd() { # NAME ARGS...: the demo in $WS with the isolated environment; output NAME.out
  local name=$1; shift
  (cd "$WS" && env -i "${BASE_ENV[@]}" "$DEMO" "$@") > "$RUN/$name.out" 2> "$RUN/$name.err"
}
INSTALL_OK=1
for p in hello todo-quadrant; do
  demo_cmd "install-$p" plugins install "$ROOT/examples/plugins/$p" || INSTALL_OK=0
done
demo_cmd install-other plugins install "$ROOT/examples/plugins/hello" --dir "$PLUGINS_B" || INSTALL_OK=0
demo_cmd register plugins register-mcp --scope user --always-load-tools
REG_RC=$?
start_peer host env -i "${BASE_ENV[@]}" "$DEMO" plugins serve --cwd "$WS"
HOST_PID=${PEER_PID[host]}
wait_json "$RUN/host.out" 0 --eq event=ready || abort "the demo printed no ready line ($WHY): $(head -c 400 "$RUN/host.err")"
READY=$JSON_LINE
log "demo ready (pid $HOST_PID): $READY"
LOCK_FILE=$HOME_DIR/.qwen/companion/plugins-mcp/$HOST_PID.lock
IDE_ENV=$("$PYTHON" -c 'import json,sys; e=json.loads(sys.argv[1])["mcp"]["env"]; print(" ".join("%s=%s" % kv for kv in sorted(e.items())))' "$READY")
if [ "$INSTALL_OK" != 1 ]; then
  fail register "plugins install failed: $(cat "$RUN"/install-*.out "$RUN"/install-*.err | head -c 400)"
elif [ "$REG_RC" != 0 ] || ! "$PYTHON" - "$RUN/register.out" "$SETTINGS" "$BRIDGE" <<'PY'
import json, os, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
assert r["ok"] is True and r["settings"] == sys.argv[2], r
s = json.load(open(sys.argv[2]))
e = s["mcpServers"]["qwen-companion-plugins"]
assert os.path.realpath(e["command"]) == os.path.realpath(sys.argv[3]), e
assert e["args"] == ["plugins"] and e["alwaysLoadTools"] is True, e
assert s["security"]["auth"]["selectedType"] == "openai", "other keys kept"
PY
then
  fail register "register-mcp: $(head -c 300 "$RUN/register.out") $(head -c 300 "$RUN/register.err")"
elif [ ! -f "$LOCK_FILE" ]; then
  fail register "no lock file at $LOCK_FILE"
elif [ "$IDE_ENV" != "QWEN_COMPANION_PLUGINS_PID=$HOST_PID" ]; then
  fail register "the ready line's mcp.env is '$IDE_ENV', expected QWEN_COMPANION_PLUGINS_PID=$HOST_PID"
else
  pass register "entry in settings.json, lock file $LOCK_FILE, terminal env $IDE_ENV"
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
elif ! "$PYTHON" - "$JSON_LINE" "$TOOL" "$TODO_TOOL" "$SERVER" <<'PY'
import json, sys
e = json.loads(sys.argv[1])
names = [t["function"]["name"] for t in e["body"].get("tools", [])]
assert sys.argv[2] in names and sys.argv[3] in names, names
assert "mcp__%s__plugins-status" % sys.argv[4] in names, names
PY
then
  fail tools "the model was not given $TOOL and $TODO_TOOL"
else
  pass tools "$TOOL, $TODO_TOOL and plugins-status declared to the model"
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

# ---------------------------------------------------------------- host_request during an MCP call
# remind_call CHECK NAME DIR [VAR=VALUE...]: a headless qwen in DIR (extra env) whose model
# calls todo-quadrant's remind_now; checks the demo's host_request and the model's input.
remind_call() {
  local check=$1 name=$2 dir=$3 h0 m0 pid; shift 3
  CUR_CHECK=$check
  SID=$(new_uuid)
  fake_model_args "$SID" yolo e2e-dummy-key
  m0=$(lines_of "$RUN/model.jsonl")
  h0=$(lines_of "$RUN/host.out")
  start_proc "$name" /dev/null bash -c 'cd "$1" && shift && exec "$@"' _ "$dir" \
    env -i "${QWEN_ENV[@]}" "$@" "$NODE" "$QWEN_PKG/cli-entry.js" "${QWEN_ARGS[@]}" \
    -p "E2E_CALL name=$TODO_TOOL args={\"action\":\"remind_now\"}"
  pid=$LAST_PID
  if wait_until eval '! proc_alive "$pid"'; then wait "$pid"; RC=$?; else RC=124; fi
  if ! wait_json "$RUN/host.out" "$h0" --eq event=host_request --eq capability=show_notification \
      --eq plugin=local.todo-quadrant; then
    fail "$check" "no show_notification host_request reached the demo ($WHY)"
  elif HOST_LINE=$JSON_LINE && ! "$PYTHON" -c 'import json,sys; p=json.loads(sys.argv[1])["params"]; assert p["viewId"]=="quadrant" and "todo" in p["title"], p' "$HOST_LINE"; then
    fail "$check" "unexpected host_request: $(printf '%s' "$HOST_LINE" | short)"
  elif ! wait_json "$RUN/model.jsonl" "$m0" --eq "decision.why=tool result" --contains "Reminder shown."; then
    fail "$check" "the plugin's result (after the host's answer) never reached the model ($WHY)"
  elif [ "$RC" != 0 ]; then
    fail "$check" "headless qwen exited with status $RC: $(tail -c 300 "$RUN/$name.err")"
  else
    pass "$check" "host_request $(printf '%s' "$HOST_LINE" | "$PYTHON" -c 'import json,sys; d=json.load(sys.stdin); print(d["capability"], json.dumps(d["params"]["title"]))') reached the demo during the call; the model got \"Reminder shown.\""
  fi
}

# A second IDE on the same folder, newer than ours, with only hello: without the env a
# bridge in $WS would pick it (newest first) and find no todo-quadrant tool.
start_peer other env -i "${BASE_ENV[@]}" "$DEMO" plugins serve --cwd "$WS" --dir "$PLUGINS_B"
OTHER_PID=${PEER_PID[other]}
if ! wait_json "$RUN/other.out" 0 --eq event=ready; then
  fail host-request-ide "the second demo printed no ready line ($WHY): $(head -c 300 "$RUN/other.err")"
else
  touch "$HOME_DIR/.qwen/companion/plugins-mcp/$OTHER_PID.lock"
  remind_call host-request-ide remind_ide "$WS" $IDE_ENV
fi
to_peer other stop
wait_json "$RUN/other.out" 0 --eq event=stopped >/dev/null || true
wait_until file_absent "$HOME_DIR/.qwen/companion/plugins-mcp/$OTHER_PID.lock" || true

mkdir -p "$WS/src/deep"
remind_call host-request-outside remind_outside "$WS/src/deep"

# ---------------------------------------------------------------- the host stops
CUR_CHECK=stopped
to_peer host stop
if ! wait_json "$RUN/host.out" 0 --eq event=result --eq command=stop --eq ok=true; then
  fail stopped "the demo did not answer stop ($WHY)"
elif [ "$(tail -n 2 "$RUN/host.out" | tr -d '\n')" != '{"event":"stopped"}{"event":"result","command":"stop","ok":true}' ]; then
  fail stopped "the last lines are not stopped then stop's result: $(tail -n 2 "$RUN/host.out" | head -c 300)"
elif ! wait_until file_absent "$LOCK_FILE"; then
  fail stopped "the lock file is still there after stop"
else
  pass stopped "server stopped, stop answered (the last line), lock file removed"
fi
wait_until eval '! proc_alive "$HOST_PID"' || true

CUR_CHECK=no-plugin-left
PLUGIN_PIDS=$(cat "$RUN/host.out" "$RUN/other.out" 2>/dev/null | "$PYTHON" -c '
import json, sys
for line in sys.stdin:
    try:
        d = json.loads(line)
    except ValueError:
        continue
    if d.get("event") == "plugin_started" or d.get("type") == "plugin_started":
        print(d["pid"])
' | sort -u | tr '\n' ' ')
LEFT=""
for p in $PLUGIN_PIDS; do kill -0 "$p" 2>/dev/null && LEFT="$LEFT $p"; done
if [ -z "$PLUGIN_PIDS" ]; then
  fail no-plugin-left "the demos reported no plugin_started event"
elif [ -n "$LEFT" ]; then
  fail no-plugin-left "plugin processes left:$LEFT"
else
  pass no-plugin-left "plugin processes $PLUGIN_PIDS all gone"
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
