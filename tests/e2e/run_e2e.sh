#!/usr/bin/env bash
# Real-CLI end-to-end test: the real Qwen Code CLI (@qwen-code/qwen-code, pinned) against
# our library, through the C demo `target/c/qcdemo ide`. Nothing is skipped: a missing
# prerequisite is installed (CLI via npm, tmux via apt-get) or built (make -C examples/c);
# if that fails, the run fails.
#
#   tests/e2e/run_e2e.sh [--mode tui|stream-json] [--host demo|sublime|standin]
#
# tui (default) drives the interactive TUI under a private tmux server and checks
#   lock          the demo writes $HOME/.qwen/ide/<port>.lock with ideInfo, live ppid, token
#   a-connect     qwen (no TERM_PROGRAM=vscode, only the lock's ideInfo) connects and
#                 discovers openDiff + closeDiff
#   b-context     open/focus/cursor/select pushed through the demo before qwen starts
#                 reach the model (the full "editor context" block)
#   b-live        a later focus/cursor/select change, while qwen is connected, reaches the
#                 model as the "summary of changes" block
#   stream-drop   every connection qwen has to the server is reset (a network hiccup):
#                 qwen re-opens its stream within the session grace period and a later
#                 focus/selection still reaches the model
#   c-diff-opened a model edit (write_file of a new file) opens OUR diff with the proposed text
#   c-accept      `accept-from` with edited text -> the file holds exactly the edited text
#   c-reject      `reject` -> nothing written, the turn ends
#   c-closed      `closed` (ide/diffClosed: the user closed the diff view) -> same as reject
#   d-cli-accept  answering "1" in the CLI -> closeDiff reaches the demo, its reply parses
#                 (no "Invalid JSON in closeDiff response"), the proposed text is written
#   quit          /quit exits promptly (no closeDiff left hanging)
#   scan          without QWEN_CODE_IDE_SERVER_PORT, from a subdirectory, next to a decoy
#                 lock of another workspace: qwen finds our lock by cwd and gets the context
#   qwen-home-tilde    a second demo and a headless qwen, both with QWEN_HOME='~/q' (the
#                 tilde left unexpanded, as in a shell that does not expand it): the
#                 lock lands in $HOME/q/ide and qwen, scanning that directory, connects
#   qwen-home-relative the same with QWEN_HOME=rel/q and the same cwd for both: the lock
#                 lands in <cwd>/rel/q/ide and qwen connects
#   stop          `stop` removes the lock file and the demo exits cleanly
# with --host sublime, two more (issue 12):
#   s-emoji-cursor the caret after two emoji (Sublime counts code points) reaches the
#                 model at the CLI's UTF-16 column ("line 1, character 10", not 8)
#   s-save-accepts ctrl+s in the proposal view (the key binding the package's keymap
#                 resolves to there) accepts: the proposed text is written
# and two of issue 21:
#   s-add-to-prompt (tui) "Qwen: Add File to Prompt" on a file whose name has a space:
#                 the plugin types "@add\ me.txt " into its qwen terminal (the stub
#                 Terminus forwards it to the qwen tmux pane), the harness presses Enter,
#                 and the fake model finds the file's unique token in the request; then
#                 the same with a selection: "@add\ me.txt (lines 1-2) "
#   s-diagnostics a second Sublime host with the plugin host and its MCP server on
#                 (--plugins) gets a SublimeLinter result; a headless qwen's model calls
#                 mcp__qwen-companion-plugins__editor-diagnostics and gets that diagnostic
# stream-json (faster, no tmux) runs the same checks minus d-cli-accept, with
#   --input-format stream-json --output-format stream-json.
#
# Hosts (the "demo" process: JSON-lines events on stdout, commands on stdin):
#   demo (default)  target/c/qcdemo ide, the C demo on the public header;
#   sublime         tests/e2e/sublime_host.py: the REAL Sublime Text plugin
#                   (examples/sublime/QwenCompanion/plugin.py) on the stub sublime
#                   modules of tests/python/stubs and the real Python binding; every
#                   command becomes the Sublime event/command a user would cause. Runs
#                   with target/pyenv/bin/python (tests/python/run.sh) if it exists, else
#                   python3. Same checks; before `scan` the user goes back to README.md
#                   (`focus`), since in Sublime closing the last diff view moved the focus;
#   standin         tests/e2e/standin_ide.py, a library-free stand-in (harness checks).
#   --host NAME is the same as E2E_DEMO=NAME (demo: the default binary).
#
# Setup: the CLI is installed once into <repo>/target/e2e/qwen (npm, pinned); tmux comes
#   from apt-get if missing; `make -C examples/c` runs every time (incremental: it
#   rebuilds the library and the demo only when their sources changed).
# Environment knobs: E2E_DEMO (path to the demo binary, "sublime" for the Sublime
#   plugin host, or "standin" for the Python stand-in tests/e2e/standin_ide.py, to tell
#   harness bugs from library bugs), E2E_PYTHON (interpreter for the sublime host),
#   E2E_NO_BUILD=1 (use the demo binary as it is), E2E_TAP=1 (route qwen's IDE traffic
#   through tests/e2e/tap_proxy.py and print the wire log on failure),
#   E2E_KEEPALIVE_CHECK=N (implies E2E_TAP=1; extra check "keepalive": after the edits,
#   idle N s (>= 31) and require SSE traffic on qwen's GET stream in that window -- the
#   CLI drops an IDE whose stream is silent for 300 s),
#   E2E_TURN_TIMEOUT (45 s per step), E2E_TOTAL_TIMEOUT (300 s after setup),
#   E2E_KEEP=1 (keep the run directory even on success), E2E_DIR (cache root,
#   default <repo>/target/e2e).
# Last line of output: `e2e: N passed, M failed`; exit status 0 only if nothing failed.
set -u -o pipefail
# shellcheck source=../lib/harness.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
# shellcheck source=e2e_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/e2e_lib.sh"

MODE=${E2E_MODE:-tui}
HOST_ARG=""
while [ $# -gt 0 ]; do
  case $1 in
    --mode) MODE=${2:-}; shift 2 || shift ;;
    --mode=*) MODE=${1#--mode=}; shift ;;
    --host) HOST_ARG=${2:-}; [ -n "$HOST_ARG" ] || HOST_ARG=-; shift 2 || shift ;;
    --host=*) HOST_ARG=${1#--host=}; [ -n "$HOST_ARG" ] || HOST_ARG=-; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run_e2e.sh: unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
case $MODE in tui|stream-json) ;; *) echo "run_e2e.sh: --mode must be tui or stream-json" >&2; exit 2 ;; esac
case $HOST_ARG in
  ""|demo|sublime|standin) ;;
  *) echo "run_e2e.sh: --host must be demo, sublime or standin" >&2; exit 2 ;;
