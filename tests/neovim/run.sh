#!/usr/bin/env bash
# Headless Neovim test of examples/neovim against the real library.
#
#   tests/neovim/run.sh            (from anywhere; installs/builds what it needs)
#
# 1. installs Debian's `neovim` with apt-get if `nvim` is missing (needs LuaJIT)
# 2. builds target/release/libqwen_companion.so if missing
# 3. checks the plugin's ffi.cdef declarations against include/qwen_companion.h
# 4. runs `nvim --headless -u NONE` with the plugin on the runtimepath and
#    tests/neovim/test_plugin.lua, in a temporary workspace (HOME, QWEN_HOME
#    and the lock dir all temporary), and checks from the outside with the
#    MCP client tests/c/mcp_client.py: lock file, env vars, ide/contextUpdate
#    (focused file, cursor, selection, closed file), openDiff shown in Neovim
#    then accepted / rejected / closed by the CLI / closed by the user /
#    accepted with :w, requests while Neovim is busy (2 s: answered late;
#    longer than the plugin's request_timeout_ms, 3000 here: the CLI gets the
#    library's timeout error, the timed-out requests are never handed to
#    Neovim, the orphaned view is refused and closed), stop with requests
#    waiting, and that stop removes the lock file. The plugin pulls diff
#    requests; no C callback is registered.
# First tests/neovim/test_platform.lua (file names, paths, shell lines and
# event watching of Linux, macOS and Windows, by OS name; no library).
# Before that, tests/neovim/test_core.lua in its own Neovim (own HOME and
# QWEN_HOME, the library found next to the plugin): the :Qwen* commands,
# setup's validation, :checkhealth qwen_companion's report, the plugin host
# with a fixture plugin (tests/neovim/fixtures/notify, installed with qcdemo),
# its MCP server and the user-scope registration, the registered entry run as
# Qwen Code runs it (tests/neovim/bridge_client.py: tools/list, a tools/call
# whose show_notification Neovim answers), on_start/on_stop, :QwenRun's env,
# the status line (CLIs connected with mcp_client.py, a pending diff, the
# last error). tests/neovim/test_health.lua: :checkhealth's qwen/node
# versions with fake programs. tests/neovim/test_prompt.lua (own HOME,
# QWEN_HOME, XDG folders): :QwenAdd's text and the exact bytes typed into
# the managed terminal (a raw-mode recorder stands in for qwen),
# :QwenToggle's states (right, bottom, float), the editor tools (byte →
# character columns, diagnostics, open file, open editors, selection, and
# the four called through the registered bridge), the log file and its
# rotation, the health report (a fixture and the real qc_health_json),
# the proposing CLI's label with two CLIs, :QwenCloseAllDiffs.
# tests/neovim/test_gemini.lua (own HOME, QWEN_HOME, TMPDIR): setup's cli,
# gemini_command and gemini_dir, :GeminiToggle/:GeminiRun (states, reuse,
# float, the env of every CLI served, the warning when Gemini CLI is not
# served), :QwenAdd into the agent terminal used last, cli = both / gemini
# (restart, discovery files, variables, the gemini health check, Gemini CLI's
# settings in :checkhealth), stop removing the discovery files. After the others: tests/neovim/test_install.lua
# (the installer against a loopback HTTP server serving $QC_DIST_DIR, default
# target/dist, as made by scripts/dist.sh: required, a missing archive is a
# failure) and tests/neovim/test_lazy.lua (the README's lazy.nvim spec run as
# lazy.nvim runs it: build, then startup with --noplugin; then as a package
# with setup() too), :helptags and every vimdoc link; then the Lua examples
# of the Markdown. It takes 50 to 70 s.
# The last line is `neovim: N passed, M failed`; exit status 1 on a failure.
#
# Env: PYTHON (python3), QC_TEST_TIMEOUT (seconds per wait, 30),
#      QC_KEEP_TMP=1 keeps the temporary directory, NVIM (nvim),
#      QC_NEOVIM_LIB (the library to test; default target/release/libqwen_companion.so),
#      QC_DIST_DIR (the release files; default target/dist).
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PY=${PYTHON:-python3}
NVIM=${NVIM:-nvim}
CLIENT="$ROOT/tests/c/mcp_client.py"
LIB=${QC_NEOVIM_LIB:-$ROOT/target/release/libqwen_companion.so}
T=${QC_TEST_TIMEOUT:-30}
# Every headless Neovim runs under `timeout -k 10`: SIGTERM at its limit, SIGKILL
# 10 s later. Neovim 0.7.2 (Debian 12's) can hang in its exit teardown after a
# deadly signal (checks.lua's end_job says how a test once caused one); a check
# then fails instead of the whole suite hanging.
RT=3000 # the plugin's request_timeout_ms in this test (the library's requestTimeoutMs)

PASS=0
FAIL=0
PIDS=()
NVIM_PID=
TMP=$(mktemp -d "${TMPDIR:-/tmp}/qc-neovim-test.XXXXXX")

cleanup() {
    local pid
    for pid in "${PIDS[@]}" $NVIM_PID; do
        kill -TERM "$pid" 2>/dev/null
    done
    for pid in "${PIDS[@]}" $NVIM_PID; do
        for _ in 1 2 3 4 5 6 7 8 9 10; do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.2
        done
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    if [ "${QC_KEEP_TMP:-0}" = 1 ]; then
        echo "kept $TMP"
    else
        rm -rf "$TMP"
    fi
}
NVIM_LOG="$TMP/nvim.log"
trap cleanup EXIT
trap 'echo "neovim: interrupted ($PASS passed, $FAIL failed)"; exit 130' INT
trap 'echo "neovim: interrupted ($PASS passed, $FAIL failed)"; exit 143' TERM

