#!/usr/bin/env bash
# The Windows suite, run under Wine on Linux: the library's Windows build and the real
# Qwen Code CLI on Windows Node, all inside a private WINEPREFIX (tests/windows/setup.sh).
#
#   tests/windows/run.sh [--no-cargo] [--no-e2e]
#
# Checks (each passes, fails, or prints `SKIP: <check>: <the error Wine printed>` when
# Wine itself cannot run that part; a SKIP is counted, never hidden):
#   setup          tests/windows/setup.sh (Wine, mingw, the Rust target, Windows Node,
#                  the prefix, the ProcessPrng shim)
#   cargo-build    cargo test --locked --target x86_64-pc-windows-gnu --no-run for the
#                  test targets in WIN_CARGO_TARGETS (default: --lib --test ide --test
#                  plugins); the binaries are built once, then run below
#   cargo-<name>   one check per test binary, run by tests/windows/wine-runner.sh with
#                  the test-name filters in WIN_<NAME>_FILTERS (WIN_LIB_FILTERS,
#                  WIN_IDE_FILTERS, WIN_PLUGINS_FILTERS; empty = the whole binary). The
#                  defaults run what passes under Wine 8:
#                  lib: the OS layer, shared, ide, the plugin host/install/ipc/process,
#                  the bridge's naming and schema, the sessions' controllers, frames,
#                  gate, limits, names, outbox and participant; ide: the whole binary
#                  but companion::stop_answers_a_pending_open_diff (passed as --skip):
#                  under Wine on busy cores it failed about one run in six (the reply
#                  "stopping" is lost as the server closes the connection; not yet
#                  looked into; it runs in every Linux run);
#                  plugins: fuzz, hostile_fixtures, manifest, views, windows.
#                  Left out of plugins, runtime (5 of its tests fail): the install
#                  and removal of a plugin while it runs fail with "Sharing
#                  violation" because the plugin's node.exe has the installed folder
#                  as its working directory, which Windows will not let anyone rename
#                  or delete (the_default_store_is_the_install_apis_plugins_dir,
#                  reload_unloads_removed_and_updated_plugins: a library question, not
#                  Wine's); three more fail under Wine, we believe because their timing
#                  is too tight for Windows Node there, which takes seconds to start
#                  (not confirmed: busy_plugin_ignoring_sigterm_
#                  is_killed_and_restarted, closed_channel_and_noisy_output,
#                  hostile::hanging_fixtures_time_out_and_only_the_stuck_one_is_killed)).
#                  Left out of lib (17 of their tests fail, none looked into yet):
#                  plugins::{manifest,pdf,views}, mcp_bridge::{discovery,registration,
#                  settings,tools}, sessions::{inbox,net,proc,registry}. Their
#                  expectations are Unix ones: POSIX paths and file:// URIs, Unix modes
#                  (0o640), local sockets at file paths where Windows has named pipes, a
#                  Unix child program, symlink checks; plugins::pdf needs fonts the Wine
#                  prefix lacks; one mcp_bridge::discovery test finds one IDE of two.
#   demo-build     cargo build --target x86_64-pc-windows-gnu --lib --bins (debug: it
#                  shares its dependencies with the test binaries), then
#                  make -C examples/c PLATFORM=mingw LIBDIR=<that debug folder>
#                  -> target/c-mingw/qcdemo.exe with qwen_companion.dll next to it
#   win-lock       `wine qcdemo.exe ide` writes %USERPROFILE%\.qwen\ide\<port>.lock
#   win-cli        the real CLI (@qwen-code/qwen-code, pinned) starts under Windows Node
#   win-connect    the CLI, in stream-json mode, connects to the demo's IDE server and
#                  discovers openDiff/closeDiff (its debug log)
#   win-diff       a model edit (the fake model's write_file) opens the demo's diff
#   win-accept     `accept-from` in the demo (the user edited the proposal) -> the CLI
#                  writes exactly the edited text, the turn ends
#   win-stop       `stop` removes the lock file, the demo exits 0
#   win-bridge-register  `qcdemo.exe plugins install` of examples/plugins/hello and
#                  todo-quadrant, then `plugins register-mcp --scope user --bridge <Windows
#                  path of qc-mcp-bridge.exe> --always-load-tools`: %USERPROFILE%\.qwen\
#                  settings.json holds the entry with that X:\ path (other keys kept)
#   win-bridge     with `qcdemo.exe plugins serve` running, the Windows CLI's `qwen mcp
#                  list` starts qc-mcp-bridge.exe from settings.json: "✓ qwen-companion-
#                  plugins: … (stdio) - Connected"
#   win-bridge-call  a headless `qwen -p` (yolo): the fake model is given
#                  mcp__qwen-companion-plugins__hello_say_hello, calls it, and the plugin's
#                  "Hello, <name>!" reaches the model's next request and the final answer
#   win-sessions   `qcdemo.exe sessions listen --name win-a-<tag>` (inbox: a named pipe
#                  \\.\pipe\qwen-socks-…), `sessions ps --json` lists it, `sessions send`
#                  prints sent + the delivered receipt, the listener prints the message,
#                  `stop` unregisters it (exit 0, record gone)
#   (the last four need the demo: not with WIN_DEMO=standin)
#
# The CLI under Wine: Windows Node cannot write to, or read from, a Linux pipe under Wine
# ("open EBADF" from libuv), so its stdin and stdout are regular files: stream-json input
# is one file written before the start, the output goes to a file. Wine 8.0 lacks the TCP
# keep-alive socket option undici asks for before connecting; the CLI runs with the
# preload tests/windows/node-wine-keepalive.cjs (see that file).
#
# Environment: WIN_CARGO_TARGETS, WIN_<NAME>_FILTERS (see above), WIN_DEMO (path to a demo
# binary, or "standin" = the library-free tests/e2e/standin_ide.py as the IDE side, to
# check the Windows CLI half alone: its lock's ppid is then made the Windows pid of a
# waiting Windows Node, since Windows processes cannot see Linux pids and the CLI
# removes a lock whose ppid it cannot see), WIN_TEST_TIMEOUT (s per test binary, 900), WIN_STEP_TIMEOUT (s per
# e2e wait, 90: Windows Node under Wine is slow to start), WIN_KEEP=1 (keep the run
# directory), CARGO_TARGET_DIR (default <repo>/target).
# Last line: `windows: N passed, N failed[, N skipped]`; exit status 0 only if none failed.
set -u -o pipefail
# shellcheck source=../lib/harness.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
HERE=$ROOT/tests/windows
# shellcheck source=env.sh
. "$HERE/env.sh"