esac

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
E2E_DIR=${E2E_DIR:-$ROOT/target/e2e}
QWEN_CACHE=$E2E_DIR/qwen
STEP_TIMEOUT=${E2E_TURN_TIMEOUT:-45}
TOTAL_TIMEOUT=${E2E_TOTAL_TIMEOUT:-300}
BUILD_TIMEOUT=${E2E_BUILD_TIMEOUT:-1800}
KEEP_RUN=${E2E_KEEP:-0}
TOTAL_NOTE=" (mode $MODE)"
DEMO_SPEC=${E2E_DEMO:-$ROOT/target/c/qcdemo}
case $HOST_ARG in
  demo) DEMO_SPEC=$ROOT/target/c/qcdemo ;;
  sublime|standin) DEMO_SPEC=$HOST_ARG ;;
esac

if [ "$MODE" = tui ]; then
  CHECKS=(lock a-connect b-context b-live c-diff-opened c-accept c-reject c-closed d-cli-accept stream-drop quit scan qwen-home-tilde qwen-home-relative stop)
else
  CHECKS=(lock a-connect b-context b-live c-diff-opened c-accept c-reject c-closed stream-drop quit scan qwen-home-tilde qwen-home-relative stop)
fi
if [ "$DEMO_SPEC" = sublime ]; then
  CHECKS+=(s-emoji-cursor s-save-accepts s-diagnostics)
  [ "$MODE" = tui ] && CHECKS+=(s-add-to-prompt)
fi
KEEPALIVE_S=${E2E_KEEPALIVE_CHECK:-}
if [ -n "$KEEPALIVE_S" ]; then
  E2E_TAP=1
  CHECKS+=(keepalive)
  TOTAL_TIMEOUT=$(( TOTAL_TIMEOUT + KEEPALIVE_S ))
fi
DEMO_PID="" QWEN_PID=""
DEBUG_LOG="" SCAN_DEBUG_LOG="" LOCK_FILE="" DIFF_BLOCKED=""
harness_init e2e named

# Something died that must stay alive during the current phase? (wait_until, wait_json)
WATCH_DEMO=0 WATCH_QWEN=0
watch_broken() {
  if [ "$WATCH_DEMO" = 1 ] && ! proc_alive "$DEMO_PID"; then echo "the demo (pid $DEMO_PID) exited"; return 0; fi
  if [ "$WATCH_QWEN" = 1 ]; then
    if [ "$MODE" = tui ] && [ -f "$RUN/qwen_tui.rc" ]; then echo "qwen exited (status $(cat "$RUN/qwen_tui.rc"))"; return 0; fi
    if [ "$MODE" = stream-json ] && [ -n "$QWEN_PID" ] && ! proc_alive "$QWEN_PID"; then echo "qwen exited"; return 0; fi
  fi
  return 1
}
watch_args() {
  [ "$WATCH_DEMO" = 1 ] && printf -- '--watch-pid\n%s\n' "$DEMO_PID"
  if [ "$WATCH_QWEN" = 1 ]; then
    if [ "$MODE" = tui ]; then printf -- '--abort-file\n%s\n' "$RUN/qwen_tui.rc"
    elif [ -n "$QWEN_PID" ]; then printf -- '--watch-pid\n%s\n' "$QWEN_PID"; fi
  fi
}
# At cleanup the demo is asked to stop (it removes its lock file); qwen only gets EOF.
peer_stop_line() { [ "$1" != demo ] || echo stop; }

PANE_SESSION=e2e

TURNS=0
submit() {
  TURNS=$((TURNS + 1))
  log "submit: $1"
  if [ "$MODE" = tui ]; then
    tui_submit qwen_tui "$1"
  else
    to_peer qwen_sj "$("$PYTHON" "$HUTIL" submit-line stream-json "$1")" || { WHY="qwen's stdin is closed"; return 1; }
  fi
}

dump_diag() {
  local f
  dump_begin
  for f in "$DEBUG_LOG" "$SCAN_DEBUG_LOG"; do
    [ -n "$f" ] && [ -f "$f" ] || continue
    dump_debug_log "$f" "IDE / closeDiff / errors" '\[IDE\]|closeDiff|openDiff|RemoteInput|\[ERROR\]|\[WARN\]'
    section "qwen debug log $f: last 25 lines"
    tail -n 25 "$f" | short
  done
  dump_model_requests
  dump_outputs
  if [ -s "$RUN/tap.log" ]; then
    section "wire log (E2E_TAP) last 200 lines"
    tail -n 200 "$RUN/tap.log" | short
  fi
  dump_panes
  dump_end
}

# ---------------------------------------------------------------- prerequisites
need_python_and_node

ensure_demo() {
  if [ "$DEMO_SPEC" = sublime ]; then
    local lib=$ROOT/target/release/libqwen_companion.so py
    if [ "${E2E_NO_BUILD:-0}" != 1 ]; then
      log "building the library (incremental): make -C examples/c lib"
      make_examples_c "$RUN/build.log" lib \
        || { log "make -C examples/c lib failed (output: build.log, in the diagnostics below)"; return 1; }
    fi
    [ -f "$lib" ] || { echo "no library at $lib"; return 1; }
    py=${E2E_PYTHON:-}
    if [ -z "$py" ]; then
      if [ -x "$ROOT/target/pyenv/bin/python" ]; then py=$ROOT/target/pyenv/bin/python; else py=$PYTHON; fi
    fi
    "$py" -c 'import sys; sys.exit(sys.version_info < (3, 8))' 2>/dev/null \
      || { echo "$py is not a Python >= 3.8"; return 1; }
    # exec'd by env: the host's pid is $DEMO_PID, so the lock's ppid check still holds.
    DEMO_CMD=("$py" "$HERE/sublime_host.py" --library "$lib")
    log "host: the Sublime Text plugin on the stub sublime modules ($py, $("$py" --version 2>&1))"
    return 0
  fi
  ensure_demo_c_or_standin
}

SETUP_T0=$(date +%s%N)
ensure_qwen || abort "could not install @qwen-code/qwen-code@$QWEN_VERSION with npm"
if [ "$MODE" = tui ]; then ensure_tmux || abort "tmux is missing and apt-get could not install it"; fi
RUN=$(mktemp -d "${TMPDIR:-/tmp}/qc-e2e.XXXXXX") || abort "mktemp failed"
RUN=$(cd "$RUN" && pwd -P)
ensure_demo || abort "the demo is not available (make -C examples/c failed or produced no $DEMO_SPEC)"
log "setup done in $(since "$SETUP_T0")s; run directory $RUN"

