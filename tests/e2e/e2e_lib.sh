# What the real-CLI e2e tests (tests/e2e/run_e2e.sh for Qwen Code, tests/e2e/run_e2e_gemini.sh
# for Gemini CLI) share on top of tests/lib/harness.sh: the demo as the IDE side (DEMO_SPEC,
# DEMO_CMD, DEMO_PID, the peer "demo"), the tmux pane of the CLI (PANE_SESSION), the
# workspace, and the checks both make the same way. Sourced after harness.sh, with HERE set
# to tests/e2e; each test defines submit TEXT (type a prompt into its CLI).

eu() { "$PYTHON" "$HERE/e2e_util.py" "$@"; }
pane() { tmux_cmd capture-pane -p -t "$PANE_SESSION" 2>/dev/null; }
pane_has() { pane | grep -qF -- "$1"; }
pane_lacks() { ! pane_has "$1"; }

# demo_cmd LINE: one command line to the demo's stdin; a demo that is gone fails CUR_CHECK.
demo_cmd() {
  log "demo <- $*"
  if ! to_peer demo "$*"; then
    fail "${CUR_CHECK:-stop}" "could not write to the demo's stdin (demo exited?)"
    return 1
  fi
}

# ensure_demo_c_or_standin: DEMO_CMD for DEMO_SPEC "standin" (tests/e2e/standin_ide.py,
# STANDIN_FAULT passed on when set) or a demo binary (target/c/qcdemo is built first unless
# E2E_NO_BUILD=1).
ensure_demo_c_or_standin() {
  if [ "$DEMO_SPEC" = standin ]; then
    DEMO_CMD=("$PYTHON" "$HERE/standin_ide.py")
    [ -n "${STANDIN_FAULT:-}" ] && DEMO_CMD=(env "STANDIN_FAULT=$STANDIN_FAULT" "${DEMO_CMD[@]}")
    log "using the Python stand-in instead of the demo (E2E_DEMO=standin)"
    return 0
  fi
  if [ "${E2E_NO_BUILD:-0}" != 1 ] && [ "$DEMO_SPEC" = "$ROOT/target/c/qcdemo" ]; then
    log "building the demo (incremental): make -C examples/c"
    make_examples_c "$RUN/build.log" \
      || { log "make -C examples/c failed (output: build.log, in the diagnostics below)"; return 1; }
  fi
  [ -x "$DEMO_SPEC" ] || { echo "no demo binary at $DEMO_SPEC"; return 1; }
  DEMO_CMD=("$DEMO_SPEC")
}

# e2e_workspace: WS=$RUN/ws with src/main.rs (ACTIVE) and README.md (OTHER), a random TAG
# and the selection token SEL_TOKEN.
e2e_workspace() {
  WS=$RUN/ws
  mkdir -p "$WS/src"
  printf 'fn main() {\n    let answer = 42;\n    println!("{answer}");\n}\n' > "$WS/src/main.rs"
  printf '# e2e workspace\n' > "$WS/README.md"
  TAG=$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')
  SEL_TOKEN=E2E_SELECTED_TEXT_$TAG
  ACTIVE=$WS/src/main.rs
  OTHER=$WS/README.md
}

# wait_demo_ready: the demo's ready line (-> READY, IDE_PORT); aborts without one.
wait_demo_ready() {
  wait_json "$RUN/demo.out" 0 --eq event=ready || abort "demo never printed its ready line ($WHY)"
  READY=$JSON_LINE
  IDE_PORT=$(jget "$READY" port)
}

# select_live: the user moves to OTHER (README.md) and selects LIVE_TOKEN at 1:3.
select_live() {
  demo_cmd "focus $OTHER"
  demo_cmd "cursor 1 3"
  demo_cmd "select $LIVE_TOKEN"
  sleep 0.5
}
# ask_live ATTEMPT: the prompt "E2E_ASK live update, attempt ATTEMPT"; its request to the
# model -> JSON_LINE (status 1, WHY, when none came; FROM: the model's lines before it).
ask_live() {
  FROM=$(lines_of "$RUN/model.jsonl")
  submit "E2E_ASK live update, attempt $1" || abort "$WHY"
  wait_json "$RUN/model.jsonl" "$FROM" --eq decision.why=ask --has "last_user_text=attempt $1"
}