DO_CARGO=1 DO_E2E=1
while [ $# -gt 0 ]; do
  case $1 in
    --no-cargo) DO_CARGO=0 ;;
    --no-e2e) DO_E2E=0 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done

STEP_TIMEOUT=${WIN_STEP_TIMEOUT:-90}
TEST_TIMEOUT=${WIN_TEST_TIMEOUT:-900}
KEEP_RUN=${WIN_KEEP:-0}
TARGET=x86_64-pc-windows-gnu
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
read -r -a CARGO_TARGETS <<< "${WIN_CARGO_TARGETS:---lib --test ide --test plugins}"
WIN_LIB_FILTERS=${WIN_LIB_FILTERS-sys:: shared:: ide:: plugins::host plugins::install plugins::ipc plugins::process mcp_bridge::naming mcp_bridge::schema sessions::controllers sessions::frames sessions::gate sessions::limits sessions::names sessions::outbox sessions::participant}
WIN_IDE_FILTERS=${WIN_IDE_FILTERS---skip companion::stop_answers_a_pending_open_diff}
WIN_PLUGINS_FILTERS=${WIN_PLUGINS_FILTERS-fuzz:: hostile_fixtures:: manifest:: views:: windows::}
DEMO_PID="" LOCK_LINUX=""

CHECKS=(setup)
[ "$DO_CARGO" = 1 ] && CHECKS+=(cargo-build)
[ "$DO_E2E" = 1 ] && CHECKS+=(demo-build win-lock win-cli win-connect win-diff win-accept win-stop)
# The plugin and sessions checks run the demo's own subcommands: not with the stand-in.
HAS_DEMO=0
[ "$DO_E2E" = 1 ] && [ "${WIN_DEMO:-}" != standin ] && HAS_DEMO=1 \
  && CHECKS+=(win-bridge-register win-bridge win-bridge-call win-sessions)
harness_init windows named
RUN=$(mktemp -d "${TMPDIR:-/tmp}/qc-win.XXXXXX") || abort "mktemp failed"
RUN=$(cd "$RUN" && pwd -P)
DEADLINE_MS=$(( $(ms_now) + 3600 * 1000 ))

# A check Wine cannot run: counted as skipped, with Wine's (or Node's) own words.
skip_check() {
  local id=$1; shift
  [ -n "${RESULT[$id]:-}" ] && return 0
  RESULT[$id]=skip; SKIPPED=$((SKIPPED + 1))
  log "SKIP: $id: $*"
}
# wine_gap FILE: print the line in FILE that says Wine lacks something (exit 1 if none).
wine_gap() {
  [ -f "$1" ] || return 1
  # Our own DLL missing is our failure, not a gap of Wine's.
  grep -E 'unimplemented function|err:module:import_dll|Unknown IPPROTO_[A-Z]+ optname|not implemented' "$1" \
    | grep -v -i -m1 -e 'qwen_companion' -e 'qc-mcp-bridge' | tr -d '\r' | grep -m1 .
}
# The cleanup also ends the prefix's wineserver (and every Windows process left in it).
harness_after_kill() { [ -n "$WINEPREFIX" ] && wineserver -k 2>/dev/null; return 0; }
peer_stop_line() { echo stop; }
watch_broken() {
  if [ -n "$DEMO_PID" ] && [ "${WATCH_DEMO:-0}" = 1 ] && ! proc_alive "$DEMO_PID"; then echo "the demo exited"; return 0; fi
  return 1
}
watch_args() { [ "${WATCH_DEMO:-0}" = 1 ] && printf -- '--watch-pid\n%s\n' "$DEMO_PID"; return 0; }
dump_diag() {
  dump_begin
  [ -n "${DEBUG_LOG:-}" ] && dump_debug_log "$DEBUG_LOG" "IDE / errors" '\[IDE\]|openDiff|closeDiff|\[ERROR\]'
  [ -n "${BRIDGE_DEBUG_LOG:-}" ] && dump_debug_log "$BRIDGE_DEBUG_LOG" "MCP / errors" '\[MCP\]|qwen-companion-plugins|\[ERROR\]'
  dump_model_requests
  dump_outputs
  dump_end
}