# ---------------------------------------------------------------- the isolated world
T_TEST=$(date +%s%N)
DEADLINE_MS=$(( $(ms_now) + TOTAL_TIMEOUT * 1000 ))
HOME_DIR=$RUN/home
TMUX_HOME=$HOME_DIR
e2e_workspace
mkdir -p "$HOME_DIR/.qwen" "$RUN/other-ws"
qwen_settings ide > "$HOME_DIR/.qwen/settings.json"

# ---------------------------------------------------------------- fake model
start_fake_model "$HERE/fake_model.py" env -i PATH="$SYS_PATH" HOME="$HOME_DIR" LANG=C.UTF-8

# ---------------------------------------------------------------- demo (IDE side)
CUR_CHECK=lock
start_peer demo env -i PATH="$SYS_PATH" HOME="$HOME_DIR" LANG=C.UTF-8 RUST_BACKTRACE=1 \
  "${DEMO_CMD[@]}" ide --workspace "$WS"
DEMO_PID=${PEER_PID[demo]}
WATCH_DEMO=1
wait_demo_ready
LOCK_FILE=$(jget "$READY" lockFile)
log "demo ready (pid $DEMO_PID): $READY"
DEMO_ENV=()
mapfile -t DEMO_ENV < <(eu env-lines "$READY" env)
PORT_ENV=()
for kv in "${DEMO_ENV[@]}"; do
  case $kv in
    QWEN_CODE_IDE_*=*) PORT_ENV+=("$kv") ;;
    *) log "note: not passing '${kv%%=*}' from the demo's env object to qwen" ;;
  esac
done
printf '%s\n' "${PORT_ENV[@]}" | grep -q "^QWEN_CODE_IDE_SERVER_PORT=$IDE_PORT\$" \
  || log "note: the demo's env object has no QWEN_CODE_IDE_SERVER_PORT=$IDE_PORT"
if LOCK_REPORT=$(eu check-lock "$LOCK_FILE" --port "$IDE_PORT" \
      --workspace "$WS" --lock-dir "$HOME_DIR/.qwen/ide" --pid "$DEMO_PID"); then
  printf '%s\n' "$LOCK_REPORT" | sed 's/^/    /'
  pass lock "lock file $LOCK_FILE is complete (ideInfo, live ppid, token, workspace)"
else
  printf '%s\n' "$LOCK_REPORT" | sed 's/^/    /'
  fail lock "lock file not as the CLI needs it"
fi

# Optional wire tap: qwen reads a copy of the lock that points at the proxy.
TAP_LOCK=""
if [ "${E2E_TAP:-0}" = 1 ]; then
  start_proc tap /dev/null "$PYTHON" "$HERE/tap_proxy.py" --target-port "$IDE_PORT" \
    --port-file "$RUN/tap.port" --log "$RUN/tap.log"
  wait_until test -s "$RUN/tap.port" || abort "the tap proxy did not start"
  TAP_PORT=$(cat "$RUN/tap.port")
  TAP_LOCK=$HOME_DIR/.qwen/ide/$TAP_PORT.lock
  eu retarget-lock "$LOCK_FILE" "$TAP_LOCK" "$TAP_PORT" || abort "cannot copy the lock file"
  PORT_ENV=("QWEN_CODE_IDE_SERVER_PORT=$TAP_PORT" "QWEN_CODE_IDE_WORKSPACE_PATH=$WS")
  log "E2E_TAP: qwen goes through 127.0.0.1:$TAP_PORT -> $IDE_PORT, wire log $RUN/tap.log"
fi

# The editor state before qwen starts: two files open, main.rs focused, cursor, selection.
demo_cmd "open $OTHER"
demo_cmd "open $ACTIVE"
demo_cmd "focus $ACTIVE"
demo_cmd "cursor 2 9"
demo_cmd "select $SEL_TOKEN"

# shellcheck disable=SC2054 # the commas belong to NO_PROXY
QWEN_ENV=(PATH="$SYS_PATH" HOME="$HOME_DIR" TERM=xterm-256color LANG=C.UTF-8
  QWEN_USAGE_STATISTICS_ENABLED=0 QWEN_TELEMETRY_ENABLED=0
  NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost)
log "qwen runs under env -i with only: $(printf '%s ' "${QWEN_ENV[@]%%=*}") + $(printf '%s ' "${PORT_ENV[@]}")(no TERM_PROGRAM)"

# ---------------------------------------------------------------- qwen (CLI side)
SID=$(new_uuid)
DEBUG_LOG=$HOME_DIR/.qwen/debug/$SID.txt
fake_model_args "$SID" default e2e-dummy-key
if [ "$MODE" = tui ]; then
  tmux_dir qce2e
  write_tui_script qwen_tui "$WS" env -i "${QWEN_ENV[@]}" "${PORT_ENV[@]}" "$NODE" "$QWEN_PKG/cli-entry.js" "${QWEN_ARGS[@]}"
  tmux_start e2e "$RUN/qwen_tui.sh" || abort "could not start tmux"
  log "qwen TUI started in tmux (server pid $TMUX_SERVER_PID, pane pid ${PANE_PIDS[0]}), debug log $DEBUG_LOG"
else
  start_peer qwen_sj bash -c 'cd "$1" && shift && exec "$@"' _ "$WS" \
    env -i "${QWEN_ENV[@]}" "${PORT_ENV[@]}" "$NODE" "$QWEN_PKG/cli-entry.js" "${QWEN_ARGS[@]}" \
    --input-format stream-json --output-format stream-json
  QWEN_PID=${PEER_PID[qwen_sj]}
  log "qwen (stream-json) started, pid $QWEN_PID, debug log $DEBUG_LOG"
fi
WATCH_QWEN=1

# (a) connection: the lock's ideInfo alone (no TERM_PROGRAM) makes qwen connect.
CUR_CHECK=a-connect
T0=$(date +%s%N)
DISCOVERED='Discovered [0-9]+ tools from IDE: '
ide_settled() {
  grep -qE "$DISCOVERED" "$DEBUG_LOG" 2>/dev/null && return 0
  grep -qE 'IDE\] .*(failed|Directory mismatch|does not match cwd|not supported|Failed to connect|Error discovering)' "$DEBUG_LOG" 2>/dev/null
}
if wait_until ide_settled && grep -qE "$DISCOVERED" "$DEBUG_LOG"; then
  line=$(grep -E "$DISCOVERED" "$DEBUG_LOG" | tail -n 1)
  if [[ $line == *openDiff* && $line == *closeDiff* ]]; then
    pass a-connect "qwen connected without TERM_PROGRAM in $(since "$T0")s: ${line#*] }"
  else
    fail a-connect "tools discovered, but not openDiff+closeDiff: $line"
  fi