pass() { PASS=$((PASS + 1)); echo "ok   - $*"; }
fail() { FAIL=$((FAIL + 1)); echo "FAIL - $*"; }
finish() {
    echo "neovim: $PASS passed, $FAIL failed"
    [ "$FAIL" -eq 0 ]
    exit
}

# check NAME CMD... : CMD succeeds (its output is shown on failure)
check() {
    local name=$1
    shift
    if "$@" >"$TMP/check.out" 2>&1; then
        pass "$name"
    else
        fail "$name"
        sed 's/^/       /' "$TMP/check.out" | head -40
    fi
}

client() { "$PY" "$CLIENT" "$@"; }
expect() {
    local file=$1 name=$2
    shift 2
    check "$name" client expect "$file" "$@" --timeout "$T"
}
jeval() { client eval "$@"; }
# report_checks FILE: prints and counts the {"checks":[[name, ok, detail]...]} of FILE.
report_checks() {
    local f=$1
    "$PY" - "$f" >"$TMP/phase.out" <<'EOF'
import json, sys
for name, ok, detail in json.load(open(sys.argv[1], encoding="utf-8"))["checks"]:
    print(("ok   - " if ok else "FAIL - ") + "nvim: " + name)
    if not ok and detail:
        print("       " + detail.replace("\n", "\n       ")[:2000])
EOF
    cat "$TMP/phase.out"
    PASS=$((PASS + $(grep -c '^ok   - ' "$TMP/phase.out")))
    FAIL=$((FAIL + $(grep -c '^FAIL - ' "$TMP/phase.out")))
}
# report_run WHAT JSON LOG: the checks a Lua test wrote to JSON, or one
# failure with the end of its Neovim LOG when it wrote none.
report_run() {
    if [ -e "$2" ]; then
        report_checks "$2"
    else
        fail "$1 wrote its checks"
        tail -20 "$3" | sed 's/^/       /'
    fi
}
# run_plain NAME: tests/neovim/test_NAME.lua, with the plugin on the
# runtimepath and nothing else (its checks in $TMP/NAME/nv-NAME.json).
run_plain() {
    mkdir -p "$TMP/$1"
    QCNV_TMP="$TMP/$1" timeout -k 10 "$T" "$NVIM" --headless -u NONE -i NONE -n --cmd "set rtp^=$ROOT/examples/neovim" \
        -c "luafile $HERE/test_$1.lua" >"$TMP/nvim-$1.log" 2>&1 </dev/null
    report_run "test_$1.lua" "$TMP/$1/nv-$1.json" "$TMP/nvim-$1.log"
}
# phase NAME: waits for Neovim's $TMP/nv-NAME.json and reports its checks.
phase() {
    local f="$TMP/nv-$1.json" i=0
    while [ ! -e "$f" ]; do
        if [ -e "$TMP/nv-error.json" ]; then
            f="$TMP/nv-error.json"
            break
        fi
        if ! kill -0 "$NVIM_PID" 2>/dev/null || [ "$i" -ge $((T * 20)) ]; then
            fail "neovim reached phase '$1'"
            echo "       nvim output (last lines):"
            tail -20 "$NVIM_LOG" | sed 's/^/       /'
            finish
        fi
        sleep 0.05
        i=$((i + 1))
    done
    report_checks "$f"
    if [ "$f" = "$TMP/nv-error.json" ]; then
        tail -20 "$NVIM_LOG" | sed 's/^/       /'
        finish
    fi
}
go() { : >"$TMP/go-$1"; }

# --- prerequisites ---------------------------------------------------------
if ! command -v "$NVIM" >/dev/null 2>&1; then
    echo "# installing neovim (apt-get)"
    SUDO=
    [ "$(id -u)" -ne 0 ] && SUDO=sudo
    if ! { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq neovim; } >"$TMP/apt.log" 2>&1; then
        tail -20 "$TMP/apt.log"
        fail "install neovim with apt-get"
        finish
    fi
fi
if "$NVIM" --version | head -3 | grep -q LuaJIT; then
    pass "nvim is built with LuaJIT ($("$NVIM" --version | head -1))"
else
    fail "nvim is built with LuaJIT (the FFI is required)"
    finish
fi
if [ ! -f "$LIB" ]; then
    echo "# building the library (cargo build --release)"
    if ! (cd "$ROOT" && cargo build --release) >"$TMP/cargo.log" 2>&1; then
        tail -30 "$TMP/cargo.log"
        fail "cargo build --release"
        finish
    fi
fi
check "libqwen_companion.so is built" test -f "$LIB"

"$PY" "$HERE/check_cdef.py" "$ROOT" >"$TMP/cdef.out" 2>&1
sed 's/^\(ok   - \|FAIL - \)/\1cdef: /' "$TMP/cdef.out"
PASS=$((PASS + $(grep -c '^ok   - ' "$TMP/cdef.out")))
FAIL=$((FAIL + $(grep -c '^FAIL - ' "$TMP/cdef.out")))

# --- platform.lua: names, paths, shell lines and event watching of each OS ----
# (tests/neovim/test_platform.lua; no library needed)
run_plain platform

# --- :checkhealth's qwen/node versions (tests/neovim/test_health.lua) -------
run_plain health