# ---------------------------------------------------------------- setup
T=$(date +%s%N)
if "$HERE/setup.sh" > "$RUN/setup.out" 2>&1; then
  sed 's/^/    /' "$RUN/setup.out"
  pass setup "in $(since "$T")s"
else
  sed 's/^/    /' "$RUN/setup.out"
  abort "tests/windows/setup.sh failed"
fi
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER=${CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER:-x86_64-w64-mingw32-gcc}
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER=$HERE/wine-runner.sh

# ---------------------------------------------------------------- cargo tests under Wine
if [ "$DO_CARGO" = 1 ]; then
  T=$(date +%s%N)
  log "cargo test --locked --target $TARGET --no-run ${CARGO_TARGETS[*]}"
  if (cd "$ROOT" && cargo test --locked --target "$TARGET" --no-run --message-format=json-render-diagnostics \
        "${CARGO_TARGETS[@]}") > "$RUN/cargo.json" 2> "$RUN/build.log"; then
    mapfile -t BINS < <(python3 - "$RUN/cargo.json" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m.get("profile", {}).get("test"):
        t = m["target"]
        # The library's unit tests: its kinds are cdylib/rlib/staticlib.
        lib = any(k.endswith("lib") for k in t["kind"])
        print(("lib" if lib else t["name"]) + "\t" + m["executable"])
PY
)
    pass cargo-build "${#BINS[@]} test binaries in $(since "$T")s"
  else
    tail -n 30 "$RUN/build.log" | sed 's/^/    /'
    fail cargo-build "the Windows build failed in $(since "$T")s (last lines above)"
    BINS=()
  fi
  for entry in "${BINS[@]}"; do
    name=${entry%%$'\t'*} exe=${entry#*$'\t'}
    id=cargo-$name
    CHECKS+=("$id")
    filters_var=WIN_$(printf '%s' "$name" | tr '[:lower:]-' '[:upper:]_')_FILTERS
    read -r -a args <<< "${!filters_var:-}"
    T=$(date +%s%N)
    timeout "$TEST_TIMEOUT" "$CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER" "$exe" "${args[@]}" \
      > "$RUN/$id.out" 2> "$RUN/$id.err"
    rc=$?
    counts=$(grep -E '^test result:' "$RUN/$id.out" | tail -n 1)
    if [ $rc = 0 ] && [ -n "$counts" ]; then
      pass "$id" "${counts#test result: } (${args[*]:-all}) in $(since "$T")s"
    elif gap=$(wine_gap "$RUN/$id.err") && ! grep -q '^test .* FAILED$' "$RUN/$id.out"; then
      skip_check "$id" "$gap"
    else
      grep -E '^test .* FAILED$|^---- |panicked at' "$RUN/$id.out" | head -n 20 | sed 's/^/    /'
      fail "$id" "exit $rc${counts:+, $counts} in $(since "$T")s (output: $id.out)"
    fi
  done
fi

[ "$DO_E2E" = 1 ] || { FINISHED=1; exit 0; }

# ---------------------------------------------------------------- the C demo for Windows
need_python_and_node
ensure_qwen || abort "could not install @qwen-code/qwen-code@$QWEN_VERSION with npm"
T=$(date +%s%N)
case ${WIN_DEMO:-} in
  "")
    DEMO=$ROOT/target/c-mingw/qcdemo.exe
    # The demo links the library's debug DLL, which shares every dependency with the
    # test binaries above (a release build would compile them all a second time).
    DBG=$TARGET_DIR/$TARGET/debug
    (cd "$ROOT" && cargo build --locked --target "$TARGET" --lib --bins) > "$RUN/cargo-lib.log" 2>&1 \
      || { tail -n 20 "$RUN/cargo-lib.log" | sed 's/^/    /'; abort "cargo build --target $TARGET --lib --bins failed"; }
    MAKE_ARGS=(PLATFORM=mingw LIBDIR="$DBG")
    if make_examples_c "$RUN/make.log" "${MAKE_ARGS[@]}" && [ -f "$DEMO" ]; then
      pass demo-build "$DEMO (make ${MAKE_ARGS[*]}) in $(since "$T")s"
    else
      tail -n 20 "$RUN/make.log" | sed 's/^/    /'
      abort "make -C examples/c ${MAKE_ARGS[*]} did not produce $DEMO"
    fi
    DEMO_CMD=(wine "$DEMO")
    # qwen_companion.dll: next to the demo, or on the Windows PATH from cargo's output.
    if [ ! -f "${DEMO%/*}/qwen_companion.dll" ]; then
      for d in "$TARGET_DIR/$TARGET/release" "$ROOT/target/$TARGET/release"; do
        [ -f "$d/qwen_companion.dll" ] && { WINEPATH="$(qc_win_path "$d");$WINEPATH"; break; }
      done
    fi
    ;;
  standin)
    DEMO_CMD=("$PYTHON" "$ROOT/tests/e2e/standin_ide.py")
    pass demo-build "the library-free stand-in tests/e2e/standin_ide.py (WIN_DEMO=standin)"
    ;;
  *)
    [ -f "$WIN_DEMO" ] || abort "WIN_DEMO=$WIN_DEMO: no such file"
    case $WIN_DEMO in *.exe) DEMO_CMD=(wine "$WIN_DEMO") ;; *) DEMO_CMD=("$WIN_DEMO") ;; esac
    pass demo-build "using $WIN_DEMO"
    ;;