else
  fail a-connect "${WHY:-connection failed}; IDE lines: $(grep -F '[IDE]' "$DEBUG_LOG" 2>/dev/null | tail -n 3 | tr '\n' '|')"
  abort "qwen did not connect to the demo"
fi

if [ "$MODE" = tui ]; then
  wait_until file_has "$DEBUG_LOG" "RemoteInput: watching" || abort "the TUI never started watching --input-file ($WHY)"
fi
# The context was set before qwen started; the demo sends it when qwen's GET stream opens.
# Give that notification a moment to land before the first prompt.
sleep 1

# (b) editor context reaches the model.
CUR_CHECK=b-context
T0=$(date +%s%N)
FROM=$(lines_of "$RUN/model.jsonl")
submit "E2E_ASK what is selected in my editor?" || abort "$WHY"
if wait_json "$RUN/model.jsonl" "$FROM" --eq decision.why=ask; then
  REQ=$JSON_LINE
  jget "$REQ" last_user_text > "$RUN/ask_user_text.txt"
  if CTX=$(eu check-context "$RUN/ask_user_text.txt" --path "$ACTIVE" \
        --cursor "line 2, character 9" --selected "$SEL_TOKEN" --other "$OTHER"); then
    pass b-context "path, cursor and selection $SEL_TOKEN reached the model ($(since "$T0")s)"
  else
    printf '%s\n' "$CTX" | sed 's/^/    /'
    fail b-context "the model's request lacks parts of the editor context"
  fi
else
  fail b-context "no E2E_ASK request reached the fake model ($WHY)"
fi

# (b) live update: the user moves to README.md and selects something else while qwen is
# connected. The model must get it as a delta. The update travels asynchronously, so ask
# up to 3 times; a delta that shows up only on a later ask is reported.
CUR_CHECK=b-live
T0=$(date +%s%N)
LIVE_TOKEN=E2E_LIVE_SELECTION_$TAG
select_live
LIVE_OK=0
for attempt in 1 2 3; do
  if ! ask_live "$attempt"; then
    fail b-live "the E2E_ASK request never reached the fake model ($WHY)"
    LIVE_OK=2
    break
  fi
  jget "$JSON_LINE" last_user_text > "$RUN/live_user_text.txt"
  if grep -qF "$LIVE_TOKEN" "$RUN/live_user_text.txt"; then LIVE_OK=1; break; fi
  log "the live update has not reached the model yet (attempt $attempt)"
  sleep 1
done
if [ "$LIVE_OK" = 1 ]; then
  if CTX=$(eu check-context "$RUN/live_user_text.txt" --delta --path "$OTHER" \
        --cursor "line 1, character 3" --selected "$LIVE_TOKEN"); then
    pass b-live "the change reached the model as a delta on ask $attempt ($(since "$T0")s)"
  else
    printf '%s\n' "$CTX" | sed 's/^/    /'
    fail b-live "the delta block the model got is not the expected one"
  fi
elif [ "$LIVE_OK" = 0 ]; then
  printf '    last request: %s\n' "$(tail -c 400 "$RUN/live_user_text.txt" | tr '\n' '|')"
  fail b-live "3 asks later, the model still has not seen the new selection $LIVE_TOKEN"
fi

# (sublime) a caret after emoji: Sublime Text's columns are code points, Qwen Code's
# UTF-16 units. `s = "` is 5 units, each emoji 2: the caret after both is at 0-based
# column 9, "character 10" for the CLI (a code-point column would say 8).
if [ "$DEMO_SPEC" = sublime ]; then
  CUR_CHECK=s-emoji-cursor
  T0=$(date +%s%N)
  EMOJI_FILE=$WS/emoji.py
  EMOJI=$'\xf0\x9f\x98\x80\xf0\x9f\x98\x80'
  printf 's = "%s" + x\n' "$EMOJI" > "$EMOJI_FILE"
  EMOJI_TOKEN=E2E_EMOJI_CARET_$TAG
  demo_cmd "open $EMOJI_FILE"
  demo_cmd "caret-after $EMOJI"
  demo_cmd "select $EMOJI_TOKEN"
  sleep 0.5
  EMOJI_OK=0
  for attempt in 1 2 3; do
    FROM=$(lines_of "$RUN/model.jsonl")
    submit "E2E_ASK where is my caret, attempt $attempt" || abort "$WHY"
    if ! wait_json "$RUN/model.jsonl" "$FROM" --eq decision.why=ask --has "last_user_text=caret, attempt $attempt"; then
      fail s-emoji-cursor "the E2E_ASK request never reached the fake model ($WHY)"
      EMOJI_OK=2
      break
    fi
    jget "$JSON_LINE" last_user_text > "$RUN/emoji_user_text.txt"
    if grep -qF "$EMOJI_TOKEN" "$RUN/emoji_user_text.txt"; then EMOJI_OK=1; break; fi
    sleep 1
  done
  if [ "$EMOJI_OK" = 1 ]; then
    if CTX=$(eu check-context "$RUN/emoji_user_text.txt" --delta --path "$EMOJI_FILE" \
          --cursor "line 1, character 10" --selected "$EMOJI_TOKEN"); then
      pass s-emoji-cursor "the caret after two emoji reached the model at UTF-16 character 10 ($(since "$T0")s)"
    else
      printf '%s\n' "$CTX" | sed 's/^/    /'
      fail s-emoji-cursor "the model did not get the caret at UTF-16 character 10"
    fi
  elif [ "$EMOJI_OK" = 0 ]; then
    fail s-emoji-cursor "3 asks later, the model still has not seen $EMOJI_TOKEN"
  fi
fi