# --- reaching the agent: :QwenAdd, the terminal, editor tools, log, health --
# (tests/neovim/test_prompt.lua, its own HOME, QWEN_HOME, XDG folders and
# workspace; a recorder program stands in for qwen in the terminal)
PR="$TMP/prompt"
mkdir -p "$PR/ws" "$PR/home" "$PR/qwen-home"
(
    cd "$PR/ws" || exit 1
    exec env HOME="$PR/home" QWEN_HOME="$PR/qwen-home" XDG_CONFIG_HOME="$PR/home/.config" \
        XDG_DATA_HOME="$PR/home/.local/share" XDG_STATE_HOME="$PR/home/.local/state" \
        XDG_CACHE_HOME="$PR/home/.cache" QWEN_COMPANION_LIB="$LIB" PYTHON="$PY" \
        QCNV_TMP="$PR" QCNV_WS="$PR/ws" QCNV_ROOT="$ROOT" QCNV_TIMEOUT="$T" \
        timeout -k 10 $((T * 4)) "$NVIM" --headless -u NONE -i NONE -n --cmd "set rtp^=$ROOT/examples/neovim" \
        -c "luafile $HERE/test_prompt.lua"
) >"$TMP/nvim-prompt.log" 2>&1 </dev/null
report_run test_prompt.lua "$PR/nv-prompt.json" "$TMP/nvim-prompt.log"
check "prompt: no Lua error in nvim's output" bash -c '! grep -E "E5108|E5113|Error executing|stack traceback" "$0"' "$TMP/nvim-prompt.log"
check "prompt: no lock file left" bash -c '! ls "$0"/ide/*.lock 2>/dev/null | grep -q .' "$PR/qwen-home"

# --- Gemini CLI: cli option, :GeminiToggle/:GeminiRun, :QwenAdd routing ----
# (tests/neovim/test_gemini.lua, its own HOME, QWEN_HOME, TMPDIR, XDG folders
# and workspace; a recorder program stands in for gemini and qwen)
GM="$TMP/gemini"
mkdir -p "$GM/ws" "$GM/home" "$GM/qwen-home" "$GM/tmp"
(
    cd "$GM/ws" || exit 1
    exec env -u GEMINI_CLI_HOME HOME="$GM/home" QWEN_HOME="$GM/qwen-home" TMPDIR="$GM/tmp" \
        XDG_CONFIG_HOME="$GM/home/.config" XDG_DATA_HOME="$GM/home/.local/share" \
        XDG_STATE_HOME="$GM/home/.local/state" XDG_CACHE_HOME="$GM/home/.cache" QWEN_COMPANION_LIB="$LIB" \
        QCNV_TMP="$GM" QCNV_WS="$GM/ws" QCNV_TIMEOUT="$T" \
        timeout -k 10 $((T * 4)) "$NVIM" --headless -u NONE -i NONE -n --cmd "set rtp^=$ROOT/examples/neovim" \
        -c "luafile $HERE/test_gemini.lua"
) >"$TMP/nvim-gemini.log" 2>&1 </dev/null
report_run test_gemini.lua "$GM/nv-gemini.json" "$TMP/nvim-gemini.log"
check "gemini: no Lua error in nvim's output" bash -c '! grep -E "E5108|E5113|Error executing|stack traceback" "$0"' "$TMP/nvim-gemini.log"
check "gemini: no discovery file or lock file left" \
    bash -c '! ls "$0"/gemini-ide/*.json "$1"/ide/*.lock "$2"/gemini/ide/*.json 2>/dev/null | grep -q .' "$GM" "$GM/qwen-home" "$GM/tmp"

# --- workspace and Neovim --------------------------------------------------
export QCNV_TMP="$TMP" QCNV_WS="$TMP/ws" QCNV_TIMEOUT="$T" QCNV_REQUEST_TIMEOUT_MS="$RT"
WS=$QCNV_WS
mkdir -p "$WS" "$TMP/home" "$TMP/qwen-home" "$TMP/locks"
printf '#include <stdio.h>\nint main(void) {\n    return 42;\n}\n' >"$WS/main.c"
printf 'other\n' >"$WS/other.txt"
export MAIN="$WS/main.c" NEWF="$WS/new.txt" OTHER="$WS/other.txt"

# --- core: commands, setup validation, checkhealth, plugin host + MCP ------
# (tests/neovim/test_core.lua, its own Neovim with its own HOME/QWEN_HOME; the
# library is found next to the plugin unless QC_NEOVIM_LIB names another)
CQH="$TMP/core-qwen-home"
mkdir -p "$TMP/core-home" "$CQH" "$TMP/plugins"
QCDEMO="$ROOT/target/c/qcdemo"
# qcdemo installs the fixture plugin (make rebuilds it when the library or its sources changed)
if ! make -C "$ROOT/examples/c" NO_CARGO=1 >"$TMP/qcdemo-build.log" 2>&1 && [ ! -x "$QCDEMO" ]; then
    tail -20 "$TMP/qcdemo-build.log"
fi
check "the fixture plugin installs into the plugins dir (qcdemo plugins install)" \
    "$QCDEMO" plugins install "$HERE/fixtures/notify" --dir "$TMP/plugins"
CORE_LIB_ENV=()
if [ "$LIB" != "$ROOT/target/release/libqwen_companion.so" ]; then
    CORE_LIB_ENV=(QWEN_COMPANION_LIB="$LIB")
fi
NVIM_LOG="$TMP/nvim-core.log"
(
    cd "$WS" || exit 1
    exec env -u QWEN_COMPANION_LIB HOME="$TMP/core-home" QWEN_HOME="$CQH" XDG_CONFIG_HOME="$TMP/core-home/.config" \
        XDG_DATA_HOME="$TMP/core-home/.local/share" XDG_STATE_HOME="$TMP/core-home/.local/state" \
        "${CORE_LIB_ENV[@]}" \
        "$NVIM" --headless -u NONE -i NONE -n \
        --cmd "set rtp^=$ROOT/examples/neovim" \
        -c "luafile $HERE/test_core.lua"
) >"$NVIM_LOG" 2>&1 </dev/null &
NVIM_PID=$!

phase core-started
CSTARTED=$(cat "$TMP/nv-core-started.json")
CLOCK=$(client get "$CSTARTED" lock_file)
check "settings.json: the entry starts the bridge copied to \$QWEN_HOME/companion/bin, args [plugins], no port or token" \
    "$PY" - "$CQH/settings.json" "$CQH/companion/bin/qc-mcp-bridge" <<'EOF'