esac

# ---------------------------------------------------------------- the isolated world
# Windows programs see %USERPROFILE% = C:\users\<user> of the private prefix (Wine sets it
# from the prefix, not from the environment): its .qwen is emptied for every run.
PROF=$WINEPREFIX/drive_c/users/$(id -un)
[ -d "$PROF" ] || abort "no user profile folder $PROF in the prefix"
rm -rf "$PROF/.qwen" && mkdir -p "$PROF/.qwen" || abort "cannot reset $PROF/.qwen"
qwen_settings ide > "$PROF/.qwen/settings.json"
WS=$RUN/ws
mkdir -p "$WS" "$RUN/home"
WS_WIN=$(qc_win_path "$WS")
TAG=$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')
ACCEPT_FILE=$WS/e2e_accept.txt
ACCEPT_WIN=$WS_WIN\\e2e_accept.txt
TOKEN=WIN_ACCEPT_$TAG
# Linux side of the environment (Windows programs get their own from the prefix).
BASE_ENV=(PATH="$SYS_PATH" HOME="$RUN/home" USER="$(id -un)" LANG=C.UTF-8
  WINEPREFIX="$WINEPREFIX" WINEDEBUG="$WINEDEBUG" WINEDLLOVERRIDES="$WINEDLLOVERRIDES"
  WINEPATH="$WINEPATH" NODE_SKIP_PLATFORM_CHECK=1)
BASE_DEMO_HOME=$RUN/home
[ "${WIN_DEMO:-}" = standin ] && BASE_DEMO_HOME=$PROF   # it writes $HOME/.qwen/ide

start_fake_model "$ROOT/tests/e2e/fake_model.py" env -i PATH="$SYS_PATH" HOME="$RUN/home" LANG=C.UTF-8

# ---------------------------------------------------------------- demo (IDE side)
T=$(date +%s%N)
DEMO_WS=$WS_WIN
start_peer demo env -i "${BASE_ENV[@]}" HOME="$BASE_DEMO_HOME" "${DEMO_CMD[@]}" ide --workspace "$DEMO_WS"
DEMO_PID=${PEER_PID[demo]}
WATCH_DEMO=1
if ! wait_json "$RUN/demo.out" 0 --eq event=ready; then
  if gap=$(wine_gap "$RUN/demo.err"); then
    for id in win-lock win-cli win-connect win-diff win-accept win-stop win-bridge-register win-bridge win-bridge-call win-sessions; do
      [ "$HAS_DEMO" = 1 ] || case $id in win-bridge*|win-sessions) continue ;; esac
      skip_check "$id" "the demo under Wine: $gap"
    done
    FINISHED=1; exit 0
  fi
  abort "the demo never printed its ready line ($WHY)"
fi
READY=$JSON_LINE
IDE_PORT=$(jget "$READY" port)
LOCK_FILE=$(jget "$READY" lockFile)
LOCK_LINUX=$PROF/.qwen/ide/$IDE_PORT.lock
log "demo ready in $(since "$T")s: $READY"
if [ "${WIN_DEMO:-}" = standin ]; then
  spawn /dev/null "$RUN/holder.out" "$RUN/holder.err" setsid env -i "${BASE_ENV[@]}" wine "$QC_WIN_NODE" -e \
    "require('fs').writeFileSync(process.argv[1], String(process.pid)); setInterval(() => {}, 1e9)" \
    "$(qc_win_path "$RUN/holder.pid")"
  wait_until test -s "$RUN/holder.pid" || abort "the Windows pid holder did not start ($WHY)"
  python3 -c 'import json,sys; p=sys.argv[1]; d=json.load(open(p)); d["ppid"]=int(sys.argv[2]); json.dump(d,open(p,"w"))' \
    "$LOCK_LINUX" "$(cat "$RUN/holder.pid")" || abort "cannot rewrite the stand-in's lock file"
fi
if LOCK_REPORT=$(python3 - "$LOCK_LINUX" "$IDE_PORT" "$DEMO_WS" <<'PY' 2>&1
import json, sys
path, port, ws = sys.argv[1], int(sys.argv[2]), sys.argv[3]
lock = json.load(open(path))
problems = []
if lock.get("port") != port: problems.append(f"port {lock.get('port')!r} != {port}")
wp = lock.get("workspacePath")
paths = wp if isinstance(wp, list) else str(wp).split(";")
if ws not in paths: problems.append(f"workspacePath {wp!r} lacks {ws!r}")
if not lock.get("authToken"): problems.append("no authToken")
if not (lock.get("ideInfo") or {}).get("name"): problems.append("no ideInfo.name")
if not isinstance(lock.get("ppid"), int): problems.append("no ppid")
print("; ".join(problems) or f"port {port}, workspacePath {wp!r}, ppid {lock['ppid']}, ideInfo {lock['ideInfo']}")
sys.exit(1 if problems else 0)
PY
); then
  pass win-lock "%USERPROFILE%\\.qwen\\ide\\$IDE_PORT.lock ($LOCK_FILE): $LOCK_REPORT"
