#!/usr/bin/env bash
# Real-CLI end-to-end test for Gemini CLI: the real Gemini CLI (@google/gemini-cli, pinned)
# in its interactive TUI under a private tmux server, against our library through the C
# demo `target/c/qcdemo ide --cli gemini`, with a scripted fake Gemini API
# (tests/e2e/fake_gemini.py) on 127.0.0.1. Nothing is skipped: a missing prerequisite is
# installed (CLI via npm, tmux via apt-get) or built (make -C examples/c); if that fails,
# the run fails.
#
#   tests/e2e/run_e2e_gemini.sh
#
# Checks:
#   discovery    the demo writes $TMPDIR/gemini/ide/gemini-ide-server-<demo pid>-<port>.json
#                (mode 0600, port, workspacePath, authToken, ideInfo), named in the ready
#                line's discoveryFiles (and no Qwen Code lock)
#   connect      gemini (no TERM_PROGRAM=vscode: only the file's ideInfo) connects and
#                discovers openDiff + closeDiff (its debug log)
#   context      open/focus/cursor/select pushed through the demo before gemini starts
#                reach the model (the "editor context" JSON: active file, cursor,
#                selected text, other open files)
#   live         a later focus/cursor/select change, while gemini is connected, reaches
#                the model as the "summary of changes" JSON
#   diff-opened  a model edit (write_file of a new file) opens OUR diff with the
#                proposed text
#   accept       `accept-from` with edited text -> the file holds exactly the edited text,
#                the model's tool result has the edited text
#   reject       `reject` -> the CLI shows the edit rejected, nothing written
#   connected    gemini's debug log shows no IDE connection error or close during the
#                session (its MCP client drops the IDE on any transport error)
#   quit         /quit exits gemini promptly with status 0
#   stop         `stop` removes the discovery file and the demo exits 0
#   both         a second demo with --cli both: Qwen Code's lock and Gemini's file share
#                port and token (the lock with ppid and ideInfo); a headless `gemini -p`
#                connects to it; `stop` removes both files
#
# Setup: the CLI is installed once into <repo>/target/e2e/gemini (npm, pinned); tmux comes
#   from apt-get if missing; `make -C examples/c` runs every time (incremental).
# Isolation: every process runs under `env -i` with HOME=<run>/home and TMPDIR=<run>/tmp
#   (Gemini CLI's discovery directory is os.tmpdir()/gemini/ide, for the demo and the CLI
#   alike); $HOME/.gemini/settings.json turns IDE mode on and telemetry, usage statistics
#   and update checks off; the model is GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:<fake>.
# Environment knobs: E2E_DEMO (path to the demo binary, or "standin" for the Python
#   stand-in tests/e2e/standin_ide.py, to tell harness bugs from library bugs),
#   E2E_NO_BUILD=1 (use the demo binary as it is), E2E_TURN_TIMEOUT (45 s per step),
#   E2E_TOTAL_TIMEOUT (240 s after setup), E2E_KEEP=1 (keep the run directory even on
#   success), E2E_DIR (cache root, default <repo>/target/e2e).
# Last line of output: `e2e-gemini: N passed, M failed`; exit status 0 only if nothing failed.
set -u -o pipefail
# shellcheck source=../lib/harness.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
# shellcheck source=e2e_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/e2e_lib.sh"
no_args "$@"

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
E2E_DIR=${E2E_DIR:-$ROOT/target/e2e}
GEMINI_CACHE=$E2E_DIR/gemini
STEP_TIMEOUT=${E2E_TURN_TIMEOUT:-45}
TOTAL_TIMEOUT=${E2E_TOTAL_TIMEOUT:-240}
BUILD_TIMEOUT=${E2E_BUILD_TIMEOUT:-1800}
KEEP_RUN=${E2E_KEEP:-0}
DEMO_SPEC=${E2E_DEMO:-$ROOT/target/c/qcdemo}
CHECKS=(discovery connect context live diff-opened accept reject connected quit stop both)
DEMO_PID="" DEBUG_LOG="" GEM_FILE=""
harness_init e2e-gemini named

