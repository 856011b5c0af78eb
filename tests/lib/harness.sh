# shellcheck shell=bash disable=SC2034 # (globals set here are used by the harnesses)
# Shared machinery of the bash test harnesses; sourced, never run:
#   tests/e2e/run_e2e.sh, tests/interop/run_sessions.sh     real Qwen CLI, named checks
#   tests/e2e/run_e2e_gemini.sh                             real Gemini CLI, named checks
#   tests/neovim/run_e2e_nvim.sh, run_e2e_nvim_gemini.sh    either CLI in Neovim, named checks
#   tests/c/run_demo_asan.sh, tests/c/run_sessions_asan.sh  C demo under ASan, "ok - " lines
#
# A harness sources this file right after `set -u`, then calls
#   harness_init LABEL named|tap [SCRATCH_DIR]
# which sets the traps (the cleanup below runs on every exit, also after SIGINT/SIGTERM).
# Its last line is `LABEL: N passed, M failed[, K skipped]`.
#
#   named  pass ID TEXT / fail ID TEXT decide the checks listed in CHECKS (the first
#          decision of an ID counts); abort fails every check not decided yet and exits;
#          processes run in their own sessions under $RUN (start_proc, start_peer, tmux);
#          on exit the checks never reached fail, everything started is stopped (peers get
#          their stop line and EOF, then every process tree is killed), the diagnostics
#          (dump_diag, defined by the harness) are printed if something failed, $RUN is
#          removed unless something failed or KEEP_RUN=1, then the summary line; exit 1
#          if a check failed or none passed.
#   tap    pass TEXT / fail TEXT / skip TEXT print "ok   - TEXT" / "FAIL - TEXT" /
#          "skip - TEXT"; check, expect, jeval and the sanitizer helpers of the C demo;
#          the harness prints the summary itself; on exit every process is stopped and
#          the scratch directory is removed (kept with KEEP_RUN=1); SIGINT / SIGTERM print
#          `LABEL: interrupted (N passed, M failed)` and exit 130 / 143.
#
# Hooks a harness may redefine after sourcing: dump_diag (named), watch_broken and
# watch_args (what wait_until / wait_json also watch), peer_stop_line NAME (the line a
# peer gets at cleanup before its EOF; default none), harness_before_kill and
# harness_after_kill (named cleanup).

HARNESS_LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(cd "$HARNESS_LIB/../.." && pwd -P)
HUTIL=$HARNESS_LIB/harness_util.py

declare -A RESULT=() PEER_PID=() PEER_FD=() PID_START=()
CHECKS=()
PASSED=0 FAILED=0 SKIPPED=0
PIDS=()
RUN="" KEEP_RUN=0 FINISHED=0 TOTAL_NOTE=""
TMUX_SOCK="" SOCK_DIR="" TMUX_SERVER_PID="" TMUX_HOME=""
TMUX_SESSIONS=() PANE_PIDS=()
T_START=$(date +%s%N)
DEADLINE_MS=0 STEP_TIMEOUT=30
WHY="" JSON_LINE="" LAST_PID=""
H_LABEL="" H_STYLE=named
OUT_FD="" ERR_FD=""

# Print the comment block at the top of the harness (up to `set -u`).
usage() { sed -n '2,/^set -u/p' "$0" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//'; }

# For a harness that takes no argument: `-h`/`--help` prints the usage and
# exits 0; anything else is refused with the usage and exit status 2.
no_args() { # "$@" of the harness
  case ${1:-} in
    -h|--help) usage; exit 0 ;;
    "") ;;
    *) echo "$(basename "$0"): unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
}

harness_init() { # LABEL named|tap [SCRATCH_DIR]
  H_LABEL=$1 H_STYLE=$2 RUN=${3:-}
  if [ "$H_STYLE" = named ]; then
    # A trap can fire inside a redirected command (`f > file`): the cleanup first goes
    # back to the harness's own stdout/stderr, saved here (children do not get them).
    exec {OUT_FD}>&1 {ERR_FD}>&2
    trap harness_cleanup EXIT
    trap 'exec 1>&"$OUT_FD" 2>&"$ERR_FD"; log "interrupted"; exit 130' INT TERM
  else
    PY=${PYTHON:-python3}
    CLIENT=$ROOT/tests/c/mcp_client.py
    SAN_ENV=(
      "ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1${QC_ASAN_EXTRA:+:$QC_ASAN_EXTRA}"
      "LSAN_OPTIONS=report_objects=1"
      "UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1"
    )
    trap harness_tap_cleanup EXIT
    trap 'echo "$H_LABEL: interrupted ($PASSED passed, $FAILED failed)"; exit 130' INT
    trap 'echo "$H_LABEL: interrupted ($PASSED passed, $FAILED failed)"; exit 143' TERM
  fi
}