# (sublime, tui) add to the prompt: the plugin types the reference into the qwen terminal
# it started (the stub Terminus forwards it to the tmux pane); the harness presses Enter.
if [ "$DEMO_SPEC" = sublime ] && [ "$MODE" = tui ]; then
  CUR_CHECK=s-add-to-prompt
  T0=$(date +%s%N)
  ADD_FILE="$WS/add me.txt"
  ADD_TOKEN=E2E_FILE_BODY_$TAG
  printf 'the token of this file: %s\nand a second line\n' "$ADD_TOKEN" > "$ADD_FILE"
  D0=$(lines_of "$RUN/demo.out"); M0=$(lines_of "$RUN/model.jsonl")
  demo_cmd "run-qwen $TMUX_SOCK e2e"
  tmux_cmd send-keys -t e2e -l "E2E_ADD "
  demo_cmd "add-file $ADD_FILE"
  if ! wait_json "$RUN/demo.out" "$D0" --eq event=terminal_input; then
    fail s-add-to-prompt "the plugin typed nothing into its qwen terminal ($WHY)"
  elif [ "$(jget "$JSON_LINE" text)" != '@add\ me.txt ' ]; then
    fail s-add-to-prompt "the plugin typed $(jget "$JSON_LINE" text | od -c | head -n 2 | tr '\n' ' '), expected '@add\ me.txt '"
  elif ! wait_until pane_has 'E2E_ADD @add\ me.txt'; then
    fail s-add-to-prompt "the reference never showed in qwen's prompt ($WHY)"
  else
    sleep 0.3   # the TUI settles (its @ completion closes at the trailing space)
    tmux_cmd send-keys -t e2e Enter
    if ! wait_json "$RUN/model.jsonl" "$M0" --eq decision.why=add; then
      fail s-add-to-prompt "the prompt never reached the model ($WHY)"
    elif [ "$(jget "$JSON_LINE" decision.text)" != "E2E_ADD_FOUND $ADD_TOKEN" ]; then
      fail s-add-to-prompt "the model did not get the file's content: $(jget "$JSON_LINE" decision.text); prompt: $(jget "$JSON_LINE" last_user_text | head -c 300 | tr '\n' '|')"
    else
      # the same with a line range: "(lines A-B)" is plain text after the reference
      sleep 1   # the answer is shown and the turn ends
      D0=$(lines_of "$RUN/demo.out"); M0=$(lines_of "$RUN/model.jsonl")
      tmux_cmd send-keys -t e2e -l "E2E_ADD "
      demo_cmd "add-lines $ADD_FILE 1 2"
      if ! wait_json "$RUN/demo.out" "$D0" --eq event=terminal_input \
           || [ "$(jget "$JSON_LINE" text)" != '@add\ me.txt (lines 1-2) ' ]; then
        fail s-add-to-prompt "Add Selection to Prompt did not type '@add\ me.txt (lines 1-2) ' ($WHY; demo: $(tail -n 1 "$RUN/demo.out" | head -c 200))"
      elif ! wait_until pane_has 'E2E_ADD @add\ me.txt (lines 1-2)'; then
        fail s-add-to-prompt "the ranged reference never showed in qwen's prompt ($WHY)"
      else
        sleep 0.3
        tmux_cmd send-keys -t e2e Enter
        if ! wait_json "$RUN/model.jsonl" "$M0" --eq decision.why=add --has "last_user_text=(lines 1-2)" \
             || [ "$(jget "$JSON_LINE" decision.text)" != "E2E_ADD_FOUND $ADD_TOKEN" ]; then
          fail s-add-to-prompt "with a line range the model did not get the file's content ($WHY)"
        else
          pass s-add-to-prompt "@add\\ me.txt and @add\\ me.txt (lines 1-2), typed by the plugin, reached the model with the file's content ($(since "$T0")s)"
        fi
      fi
    fi
  fi
  sleep 1   # the answer is shown and the turn ends
fi

# (sublime) the editor tools: a second Sublime host with its plugin host and MCP server
# (--plugins, registered in $HOME/.qwen/settings.json) reports a SublimeLinter diagnostic;
# a headless qwen's model calls editor-diagnostics and must get it.
if [ "$DEMO_SPEC" = sublime ]; then
  CUR_CHECK=s-diagnostics
  T0=$(date +%s%N)
  DIAG_TOKEN=E2E_DIAG_$TAG
  DIAG_TOOL=mcp__qwen-companion-plugins__editor-diagnostics
  start_peer sdiag env -i PATH="$SYS_PATH" HOME="$HOME_DIR" LANG=C.UTF-8 \
    "${DEMO_CMD[@]}" --plugins ide --workspace "$WS"
  if ! wait_json "$RUN/sdiag.out" 0 --eq event=ready; then
    fail s-diagnostics "the --plugins host printed no ready line ($WHY): $(head -c 300 "$RUN/sdiag.err")"
  else
    to_peer sdiag "lint $ACTIVE 2 9 error $DIAG_TOKEN unused variable"
    DIAG_SID=$(new_uuid)
    fake_model_args "$DIAG_SID" yolo e2e-dummy-key
    M0=$(lines_of "$RUN/model.jsonl")
    start_proc sdiag-qwen /dev/null bash -c 'cd "$1" && shift && exec "$@"' _ "$WS" \
      env -i "${QWEN_ENV[@]}" QWEN_CODE_SUPPRESS_YOLO_WARNING=1 "$NODE" "$QWEN_PKG/cli-entry.js" "${QWEN_ARGS[@]}" \
      -p "E2E_CALL name=$DIAG_TOOL args={}"
    DIAG_PID=$LAST_PID
    if ! wait_until eval '! proc_alive "$DIAG_PID"'; then
      fail s-diagnostics "headless qwen did not finish ($WHY)"
    elif ! wait_json "$RUN/model.jsonl" "$M0" --eq decision.why=call; then
      fail s-diagnostics "the prompt never reached the model ($WHY)"
    elif ! jget "$JSON_LINE" body | grep -qF "\"$DIAG_TOOL\""; then
      fail s-diagnostics "the model was not given $DIAG_TOOL"
    elif ! wait_json "$RUN/model.jsonl" "$M0" --eq "decision.why=tool result" --contains "$DIAG_TOKEN"; then
      fail s-diagnostics "the diagnostic never reached the model: $(grep -F 'tool result' "$RUN/model.jsonl" | tail -n 1 | head -c 400)"
    else
      pass s-diagnostics "the model called $DIAG_TOOL and got the SublimeLinter diagnostic ($(since "$T0")s)"
    fi
  fi
  to_peer sdiag stop
  close_peer sdiag
fi

# Helpers shared by the edit steps.
wait_tool_result() { # FROM TEXT -> the model got a tool result containing TEXT
  wait_json "$RUN/model.jsonl" "$1" --eq last_role=tool --has "decision.text=$2"
}