import json, re, sys
text = open(sys.argv[1], encoding="utf-8").read()
print(text)
text = re.sub(r"^\s*//.*$", "", text, flags=re.M)
e = json.loads(re.sub(r"/\*.*?\*/", "", text))["mcpServers"]["qwen-companion-plugins"]
sys.exit(0 if e["command"] == sys.argv[2] and e["args"] == ["plugins"] and "url" not in e and "headers" not in e else 1)
EOF
CSTATE="$TMP/core-mcp-state.json"
CNOTES="$TMP/core-notifications.jsonl"
check "an MCP client connects to Neovim's companion" client init --lock "$CLOCK" --state "$CSTATE"
client listen --state "$CSTATE" --out "$CNOTES" &
PIDS+=($!)
expect "$CNOTES" "... and opens its stream" 'e.get("_stream")=="open" and e["status"]==200'
go core-client
phase core-clients
RES=$(env -C "$WS" HOME="$TMP/core-home" QWEN_HOME="$CQH" "$PY" "$HERE/bridge_client.py" "$CQH/settings.json" "$WS" \
    nvim-notify_notify '{"title":"From Qwen","body":"through the bridge"}' --timeout "$T" 2>&1)
check "the registered entry (qc-mcp-bridge) lists the plugin tool and plugins-status" \
    jeval '"nvim-notify_notify" in d["tools"] and "plugins-status" in d["tools"]' "$RES"
check "a tools/call through it: the plugin's show_notification was answered by Neovim ({\"shown\":true})" \
    jeval 'not d["result"].get("isError") and d["result"]["content"][0]["text"]=="host answered {\"shown\":true}"' "$RES"
go core-notified
phase core-notification
RES=$(client call --state "$CSTATE" openDiff '{"filePath":"'"$WS/main.c"'","newContent":"proposed\n"}' 2>&1)
check "openDiff to Neovim answers content: []" jeval 'd["content"] == [] and not d.get("isError")' "$RES"
go core-diff
phase core-diff
expect "$CNOTES" ":QwenDiffReject -> ide/diffRejected" \
    'e.get("method")=="ide/diffRejected" and e["params"]["filePath"]==env["MAIN"]'
phase core-stopped
check "no plugins MCP lock file is left" bash -c '! ls "$0"/companion/plugins-mcp/*.lock 2>/dev/null' "$CQH"
check "the companion's lock file is gone" test ! -e "$CLOCK"
for _ in $(seq 1 $((T * 10))); do
    kill -0 "$NVIM_PID" 2>/dev/null || break
    sleep 0.1
done
if kill -0 "$NVIM_PID" 2>/dev/null; then
    fail "nvim (core) exits after its test script"
else
    wait "$NVIM_PID"
    RC=$?
    check "nvim (core) exits 0" test "$RC" -eq 0
fi
NVIM_PID=
check "no Lua error in nvim's output (core)" bash -c '! grep -E "E5108|E5113|Error executing|stack traceback" "$0"' "$NVIM_LOG"
NVIM_LOG="$TMP/nvim.log"

(
    cd "$WS" || exit 1
    exec env HOME="$TMP/home" QWEN_HOME="$TMP/qwen-home" XDG_CONFIG_HOME="$TMP/home/.config" \
        XDG_DATA_HOME="$TMP/home/.local/share" XDG_STATE_HOME="$TMP/home/.local/state" \
        QWEN_COMPANION_LIB="$LIB" \
        "$NVIM" --headless -u NONE -i NONE -n \
        --cmd "set rtp^=$ROOT/examples/neovim" \
        -c "luafile $HERE/test_plugin.lua"
) >"$TMP/nvim.log" 2>&1 </dev/null &
NVIM_PID=$!

phase started
STARTED=$(cat "$TMP/nv-started.json")
LOCK=$(client get "$STARTED" lock_file)
PORT=$(client get "$STARTED" port)
export LOCK PORT
check "lock file exists, mode 0600" test "$(stat -c %a "$LOCK" 2>/dev/null)" = 600
check "lock file: port, workspacePath, ideInfo, ppid = nvim" jeval \
    'd["port"]==int(env["PORT"]) and d["workspacePath"]==env["QCNV_WS"] and d["ideInfo"]["name"]=="neovim" and d["ideInfo"]["displayName"]=="Neovim" and d["ppid"]=='"$NVIM_PID"' and len(d["authToken"])>=32' \
    "$(cat "$LOCK")"
check "nothing written under the real ~/.qwen" test ! -e "$TMP/home/.qwen"
check "Neovim's env: QWEN_CODE_IDE_SERVER_PORT / _WORKSPACE_PATH" jeval \
    'd["env"]=={"QWEN_CODE_IDE_SERVER_PORT": env["PORT"], "QWEN_CODE_IDE_WORKSPACE_PATH": env["QCNV_WS"]}' "$STARTED"

STATE="$TMP/mcp-state.json"
NOTES="$TMP/notifications.jsonl"
check "MCP client connects with the lock file's token" client init --lock "$LOCK" --state "$STATE"
client listen --state "$STATE" --out "$NOTES" &
PIDS+=($!)
expect "$NOTES" "GET /mcp opens the SSE stream" 'e.get("_stream")=="open" and e["status"]==200'
go context

phase cursor
ACTIVE='[f for f in e["params"]["workspaceState"]["openFiles"] if f.get("isActive")]'
expect "$NOTES" "ide/contextUpdate: focused main.c with cursor line 3, character 5" \
    'e.get("method")=="ide/contextUpdate" and [(f["path"], f.get("cursor")) for f in '"$ACTIVE"']==[(env["MAIN"], {"line": 3, "character": 5})]'
go select