else
  fail win-lock "lock file $LOCK_LINUX ($LOCK_FILE): $LOCK_REPORT"
fi

# ---------------------------------------------------------------- the CLI (Windows Node)
QWEN_JS=$(qc_win_path "$QWEN_PKG/cli-entry.js")   # the `qwen` command (package.json bin)
PRELOAD=$(qc_win_path "$HERE/node-wine-keepalive.cjs")
# QWEN_CODE_NO_RELAUNCH: the CLI normally starts a second node.exe of itself
# with a larger heap (and sets this variable in that child). Under Wine that
# spawn failed now and then ("Fatal error: Failed to relaunch the CLI
# process."), so the suite runs the CLI as that child would run: one process.
QWEN_ENV=("${BASE_ENV[@]}" NODE_OPTIONS="--require $PRELOAD" QWEN_CODE_NO_RELAUNCH=true
  QWEN_USAGE_STATISTICS_ENABLED=0 QWEN_TELEMETRY_ENABLED=0
  NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost)

T=$(date +%s%N)
spawn -C "$WS" /dev/null "$RUN/version.out" "$RUN/version.err" env -i "${QWEN_ENV[@]}" wine "$QC_WIN_NODE" "$QWEN_JS" --version
VPID=$LAST_PID
wait_exit "$VPID" "$STEP_TIMEOUT"
VERSION=$(tr -d '\r' < "$RUN/version.out")
if [ "$RC" = 0 ] && [ "$VERSION" = "$QWEN_VERSION" ]; then
  pass win-cli "wine node.exe cli-entry.js --version -> $VERSION in $(since "$T")s"
elif gap=$(wine_gap "$RUN/version.err"); then
  for id in win-cli win-connect win-diff win-accept win-bridge win-bridge-call; do
    [ "$HAS_DEMO" = 1 ] || case $id in win-bridge*) continue ;; esac
    skip_check "$id" "the CLI under Windows Node: $gap"
  done
else
  fail win-cli "exit $RC, printed '$VERSION' (want $QWEN_VERSION): $(tail -n 3 "$RUN/version.err")"
fi

if [ "${RESULT[win-cli]:-}" = pass ]; then
  SID=$(new_uuid)
  DEBUG_LOG=$PROF/.qwen/debug/$SID.txt
  fake_model_args "$SID" default win-dummy-key
  "$PYTHON" "$HUTIL" submit-line stream-json "E2E_WRITE path=$ACCEPT_WIN content=$TOKEN" > "$RUN/qwen.in"
  T=$(date +%s%N)
  spawn -C "$WS" "$RUN/qwen.in" "$RUN/qwen.out" "$RUN/qwen.err" setsid env -i "${QWEN_ENV[@]}" QWEN_CODE_IDE_SERVER_PORT="$IDE_PORT" \
    wine "$QC_WIN_NODE" "$QWEN_JS" --input-format stream-json --output-format stream-json "${QWEN_ARGS[@]}"
  QWEN_PID=$LAST_PID
  connected() { [ -f "$DEBUG_LOG" ] && grep -q 'Discovered .* tools from IDE' "$DEBUG_LOG"; }
  if wait_until connected; then
    pass win-connect "$(grep -m1 -o 'Discovered .* tools from IDE.*' "$DEBUG_LOG" | tr -d '\r') after $(since "$T")s"
  elif gap=$(wine_gap "$RUN/qwen.err"); then
    skip_check win-connect "$gap"
  else
    fail win-connect "no 'Discovered … tools from IDE' in the debug log ($WHY); IDE lines: $(grep -h '\[IDE\]' "$DEBUG_LOG" 2>/dev/null | tail -n 3 | tr -d '\r' | tr '\n' ' ')"
  fi
  if wait_json "$RUN/demo.out" 0 --eq event=diff_opened; then
    FP=$(jget "$JSON_LINE" filePath)
    NC=$(jget "$JSON_LINE" newContent)
    if [ "${FP,,}" = "${ACCEPT_WIN,,}" ] && [ "$NC" = "$TOKEN" ]; then
      pass win-diff "openDiff $FP after $(since "$T")s"
    else
      fail win-diff "openDiff for '$FP' with '$NC' (want '$ACCEPT_WIN' with '$TOKEN')"
    fi
    # The user edits the proposal in the editor, then accepts: the CLI must write exactly
    # the edited text (accept-from FILE PATH: FILE as the demo sees paths).
    printf '%s\n// edited in the IDE on Windows\n' "$TOKEN" > "$RUN/edited.txt"
    EDITED=$RUN/edited.txt
    [ "${DEMO_CMD[0]}" = wine ] && EDITED=$(qc_win_path "$RUN/edited.txt")
    to_peer demo "accept-from $EDITED $FP"
    T=$(date +%s%N)
    accepted() { file_is "$ACCEPT_FILE" "$RUN/edited.txt" && grep -q '"type":"result"' "$RUN/qwen.out"; }
    if wait_until accepted; then
      pass win-accept "the CLI wrote exactly the edited text to $ACCEPT_WIN and ended the turn $(since "$T")s after the accept"
    else
      fail win-accept "file $(if [ -f "$ACCEPT_FILE" ]; then echo "holds '$(head -c 80 "$ACCEPT_FILE")'"; else echo missing; fi), result line: $(grep -c '"type":"result"' "$RUN/qwen.out")"
    fi
  else
    if gap=$(wine_gap "$RUN/qwen.err"); then
      skip_check win-diff "$gap"; skip_check win-accept "$gap"
    else
      fail win-diff "no diff_opened from the demo ($WHY)"
      fail win-accept "no diff to accept"
    fi
  fi
  wait_exit "$QWEN_PID" 30
  log "the CLI exited with status $RC"