# (c) accept from the IDE with edited text.
if propose_write c-diff-opened accept; then
  ACCEPT_PATH=$W_PATH
  pass c-diff-opened "openDiff reached the demo with the proposed content ($(since "$T0")s)"
  CUR_CHECK=c-accept
  printf '%s\n// edited in the IDE before accepting (%s)\n' "$W_TOKEN" "$TAG" > "$RUN/accept_edited.txt"
  demo_cmd "accept-from $RUN/accept_edited.txt $ACCEPT_PATH"
  if wait_until file_is "$ACCEPT_PATH" "$RUN/accept_edited.txt"; then
    if wait_tool_result "$M0" "$ACCEPT_PATH"; then
      pass c-accept "file holds exactly the IDE-edited text; the model got the tool result ($(since "$T0")s)"
    else
      fail c-accept "file written, but the model never got the tool result ($WHY)"
    fi
  else
    fail c-accept "$ACCEPT_PATH does not hold the edited text ($WHY); on disk: $( [ -f "$ACCEPT_PATH" ] && od -c "$ACCEPT_PATH" | head -n 5 | tr '\n' ' ' || echo 'no file')"
    [ -f "$ACCEPT_PATH" ] || DIFF_BLOCKED="the accept diff never resolved, and qwen handles one at a time"
  fi
else
  fail c-diff-opened "$WHY"
  fail c-accept "no diff to accept"
  DIFF_BLOCKED="the accept edit is still pending, and qwen handles one at a time"
fi

# (sublime) ctrl+s in the proposal view accepts (not Save As).
if [ "$DEMO_SPEC" = sublime ]; then
  if [ -n "$DIFF_BLOCKED" ]; then
    fail s-save-accepts "not run: $DIFF_BLOCKED"
  elif propose_write s-save-accepts save; then
    SAVE_PATH=$W_PATH
    printf '%s\n' "$W_TOKEN" > "$RUN/save_expected.txt"
    demo_cmd "save $SAVE_PATH"
    if wait_until file_is "$SAVE_PATH" "$RUN/save_expected.txt" && wait_tool_result "$M0" "$SAVE_PATH"; then
      pass s-save-accepts "ctrl+s in the proposal view accepted: the proposed text was written ($(since "$T0")s)"
    else
      fail s-save-accepts "after ctrl+s, $SAVE_PATH does not hold the proposal or the model got no result ($WHY)"
      [ -f "$SAVE_PATH" ] || DIFF_BLOCKED="the save diff never resolved, and qwen handles one at a time"
    fi
  else
    fail s-save-accepts "$WHY"
    DIFF_BLOCKED="the save edit is still pending, and qwen handles one at a time"
  fi
fi

# (c) the IDE declines: `reject` sends ide/diffRejected, `closed` (the user closed the
# diff view) sends ide/diffClosed; qwen treats both as a rejection and writes nothing.
ide_declines() { # CHECK VERB NAME
  local check=$1 verb=$2 name=$3 path
  CUR_CHECK=$check
  if [ -n "$DIFF_BLOCKED" ]; then fail "$check" "not run: $DIFF_BLOCKED"; return; fi
  if ! propose_write "$check" "$name"; then
    fail "$check" "$WHY"
    DIFF_BLOCKED="the $name edit is still pending, and qwen handles one at a time"
    return
  fi
  path=$W_PATH
  if [ "$MODE" = tui ]; then
    wait_until pane_has "Apply this change?" || log "note: the CLI dialog did not show ($WHY)"
    demo_cmd "$verb $path"
    if ! wait_until pane_lacks "Apply this change?"; then
      fail "$check" "the CLI still shows its dialog after '$verb' ($WHY)"
      DIFF_BLOCKED="the $name diff never resolved, and qwen handles one at a time"
      return
    fi
    sleep 1   # a wrongly accepted edit would be written right after the dialog closes
  else
    demo_cmd "$verb $path"
    # One {"type":"result"} line per finished turn; this is turn number $TURNS.
    if ! wait_json "$RUN/qwen_sj.out" 0 --nth "$TURNS" --eq type=result; then
      fail "$check" "the turn did not end after '$verb' ($WHY)"
      DIFF_BLOCKED="the $name diff never resolved, and qwen handles one at a time"
      return
    fi
  fi
  if [ -e "$path" ]; then
    fail "$check" "$path was written although the IDE declined the diff ($verb)"
  else
    pass "$check" "'$verb' ended the turn, nothing written ($(since "$T0")s)"
  fi
}
ide_declines c-reject reject reject
ide_declines c-closed closed closed

# (d) the user answers in the CLI: qwen calls closeDiff and parses the reply.
if [ "$MODE" = tui ] && [ -n "$DIFF_BLOCKED" ]; then
  fail d-cli-accept "not run: $DIFF_BLOCKED"
elif [ "$MODE" = tui ]; then
  propose_write d-cli-accept hold
  OPENED=$?
  HOLD_PATH=$W_PATH
  printf '%s\n' "$W_TOKEN" > "$RUN/hold_expected.txt"
  if [ "$OPENED" != 0 ]; then
    fail d-cli-accept "$WHY"
  elif ! wait_until pane_has "Apply this change?"; then
    fail d-cli-accept "the CLI approval dialog never showed ($WHY)"
  else
    log "tmux <- 1 (Yes, allow once)"
    tmux_cmd send-keys -t e2e 1
    if ! wait_json "$RUN/demo.out" "$D0" --eq event=diff_close_requested --eq "filePath=$HOLD_PATH"; then
      fail d-cli-accept "closeDiff never reached the demo ($WHY)"
    elif ! wait_until pane_lacks "Apply this change?"; then
      fail d-cli-accept "the CLI dialog stayed open after answering 1 ($WHY)"
    elif ! wait_until file_is "$HOLD_PATH" "$RUN/hold_expected.txt"; then
      fail d-cli-accept "closeDiff arrived but $HOLD_PATH does not hold the proposed content ($WHY)"
    elif ! wait_tool_result "$M0" "$HOLD_PATH"; then
      fail d-cli-accept "file written, but the model never got the tool result ($WHY)"
    else
      D_OK=1   # the reply is judged after /quit, when the debug log is complete
      log "closeDiff reached the demo and the file was written ($(since "$T0")s)"
    fi
  fi
fi

# keepalive (optional): the companion must not leave qwen's GET stream silent.
if [ -n "$KEEPALIVE_S" ]; then
  CUR_CHECK=keepalive
  OFF=$(stat -c %s "$RUN/tap.log")
  log "keepalive: idling ${KEEPALIVE_S}s, watching qwen's GET /mcp stream through the tap"
  sleep "$KEEPALIVE_S"
  KA=$(eu tap-get-traffic "$RUN/tap.log" --from-offset "$OFF")
  printf '%s\n' "$KA" | tail -n +2 | sed 's/^/    /'
  if [ "$(printf '%s\n' "$KA" | head -n 1)" -ge 1 ] 2>/dev/null; then
    pass keepalive "$(printf '%s\n' "$KA" | head -n 1) SSE chunk(s) on the idle GET stream in ${KEEPALIVE_S}s"
  else
    fail keepalive "no traffic on qwen's GET stream during ${KEEPALIVE_S}s of idling (qwen gives up after 300s)"
  fi