phase select
expect "$NOTES" "ide/contextUpdate: visual selection (charwise, 2 lines) and its cursor" \
    'e.get("method")=="ide/contextUpdate" and [(f.get("selectedText"), f.get("cursor")) for f in '"$ACTIVE"']==[("main(void) {\n    r", {"line": 3, "character": 5})]'
NOSEL='e.get("method")=="ide/contextUpdate" and [("selectedText" in f) for f in '"$ACTIVE"']==[False]'
N=$(client count "$NOTES" "$NOSEL")
go unselect

phase unselect
expect "$NOTES" "ide/contextUpdate: leaving visual mode clears the selection" "$NOSEL" --count $((N + 1))
# the last context update must be the cleared one
check "the latest contextUpdate has no selectedText" "$PY" - "$NOTES" <<'EOF'
import json, sys
ups = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8") if '"ide/contextUpdate"' in l]
act = [f for f in ups[-1]["params"]["workspaceState"]["openFiles"] if f.get("isActive")]
sys.exit(0 if act and "selectedText" not in act[0] else 1)
EOF

# --- diffs ---------------------------------------------------------------------
open_diff() { # PATH CONTENT
    local args
    args=$("$PY" -c 'import json,sys; print(json.dumps({"filePath": sys.argv[1], "newContent": sys.argv[2]}))' "$1" "$2")
    client call --state "$STATE" openDiff "$args" 2>&1
}
RES=$(open_diff "$MAIN" $'#include <stdio.h>\nint main(void) {\n    return 0;\n}\n')
check "openDiff main.c answers content: [] (Neovim shows it)" jeval 'd["content"] == [] and not d.get("isError")' "$RES"
go diff1
phase diff1
expect "$NOTES" ":QwenDiffAccept -> ide/diffAccepted with the user's edit" \
    'e.get("method")=="ide/diffAccepted" and e["params"]["filePath"]==env["MAIN"] and e["params"]["content"]=="#include <stdio.h>\nint main(void) {\n    return 0;\n}\n// reviewed in neovim\n"'

RES=$(open_diff "$NEWF" $'hello\n')
check "openDiff new.txt (new file) answers content: []" jeval 'd["content"] == [] and not d.get("isError")' "$RES"
go diff2
phase diff2
expect "$NOTES" ":QwenDiffReject PATH -> ide/diffRejected" \
    'e.get("method")=="ide/diffRejected" and e["params"]["filePath"]==env["NEWF"]'

RES=$(open_diff "$MAIN" $'#include <stdio.h>\nint main(void) {\n    return 3;\n}\n')
check "openDiff main.c again answers content: []" jeval 'd["content"] == [] and not d.get("isError")' "$RES"
go diff3
phase diff3-edited
RES=$(client call --state "$STATE" closeDiff '{"filePath":"'"$MAIN"'","suppressNotification":true}' 2>&1)
check "closeDiff answers {\"content\": <the buffer's edited text>}" \
    jeval 'not d.get("isError") and json.loads(d["content"][0]["text"]) == {"content": "// edited in neovim\nint main(void) {\n    return 3;\n}\n"}' "$RES"
phase diff3

RES=$(open_diff "$MAIN" $'four\n')
check "openDiff (4) answers content: []" jeval 'd["content"] == [] and not d.get("isError")' "$RES"
go diff4
phase diff4
expect "$NOTES" ":quit on the proposal window -> ide/diffClosed" \
    'e.get("method")=="ide/diffClosed" and e["params"]["filePath"]==env["MAIN"]'

RES=$(open_diff "$MAIN" $'five\r\nlines\r\n')
check "openDiff (5, CRLF) answers content: []" jeval 'd["content"] == [] and not d.get("isError")' "$RES"
go diff5
phase diff5
expect "$NOTES" ":w on the proposal -> ide/diffAccepted with the proposed text (CRLF kept)" \
    'e.get("method")=="ide/diffAccepted" and e["params"]["filePath"]==env["MAIN"] and e["params"]["content"]=="five\r\nlines\r\n"'
check "exactly 2 diffAccepted, 1 diffRejected, 1 diffClosed" "$PY" - "$NOTES" <<'EOF'
import collections, json, sys
n = collections.Counter(json.loads(l).get("method") for l in open(sys.argv[1], encoding="utf-8"))
want = {"ide/diffAccepted": 2, "ide/diffRejected": 1, "ide/diffClosed": 1}
got = {k: n[k] for k in want}
print(got)
sys.exit(0 if got == want else 1)
EOF

RES=$(open_diff "$MAIN" $'six\n')
check "openDiff (6) answers content: []" jeval 'd["content"] == [] and not d.get("isError")' "$RES"
go diff6
phase diff6-busy
T0=$(date +%s%N)
RES=$(client call --state "$STATE" closeDiff '{"filePath":"'"$MAIN"'","suppressNotification":true}' 2>&1)
MS=$((($(date +%s%N) - T0) / 1000000))
check "closeDiff while Neovim is busy answers the buffer's edited text" \
    jeval 'not d.get("isError") and json.loads(d["content"][0]["text"]) == {"content": "six, edited\n"}' "$RES"
check "... once Neovim's main loop runs again (busy 2 s, under the ${RT} ms timeout): ${MS} ms" \
    test "$MS" -ge 1000 -a "$MS" -lt "$RT"
phase diff6