fi

# ---------------------------------------------------------------- stop
to_peer demo stop
close_peer demo
WATCH_DEMO=0
peer_exit_status demo
DRC=$?
if [ "$DRC" = 0 ] && [ ! -e "$LOCK_LINUX" ]; then
  pass win-stop "the demo exited 0 and removed its lock file"
else
  fail win-stop "demo exit status $DRC, lock file $( [ -e "$LOCK_LINUX" ] && echo 'still there' || echo removed)"
fi
# ---------------------------------------------------------------- plugins: the MCP bridge
# The demo as a plugin host (`plugins serve`), its qwen-companion-plugins entry in the
# user settings (`plugins register-mcp --bridge <Windows path>`), and the Windows CLI
# starting qc-mcp-bridge.exe from that entry: `qwen mcp list`, then a headless call.
# demo_run NAME ARGS...: the demo once, in $WS, output to $RUN/NAME.out/.err -> RC.
demo_run() {
  local name=$1; shift
  spawn -C "$WS" /dev/null "$RUN/$name.out" "$RUN/$name.err" env -i "${BASE_ENV[@]}" "${DEMO_CMD[@]}" "$@"
  wait_exit "$LAST_PID" "$STEP_TIMEOUT"
}
if [ "$HAS_DEMO" = 1 ]; then
  SERVER=qwen-companion-plugins
  TOOL=mcp__${SERVER}__hello_say_hello
  BRIDGE=${DEMO_CMD[-1]%/*}/qc-mcp-bridge.exe
  BRIDGE_WIN=$(qc_win_path "$BRIDGE")
  SETTINGS=$PROF/.qwen/settings.json
  T=$(date +%s%N)
  INSTALLED=""
  for p in hello todo-quadrant; do
    demo_run "plugins-install-$p" plugins install "$(qc_win_path "$ROOT/examples/plugins/$p")"
    [ "$RC" = 0 ] && grep -q '"ok":true' "$RUN/plugins-install-$p.out" && INSTALLED+=" $p"
  done
  demo_run plugins-register plugins register-mcp --scope user --bridge "$BRIDGE_WIN" --always-load-tools
  if [ "$INSTALLED" != " hello todo-quadrant" ]; then
    fail win-bridge-register "plugins install: only '${INSTALLED# }' installed: $(cat "$RUN"/plugins-install-*.out "$RUN"/plugins-install-*.err | tr -d '\r' | head -c 400)"
  elif [ ! -f "$BRIDGE" ]; then
    fail win-bridge-register "no $BRIDGE (make copies it next to the demo when cargo built it)"
  elif [ "$RC" != 0 ]; then
    fail win-bridge-register "register-mcp exit $RC: $(head -c 300 "$RUN/plugins-register.out") $(head -c 300 "$RUN/plugins-register.err")"
  elif REG_REPORT=$(python3 - "$SETTINGS" "$BRIDGE_WIN" "$SERVER" <<'PY' 2>&1
import json, re, sys
path, bridge, server = sys.argv[1:4]
s = json.load(open(path, encoding="utf-8"))
e = (s.get("mcpServers") or {}).get(server)
problems = []
if not e: problems.append(f"no mcpServers.{server} in {list(s)}")
else:
    cmd = e.get("command", "")
    if not re.match(r"^[A-Za-z]:\\", cmd): problems.append(f"command {cmd!r} is not a Windows path")
    if cmd.lower() != bridge.lower(): problems.append(f"command {cmd!r} != {bridge!r}")
    if e.get("args") != ["plugins"]: problems.append(f"args {e.get('args')!r}")
    if e.get("alwaysLoadTools") is not True: problems.append("no alwaysLoadTools")
if ((s.get("security") or {}).get("auth") or {}).get("selectedType") != "openai": problems.append("security.auth lost")
if not (s.get("ide") or {}).get("enabled"): problems.append("ide lost")
print("; ".join(problems) or f"command {e['command']!r}, args {e['args']!r}; other keys kept")
sys.exit(1 if problems else 0)
PY
  ); then
    pass win-bridge-register "plugins hello, todo-quadrant installed; %USERPROFILE%\\.qwen\\settings.json: $REG_REPORT ($(since "$T")s)"
  else
    fail win-bridge-register "$SETTINGS: $REG_REPORT"
  fi

  # The host: its lock file tells the bridge where the plugin MCP server listens.
  T=$(date +%s%N)
  start_peer plugins env -i "${BASE_ENV[@]}" "${DEMO_CMD[@]}" plugins serve --cwd "$WS_WIN"
  HOST_UP=0
  if wait_json "$RUN/plugins.out" 0 --eq event=ready; then
    HOST_READY=$JSON_LINE
    HOST_WINPID=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["mcp"]["env"]["QWEN_COMPANION_PLUGINS_PID"])' "$HOST_READY" 2>/dev/null)
    HOST_LOCK=$PROF/.qwen/companion/plugins-mcp/$HOST_WINPID.lock
    if [ -n "$HOST_WINPID" ] && [ -f "$HOST_LOCK" ]; then
      HOST_UP=1
      log "plugin host ready in $(since "$T")s (Windows pid $HOST_WINPID, lock $HOST_LOCK)"
    else
      fail win-bridge "the host's ready line has mcp.env '$HOST_WINPID', no lock file $HOST_LOCK: $(printf '%s' "$HOST_READY" | short)"
    fi
  elif gap=$(wine_gap "$RUN/plugins.err"); then
    skip_check win-bridge "plugins serve under Wine: $gap"; skip_check win-bridge-call "plugins serve under Wine: $gap"
  else
    fail win-bridge "plugins serve printed no ready line ($WHY): $(tr -d '\r' < "$RUN/plugins.err" | head -c 300)"
  fi

  if [ "$HOST_UP" = 1 ] && [ "${RESULT[win-cli]:-}" = pass ]; then
    # qwen mcp list: a real initialize through the bridge, one line per server.
    T=$(date +%s%N)
    spawn -C "$WS" /dev/null "$RUN/mcp-list.out" "$RUN/mcp-list.err" setsid env -i "${QWEN_ENV[@]}" \
      wine "$QC_WIN_NODE" "$QWEN_JS" mcp list
    wait_exit "$LAST_PID" "$STEP_TIMEOUT"
    LINE=$(grep -F "$SERVER" "$RUN/mcp-list.out" | tr -d '\r' | sed 's/\x1b\[[0-9;]*m//g')
    if [ "$RC" = 0 ] && printf '%s' "$LINE" | grep -q "✓ $SERVER: .*qc-mcp-bridge.exe plugins (stdio) - Connected"; then
      pass win-bridge "qwen mcp list (Windows Node) started the bridge: $LINE ($(since "$T")s)"
    elif gap=$(wine_gap "$RUN/mcp-list.err"); then
      skip_check win-bridge "$gap"
    else
      fail win-bridge "qwen mcp list exit $RC, line '${LINE:-none}': $(tr -d '\r' < "$RUN/mcp-list.out" | sed 's/\x1b\[[0-9;]*m//g' | tr '\n' '|' | head -c 400)"
    fi

    # A headless prompt: the fake model is given the plugin tools and calls hello's.
    SID=$(new_uuid)
    BRIDGE_DEBUG_LOG=$PROF/.qwen/debug/$SID.txt
    fake_model_args "$SID" yolo win-dummy-key
    M0=$(lines_of "$RUN/model.jsonl")
    T=$(date +%s%N)
    spawn -C "$WS" /dev/null "$RUN/mcp-call.out" "$RUN/mcp-call.err" setsid env -i "${QWEN_ENV[@]}" \
      QWEN_CODE_SUPPRESS_YOLO_WARNING=1 wine "$QC_WIN_NODE" "$QWEN_JS" "${QWEN_ARGS[@]}" \
      -p "E2E_CALL name=$TOOL args={\"name\":\"Windows$TAG\"}"
    CALL_PID=$LAST_PID
    if ! wait_json "$RUN/model.jsonl" "$M0" --eq decision.why=call; then
      if gap=$(wine_gap "$RUN/mcp-call.err"); then skip_check win-bridge-call "$gap"
      else fail win-bridge-call "the prompt never reached the model ($WHY): $(tr -d '\r' < "$RUN/mcp-call.err" | tail -n 3)"; fi
    elif ! TOOLS=$(python3 -c 'import json,sys; e=json.loads(sys.argv[1]); n=[t["function"]["name"] for t in e["body"].get("tools",[])]; m=[x for x in n if x.startswith("mcp__")]; print(" ".join(m)); sys.exit(0 if sys.argv[2] in n else 1)' "$JSON_LINE" "$TOOL"); then
      fail win-bridge-call "the model was not given $TOOL (MCP tools: '$TOOLS')"
    elif ! wait_json "$RUN/model.jsonl" "$M0" --eq "decision.why=tool result" --contains "Hello, Windows$TAG!"; then
      fail win-bridge-call "the plugin's result never reached the model ($WHY)"
    else
      wait_exit "$CALL_PID" "$STEP_TIMEOUT"
      if [ "$RC" = 0 ] && grep -qF "E2E_FINAL_ANSWER tool_result=Hello, Windows$TAG!" "$RUN/mcp-call.out"; then
        pass win-bridge-call "the model got [$TOOLS], called $TOOL; \"Hello, Windows$TAG!\" reached the model and the answer ($(since "$T")s)"
      else
        fail win-bridge-call "headless qwen exit $RC, output: $(tr -d '\r' < "$RUN/mcp-call.out" | head -c 300)"
      fi
    fi
  elif [ "$HOST_UP" = 1 ]; then
    fail win-bridge "the CLI did not start (win-cli: ${RESULT[win-cli]:-undecided})"
    fail win-bridge-call "the CLI did not start"
  fi
  # Without a host neither CLI check ran (fail is a no-op for a check already decided).
  fail win-bridge "not run: no plugin host"; fail win-bridge-call "not run: no plugin host"
  to_peer plugins stop
  close_peer plugins
  peer_exit_status plugins
  HRC=$?
  log "the plugin host exited with status $HRC; lock file $( [ -n "${HOST_LOCK:-}" ] && [ -e "$HOST_LOCK" ] && echo 'still there' || echo gone)"
fi

# ---------------------------------------------------------------- cross-session messaging
# Two library participants on Windows: a listener (its inbox a named pipe), `ps --json`
# lists it, a one-shot sender delivers, the listener prints the message, the sender gets
# the final receipt; `stop` unregisters the listener.
if [ "$HAS_DEMO" = 1 ]; then
  T=$(date +%s%N)
  SNAME=win-a-$TAG
  start_peer sess-a env -i "${BASE_ENV[@]}" "${DEMO_CMD[@]}" sessions listen --name "$SNAME"
  if ! wait_json "$RUN/sess-a.out" 0 --eq event=ready; then
    if gap=$(wine_gap "$RUN/sess-a.err"); then skip_check win-sessions "sessions listen under Wine: $gap"
    else fail win-sessions "sessions listen printed no ready line ($WHY): $(tr -d '\r' < "$RUN/sess-a.err" | head -c 300)"; fi
  else
    S_READY=$JSON_LINE
    S_SID=$(jget "$S_READY" sessionId) S_IPC=$(jget "$S_READY" ipcPath) S_REC=$(jget "$S_READY" record)
    log "listener ready in $(since "$T")s: $S_READY"
    demo_run sess-ps sessions ps --json
    PS_RC=$RC
    BODY="hello from Windows $TAG"
    T=$(date +%s%N)
    demo_run sess-send sessions send "$SNAME" "$BODY" --from-mode prompting --wait 30
    SEND_RC=$RC
    if ! [[ $S_IPC == '\\.\pipe\qwen-socks-'* ]]; then
      fail win-sessions "the listener's inbox is '$S_IPC', not a named pipe \\\\.\\pipe\\qwen-socks-…"
    elif ! PS_REPORT=$(python3 - "$RUN/sess-ps.out" "$S_SID" "$S_IPC" "$SNAME" <<'PY' 2>&1
import json, sys
path, sid, ipc, name = sys.argv[1:5]
rows = [json.loads(l) for l in open(path, encoding="utf-8") if l.strip()]
mine = [r for r in rows if r.get("sessionId") == sid]
if len(mine) != 1 or mine[0].get("ipcPath") != ipc or mine[0].get("name") != name:
    print(f"ps --json lacks {sid} ({name}, {ipc}): {rows!r}"[:400]); sys.exit(1)
print(f"{len(rows)} record(s), {name} pid {mine[0]['pid']} kind {mine[0]['kind']}")
PY
    ) || [ "$PS_RC" != 0 ]; then
      fail win-sessions "sessions ps --json (exit $PS_RC): $PS_REPORT"
    elif [ "$SEND_RC" != 0 ] || ! SEND_REPORT=$(python3 - "$RUN/sess-send.out" "$SNAME" "$S_SID" <<'PY' 2>&1
import json, sys
path, name, sid = sys.argv[1:4]
ev = [json.loads(l) for l in open(path, encoding="utf-8") if l.strip()]
kinds = [(e["event"], e.get("status")) for e in ev]
ok = kinds == [("sent", None), ("receipt", "delivered")] and ev[0]["toSessionId"] == sid and ev[1]["msgId"] == ev[0]["msgId"]
print(ev[0]["msgId"] if ok else f"events {kinds}: {ev!r}"[:400])
sys.exit(0 if ok else 1)
PY
    ); then
      fail win-sessions "sessions send exit $SEND_RC: ${SEND_REPORT:-} $(tr -d '\r' < "$RUN/sess-send.err" | tail -n 3)"
    elif ! wait_json "$RUN/sess-a.out" 0 --eq event=message --eq frame.msgId="$SEND_REPORT" --eq frame.message.content="$BODY"; then
      fail win-sessions "the listener never printed message $SEND_REPORT ($WHY)"
    else
      SESS_OK=1
    fi
    to_peer sess-a stop
    close_peer sess-a
    peer_exit_status sess-a
    LRC=$?
    if [ "${SESS_OK:-0}" = 1 ]; then
      S_REC_LINUX=$PROF/.qwen/sessions/${S_REC##*[\\/]}
      if [ "$LRC" = 0 ] && [ ! -e "$S_REC_LINUX" ]; then
        pass win-sessions "listener $SNAME on $S_IPC; ps --json: $PS_REPORT; send -> sent + delivered receipt, the listener printed \"$BODY\" ($(since "$T")s); stop unregistered it"
      else
        fail win-sessions "message delivered, but the listener exited $LRC, record $S_REC_LINUX $( [ -e "$S_REC_LINUX" ] && echo 'still there' || echo gone)"
      fi
    fi
  fi
fi
FINISHED=1