fi

# stream-drop: a network hiccup resets every connection qwen has to the IDE server (its
# SSE stream included). qwen's MCP transport re-opens the stream (with Last-Event-ID) after
# the server's retry hint; the server kept the session through its grace period, so the
# context keeps reaching qwen without a new handshake. (qwen 0.24.4 marks the IDE as
# disconnected on any transport error, so later edits would no longer open diffs: this
# check runs after the diff checks.)
CUR_CHECK=stream-drop
T0=$(date +%s%N)
CUT_PORT=${TAP_PORT:-$IDE_PORT}
command -v ss >/dev/null 2>&1 || { timeout 600 apt-get install -y -qq --no-install-recommends iproute2 \
  || { timeout 600 apt-get update -qq && timeout 600 apt-get install -y -qq --no-install-recommends iproute2; }; } >/dev/null 2>&1
if ! command -v ss >/dev/null 2>&1; then
  fail stream-drop "ss (iproute2) is needed to reset qwen's connections and could not be installed"
elif ! ss -K dst 127.0.0.1 dport = ":$CUT_PORT" > "$RUN/ss_cut.txt" 2>&1 \
     || ! grep -q ":$CUT_PORT" "$RUN/ss_cut.txt"; then
  fail stream-drop "could not reset qwen's connections to port $CUT_PORT: $(tr '\n' '|' < "$RUN/ss_cut.txt" | head -c 300)"
else
  log "reset $(grep -c ":$CUT_PORT" "$RUN/ss_cut.txt") connection(s) of qwen to port $CUT_PORT"
  sleep 5   # qwen waits for the server's SSE retry hint (3 s) before it reconnects
  DROP_TOKEN=E2E_AFTER_DROP_$TAG
  demo_cmd "focus $ACTIVE"
  demo_cmd "cursor 3 5"
  demo_cmd "select $DROP_TOKEN"
  sleep 0.5
  DROP_OK=0
  for attempt in 1 2 3 4; do
    FROM=$(lines_of "$RUN/model.jsonl")
    submit "E2E_ASK after the drop, attempt $attempt" || abort "$WHY"
    if ! wait_json "$RUN/model.jsonl" "$FROM" --eq decision.why=ask --has "last_user_text=after the drop, attempt $attempt"; then
      DROP_OK=2; break
    fi
    jget "$JSON_LINE" last_user_text > "$RUN/drop_user_text.txt"
    if grep -qF "$DROP_TOKEN" "$RUN/drop_user_text.txt"; then DROP_OK=1; break; fi
    log "the context after the drop has not reached the model yet (attempt $attempt)"
    sleep 2
  done
  if [ "$DROP_OK" = 1 ]; then
    pass stream-drop "qwen reconnected its stream and the new selection reached the model on ask $attempt ($(since "$T0")s)"
  elif [ "$DROP_OK" = 2 ]; then
    fail stream-drop "the E2E_ASK request never reached the fake model ($WHY)"
  else
    fail stream-drop "after the reset, the model never saw $DROP_TOKEN; IDE lines: $(grep -F '[IDE]' "$DEBUG_LOG" 2>/dev/null | tail -n 3 | tr '\n' '|')"
  fi
fi
# Back to the state b-live left for the later checks (README.md active with its selection).
select_live

# quit: the CLI leaves promptly.
CUR_CHECK=quit
T0=$(date +%s%N)
WATCH_QWEN=0
if [ "$MODE" = tui ]; then
  check_tui_quit qwen "$RUN/qwen_tui.rc"
else
  close_peer qwen_sj
  if wait_until eval '! proc_alive "$QWEN_PID"'; then
    wait "$QWEN_PID"; QRC=$?
    if [ "$QRC" = 0 ]; then pass quit "qwen exited after stdin closed ($(since "$T0")s)"; else fail quit "qwen exited with status $QRC"; fi
  else
    fail quit "qwen did not exit after its stdin closed ($WHY)"
  fi
fi

if [ "$MODE" = tui ] && [ "${RESULT[d-cli-accept]:-}" = "" ]; then
  if [ "${D_OK:-0}" != 1 ]; then
    fail d-cli-accept "not completed"
  elif grep -qF "Invalid JSON in closeDiff response" "$DEBUG_LOG"; then
    fail d-cli-accept "qwen could not parse the closeDiff reply: $(grep -F 'Invalid JSON in closeDiff response' "$DEBUG_LOG" | tail -n 1 | short)"
  elif grep -qE "Request for closeDiff .* failed" "$DEBUG_LOG"; then
    fail d-cli-accept "closeDiff failed: $(grep -E 'Request for closeDiff .* failed' "$DEBUG_LOG" | tail -n 1 | short)"
  else
    N_CLOSE=$(count_json "$RUN/demo.out" --eq event=diff_close_requested --eq "filePath=$HOLD_PATH")
    if [ "$N_CLOSE" != 1 ]; then
      # IdeClient.disconnect() re-sends closeDiff for diffs whose closeDiff never returned.
      fail d-cli-accept "closeDiff for $HOLD_PATH was requested $N_CLOSE times (reply lost or late?)"
    else
      pass d-cli-accept "closeDiff answered with a reply qwen accepted; proposed content written"
    fi
  fi
fi

# In Sublime a diff view takes the focus, and closing it gives the focus to another tab
# (the stub: the last one, src/main.rs); the user goes back to README.md, which still has
# its caret and selection from b-live. (The C demo's focus never moves by itself.)
if [ "$DEMO_SPEC" = sublime ]; then
  CUR_CHECK=scan
  demo_cmd "focus $OTHER"
  sleep 0.3
fi

# scan: no QWEN_CODE_IDE_SERVER_PORT, cwd below the workspace, a newer decoy lock of
# another workspace next to ours (ppid alive so qwen keeps it): qwen must pick ours.
CUR_CHECK=scan
T0=$(date +%s%N)
[ -n "$TAP_LOCK" ] && rm -f "$TAP_LOCK"
DECOY=$HOME_DIR/.qwen/ide/9.lock
printf '{"port":9,"workspacePath":"%s","authToken":"decoy","ppid":%d,"ideInfo":{"name":"decoy","displayName":"Decoy"}}\n' \
  "$RUN/other-ws" "$$" > "$DECOY"