# ---------------------------------------------------------------- checks and the summary
pass() {
  if [ "$H_STYLE" = tap ]; then PASSED=$((PASSED + 1)); echo "ok   - $*"; return 0; fi
  local id=$1; shift
  [ -n "${RESULT[$id]:-}" ] && return 0
  RESULT[$id]=pass; PASSED=$((PASSED + 1))
  log "PASS $id: $*"
}
fail() {
  if [ "$H_STYLE" = tap ]; then FAILED=$((FAILED + 1)); echo "FAIL - $*"; return 0; fi
  local id=$1; shift
  [ -n "${RESULT[$id]:-}" ] && return 0
  RESULT[$id]=fail; FAILED=$((FAILED + 1))
  log "FAIL $id: $*"
  capture_panes "fail-$id"
  return 0
}
skip() { SKIPPED=$((SKIPPED + 1)); echo "skip - $*"; }
summary() {
  if [ "$SKIPPED" -gt 0 ]; then
    echo "$H_LABEL: $PASSED passed, $FAILED failed, $SKIPPED skipped"
  else
    echo "$H_LABEL: $PASSED passed, $FAILED failed"
  fi
}
# named: fail every check not decided yet and stop the run (the cleanup prints the
# diagnostics).
abort() {
  local id
  log "ABORT: $*"
  for id in "${CHECKS[@]}"; do fail "$id" "not run: $*"; done
  exit 1
}
# tap: the run cannot go on; print the summary and exit 1.
bail() { summary; exit 1; }

# ---------------------------------------------------------------- time and logging
ms_now() { echo $(( $(date +%s%N) / 1000000 )); }
since() { awk -v a="$1" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }'; }
log() { printf '[%6ss] %s\n' "$(since "$T_START")" "$*"; }
section() { printf '\n----- %s -----\n' "$*"; }
short() { cut -c1-400; }

# Milliseconds / seconds for one wait: min(the step timeout ($STEP_NOW if set, else
# $STEP_TIMEOUT, in s), what is left until DEADLINE_MS).
step_ms() {
  local left=$(( DEADLINE_MS - $(ms_now) )) turn=$(( ${STEP_NOW:-$STEP_TIMEOUT} * 1000 ))
  [ "$left" -lt "$turn" ] && turn=$left
  [ "$turn" -lt 0 ] && turn=0
  echo "$turn"
}
step_s() { awk -v m="$(step_ms)" 'BEGIN { printf "%.1f", m / 1000 }'; }