# Something died that must stay alive during the current phase? (wait_until, wait_json)
WATCH_DEMO=0 WATCH_GEMINI=0
watch_broken() {
  if [ "$WATCH_DEMO" = 1 ] && ! proc_alive "$DEMO_PID"; then echo "the demo (pid $DEMO_PID) exited"; return 0; fi
  if [ "$WATCH_GEMINI" = 1 ] && [ -f "$RUN/gemini_tui.rc" ]; then echo "gemini exited (status $(cat "$RUN/gemini_tui.rc"))"; return 0; fi
  return 1
}
watch_args() {
  [ "$WATCH_DEMO" = 1 ] && printf -- '--watch-pid\n%s\n' "$DEMO_PID"
  [ "$WATCH_GEMINI" = 1 ] && printf -- '--abort-file\n%s\n' "$RUN/gemini_tui.rc"
  return 0
}
# At cleanup a demo still running is asked to stop (it removes its discovery files).
peer_stop_line() { echo stop; }

PANE_SESSION=gem
# submit TEXT: type TEXT into gemini's prompt and press Enter.
submit() {
  log "submit: $1"
  tmux_cmd send-keys -t gem -l "$1" || { WHY="tmux send-keys failed"; return 1; }
  sleep 0.3
  tmux_cmd send-keys -t gem Enter
}

dump_diag() {
  dump_begin
  local f
  for f in "$DEBUG_LOG" "$RUN/gemini-both-debug.log"; do
    [ -n "$f" ] && [ -f "$f" ] || continue
    section "gemini debug log $f: IDE lines and errors (last 40)"
    grep -E 'IDE|openDiff|closeDiff|\[ERROR\]|\[WARN\]' "$f" | tail -n 40 | short
    section "gemini debug log $f: last 25 lines"
    tail -n 25 "$f" | short
  done
  dump_model_requests
  dump_outputs
  dump_panes
  dump_end
}

# ---------------------------------------------------------------- prerequisites
need_python_and_node

SETUP_T0=$(date +%s%N)
ensure_gemini || abort "could not install @google/gemini-cli@$GEMINI_VERSION with npm"
ensure_tmux || abort "tmux is missing and apt-get could not install it"
RUN=$(mktemp -d "${TMPDIR:-/tmp}/qc-e2e-gemini.XXXXXX") || abort "mktemp failed"
RUN=$(cd "$RUN" && pwd -P)
ensure_demo_c_or_standin || abort "the demo is not available (make -C examples/c failed or produced no $DEMO_SPEC)"
log "setup done in $(since "$SETUP_T0")s; Gemini CLI $("$NODE" "$GEMINI_PKG/bundle/gemini.js" --version 2>/dev/null); run directory $RUN"

# ---------------------------------------------------------------- the isolated world
T_TEST=$(date +%s%N)
DEADLINE_MS=$(( $(ms_now) + TOTAL_TIMEOUT * 1000 ))
HOME_DIR=$RUN/home
TMUX_HOME=$HOME_DIR
TMP_DIR=$RUN/tmp
GEM_DIR=$TMP_DIR/gemini/ide
e2e_workspace
mkdir -p "$HOME_DIR/.gemini" "$TMP_DIR"
gemini_settings > "$HOME_DIR/.gemini/settings.json"
LIVE_TOKEN=E2E_LIVE_SELECTION_$TAG
BASE_ENV=(PATH="$SYS_PATH" HOME="$HOME_DIR" TMPDIR="$TMP_DIR" LANG=C.UTF-8)

# ---------------------------------------------------------------- fake Gemini API
start_fake_model "$HERE/fake_gemini.py" env -i "${BASE_ENV[@]}"