SCAN_SID=$(new_uuid)
SCAN_DEBUG_LOG=$HOME_DIR/.qwen/debug/$SCAN_SID.txt
fake_model_args "$SCAN_SID" default e2e-dummy-key
M0=$(lines_of "$RUN/model.jsonl")
start_proc scan /dev/null bash -c 'cd "$1" && shift && exec "$@"' _ "$WS/src" \
  env -i "${QWEN_ENV[@]}" "$NODE" "$QWEN_PKG/cli-entry.js" "${QWEN_ARGS[@]}" -p "E2E_ASK scan $TAG"
SCAN_PID=$LAST_PID
if wait_until eval '! proc_alive "$SCAN_PID"'; then
  wait "$SCAN_PID"; SRC=$?
  if [ "$SRC" != 0 ]; then
    fail scan "headless qwen exited with status $SRC"
  elif ! grep -qE "$DISCOVERED.*openDiff" "$SCAN_DEBUG_LOG" 2>/dev/null; then
    fail scan "qwen did not find the demo by scanning the lock directory: $(grep -F '[IDE]' "$SCAN_DEBUG_LOG" 2>/dev/null | tail -n 3 | tr '\n' '|')"
  elif ! grep -qF "127.0.0.1:$IDE_PORT" "$SCAN_DEBUG_LOG"; then
    fail scan "qwen connected somewhere else: $(grep -F 'Attempting to connect' "$SCAN_DEBUG_LOG" | tr '\n' '|')"
  elif ! wait_json "$RUN/model.jsonl" "$M0" --eq decision.why=ask --has "last_user_text=E2E_ASK scan $TAG"; then
    fail scan "the headless prompt never reached the model ($WHY)"
  else
    jget "$JSON_LINE" last_user_text > "$RUN/scan_user_text.txt"
    # A fresh session gets the current state: README.md active since b-live.
    if CTX=$(eu check-context "$RUN/scan_user_text.txt" --path "$OTHER" \
          --cursor "line 1, character 3" --selected "$LIVE_TOKEN" --other "$ACTIVE"); then
      if [ -f "$LOCK_FILE" ]; then
        pass scan "found by cwd scan (decoy skipped), context delivered ($(since "$T0")s)"
      else
        fail scan "connected, but the lock file $LOCK_FILE is gone afterwards (qwen deleted it as stale?)"
      fi
    else
      printf '%s\n' "$CTX" | sed 's/^/    /'
      fail scan "connected by scan, but the editor context did not reach the model"
    fi
  fi
else
  fail scan "headless qwen did not finish ($WHY)"
fi
rm -f "$DECOY"

# qwen-home-*: the demo and the CLI resolve $QWEN_HOME the same way. A second host runs
# with only QWEN_HOME to find its lock directory; a headless qwen with the same QWEN_HOME
# (its settings there too, since that is its global directory) and no port variable must
# find the lock by scanning that directory and connect to this host, not the first one.
qwen_home_case() { # CHECK QWEN_HOME_VALUE CWD EXPECTED_HOME
  local check=$1 qh=$2 cwd=$3 want=$4 name="qh_$1" ready port lock="" sid dlog pid rc drc verdict=""
  CUR_CHECK=$check
  T0=$(date +%s%N)
  mkdir -p "$want" "$cwd"
  qwen_settings ide > "$want/settings.json"
  start_peer "$name" bash -c 'cd "$1" && shift && exec "$@"' _ "$cwd" \
    env -i PATH="$SYS_PATH" HOME="$HOME_DIR" QWEN_HOME="$qh" LANG=C.UTF-8 \
    "${DEMO_CMD[@]}" ide --workspace "$WS"
  if ! wait_json "$RUN/$name.out" 0 --eq event=ready; then
    verdict="the host with QWEN_HOME=$qh printed no ready line ($WHY): $(head -c 300 "$RUN/$name.err")"
  else
    ready=$JSON_LINE
    port=$(jget "$ready" port)
    lock=$(jget "$ready" lockFile)
    if [ "$lock" != "$want/ide/$port.lock" ] || [ ! -f "$lock" ]; then
      verdict="QWEN_HOME=$qh: lock file at '$lock', expected $want/ide/$port.lock"
    else
      sid=$(new_uuid)
      dlog=$want/debug/$sid.txt
      fake_model_args "$sid" default e2e-dummy-key
      start_proc "$name-qwen" /dev/null bash -c 'cd "$1" && shift && exec "$@"' _ "$cwd" \
        env -i "${QWEN_ENV[@]}" QWEN_HOME="$qh" "$NODE" "$QWEN_PKG/cli-entry.js" "${QWEN_ARGS[@]}" \
        -p "E2E_ASK $check $TAG"
      pid=$LAST_PID
      if wait_until eval '! proc_alive "$pid"'; then
        wait "$pid"; rc=$?
        if [ "$rc" != 0 ]; then
          verdict="headless qwen (QWEN_HOME=$qh) exited with status $rc"
        elif [ ! -f "$dlog" ]; then
          verdict="qwen wrote no debug log at $dlog: it did not take QWEN_HOME=$qh as we did"
        elif ! grep -qE "$DISCOVERED.*openDiff" "$dlog"; then
          verdict="qwen did not connect: $(grep -F '[IDE]' "$dlog" | tail -n 3 | tr '\n' '|')"
        elif ! grep -qF "127.0.0.1:$port" "$dlog"; then
          verdict="qwen connected somewhere else: $(grep -F 'Attempting to connect' "$dlog" | tr '\n' '|')"
        fi
      else
        verdict="headless qwen (QWEN_HOME=$qh) did not finish ($WHY)"
      fi
    fi
  fi
  to_peer "$name" stop
  close_peer "$name"
  peer_exit_status "$name"; drc=$?
  if [ -z "$verdict" ] && [ "$drc" != 0 ]; then verdict="the QWEN_HOME=$qh host exited with status $drc"; fi
  if [ -z "$verdict" ] && [ -e "$lock" ]; then verdict="the QWEN_HOME=$qh host left its lock file $lock"; fi
  if [ -z "$verdict" ]; then
    pass "$check" "QWEN_HOME=$qh: lock in $want/ide, qwen scanned it and connected, lock removed on stop ($(since "$T0")s)"
  else
    fail "$check" "$verdict"
  fi
}
qwen_home_case qwen-home-tilde '~/q' "$WS/src" "$HOME_DIR/q"
qwen_home_case qwen-home-relative 'rel/q' "$WS" "$WS/rel/q"

# stop: the demo removes its lock file and exits.
check_demo_stop "$LOCK_FILE" "lock file"
finish_e2e