# diff 7: Neovim stays busy longer than the library waits for an answer ($RT ms)
RES=$(open_diff "$NEWF" $'seven\n')
check "openDiff (7, new.txt) answers content: []" jeval 'd["content"] == [] and not d.get("isError")' "$RES"
STATE_B="$TMP/mcp-state-b.json"
check "a second MCP client session connects" client init --lock "$LOCK" --state "$STATE_B"
go diff7
phase diff7-busy
(
    T0=$(date +%s%N)
    client call --state "$STATE_B" closeDiff '{"filePath":"'"$NEWF"'","suppressNotification":true}' >"$TMP/close7.out" 2>&1
    echo $((($(date +%s%N) - T0) / 1000000)) >"$TMP/close7.ms"
) &
CLOSE7=$!
PIDS+=("$CLOSE7")
# Kept: gives the closeDiff a head start so it is queued before the openDiff
# (no sign from outside that the library queued it).
sleep 0.3
T0=$(date +%s%N)
RES=$(open_diff "$MAIN" $'too late\n')
MS=$((($(date +%s%N) - T0) / 1000000))
wait "$CLOSE7"
CMS=$(cat "$TMP/close7.ms" 2>/dev/null || echo 0)
go diff7-answered # Neovim's main loop may run again
TIMEOUT_ERR='d.get("isError") and "did not answer within '"$RT"' ms" in d["content"][0]["text"]'
check "openDiff unanswered: the CLI gets the library's timeout error (\"... within $RT ms\")" jeval "$TIMEOUT_ERR" "$RES"
check "... after the ${RT} ms timeout, not before: ${MS} ms" test "$MS" -ge $((RT - 100)) -a "$MS" -lt $((RT * 2))
check "closeDiff unanswered: the CLI gets the library's timeout error" jeval "$TIMEOUT_ERR" "$(cat "$TMP/close7.out")"
check "... after the ${RT} ms timeout, not before: ${CMS} ms" test "$CMS" -ge $((RT - 100)) -a "$CMS" -lt $((RT * 2))
phase diff7
check "the orphaned view sent nothing: still 2 diffAccepted, 1 diffRejected, 1 diffClosed" "$PY" - "$NOTES" <<'EOF'
import collections, json, sys
n = collections.Counter(json.loads(l).get("method") for l in open(sys.argv[1], encoding="utf-8"))
want = {"ide/diffAccepted": 2, "ide/diffRejected": 1, "ide/diffClosed": 1}
got = {k: n[k] for k in want}
print(got)
sys.exit(0 if got == want else 1)
EOF

RES=$(open_diff "$MAIN" $'eight\n')
check "openDiff (8) answers content: []" jeval 'd["content"] == [] and not d.get("isError")' "$RES"
go diff8
phase diff8-edited
RES=$(client call --state "$STATE" closeDiff '{"filePath":"'"$MAIN"'","suppressNotification":true}' 2>&1)
check "closeDiff after stale requests gets its own answer: the edited text" \
    jeval 'not d.get("isError") and json.loads(d["content"][0]["text"]) == {"content": "eight, edited\n"}' "$RES"
phase diff8

go close
phase closed
expect "$NOTES" "ide/contextUpdate: main.c closed (:bwipeout), other.txt active" \
    'e.get("method")=="ide/contextUpdate" and env["MAIN"] not in [f["path"] for f in e["params"]["workspaceState"]["openFiles"]] and [f["path"] for f in '"$ACTIVE"']==[env["OTHER"]]'

go stop
phase restarted
check "the first lock file is gone (seen from outside)" test ! -e "$LOCK"
expect "$NOTES" "stop closes the client's SSE stream" 'e.get("_stream")=="closed"'
LOCK2=$(client get "$(cat "$TMP/nv-restarted.json")" lock_file)
STATE2="$TMP/mcp-state2.json"
check "a client connects to the restarted companion" client init --lock "$LOCK2" --state "$STATE2"
RES=$(STATE=$STATE2 open_diff "$MAIN" $'nine\n')
check "openDiff (9) answers content: []" jeval 'd["content"] == [] and not d.get("isError")' "$RES"
STATE2B="$TMP/mcp-state2b.json"
check "a second session on the restarted companion" client init --lock "$LOCK2" --state "$STATE2B"
go diff9
phase diff9-busy
T0=$(date +%s%N)
client call --state "$STATE2" closeDiff '{"filePath":"'"$MAIN"'","suppressNotification":true}' >"$TMP/close9.out" 2>&1 &
CLOSE_PID=$!
PIDS+=("$CLOSE_PID")
STATE=$STATE2B open_diff "$NEWF" $'nine, new\n' >"$TMP/open9.out" 2>&1 &
OPEN_PID=$!
PIDS+=("$OPEN_PID")
phase stopped
check "the second lock file is gone (seen from outside)" test ! -e "$LOCK2"
for _ in $(seq 1 $((T * 10))); do
    kill -0 "$CLOSE_PID" 2>/dev/null || kill -0 "$OPEN_PID" 2>/dev/null || break
    sleep 0.1
done
MS=$((($(date +%s%N) - T0) / 1000000))
check "the requests waiting during stop end at the stop, before the ${RT} ms timeout (${MS} ms)" \
    bash -c '! kill -0 "$0" 2>/dev/null && ! kill -0 "$1" 2>/dev/null && [ "$2" -lt "$3" ]' "$CLOSE_PID" "$OPEN_PID" "$MS" "$RT"
for f in close9 open9; do
    check "... $f: an error or a closed connection, not a success (nor the timeout)" "$PY" -c '
import json, sys
text = open(sys.argv[1], encoding="utf-8").read()
print(text[:500])
if "did not answer within" in text:
    sys.exit(1)
try:
    d = json.loads(text)
except ValueError:
    sys.exit(0)  # the connection was closed (the client printed a traceback)
sys.exit(0 if isinstance(d, dict) and (d.get("isError") or "error" in d) else 1)
' "$TMP/$f.out"
done
go end
phase end
for _ in $(seq 1 $((T * 10))); do
    kill -0 "$NVIM_PID" 2>/dev/null || break
    sleep 0.1
done
if kill -0 "$NVIM_PID" 2>/dev/null; then
    fail "nvim exits after the test script"