# ---------------------------------------------------------------- demo (IDE side)
CUR_CHECK=discovery
start_peer demo env -i "${BASE_ENV[@]}" RUST_BACKTRACE=1 "${DEMO_CMD[@]}" ide --workspace "$WS" --cli gemini
DEMO_PID=${PEER_PID[demo]}
WATCH_DEMO=1
wait_demo_ready
GEM_FILE=$(jget "$READY" discoveryFiles.gemini)
QWEN_FILE=$(jget "$READY" discoveryFiles.qwen)
log "demo ready (pid $DEMO_PID): $READY"
DEMO_ENV=()
mapfile -t DEMO_ENV < <(eu env-lines "$READY" env)
if REPORT=$(eu check-gemini-file "$GEM_FILE" --port "$IDE_PORT" --workspace "$WS" --dir "$GEM_DIR" --pid "$DEMO_PID"); then
  printf '%s\n' "$REPORT" | sed 's/^/    /'
  if [ -n "$QWEN_FILE" ] || [ -e "$HOME_DIR/.qwen/ide" ]; then
    fail discovery "--cli gemini also wrote a Qwen Code lock ($QWEN_FILE)"
  elif ! printf '%s\n' "${DEMO_ENV[@]}" | grep -qx "GEMINI_CLI_IDE_SERVER_PORT=$IDE_PORT"; then
    fail discovery "the ready line's env has no GEMINI_CLI_IDE_SERVER_PORT=$IDE_PORT: ${DEMO_ENV[*]}"
  else
    pass discovery "$GEM_FILE: mode 0600, port, workspacePath, authToken, ideInfo"
  fi
else
  printf '%s\n' "$REPORT" | sed 's/^/    /'
  fail discovery "Gemini's discovery file is not as the CLI needs it"
fi

# The editor state before gemini starts: two files open, main.rs focused, cursor, selection.
demo_cmd "open $OTHER"
demo_cmd "open $ACTIVE"
demo_cmd "focus $ACTIVE"
demo_cmd "cursor 2 9"
demo_cmd "select $SEL_TOKEN"

# ---------------------------------------------------------------- gemini (CLI side)
# The terminal an editor starts: its environment plus the demo's env object (the
# GEMINI_CLI_IDE_* variables); never TERM_PROGRAM.
DEBUG_LOG=$RUN/gemini-debug.log
# (gemini_model_env: the fake API, and REMOTE_CONTAINERS in a container; tests/e2e/README.md)
gemini_model_env
GEMINI_ENV=("${BASE_ENV[@]}" TERM=xterm-256color COLORTERM=truecolor "${GEMINI_MODEL_ENV[@]}")
log "gemini runs under env -i with only: $(printf '%s ' "${GEMINI_ENV[@]%%=*}") + $(printf '%s ' "${DEMO_ENV[@]}")(no TERM_PROGRAM)"
tmux_dir qcgem
{
  echo '#!/usr/bin/env bash'
  printf 'cd %q || exit 99\n' "$WS"
  printf '%q ' env -i "${GEMINI_ENV[@]}" "${DEMO_ENV[@]}" GEMINI_DEBUG_LOG_FILE="$DEBUG_LOG" \
    "$NODE" "$GEMINI_PKG/bundle/gemini.js"
  printf '2> %q\n' "$RUN/gemini_tui.stderr"
  printf 'echo $? > %q\n' "$RUN/gemini_tui.rc"
} > "$RUN/gemini_tui.sh"
chmod +x "$RUN/gemini_tui.sh"
tmux_start gem "$RUN/gemini_tui.sh" || abort "could not start tmux"
log "gemini TUI started in tmux (server pid $TMUX_SERVER_PID, pane pid ${PANE_PIDS[0]}), debug log $DEBUG_LOG"
WATCH_GEMINI=1

# connect: the discovery file's ideInfo alone (no TERM_PROGRAM) makes gemini connect.
CUR_CHECK=connect
T0=$(date +%s%N)
DISCOVERED='Discovered [0-9]+ tools from IDE: '
ide_settled() {
  grep -qE "$DISCOVERED" "$DEBUG_LOG" 2>/dev/null && return 0
  grep -qE 'IDE.*(not supported|Failed to connect|Directory mismatch|not match|failed)' "$DEBUG_LOG" 2>/dev/null
}
# The client marks the IDE disconnected (and stops using its diffs and context) on any
# transport error, e.g. an SSE event it cannot parse.
DROPPED='\[IDEClient\] IDE connection (error|closed)'
ide_dropped() { # LOG -> the first drop, with the line after it (the error message)
  grep -a -A1 -m1 -E "$DROPPED" "$1" 2>/dev/null | tr '\n' ' ' | short
}
if wait_until ide_settled && grep -qE "$DISCOVERED" "$DEBUG_LOG"; then
  line=$(grep -E "$DISCOVERED" "$DEBUG_LOG" | tail -n 1)
  sleep 1   # the GET stream opens right after the handshake
  if [ -n "$(ide_dropped "$DEBUG_LOG")" ]; then
    fail connect "tools discovered, then the connection dropped: $(ide_dropped "$DEBUG_LOG")"
  elif [[ $line == *openDiff* && $line == *closeDiff* ]]; then
    pass connect "gemini connected without TERM_PROGRAM in $(since "$T0")s: ${line#*] }"
  else
    fail connect "tools discovered, but not openDiff+closeDiff: $line"
  fi
