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
#                  defaults are every module that passes whole under Wine 8:
#                  lib: the OS layer, shared, ide, the plugin host/install/ipc/process,
#                  the bridge's naming and schema, the sessions' controllers, frames,
#                  gate, limits, names, outbox and participant; ide: http_limits;
#                  plugins: fuzz, hostile_fixtures, manifest, views, windows. Left out
#                  (they fail on Windows or under Wine; see the report of the session
#                  that set this): lib plugins::{manifest,pdf,views}, mcp_bridge::
#                  {discovery,registration,settings,tools}, sessions::{inbox,net,proc,
#                  registry}; ide companion; plugins runtime
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
WIN_IDE_FILTERS=${WIN_IDE_FILTERS-http_limits::}
WIN_PLUGINS_FILTERS=${WIN_PLUGINS_FILTERS-fuzz:: hostile_fixtures:: manifest:: views:: windows::}
DEMO_PID="" LOCK_LINUX=""

CHECKS=(setup)
[ "$DO_CARGO" = 1 ] && CHECKS+=(cargo-build)
[ "$DO_E2E" = 1 ] && CHECKS+=(demo-build win-lock win-cli win-connect win-diff win-accept win-stop)
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
    for id in win-lock win-cli win-connect win-diff win-accept win-stop; do skip_check "$id" "the demo under Wine: $gap"; done
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
QWEN_ENV=("${BASE_ENV[@]}" NODE_OPTIONS="--require $PRELOAD"
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
  for id in win-cli win-connect win-diff win-accept; do skip_check "$id" "the CLI under Windows Node: $gap"; done
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
FINISHED=1