else
    wait "$NVIM_PID"
    RC=$?
    NVIM_PID=
    check "nvim exits 0" test "$RC" -eq 0
fi
check "no Lua error in nvim's output" bash -c '! grep -E "E5108|E5113|Error executing|stack traceback" "$0"' "$TMP/nvim.log"

# --- plugin UI (:QwenPlugin) and cross-session participant (test_extras.lua) -
# A second headless Neovim with its own HOME, QWEN_HOME and workspace (…/ws,
# so its participant is `nvim-ws`): the pure logic, the fixture plugins
# through the real plugin host (queued calls, notifications, configuration,
# checklist, file card, parser, keybindings, completion; no plugin process
# left), and the participant against a second participant of the same
# process (sessions, send, receipts, receive, held → release/deny, refusals,
# unregister on stop and on VimLeavePre).
XT="$TMP/x"
mkdir -p "$XT/ws" "$XT/home" "$XT/qwen-home"
printf '#include <stdio.h>\nint main(void) {\n    return 42;\n}\n' >"$XT/ws/main.c"
(
    cd "$XT/ws" || exit 1
    exec env HOME="$XT/home" QWEN_HOME="$XT/qwen-home" XDG_CONFIG_HOME="$XT/home/.config" \
        XDG_DATA_HOME="$XT/home/.local/share" XDG_STATE_HOME="$XT/home/.local/state" \
        QCNV_TMP="$XT" QCNV_ROOT="$ROOT" QCNV_WS="$XT/ws" QCNV_TIMEOUT="$T" QWEN_COMPANION_LIB="$LIB" \
        timeout -k 10 $((T * 8)) "$NVIM" --headless -u NONE -i NONE -n \
        --cmd "set rtp^=$ROOT/examples/neovim" -c "luafile $HERE/test_extras.lua"
) >"$XT/nvim.log" 2>&1 </dev/null
XRC=$?
if [ -f "$XT/nv-extras.json" ]; then
    "$PY" - "$XT/nv-extras.json" >"$XT/checks.out" <<'EOF'
import json, sys
for name, ok, detail in json.load(open(sys.argv[1], encoding="utf-8"))["checks"]:
    print(("ok   - " if ok else "FAIL - ") + "extras: " + name)
    if not ok and detail:
        print("       " + detail.replace("\n", "\n       ")[:2000])
EOF
    cat "$XT/checks.out"
    PASS=$((PASS + $(grep -c '^ok   - ' "$XT/checks.out")))
    FAIL=$((FAIL + $(grep -c '^FAIL - ' "$XT/checks.out")))
else
    fail "extras: the test wrote its results"
    tail -20 "$XT/nvim.log" | sed 's/^/       /'
fi
check "extras: nvim exits 0 ($XRC)" test "$XRC" -eq 0
check "extras: VimLeavePre unregistered the participant (record gone)" \
    bash -c '[ -s "$0" ] && [ ! -e "$(cat "$0")" ]' "$XT/nv-extras-record"
check "extras: no session record left in QWEN_HOME" bash -c '! ls "$0"/sessions/*.json 2>/dev/null | grep -q .' "$XT/qwen-home"
check "extras: no plugin process left" bash -c '! grep -lsz "PLUGIN_DATA_DIR=$0" /proc/[0-9]*/environ' "$XT/x-plugins/data/"
check "extras: no Lua error in nvim's output" bash -c '! grep -E "E5108|E5113|Error executing|stack traceback" "$0"' "$XT/nvim.log"

# --- the installer and the lazy.nvim spec (test_install.lua, test_lazy.lua) -
# The release files of scripts/dist.sh ($QC_DIST_DIR, default target/dist:
# VERSION, SHA256SUMS, qwen-companion-<version>-<triple>.tar.gz) are served
# by a loopback HTTP server (python3 -m http.server on 127.0.0.1, port 0),
# with altered copies made by dist_fixtures.py (tampered, no checksum, no
# asset, another version). Without this host's archive these parts fail.
DIST=${QC_DIST_DIR:-$ROOT/target/dist}
case "$(uname -s)-$(uname -m)" in
Linux-x86_64) TRIPLE=x86_64-unknown-linux-gnu ;;
Linux-aarch64) TRIPLE=aarch64-unknown-linux-gnu ;;
*) TRIPLE=unsupported-$(uname -s)-$(uname -m) ;;
esac
WWW="$TMP/www"
URL=
if VERSION=$("$PY" "$HERE/dist_fixtures.py" "$DIST" "$TRIPLE" "$WWW" 2>"$TMP/dist-fixtures.err"); then
    pass "release files for $TRIPLE in $DIST (version $VERSION)"
    "$PY" -u -m http.server --bind 127.0.0.1 0 --directory "$WWW" >"$TMP/http.log" 2>&1 </dev/null &
    PIDS+=($!)
    for _ in $(seq 1 $((T * 20))); do
        PORT_HTTP=$(grep -o 'port [0-9]*' "$TMP/http.log" 2>/dev/null | head -1 | cut -d' ' -f2)
        [ -n "$PORT_HTTP" ] && break
        sleep 0.05
    done
    if [ -n "$PORT_HTTP" ]; then
        URL="http://127.0.0.1:$PORT_HTTP"
        pass "a loopback HTTP server serves them ($URL)"
    else
        fail "the loopback HTTP server started"
        sed 's/^/       /' "$TMP/http.log" | head -20
    fi
else
    fail "release files for $TRIPLE in $DIST: $(cat "$TMP/dist-fixtures.err")"
fi