expect_diff_opened() { # PATH CONTENT FROM
  if ! wait_json "$RUN/demo.out" "$3" --eq event=diff_opened --eq "filePath=$1"; then
    WHY="the demo printed no diff_opened for $1 ($WHY)"
    return 1
  fi
  local got
  got=$(jget "$JSON_LINE" newContent; echo x)
  got=${got%x}
  got=${got%$'\n'}   # jget adds one newline
  if [ "$got" != "$2" ]; then WHY="diff_opened for $1 has newContent $(printf %q "$got"), expected $(printf %q "$2")"; return 1; fi
}
# propose_write CHECK NAME: CHECK starts (T0); the model is asked to write
# $WS/e2e_NAME.txt (-> W_PATH) with E2E_<NAME>_<TAG> (-> W_TOKEN), and the demo must show
# that diff. D0 / M0: the demo's / the model's lines before the prompt.
propose_write() {
  CUR_CHECK=$1
  T0=$(date +%s%N)
  W_PATH=$WS/e2e_$2.txt
  W_TOKEN=E2E_${2^^}_$TAG
  D0=$(lines_of "$RUN/demo.out"); M0=$(lines_of "$RUN/model.jsonl")
  submit "E2E_WRITE path=$W_PATH content=$W_TOKEN" || abort "$WHY"
  expect_diff_opened "$W_PATH" "$W_TOKEN"$'\n' "$D0"
}

# check_tui_quit CLI RC_FILE: check quit (from T0): /quit typed into PANE_SESSION, and the
# CLI writes its exit status 0 to RC_FILE.
check_tui_quit() {
  local rc
  tmux_quit "$PANE_SESSION"
  if wait_until test -s "$2"; then
    rc=$(cat "$2")
    if [ "$rc" = 0 ]; then pass quit "/quit exited in $(since "$T0")s"; else fail quit "$1 exited with status $rc"; fi
  else
    fail quit "$1 did not exit after /quit ($WHY)"
  fi
  capture_panes final 200
}

# check_demo_stop FILE NOUN: check stop: after 'stop' the demo removes FILE (its NOUN, e.g.
# "lock file") and exits 0 without a panic.
check_demo_stop() {
  local drc
  CUR_CHECK=stop
  T0=$(date +%s%N)
  WATCH_DEMO=0
  demo_cmd stop
  close_peer demo
  if wait_until eval '! proc_alive "$DEMO_PID"'; then
    wait "$DEMO_PID"; drc=$?
    if [ -e "$1" ]; then
      fail stop "the demo exited but left its $2 $1"
    elif grep -qF "panicked" "$RUN/demo.err"; then
      fail stop "the demo reported a panic: $(grep -F panicked "$RUN/demo.err" | head -n 1)"
    elif [ "$drc" != 0 ]; then
      fail stop "the demo exited with status $drc"
    else
      pass stop "$2 removed, demo exited 0 ($(since "$T0")s)"
    fi
  else
    fail stop "the demo did not exit after 'stop' ($WHY)"
  fi
}

# finish_e2e: notes the demo's error events and the test phase's time, then exits 0 (the
# harness's cleanup prints the summary and sets the exit status).
finish_e2e() {
  local n_err
  n_err=$(count_json "$RUN/demo.out" --eq event=error)
  if [ "$n_err" != 0 ]; then
    log "note: the demo printed $n_err error event(s):"
    grep -E '"event": ?"error"' "$RUN/demo.out" | short | sed 's/^/    /'
  fi
  log "test phase took $(since "$T_TEST")s"
  FINISHED=1
  exit 0
}