else
  fail connect "${WHY:-connection failed}; IDE lines: $(grep -E 'IDE' "$DEBUG_LOG" 2>/dev/null | tail -n 3 | tr '\n' '|')"
  abort "gemini did not connect to the demo"
fi
wait_until pane_has "Type your message" || abort "the TUI never showed its prompt ($WHY)"
# The context was set before gemini started; the demo sends it when gemini's stream opens.
sleep 1

# context: the full editor context reaches the model with the first prompt.
CUR_CHECK=context
T0=$(date +%s%N)
FROM=$(lines_of "$RUN/model.jsonl")
submit "E2E_ASK what is selected in my editor?" || abort "$WHY"
if wait_json "$RUN/model.jsonl" "$FROM" --eq decision.why=ask; then
  if CTX=$("$PYTHON" - "$JSON_LINE" "$ACTIVE" "$SEL_TOKEN" "$OTHER" <<'PY'
import json, sys
e = json.loads(sys.argv[1])
ctx, kind = e.get("ide_context"), e.get("ide_context_kind")
print("editor context (%s) received by the model: %s" % (kind, json.dumps(ctx)))
want = {"activeFile": {"path": sys.argv[2], "cursor": {"line": 2, "character": 9},
                       "selectedText": sys.argv[3]}, "otherOpenFiles": [sys.argv[4]]}
sys.exit(0 if kind == "full" and ctx == want else 1)
PY
  ); then
    printf '%s\n' "$CTX" | sed 's/^/    /'
    pass context "active file, cursor 2:9, selection $SEL_TOKEN and the other open file reached the model ($(since "$T0")s)"
  else
    printf '%s\n' "$CTX" | sed 's/^/    /'
    fail context "the model's request lacks parts of the editor context"
  fi
else
  fail context "no E2E_ASK request reached the fake model ($WHY)"
fi
wait_until pane_has "E2E_CONTEXT_ANSWER" || log "note: the answer did not show in the pane ($WHY)"

# live: the user moves to README.md and selects something else while gemini is
# connected; the next prompt carries the change as a delta (asked up to 3 times, since
# the notification travels asynchronously).
CUR_CHECK=live
T0=$(date +%s%N)
select_live
LIVE_OK=0
for attempt in 1 2 3; do
  if ! ask_live "$attempt"; then
    LIVE_OK=2; break
  fi
  LIVE_LINE=$JSON_LINE
  if [ "$(jget "$LIVE_LINE" ide_context_kind)" = delta ]; then LIVE_OK=1; break; fi
  log "the live update has not reached the model yet (attempt $attempt)"
  wait_until pane_has "attempt $attempt" >/dev/null
  sleep 1
done
if [ "$LIVE_OK" = 1 ]; then
  DELTA=$(jget "$LIVE_LINE" ide_context)
  if "$PYTHON" -c '
import json, sys
d = json.loads(sys.argv[1])["changes"]["activeFileChanged"]
sys.exit(0 if d == {"path": sys.argv[2], "cursor": {"line": 1, "character": 3}, "selectedText": sys.argv[3]} else 1)
' "$DELTA" "$OTHER" "$LIVE_TOKEN" 2>/dev/null; then
    pass live "the change reached the model as activeFileChanged on ask $attempt ($(since "$T0")s)"
  else
    fail live "the delta the model got is not the expected one: $DELTA"
  fi
elif [ "$LIVE_OK" = 2 ]; then
  fail live "the E2E_ASK request never reached the fake model ($WHY)"
else
  fail live "3 asks later, the model still has not seen the new selection $LIVE_TOKEN"
fi
sleep 1   # the answer is shown and the turn ends