# a scratch clone as lazy.nvim makes it: examples/neovim, Cargo.toml, a GitHub origin
make_clone() {
    mkdir -p "$1/examples"
    cp -r "$ROOT/examples/neovim" "$1/examples/neovim"
    rm -rf "$1/examples/neovim/doc/tags" "$1/examples/neovim/lib"
    cp "$ROOT/Cargo.toml" "$1/Cargo.toml"
    git -C "$1" init -q && git -C "$1" remote add origin https://github.com/OWNER/qwen-companion.git
}
if [ -n "$URL" ]; then
    make_clone "$TMP/inst/qwen-companion"
    mkdir -p "$TMP/inst/home"
    env -C "$WS" -u QWEN_COMPANION_DOWNLOAD_URL -u QWEN_COMPANION_BUILD HOME="$TMP/inst/home" QWEN_HOME="$TMP/inst/home/.qwen" \
        QCNV_TMP="$TMP/inst" QCNV_CLONE="$TMP/inst/qwen-companion" QCNV_URL="$URL" QCNV_DIST="$DIST" \
        QCNV_VERSION="$VERSION" QCNV_TRIPLE="$TRIPLE" \
        timeout -k 10 $((T * 4)) "$NVIM" --headless -u NONE -i NONE -n --cmd "set rtp^=$TMP/inst/qwen-companion/examples/neovim" \
        -c "luafile $HERE/test_install.lua" >"$TMP/nvim-install.log" 2>&1 </dev/null
    report_run test_install.lua "$TMP/inst/nv-install.json" "$TMP/nvim-install.log"

    LAZY="$TMP/lazy/qwen-companion"
    make_clone "$LAZY"
    mkdir -p "$TMP/lazy-home" "$TMP/lazy-qwen-home"
    lazy_nvim() { # PHASE NVIM-ARGS...
        local phase=$1
        shift
        env -C "$WS" -u QWEN_COMPANION_LIB -u QWEN_COMPANION_BUILD HOME="$TMP/lazy-home" QWEN_HOME="$TMP/lazy-qwen-home" \
            XDG_CONFIG_HOME="$TMP/lazy-home/.config" XDG_DATA_HOME="$TMP/lazy-home/.local/share" \
            XDG_STATE_HOME="$TMP/lazy-home/.local/state" QWEN_COMPANION_DOWNLOAD_URL="$URL/real" \
            QCNV_TMP="$TMP" QCNV_LAZY="$LAZY" QCNV_README="$ROOT/examples/neovim/README.md" QCNV_LAZY_PHASE="$phase" \
            timeout -k 10 $((T * 4)) "$NVIM" "$@" >"$TMP/nvim-lazy-$phase.log" 2>&1 </dev/null
        local rc=$?
        report_run "test_lazy.lua ($phase, exit $rc)" "$TMP/nv-lazy-$phase.json" "$TMP/nvim-lazy-$phase.log"
        check "nvim (lazy.nvim $phase) exits 0" test "$rc" -eq 0
        check "no Lua error or E-message in nvim's output (lazy.nvim $phase)" \
            bash -c '! grep -E "E[0-9]+:|Error executing|stack traceback" "$0"' "$TMP/nvim-lazy-$phase.log"
    }
    lazy_nvim build --headless -u NONE -i NONE -n --noplugin -c "luafile $HERE/test_lazy.lua"
    lazy_nvim start --headless -u "$HERE/test_lazy.lua" -i NONE -n --noplugin
    # the spec loaded after VimEnter (event = 'VeryLazy'): setup() starts at once
    lazy_nvim late --headless -u "$HERE/test_lazy.lua" -i NONE -n --noplugin
    # the same clone as a package on the runtimepath: plugin/ sourced and setup() called
    lazy_nvim packpath --headless -u "$HERE/test_lazy.lua" -i NONE -n
    check ":helptags wrote the tags (:QwenRun, qwen_companion-statusline)" \
        grep -qP '^:QwenRun\tqwen_companion.txt' "$LAZY/examples/neovim/doc/tags"
    check "the participant left on exit (no session record in QWEN_HOME)" \
        bash -c '! ls "$0"/sessions/*.json 2>/dev/null | grep -q .' "$TMP/lazy-qwen-home"
else
    fail "the installer and lazy.nvim tests need the release files (run bash scripts/dist.sh first)"
fi

# --- the Lua examples of the Markdown files (tests/docs/examples.py) --------
# Each runs in a fresh headless Neovim with the plugin on the runtimepath and
# the library in $QWEN_COMPANION_LIB; a Lua error fails it (exit status 1).
mkdir -p "$TMP/doc-examples"
if ! "$PY" "$ROOT/tests/docs/examples.py" write lua "$TMP/doc-examples" >"$TMP/doc-examples.list" 2>"$TMP/doc-examples.err"; then
    fail "extract the Lua examples: $(head -c 300 "$TMP/doc-examples.err")"
elif [ ! -s "$TMP/doc-examples.list" ]; then
    fail "the Markdown files have Lua examples (none found)"
fi
while IFS= read -r ex; do
    [ -n "$ex" ] || continue
    mkdir -p "$TMP/ex-home" "$TMP/ex-qwen-home"
    check "doc example $(basename "$ex") runs" env -C "$WS" HOME="$TMP/ex-home" QWEN_HOME="$TMP/ex-qwen-home" \
        XDG_CONFIG_HOME="$TMP/ex-home/.config" XDG_DATA_HOME="$TMP/ex-home/.local/share" \
        XDG_STATE_HOME="$TMP/ex-home/.local/state" QWEN_COMPANION_LIB="$LIB" \
        timeout -k 10 "$T" "$NVIM" --headless -u NONE -i NONE -n --cmd "set rtp^=$ROOT/examples/neovim" \
        -c "lua local ok, e = pcall(dofile, [[$ex]]); if not ok then io.stderr:write(tostring(e) .. '\\n'); vim.cmd('cquit 1') end; vim.cmd('qa!')" \
        </dev/null
done <"$TMP/doc-examples.list"
finish