# ---------------------------------------------------------------- processes
# Process state straight from /proc (slim images have no ps): zombies count as dead.
proc_alive() {
  local stat
  [ -n "$1" ] && read -r stat 2>/dev/null < "/proc/$1/stat" || return 1
  stat=${stat##*) }
  case ${stat%% *} in Z|X) return 1 ;; esac
  return 0
}
# The start time of PID (clock ticks after boot): with the pid, it names one process.
proc_start() {
  local stat
  read -r stat 2>/dev/null < "/proc/$1/stat" || return 1
  # shellcheck disable=SC2086 # the fields after "pid (comm) ", split
  set -- ${stat##*) }
  echo "${20}"
}
# track PID: a process we started; the cleanup stops it (unless its pid was reused).
track() {
  PIDS+=("$1")
  PID_START[$1]=$(proc_start "$1")
}
# PID is still the process we tracked (or one we did not track, e.g. a tmux pane).
proc_ours() { [ -z "${PID_START[$1]:-}" ] || [ "$(proc_start "$1")" = "${PID_START[$1]}" ]; }
# wait_gone PID TENTHS: up to TENTHS x 0.1 s for PID to end.
wait_gone() {
  local i
  for ((i = 0; i < $2; i++)); do proc_alive "$1" || return 0; sleep 0.1; done
  ! proc_alive "$1"
}
# wait_exit PID SECONDS: wait for our child PID to end -> RC (its status, 124 on timeout).
wait_exit() {
  local pid=$1 secs=$2 i
  for ((i = 0; i < secs * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    RC=124
    return
  fi
  wait "$pid"
  RC=$?
}

# Print PID and all its descendants (parents first), from the ppid fields in /proc.
descendants() {
  local -A kids=()
  local f stat rest pid ppid
  for f in /proc/[0-9]*/stat; do
    read -r stat 2>/dev/null < "$f" || continue
    pid=${stat%% *}
    rest=${stat##*) }
    ppid=${rest#* }; ppid=${ppid%% *}
    kids[$ppid]+=" $pid"
  done
  local -a todo=("$1")
  while [ ${#todo[@]} -gt 0 ]; do
    pid=${todo[0]}; todo=("${todo[@]:1}")
    echo "$pid"
    for f in ${kids[$pid]:-}; do todo+=("$f"); done
  done
}
# Terminate the trees of the given PIDs (ours: started by the harness and not gone since,
# or the tmux server/panes it created): TERM each live root's process group (the roots of start_proc
# and tmux are session leaders) and every descendant found in /proc, then KILL what is
# left after 3 s.
kill_trees() {
  local -a roots=() all=() left=() tree=()
  local p
  for p in "$@"; do
    [ -n "$p" ] && proc_alive "$p" && proc_ours "$p" || continue
    roots+=("$p")
    mapfile -t tree < <(descendants "$p")
    all+=("${tree[@]}")
  done
  [ ${#roots[@]} -eq 0 ] && return 0
  for p in "${roots[@]}"; do kill -TERM -- "-$p" 2>/dev/null; done
  kill -TERM "${all[@]}" 2>/dev/null
  for _ in $(seq 1 30); do
    left=(); for p in "${all[@]}"; do proc_alive "$p" && left+=("$p"); done
    [ ${#left[@]} -eq 0 ] && return 0
    sleep 0.1
  done
  for p in "${roots[@]}"; do kill -KILL -- "-$p" 2>/dev/null; done
  kill -KILL "${left[@]}" 2>/dev/null
  return 0
}

# In a child: close the write ends of the peers' stdin FIFOs (a process holding one keeps
# that peer from ever seeing EOF) and the harness's saved stdout/stderr.
close_peer_fds() {
  local fd
  for fd in "${PEER_FD[@]}" $OUT_FD $ERR_FD; do eval "exec $fd>&-"; done
}
# spawn [-C DIR] IN OUT ERR CMD...: CMD in the background (in DIR), stdin/stdout/stderr
# from/to the given files ("-": the harness's), without the harness's other descriptors.
# Sets LAST_PID, adds it to PIDS.
spawn() {
  local dir=""
  if [ "$1" = -C ]; then dir=$2; shift 2; fi
  local in=$1 out=$2 err=$3; shift 3
  (
    # Opened in the child: a FIFO's read end blocks until the harness opens its write end.
    if [ "$in" != - ]; then exec < "$in"; fi
    if [ "$out" != - ]; then exec > "$out"; fi
    if [ "$err" != - ]; then exec 2> "$err"; fi
    close_peer_fds
    if [ -n "$dir" ]; then cd "$dir" || exit 99; fi
    exec "$@"
  ) &
  LAST_PID=$!
  track "$LAST_PID"
}
# start_proc NAME STDIN CMD...: CMD in its own session (setsid: its process group can be
# killed) with cwd $RUN, stdout/stderr to $RUN/NAME.out/.err. Sets LAST_PID.
start_proc() {
  local name=$1 input=$2; shift 2
  spawn -C "$RUN" "$input" "$RUN/$name.out" "$RUN/$name.err" setsid "$@"
}

# ---------------------------------------------------------------- peers (stdin through a FIFO)
# peer_attach NAME PID FIFO: PID (reading FIFO) is the peer NAME; the harness holds the
# write end of FIFO until close_peer NAME (or the cleanup).
peer_attach() {
  local fd
  PEER_PID[$1]=$2
  exec {fd}> "$3"
  PEER_FD[$1]=$fd
}
# start_peer NAME CMD...: start_proc NAME with a FIFO ($RUN/NAME.in) on its stdin.
start_peer() {
  local name=$1; shift
  mkfifo "$RUN/$name.in"
  start_proc "$name" "$RUN/$name.in" "$@"
  peer_attach "$name" "$LAST_PID" "$RUN/$name.in"
}
# to_peer NAME LINE...: one line on the peer's stdin (logged to $RUN/commands.log).
to_peer() {
  local name=$1 fd=${PEER_FD[$1]:-}; shift
  printf '%s <- %s\n' "$name" "$*" >> "$RUN/commands.log"
  [ -n "$fd" ] || { WHY="$name's stdin is closed"; return 1; }
  # In a subshell: a dead reader ends the subshell with SIGPIPE, not the harness.
  (printf '%s\n' "$*" >&"$fd") 2>/dev/null || { WHY="could not write to $name (exited?)"; return 1; }
}
close_peer() {
  local fd=${PEER_FD[$1]:-}
  [ -n "$fd" ] || return 0
  eval "exec $fd>&-"
  unset "PEER_FD[$1]"
}
# Exit status of a peer once it exited (it is our child), or 255 if it did not in time.
peer_exit_status() {
  local pid=${PEER_PID[$1]}
  wait_until eval '! proc_alive "$pid"' || return 255
  wait "$pid" 2>/dev/null
}
peer_stop_line() { :; }
# Every peer still fed gets its stop line (peer_stop_line) and EOF; then up to 3 s to exit.
stop_peers() {
  local name line
  for name in "${!PEER_FD[@]}"; do
    line=$(peer_stop_line "$name")
    [ -z "$line" ] || to_peer "$name" "$line"
    close_peer "$name"
  done
  for name in "${!PEER_PID[@]}"; do wait_gone "${PEER_PID[$name]}" 30; done
}
# Kill every process tree we started: PIDS, the tmux panes (their trees are listed before
# the server goes) and the tmux server; remove the tmux socket directory.
stop_process_trees() {
  local -a pane_tree=() t=()
  local p
  for p in "${PANE_PIDS[@]}"; do
    proc_alive "$p" && { mapfile -t t < <(descendants "$p"); pane_tree+=("${t[@]}"); }
  done
  if [ -n "$TMUX_SOCK" ] && [ -S "$TMUX_SOCK" ]; then tmux_cmd kill-server 2>/dev/null; fi
  kill_trees "${PIDS[@]}" "${PANE_PIDS[@]}" "${pane_tree[@]}" "$TMUX_SERVER_PID"
  [ -n "$SOCK_DIR" ] && rm -rf "$SOCK_DIR"
  return 0
}

# ---------------------------------------------------------------- waiting
# Hooks: watch_broken prints why a process that must stay alive is gone (status 0) or
# fails; watch_args prints extra wait-json options (one a line) for the same watch.
watch_broken() { return 1; }
watch_args() { :; }

# wait_until CMD...: poll CMD every 0.2 s within one step (step_ms).
# Status 0 = condition met, 1 = timeout, 2 = a watched process died (WHY is set).
wait_until() {
  local end=$(( $(ms_now) + $(step_ms) ))
  WHY=""
  while :; do
    "$@" && return 0
    if WHY=$(watch_broken); then return 2; fi
    if [ "$(ms_now)" -ge "$end" ]; then WHY="timed out"; return 1; fi
    sleep 0.2
  done
}

# wait_json FILE FROM ARGS...: wait for a JSON line (index >= FROM) matching ARGS
# (harness_util.py wait-json: --eq K=V, --has K=SUB, --contains SUB, --nth N, --watch-pid P);
# the line lands in $JSON_LINE (not on stdout, so that $WHY survives).
wait_json() {
  local file=$1 from=$2 out rc; shift 2
  local -a extra=()
  mapfile -t extra < <(watch_args)
  out=$("$PYTHON" "$HUTIL" wait-json "$file" --from "$from" --timeout "$(step_s)" "$@" "${extra[@]}" 2>"$RUN/wait.err")
  rc=$?
  case $rc in
    0) JSON_LINE=$out; WHY="" ;;
    1) JSON_LINE=""; WHY="timed out" ;;
    *) JSON_LINE=""; WHY=$(cat "$RUN/wait.err") ;;
  esac
  return $rc
}
count_json() { "$PYTHON" "$HUTIL" count-json "$@"; }
jget() { "$PYTHON" "$HUTIL" get "$1" "$2"; }
lines_of() { if [ -f "$1" ]; then wc -l < "$1" | tr -d ' '; else echo 0; fi; }
file_has() { [ -f "$1" ] && grep -qF -- "$2" "$1"; }
file_is() { [ -f "$1" ] && cmp -s "$1" "$2"; }
file_absent() { [ ! -e "$1" ]; }
new_uuid() { "$PYTHON" -c 'import uuid; print(uuid.uuid4())'; }

# ---------------------------------------------------------------- the real CLI: setup
QWEN_VERSION=0.24.4
QWEN_CACHE=$ROOT/target/e2e/qwen

# PYTHON, NODE (>= 20), SYS_PATH (node's directory + the system's) or abort.
need_python_and_node() {
  PYTHON=$(command -v python3 >/dev/null && python3 -c 'import sys; print(sys.executable)') \
    || abort "python3 not found"
  NODE=$(command -v node) || abort "node not found"
  NODE_MAJOR=$("$NODE" -p 'process.versions.node.split(".")[0]')
  [ "$NODE_MAJOR" -ge 20 ] || abort "node >= 20 required, found $("$NODE" --version)"
  SYS_PATH="$(dirname "$NODE"):/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
}

# npm_pinned DIR PKGDIR SPEC VERSION [FILE]: the npm package SPEC at exactly VERSION in
# DIR (PKGDIR = its node_modules/... directory, FILE a file it must have), installed once.
npm_pinned() {
  local dir=$1 pkg=$2 spec=$3 want=$4 file=${5:-package.json} have
  have=$("$NODE" -p "require('$pkg/package.json').version" 2>/dev/null)
  if [ "$have" = "$want" ] && [ -f "$pkg/$file" ]; then log "$spec already installed in $dir"; return 0; fi
  log "installing $spec into $dir"
  mkdir -p "$dir" || return 1
  [ -f "$dir/package.json" ] || printf '{ "name": "qwen-companion-%s", "private": true }\n' "${dir##*/}" > "$dir/package.json"
  timeout 900 npm install --prefix "$dir" --no-audit --no-fund --no-update-notifier \
    --save-exact --loglevel=error "$spec" || return 1
  have=$("$NODE" -p "require('$pkg/package.json').version" 2>/dev/null)
  [ "$have" = "$want" ] && [ -f "$pkg/$file" ]
}
# The pinned CLI in $QWEN_CACHE (sets QWEN_PKG; QWEN_CACHE may be set before).
ensure_qwen() {
  QWEN_PKG=$QWEN_CACHE/node_modules/@qwen-code/qwen-code
  npm_pinned "$QWEN_CACHE" "$QWEN_PKG" "@qwen-code/qwen-code@$QWEN_VERSION" "$QWEN_VERSION" cli-entry.js
}

# The pinned Gemini CLI in $GEMINI_CACHE (sets GEMINI_PKG; GEMINI_CACHE may be set before).
GEMINI_VERSION=0.61.0
GEMINI_CACHE=$ROOT/target/e2e/gemini
ensure_gemini() {
  GEMINI_PKG=$GEMINI_CACHE/node_modules/@google/gemini-cli
  npm_pinned "$GEMINI_CACHE" "$GEMINI_PKG" "@google/gemini-cli@$GEMINI_VERSION" "$GEMINI_VERSION" bundle/gemini.js
}
# gemini_settings: ~/.gemini/settings.json of an isolated HOME: IDE mode on (and its
# first-run nudge seen); the API key from the environment; nothing that would call home:
# telemetry, usage statistics, update checks off.
gemini_settings() {
  cat <<'JSON'
{
  "ide": { "enabled": true, "hasSeenNudge": true },
  "security": { "auth": { "selectedType": "gemini-api-key" }, "folderTrust": { "enabled": false } },
  "general": { "enableAutoUpdate": false, "enableAutoUpdateNotification": false },
  "privacy": { "usageStatisticsEnabled": false },
  "telemetry": { "enabled": false },
  "ui": { "hideTips": true, "hideBanner": true, "hideWindowTitle": true }
}
JSON
}
# gemini_model_env -> GEMINI_MODEL_ENV: the variables that point gemini at the fake API
# on 127.0.0.1:$MODEL_PORT (API key auth, no telemetry, no proxy for loopback).
# Inside a container (/.dockerenv, /run/.containerenv) Gemini CLI looks for the IDE at
# host.docker.internal, unless it is told that the IDE runs in the same container (a dev
# container: REMOTE_CONTAINERS) or is reached over SSH. Here the editor is in the same
# container, as it is for an editor running in a dev container.
gemini_model_env() {
  # shellcheck disable=SC2054 # the commas belong to NO_PROXY
  GEMINI_MODEL_ENV=(GEMINI_API_KEY=e2e-dummy-key GOOGLE_GEMINI_BASE_URL="http://127.0.0.1:$MODEL_PORT"
    GEMINI_TELEMETRY_ENABLED=false NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost)
  if [ -e /.dockerenv ] || [ -e /run/.containerenv ]; then
    GEMINI_MODEL_ENV+=(REMOTE_CONTAINERS=true)
    log "note: in a container: REMOTE_CONTAINERS=true, so gemini connects to 127.0.0.1 (not host.docker.internal)"
  fi
}

ensure_tmux() {
  command -v tmux >/dev/null 2>&1 && return 0
  local -a sudo=()
  [ "$(id -u)" = 0 ] || sudo=(sudo -n)
  log "installing tmux with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  timeout 600 "${sudo[@]}" apt-get install -y --no-install-recommends tmux \
    || { timeout 600 "${sudo[@]}" apt-get update && timeout 600 "${sudo[@]}" apt-get install -y --no-install-recommends tmux; } \
    || return 1
  command -v tmux >/dev/null 2>&1
}

# make_examples_c LOG [TARGET|VAR=VALUE...]: make -C examples/c (incremental), output to
# LOG, within BUILD_TIMEOUT seconds if that is set (and not 0).
make_examples_c() {
  local out=$1; shift
  local -a limit=()
  [ "${BUILD_TIMEOUT:-0}" != 0 ] && limit=(timeout "$BUILD_TIMEOUT")
  (cd "$ROOT" && "${limit[@]}" make -C examples/c "$@") > "$out" 2>&1
}

# qwen_settings [ide]: the settings.json of an isolated HOME: no telemetry, no update
# checks, no tips, no extra model calls; "ide": the IDE integration on.
qwen_settings() {
  echo '{'
  [ "${1:-}" = ide ] && echo '  "ide": { "enabled": true, "hasSeenNudge": true },'
  cat <<'JSON'
  "security": { "auth": { "selectedType": "openai" }, "folderTrust": { "enabled": false } },
  "general": { "enableAutoUpdate": false, "showSessionRecap": false },
  "privacy": { "usageStatisticsEnabled": false },
  "telemetry": { "enabled": false },
  "memory": { "enableManagedAutoMemory": false, "enableManagedAutoDream": false, "enableAutoSkill": false },
  "model": { "skipNextSpeakerCheck": true, "skipLoopDetection": true },
  "tools": { "useRipgrep": false },
  "ui": { "hideTips": true, "hideBanner": true, "hideWindowTitle": true,
          "enableFollowupSuggestions": false, "enableSpeculation": false,
          "enableUserFeedback": false, "enableWelcomeBack": false,
          "accessibility": { "enableLoadingPhrases": false } }
}
JSON
}

# start_fake_model SCRIPT ENV...: the scripted model SCRIPT (--port-file, --log
# $RUN/model.jsonl) under the ENV command prefix -> MODEL_PID, MODEL_PORT.
start_fake_model() {
  local script=$1; shift
  start_proc model /dev/null "$@" "$PYTHON" "$script" --port-file "$RUN/model.port" --log "$RUN/model.jsonl"
  MODEL_PID=$LAST_PID
  wait_until test -s "$RUN/model.port" || abort "the fake model did not start: $(cat "$RUN/model.err")"
  MODEL_PORT=$(cat "$RUN/model.port")
  log "fake model on 127.0.0.1:$MODEL_PORT (pid $MODEL_PID)"
}
# fake_model_args SID APPROVAL_MODE API_KEY -> QWEN_ARGS: qwen on the fake model, with
# --debug (its log: HOME/.qwen/debug/SID.txt).
fake_model_args() {
  QWEN_ARGS=(--openai-base-url "http://127.0.0.1:$MODEL_PORT/v1" --openai-api-key "$3"
    -m e2e-fake-model --auth-type openai --approval-mode "$2" --debug --session-id "$1")
}

# ---------------------------------------------------------------- the real CLI: TUI under tmux
# tmux_dir PREFIX: a private tmux server socket (TMUX_SOCK) in a new /tmp/PREFIX-tmux.*
# directory (short: socket paths are limited). The server runs with HOME=$TMUX_HOME.
tmux_dir() {
  SOCK_DIR=$(mktemp -d "/tmp/$1-tmux.XXXXXX")
  TMUX_SOCK=$SOCK_DIR/sock
}
tmux_cmd() {
  (close_peer_fds; exec env -i PATH="$SYS_PATH" HOME="$TMUX_HOME" TERM=xterm-256color tmux -S "$TMUX_SOCK" "$@")
}
# write_tui_script NAME WS CMD...: $RUN/NAME.sh runs CMD in WS with --input-file
# $RUN/NAME.input.jsonl (tui_submit) and --json-file $RUN/NAME.events.jsonl; its stderr
# goes to $RUN/NAME.stderr, its exit status to $RUN/NAME.rc.
write_tui_script() {
  local name=$1 ws=$2; shift 2
  : > "$RUN/$name.input.jsonl"
  {
    echo '#!/usr/bin/env bash'
    printf 'cd %q || exit 99\n' "$ws"
    printf '%q ' "$@" --input-file "$RUN/$name.input.jsonl" --json-file "$RUN/$name.events.jsonl"
    printf '2> %q\n' "$RUN/$name.stderr"
    printf 'echo $? > %q\n' "$RUN/$name.rc"
  } > "$RUN/$name.sh"
  chmod +x "$RUN/$name.sh"
}
tui_submit() { # NAME TEXT: the TUI of write_tui_script NAME gets TEXT as a prompt
  "$PYTHON" "$HUTIL" submit-line tui "$2" >> "$RUN/$1.input.jsonl"
}
# tmux_start SESSION SCRIPT [SESSION SCRIPT]...: one tmux session per SCRIPT (200x50, the
# pane stays after the script exits) -> TMUX_SERVER_PID, PANE_PIDS, TMUX_SESSIONS.
tmux_start() {
  local -a cmd=(-f /dev/null)
  local s
  while [ $# -gt 0 ]; do
    [ ${#cmd[@]} -gt 2 ] && cmd+=(";")
    cmd+=(new-session -d -s "$1" -x 200 -y 50 "$2" ";" set-option -t "$1" remain-on-exit on)
    TMUX_SESSIONS+=("$1")
    shift 2
  done
  tmux_cmd "${cmd[@]}" || return 1
  TMUX_SERVER_PID=$(tmux_cmd display-message -p -t "${TMUX_SESSIONS[0]}" '#{pid}')
  for s in "${TMUX_SESSIONS[@]}"; do PANE_PIDS+=("$(tmux_cmd display-message -p -t "$s" '#{pane_pid}')"); done
}
tmux_quit() { # SESSION: type /quit into the TUI
  tmux_cmd send-keys -t "$1" -l /quit
  sleep 0.3
  tmux_cmd send-keys -t "$1" Enter
}
# capture_panes TAG [LINES]: every pane to $RUN/pane-SESSION.TAG.txt (LINES of history).
capture_panes() {
  [ -n "$TMUX_SOCK" ] && [ -S "$TMUX_SOCK" ] || return 0
  local s
  for s in "${TMUX_SESSIONS[@]}"; do
    tmux_cmd capture-pane -p ${2:+-S "-$2"} -t "$s" > "$RUN/pane-$s.$1.txt" 2>/dev/null
  done
  return 0
}

# ---------------------------------------------------------------- diagnostics (named)
dump_begin() {
  section "diagnostics (run directory: $RUN)"
  if [ -s "$RUN/commands.log" ]; then section "commands sent (last 60)"; tail -n 60 "$RUN/commands.log" | short; fi
}
# dump_debug_log FILE WHAT REGEX: the last 40 lines of FILE matching REGEX.
dump_debug_log() {
  [ -n "$1" ] && [ -f "$1" ] || return 0
  section "qwen debug log $1: $2"
  grep -E "$3" "$1" | tail -n 40 | short
}
# dump_debug_logs DIR WHAT REGEX: dump_debug_log for every *.txt in DIR (qwen's ~/.qwen/debug).
dump_debug_logs() {
  local f
  for f in "$1"/*.txt; do dump_debug_log "$f" "$2" "$3"; done
}
dump_model_requests() {
  [ -f "$RUN/model.jsonl" ] || return 0
  section "fake model requests"
  "$PYTHON" "$HUTIL" model-summary "$RUN/model.jsonl" | short
}
# The last 40 lines of every process's output in $RUN and of the build.
dump_outputs() {
  local f
  for f in "$RUN"/*.out "$RUN"/*.err "$RUN"/*.stderr "$RUN"/build.log; do
    [ -s "$f" ] || continue
    case ${f##*/} in wait.err) continue ;; esac
    section "${f##*/} (last 40 lines)"
    tail -n 40 "$f" | short
  done
}
dump_panes() {
  local f
  for f in "$RUN"/pane-*.txt; do
    [ -s "$f" ] || continue
    section "${f##*/} (non-empty lines, last 40)"
    grep -v '^[[:space:]]*$' "$f" | tail -n 40
  done
}
dump_end() { section "end of diagnostics"; }
dump_diag() { dump_begin; dump_model_requests; dump_outputs; dump_panes; dump_end; }

# ---------------------------------------------------------------- Neovim e2e (tests/neovim/run_e2e_nvim*.sh)
# nvim_e2e_config: their knobs (E2E_DIR, E2E_TURN_TIMEOUT -> STEP_TIMEOUT, E2E_KEEP ->
# KEEP_RUN, NVIM) and the library they load (LIB).
nvim_e2e_config() {
  E2E_DIR=${E2E_DIR:-$ROOT/target/e2e}
  STEP_TIMEOUT=${E2E_TURN_TIMEOUT:-45}
  KEEP_RUN=${E2E_KEEP:-0}
  NVIM=${NVIM:-nvim}
  LIB=$ROOT/target/release/libqwen_companion.so
}
# need_nvim: python, node and Neovim are there (or abort).
need_nvim() {
  need_python_and_node
  command -v "$NVIM" >/dev/null 2>&1 || abort "no $NVIM (tests/neovim/run.sh installs it)"
}
dump_nvim_output() { section "nvim output"; tail -n 60 "$RUN/nvim.out" 2>/dev/null | short; }
# start_nvim_e2e LUA_FILE ENV...: headless Neovim in $WS (-> NVIM_PID) under env -i with
# BASE_ENV, QWEN_COMPANION_LIB=$LIB, XDG dirs under HOME_DIR and ENV, the plugin of
# examples/neovim on its runtimepath, running LUA_FILE.
start_nvim_e2e() {
  local lua=$1; shift
  start_proc nvim /dev/null bash -c 'cd "$1" && shift && exec "$@"' _ "$WS" \
    env -i "${BASE_ENV[@]}" QWEN_COMPANION_LIB="$LIB" \
    XDG_CONFIG_HOME="$HOME_DIR/.config" XDG_DATA_HOME="$HOME_DIR/.local/share" \
    XDG_STATE_HOME="$HOME_DIR/.local/state" XDG_CACHE_HOME="$HOME_DIR/.cache" "$@" \
    "$NVIM" --headless -u NONE -i NONE -n --cmd "set rtp^=$ROOT/examples/neovim" -c "luafile $lua"
  NVIM_PID=$LAST_PID
}
# wait_nvim_exit STEPS: Neovim waits up to STEP_TIMEOUT for each of its steps; give it
# STEPS of them to exit (status 1, WHY, when it did not).
wait_nvim_exit() {
  local per_step=$STEP_TIMEOUT rc=0
  STEP_TIMEOUT=$((per_step * $1))
  DEADLINE_MS=$(( $(ms_now) + STEP_TIMEOUT * 1000 ))
  wait_until eval '! proc_alive "$NVIM_PID"' || rc=1
  STEP_TIMEOUT=$per_step
  return "$rc"
}
# report_nvim_checks JSON [ID...]: pass / fail each check of the Lua side's JSON
# ({"checks": [[name, ok, detail]...]}), then fail each of CHECKS (but the IDs, which the
# shell side checks) that the Lua side did not reach. Aborts when it wrote no JSON.
report_nvim_checks() {
  local json=$1 id ok detail; shift
  [ -f "$json" ] || abort "Neovim wrote no results ($WHY): $(tail -c 400 "$RUN/nvim.out")"
  while IFS=$'\t' read -r id ok detail; do
    if [ "$ok" = 1 ]; then pass "$id" "ok"; else fail "$id" "$detail"; fi
  done < <("$PYTHON" - "$json" <<'PY'
import json, sys
for name, ok, detail in json.load(open(sys.argv[1], encoding="utf-8"))["checks"]:
    print("%s\t%d\t%s" % (name, 1 if ok else 0, detail.replace("\t", " ").replace("\n", " ")[:1500]))
PY
  )
  # A step the Neovim side did not reach (it returns after a failure it cannot go on from).
  for id in "${CHECKS[@]}"; do
    case " $* " in *" $id "*) continue ;; esac
    [ -n "${RESULT[$id]:-}" ] || fail "$id" "not reached: an earlier step failed"
  done
}

# ---------------------------------------------------------------- the cleanup traps
harness_before_kill() { :; }
harness_after_kill() { :; }
harness_cleanup() {
  local rc=$? id
  trap - EXIT INT TERM
  set +e
  exec 1>&"$OUT_FD" 2>&"$ERR_FD"
  if [ "$FINISHED" != 1 ]; then
    for id in "${CHECKS[@]}"; do fail "$id" "not run (harness stopped early, status $rc)"; done
  fi
  capture_panes final 200
  stop_peers
  harness_before_kill
  stop_process_trees
  harness_after_kill
  if [ "$FAILED" -gt 0 ] && [ -n "$RUN" ]; then dump_diag; fi
  if [ -n "$RUN" ]; then
    if [ "$FAILED" -eq 0 ] && [ "$KEEP_RUN" != 1 ]; then rm -rf "$RUN"; else log "run directory kept: $RUN"; fi
  fi
  log "total time $(since "$T_START")s$TOTAL_NOTE"
  summary
  if [ "$FAILED" -gt 0 ] || [ "$PASSED" -eq 0 ]; then exit 1; fi
  exit 0
}
harness_tap_cleanup() {
  local pid
  stop_peers
  stop_process_trees
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null; done
  if [ -z "$RUN" ]; then return; fi
  if [ "$KEEP_RUN" = 1 ]; then echo "kept $RUN"; else rm -rf "$RUN"; fi
}

# ---------------------------------------------------------------- the C demo (tap)
# check NAME CMD...: CMD succeeds (its output is shown on failure).
check() {
  local name=$1
  shift
  if "$@" >"$RUN/check.out" 2>&1; then
    pass "$name"
  else
    fail "$name"
    sed 's/^/       /' "$RUN/check.out" | head -40
  fi
}
client() { "$PY" "$CLIENT" "$@"; }
# expect FILE NAME EXPR [--count N]: wait (T s) for a JSON line of FILE matching EXPR.
expect() {
  local file=$1 name=$2
  shift 2
  check "$name" client expect "$file" "$@" --timeout "$T"
}
jeval() { client eval "$@"; }
# expect_ready FILE NAME STDERR: the process writing FILE printed its ready line ->
# READY; else the run ends (with STDERR shown).
expect_ready() {
  if ! READY=$(client expect "$1" 'e["event"]=="ready"' --timeout "$T" 2>"$RUN/ready.err"); then
    fail "$2"
    cat "$RUN/ready.err" "$3"
    bail
  fi
  pass "$2"
  echo "       $READY"
}
# sanitizer_clean FILE...: no ASan/LSan/UBSan report in the stderr files.
sanitizer_clean() {
  local f bad=0
  for f in "$@"; do
    if grep -nE 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|SUMMARY: [A-Za-z]*Sanitizer|Sanitizer has encountered a fatal error' "$f"; then
      echo "--- sanitizer report in $f:"
      sed -n '1,200p' "$f"
      bad=1
    fi
  done
  return $bad
}
# build_c WHAT TARGET...: make -C examples/c TARGET... (NO_CARGO=1 passed on); a failed
# build ends the run with the build output.
build_c() {
  local what=$1; shift
  if ! make_examples_c "$RUN/build.log" "$@" ${NO_CARGO:+NO_CARGO=1}; then
    fail "build (make -C examples/c $*)"
    cat "$RUN/build.log"
    bail
  fi
  pass "$what"
}