# Model edits: propose_write CHECK NAME (tests/e2e/e2e_lib.sh) asks the model to write
# $WS/e2e_NAME.txt (-> W_PATH) with E2E_<NAME>_<TAG> (-> W_TOKEN); the demo must show that diff.
# The model got the function response of the edit (text: E2E_FINAL_ANSWER tool_result=...).
wait_tool_result() { # FROM TEXT: ... and its text has TEXT
  wait_json "$RUN/model.jsonl" "$1" --eq "decision.why=tool result" --has "decision.text=$2"
}

DIFF_BLOCKED=""
if propose_write diff-opened accept; then
  ACCEPT_PATH=$W_PATH
  pass diff-opened "openDiff reached the demo with the proposed content ($(since "$T0")s)"
  CUR_CHECK=accept
  printf '%s\n// edited in the IDE before accepting (%s)\n' "$W_TOKEN" "$TAG" > "$RUN/accept_edited.txt"
  demo_cmd "accept-from $RUN/accept_edited.txt $ACCEPT_PATH"
  if wait_until file_is "$ACCEPT_PATH" "$RUN/accept_edited.txt"; then
    if wait_tool_result "$M0" "edited in the IDE before accepting ($TAG)"; then
      pass accept "the file holds exactly the IDE-edited text; the model's tool result has the edit ($(since "$T0")s)"
    else
      fail accept "file written, but the model never got the tool result ($WHY)"
    fi
  else
    fail accept "$ACCEPT_PATH does not hold the edited text ($WHY); on disk: $( [ -f "$ACCEPT_PATH" ] && od -c "$ACCEPT_PATH" | head -n 5 | tr '\n' ' ' || echo 'no file')"
    [ -f "$ACCEPT_PATH" ] || DIFF_BLOCKED="the accept diff never resolved, and gemini handles one at a time"
  fi
else
  fail diff-opened "$WHY"
  fail accept "no diff to accept"
  DIFF_BLOCKED="the accept edit is still pending, and gemini handles one at a time"
fi
sleep 1   # the final answer is shown and the turn ends

# reject: `reject` sends ide/diffRejected; gemini writes nothing and tells the model.
CUR_CHECK=reject
if [ -n "$DIFF_BLOCKED" ]; then
  fail reject "not run: $DIFF_BLOCKED"
elif ! propose_write reject reject; then
  fail reject "$WHY"
else
  REJECT_PATH=$W_PATH
  demo_cmd "reject $REJECT_PATH"
  # Gemini CLI 0.61.0 marks the tool call "e2e_reject.txt → Rejected" and ends the turn.
  if ! wait_until pane_has "e2e_reject.txt → Rejected"; then
    fail reject "the CLI never showed the edit as rejected after 'reject' ($WHY)"
  else
    sleep 1   # a wrongly accepted edit would be written right after
    if [ -e "$REJECT_PATH" ]; then
      fail reject "$REJECT_PATH was written although the IDE rejected the diff"
    else
      pass reject "'reject' ended the edit, nothing written ($(since "$T0")s)"
    fi
  fi
fi

# connected: the IDE connection never dropped during the session.
CUR_CHECK=connected
if [ -n "$(ide_dropped "$DEBUG_LOG")" ]; then
  fail connected "gemini's IDE connection dropped: $(ide_dropped "$DEBUG_LOG")"
else
  pass connected "no IDE connection error or close in gemini's debug log during the session"
fi

# quit: the CLI leaves promptly.
CUR_CHECK=quit
T0=$(date +%s%N)
WATCH_GEMINI=0
sleep 1
if [ -n "$DIFF_BLOCKED" ]; then
  # An edit still waits in the CLI's approval dialog: Escape cancels it first.
  tmux_cmd send-keys -t gem Escape
  sleep 1
fi
check_tui_quit gemini "$RUN/gemini_tui.rc"

# stop: the demo removes its discovery file and exits.
check_demo_stop "$GEM_FILE" "discovery file"

# both: one server for both CLIs; a headless gemini connects to it.
CUR_CHECK=both
T0=$(date +%s%N)
VERDICT=""
start_peer both env -i "${BASE_ENV[@]}" "${DEMO_CMD[@]}" ide --workspace "$WS" --cli both
BOTH_PID=${PEER_PID[both]}
if ! wait_json "$RUN/both.out" 0 --eq event=ready; then
  VERDICT="the --cli both demo printed no ready line ($WHY): $(head -c 300 "$RUN/both.err")"
else
  B_READY=$JSON_LINE
  B_PORT=$(jget "$B_READY" port)
  B_QWEN=$(jget "$B_READY" discoveryFiles.qwen)
  B_GEM=$(jget "$B_READY" discoveryFiles.gemini)
  B_ENV=()
  mapfile -t B_ENV < <(eu env-lines "$B_READY" env)
  log "--cli both ready (pid $BOTH_PID): $B_READY"
  if ! B_LOCK=$(eu check-lock "$B_QWEN" --port "$B_PORT" --workspace "$WS" \
        --lock-dir "$HOME_DIR/.qwen/ide" --pid "$BOTH_PID"); then
    VERDICT="the Qwen Code lock is not as qwen needs it: $(printf '%s' "$B_LOCK" | tr '\n' '|')"
  elif ! B_REPORT=$(eu check-gemini-file "$B_GEM" --port "$B_PORT" --workspace "$WS" \
        --dir "$GEM_DIR" --pid "$BOTH_PID" --token-of "$B_QWEN"); then
    VERDICT="Gemini's file: $(printf '%s' "$B_REPORT" | tr '\n' '|')"
  elif ! printf '%s\n' "${B_ENV[@]}" | grep -qx "QWEN_CODE_IDE_SERVER_PORT=$B_PORT" \
       || ! printf '%s\n' "${B_ENV[@]}" | grep -qx "GEMINI_CLI_IDE_SERVER_PORT=$B_PORT"; then
    VERDICT="the env object lacks one CLI's port variable: ${B_ENV[*]}"
  else
    printf '%s\n%s\n' "$B_LOCK" "$B_REPORT" | sed 's/^/    /'
    B_LOG=$RUN/gemini-both-debug.log
    start_proc both-gemini /dev/null bash -c 'cd "$1" && shift && exec "$@"' _ "$WS" \
      env -i "${GEMINI_ENV[@]}" "${B_ENV[@]}" GEMINI_DEBUG_LOG_FILE="$B_LOG" \
      "$NODE" "$GEMINI_PKG/bundle/gemini.js" -p "E2E_ASK both $TAG"
    B_GPID=$LAST_PID
    if ! wait_until eval '! proc_alive "$B_GPID"'; then
      VERDICT="headless gemini did not finish ($WHY)"
    else
      wait "$B_GPID"; B_RC=$?
      if [ "$B_RC" != 0 ]; then
        VERDICT="headless gemini exited with status $B_RC: $(tail -c 300 "$RUN/both-gemini.err")"
      elif ! grep -E "$DISCOVERED" "$B_LOG" | grep -q "openDiff.*closeDiff\|closeDiff.*openDiff"; then
        VERDICT="headless gemini did not connect: $(grep -E 'IDE' "$B_LOG" | tail -n 3 | tr '\n' '|')"
      elif [ -n "$(ide_dropped "$B_LOG")" ]; then
        VERDICT="headless gemini's IDE connection dropped: $(ide_dropped "$B_LOG")"
      elif ! grep -qF "E2E_CONTEXT_ANSWER" "$RUN/both-gemini.out"; then
        VERDICT="headless gemini printed no answer: $(head -c 300 "$RUN/both-gemini.out")"
      fi
    fi
  fi
fi
to_peer both stop
close_peer both
peer_exit_status both; B_DRC=$?
if [ -z "$VERDICT" ] && [ "$B_DRC" != 0 ]; then VERDICT="the --cli both demo exited with status $B_DRC"; fi
if [ -z "$VERDICT" ] && { [ -e "$B_QWEN" ] || [ -e "$B_GEM" ]; }; then VERDICT="a discovery file is left after stop"; fi
if [ -z "$VERDICT" ]; then
  pass both "one port and token in the qwen lock and Gemini's file, headless gemini connected, both files removed on stop ($(since "$T0")s)"
else
  fail both "$VERDICT"
fi

finish_e2e
