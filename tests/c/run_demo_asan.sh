#!/usr/bin/env bash
# Scripted leak/error test of the C demo (examples/c/qcdemo*.c) under ASan+UBSan.
#
#   tests/c/run_demo_asan.sh            (from anywhere; builds what it needs)
#
# 1. builds target/c/qcdemo-asan and target/c/abi_misuse-asan (make -C examples/c)
# 2. runs the C ABI misuse matrix (tests/c/abi_misuse.c)
# 3. runs `qcdemo-asan ide` in an isolated HOME/QWEN_HOME against a temporary
#    workspace, feeds it editor commands (and wrong ones), and drives
#    openDiff/closeDiff over MCP HTTP with tests/c/mcp_client.py
# 4. stops it three ways (SIGTERM while blocked on stdin, EOF, `stop`)
# and asserts on the JSON event lines, the lock file, MCP replies and
# notifications, exit codes, and that ASan/LSan/UBSan report nothing.
# 5. runs tests/c/run_sessions_asan.sh (`qcdemo sessions`), counted as one
#    check here; its own summary line is "c-sessions: N passed, M failed".
# 6. runs tests/c/run_plugins_asan.sh (`qcdemo plugins`, needs node), counted
#    as one check here; its own summary line is "c-plugins: N passed, M failed".
#
# Env: PYTHON (python3), QC_TEST_TIMEOUT (seconds per wait, 30),
#      QC_KEEP_TMP=1 keeps the temporary directory, NO_CARGO=1 is passed to make,
#      QC_SKIP_SESSIONS=1 leaves out step 5, QC_SKIP_PLUGINS=1 step 6.
set -u
# shellcheck source=../lib/harness.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DEMO="$ROOT/target/c/qcdemo-asan"
ABI="$ROOT/target/c/abi_misuse-asan"
T=${QC_TEST_TIMEOUT:-30}
KEEP_RUN=${QC_KEEP_TMP:-0}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/qc-demo-test.XXXXXX")
harness_init c-demo tap "$TMP"

# ---------------------------------------------------------------------------
echo "# build"
build_c "build qcdemo-asan and abi_misuse-asan (-Wall -Wextra -Werror -Wpedantic)" asan abi

# Isolated home: the real ~/.qwen is never touched.
export HOME="$TMP/home" QWEN_HOME="$TMP/qwen-home"
unset QWEN_CODE_IDE_SERVER_PORT QWEN_CODE_IDE_WORKSPACE_PATH
mkdir -p "$HOME" "$QWEN_HOME"
LOCKDIR="$QWEN_HOME/ide"

# ---------------------------------------------------------------------------
echo "# C ABI misuse matrix"
env "${SAN_ENV[@]}" timeout 120 "$ABI" >"$TMP/abi.out" 2>"$TMP/abi.err"
RC=$?
cat "$TMP/abi.out"
if [ $RC -eq 0 ]; then pass "abi_misuse-asan exits 0"; else
    fail "abi_misuse-asan exits 0 (rc=$RC)"
    sed 's/^/       /' "$TMP/abi.err" | head -60
fi
check "abi_misuse-asan: sanitizers clean" sanitizer_clean "$TMP/abi.err"

# ---------------------------------------------------------------------------
echo "# qcdemo --help / --version / bad usage"
env "${SAN_ENV[@]}" "$DEMO" --help >"$TMP/help.out" 2>"$TMP/help.err"
check "--help exits 0 with usage" grep -q '^usage: qcdemo' "$TMP/help.out"
VERSION=$(env "${SAN_ENV[@]}" "$DEMO" --version 2>>"$TMP/help.err")
version_ok() { [[ $VERSION =~ ^[0-9]+\.[0-9]+\.[0-9]+ ]]; }
check "--version prints qc_version() ($VERSION)" version_ok
env "${SAN_ENV[@]}" "$DEMO" frobnicate >/dev/null 2>>"$TMP/help.err"
RC=$?
check "unknown subcommand exits 2 (rc=$RC)" test $RC -eq 2
env "${SAN_ENV[@]}" "$DEMO" ide >/dev/null 2>>"$TMP/help.err"
RC=$?
check "ide without --workspace exits 2 (rc=$RC)" test $RC -eq 2
env "${SAN_ENV[@]}" "$DEMO" ide --workspace "$TMP" --cli vscode >/dev/null 2>"$TMP/cli.err"
RC=$?
check "ide --cli vscode exits 2 (rc=$RC)" test $RC -eq 2
check "ide --cli vscode: the message names the value and the choices" \
    grep -qF -- "--cli must be qwen, gemini or both, not 'vscode'" "$TMP/cli.err"
env "${SAN_ENV[@]}" "$DEMO" ide --workspace "$TMP" --cli >/dev/null 2>>"$TMP/cli.err"
RC=$?
check "ide --cli without a value exits 2 (rc=$RC)" test $RC -eq 2
cat "$TMP/cli.err" >>"$TMP/help.err"
env "${SAN_ENV[@]}" "$DEMO" ide --help >"$TMP/ide-help.out" 2>>"$TMP/help.err"
check "ide --help documents --cli" grep -qF -- "[--cli qwen|gemini|both]" "$TMP/ide-help.out"
check "ide --help documents discoveryFiles" grep -qF '"discoveryFiles":' "$TMP/ide-help.out"
check "usage paths: sanitizers clean" sanitizer_clean "$TMP/help.err"

# ---------------------------------------------------------------------------
echo "# session 1: editor events, errors, MCP client, diffs, SIGTERM"
WS1="$TMP/work space one"
WS2="$TMP/ws2"
mkdir -p "$WS1/src" "$WS2"
export F1="$WS1/src/main file.c" F2="$WS2/lib.rs"
export FA="$WS1/diff a.txt" FB="$WS1/diff-b.txt" FC="$WS2/diff-c.txt" FD="$WS2/diff-d.txt" FE="$WS2/diff-e.txt"
printf 'int main(void) { return 0; }\n' >"$F1"
printf 'fn f() {}\n' >"$F2"
export WS_SPEC="$WS1:$WS2"
export IDE_NAME='Demo "C" IDE \ ü'
OUT="$TMP/out1.jsonl"
export OUT1="$OUT" TMP
ERR="$TMP/err1.log"
NOTES="$TMP/notifications.jsonl"
STATE="$TMP/mcp-state.json"
mkfifo "$TMP/in1"

spawn "$TMP/in1" "$OUT" "$ERR" env "${SAN_ENV[@]}" "$DEMO" ide --workspace "$WS_SPEC" --ide-name "$IDE_NAME"
DEMO_PID=$LAST_PID
peer_attach demo1 "$DEMO_PID" "$TMP/in1"
send() { to_peer demo1 "$1"; }

expect_ready "$OUT" "session 1: ready event" "$ERR"
PORT=$(client get "$READY" port)
LOCK=$(client get "$READY" lockFile)
export PORT LOCK
check "ready: port > 0, lockFile is \$QWEN_HOME/ide/<port>.lock" \
    jeval 'd["port"] > 0 and d["lockFile"] == os.path.join(env["QWEN_HOME"], "ide", "%d.lock" % d["port"])' "$READY"
check "ready: discoveryFiles is {qwen: lockFile, gemini: null} (default --cli qwen)" \
    jeval 'd["discoveryFiles"] == {"qwen": d["lockFile"], "gemini": None}' "$READY"
check "ready: env has the port and the workspace path" \
    jeval 'd["env"]["QWEN_CODE_IDE_SERVER_PORT"] == str(d["port"]) and d["env"]["QWEN_CODE_IDE_WORKSPACE_PATH"] == env["WS_SPEC"]' "$READY"
check "lock file exists while running" test -f "$LOCK"
LOCKJSON=$(cat "$LOCK" 2>/dev/null || echo '{}')
check "lock file: port, authToken, workspacePath, IDE name (escaped round trip)" \
    jeval 'd["port"] == int(env["PORT"]) and len(d["authToken"]) >= 16 and d["workspacePath"] == env["WS_SPEC"] and env["IDE_NAME"] in (d.get("ideName"), (d.get("ideInfo") or {}).get("displayName"), (d.get("ideInfo") or {}).get("name"))' "$LOCKJSON"

# State set before any CLI connects.
send "open $F1"
send "open $F2"
send "focus $F1"
send "cursor 3 5"
send 'select line1\nline2\t\\end'
send "workspace $WS1:$WS2"
send "trust false"
send "trust true"
send ""
send "# a comment"
# Error cases, each must produce exactly one error event.
send "accept $WS1/no such diff.txt"
send "context {bad json"
send "frobnicate now"
send "cursor 0 0"
send "accept-from $TMP/missing-file.txt $F1"
send "trust maybe"
send "cursor 1"
send "open"
expect "$OUT" "error: accept of an unknown path -> QC_NOT_FOUND" \
    'e["event"]=="error" and "QC_NOT_FOUND" in e["message"] and e["message"].startswith("accept:")'
expect "$OUT" "error: bad context JSON -> QC_INVALID_JSON" \
    'e["event"]=="error" and "QC_INVALID_JSON" in e["message"] and e["message"].startswith("context:")'
expect "$OUT" "error: unknown command" \
    'e["event"]=="error" and e["message"]=="unknown command: frobnicate"'
expect "$OUT" "error: cursor 0 0 -> QC_INVALID_ARGUMENT" \
    'e["event"]=="error" and "QC_INVALID_ARGUMENT" in e["message"] and e["message"].startswith("cursor:")'
expect "$OUT" "error: accept-from with an unreadable FILE" \
    'e["event"]=="error" and e["message"].startswith("accept-from: cannot read") and "missing-file.txt" in e["message"]'
expect "$OUT" "error: trust maybe" 'e["event"]=="error" and e["message"].startswith("trust: expected true or false")'
expect "$OUT" "error: cursor with one number" 'e["event"]=="error" and e["message"].startswith("cursor: expected two")'
expect "$OUT" "error: open without PATH" 'e["event"]=="error" and e["message"].startswith("open: missing argument")'
send "frobnicate barrier-1"
expect "$OUT" "barrier 1" 'e["event"]=="error" and e["message"]=="unknown command: frobnicate"' --count 2
NERR=$(client count "$OUT" 'e["event"]=="error"')
check "no error from the valid commands (errors: $NERR, want 9)" test "$NERR" -eq 9

export CTX_SEL='ctx "sel" ü	tab'
CTX=$(client eval 'print(json.dumps({"workspaceState": {"openFiles": [{"path": env["F1"], "timestamp": 1700000000000, "isActive": True, "cursor": {"line": 7, "character": 3}, "selectedText": env["CTX_SEL"]}], "isTrusted": True}}, ensure_ascii=False)) or True')
send "context $CTX"

# A CLI connects: initialize, initialized (202), GET stream.
if INIT=$(client init --lock "$LOCK" --state "$STATE" 2>"$TMP/init.err"); then
    pass "MCP initialize + notifications/initialized answered 202"
else
    fail "MCP initialize + notifications/initialized answered 202"
    sed 's/^/       /' "$TMP/init.err"
fi
check "initialize result has serverInfo and a protocolVersion" \
    jeval '"serverInfo" in d["initialize"] and d["initialize"]["protocolVersion"]' "${INIT:-null}"
spawn - - - "$PY" "$CLIENT" listen --state "$STATE" --out "$NOTES"
LISTEN_PID=$LAST_PID
expect "$NOTES" "GET /mcp opens an SSE stream" 'e.get("_stream")=="open" and e["status"]==200 and "text/event-stream" in e["contentType"]'
expect "$NOTES" "state set before connecting arrives as ide/contextUpdate when the stream opens" \
    'e.get("method")=="ide/contextUpdate" and e["params"]["workspaceState"]["isTrusted"] is True and [f["path"] for f in e["params"]["workspaceState"]["openFiles"] if f.get("isActive")]==[env["F1"]] and e["params"]["workspaceState"]["openFiles"][0]["cursor"]=={"line":7,"character":3} and e["params"]["workspaceState"]["openFiles"][0]["selectedText"]==env["CTX_SEL"]'

TOOLS=$(client list --state "$STATE" 2>&1)
check "tools/list has openDiff and closeDiff" \
    jeval '{"openDiff","closeDiff"} <= {t["name"] for t in d["tools"]}' "$TOOLS"

# select escapes reach the CLI: \t, \\ and \n decoded
send 'select a\tb\\c\nd'
expect "$NOTES" "select with \\n \\t \\\\ escapes -> contextUpdate selectedText" \
    'e.get("method")=="ide/contextUpdate" and [f.get("selectedText") for f in e["params"]["workspaceState"]["openFiles"] if f.get("isActive")]==["a\tb\\c\nd"]'
send "trust false"
expect "$NOTES" "trust false -> contextUpdate isTrusted false" \
    'e.get("method")=="ide/contextUpdate" and e["params"]["workspaceState"]["isTrusted"] is False'
send "trust true"

# Diff A: openDiff -> accept-from (user edited) -> diffAccepted with the edited text.
export ARGS_A='{"filePath":"'"$FA"'","newContent":"proposed \"A\" \\ back\nline2\ttab \u0001 ünïcödé 😀\n"}'
RES=$(client call --state "$STATE" openDiff "$ARGS_A" 2>&1)
check "openDiff A answers content: [] (no isError)" jeval 'd["content"] == [] and not d.get("isError")' "$RES"
expect "$OUT" "diff_opened A with the exact newContent (quotes, backslash, control char, UTF-8)" \
    'e["event"]=="diff_opened" and e["filePath"]==env["FA"] and e["newContent"]==json.loads(env["ARGS_A"])["newContent"]'
check "raw stdout escapes the control char as \\u0001 and keeps UTF-8 as-is" \
    grep -qF '\u0001 ünïcödé 😀\u000a' "$OUT"
export EDITED_A="$TMP/editedA.txt"
printf 'edited by the user\nwith "quotes" \\ and ü\n' >"$EDITED_A"
send "accept-from $EDITED_A $FA"
expect "$NOTES" "accept-from -> ide/diffAccepted with the file's text" \
    'e.get("method")=="ide/diffAccepted" and e["params"]["filePath"]==env["FA"] and e["params"]["content"]==open(env["EDITED_A"], encoding="utf-8").read()'
RES=$(client call --state "$STATE" closeDiff '{"filePath":"'"$FA"'","suppressNotification":true}' 2>&1)
# After an accept the diff is settled: a later closeDiff answers
# {"content": null} by itself and does not ask the IDE again.
check "closeDiff A (already accepted) answers {\"content\": null}" \
    jeval 'not d.get("isError") and json.loads(d["content"][0]["text"]) == {"content": None}' "$RES"
sleep 0.5
check "closeDiff A (already accepted): no diff_close_requested" \
    test "$(client count "$OUT" 'e["event"]=="diff_close_requested" and e["filePath"]==env["FA"]')" -eq 0

# Diff B: openDiff -> closeDiff answers the proposed text.
export ARGS_B='{"filePath":"'"$FB"'","newContent":"proposed B\n"}'
RES=$(client call --state "$STATE" openDiff "$ARGS_B" 2>&1)
check "openDiff B answers content: []" jeval 'd["content"] == [] and not d.get("isError")' "$RES"
expect "$OUT" "diff_opened B" 'e["event"]=="diff_opened" and e["filePath"]==env["FB"] and e["newContent"]=="proposed B\n"'
RES=$(client call --state "$STATE" closeDiff '{"filePath":"'"$FB"'","suppressNotification":true}' 2>&1)
check "closeDiff B answers {\"content\": <proposed text>}" \
    jeval 'not d.get("isError") and json.loads(d["content"][0]["text"]) == {"content": "proposed B\n"}' "$RES"
expect "$OUT" "closeDiff B -> diff_close_requested event" \
    'e["event"]=="diff_close_requested" and e["filePath"]==env["FB"]'

# Diff C: reject. Diff D: closed. Diff E: accept (proposed text).
for X in C D E; do
    var="F$X"
    RES=$(client call --state "$STATE" openDiff '{"filePath":"'"${!var}"'","newContent":"proposed '"$X"'\n"}' 2>&1)
    check "openDiff $X answers content: []" jeval 'd["content"] == [] and not d.get("isError")' "$RES"
    expect "$OUT" "diff_opened $X" 'e["event"]=="diff_opened" and e["filePath"]==env["'"$var"'"]'
done
send "reject $FC"
expect "$NOTES" "reject -> ide/diffRejected" 'e.get("method")=="ide/diffRejected" and e["params"]["filePath"]==env["FC"]'
send "closed $FD"
expect "$NOTES" "closed -> ide/diffClosed" 'e.get("method")=="ide/diffClosed" and e["params"]["filePath"]==env["FD"]'
send "accept $FE"
expect "$NOTES" "accept -> ide/diffAccepted with the proposed text" \
    'e.get("method")=="ide/diffAccepted" and e["params"]["filePath"]==env["FE"] and e["params"]["content"]=="proposed E\n"'
send "reject $FC"
expect "$OUT" "reject of an already rejected diff -> QC_NOT_FOUND" \
    'e["event"]=="error" and e["message"].startswith("reject:") and "QC_NOT_FOUND" in e["message"]'
send "frobnicate barrier-2"
expect "$OUT" "barrier 2" 'e["event"]=="error" and e["message"]=="unknown command: frobnicate"' --count 3
NERR=$(client count "$OUT" 'e["event"]=="error"')
check "no unexpected error events in session 1 ($NERR, want 11)" test "$NERR" -eq 11

# SIGTERM while the demo is blocked reading stdin (we keep the pipe open).
check "lock file still exists before SIGTERM" test -f "$LOCK"
kill -TERM "$DEMO_PID"
wait_exit "$DEMO_PID" "$T"
check "SIGTERM interrupts the blocked read: clean exit 0 (rc=$RC)" test "$RC" -eq 0
close_peer demo1
expect "$OUT" "last event is stopped" 'e["event"]=="stopped"'
check "\"stopped\" is the last line" jeval 'json.loads(open(env["OUT1"]).read().splitlines()[-1]) == {"event": "stopped"}'
check "lock file removed after SIGTERM" file_absent "$LOCK"
check "every stdout line is a JSON event" client valid "$OUT"
expect "$NOTES" "the SSE stream ends when the companion stops" 'e.get("_stream") in ("closed", "error")'
wait_exit "$LISTEN_PID" 5
check "session 1: sanitizers clean (no errors, no leaks)" sanitizer_clean "$ERR"

# ---------------------------------------------------------------------------
echo "# session 2: EOF stops; an unterminated last line still runs"
OUT2="$TMP/out2.jsonl"
ERR2="$TMP/err2.log"
printf 'open %s\nfocus %s\ncursor 1 1\nselect x\nfrobnicate eof' "$F1" "$F1" >"$TMP/in2"
spawn "$TMP/in2" "$OUT2" "$ERR2" env "${SAN_ENV[@]}" "$DEMO" ide --workspace "$WS1"
PID2=$LAST_PID
wait_exit "$PID2" "$T"
check "EOF: clean exit 0 (rc=$RC)" test "$RC" -eq 0
check "EOF: ready ... unknown command (unterminated last line) ... stopped" \
    jeval '[json.loads(l)["event"] for l in open(env["TMP"] + "/out2.jsonl")] == ["ready", "error", "stopped"] and json.loads(open(env["TMP"] + "/out2.jsonl").read().splitlines()[1])["message"] == "unknown command: frobnicate"'
LOCK2=$(client get "$(head -n1 "$OUT2")" lockFile 2>/dev/null || echo "$LOCKDIR/none")
check "EOF: lock file removed" file_absent "$LOCK2"
check "EOF: sanitizers clean" sanitizer_clean "$ERR2"

# ---------------------------------------------------------------------------
echo "# session 3: the stop command (stdin stays open; later lines are not run)"
OUT3="$TMP/out3.jsonl"
ERR3="$TMP/err3.log"
mkfifo "$TMP/in3"
spawn "$TMP/in3" "$OUT3" "$ERR3" env "${SAN_ENV[@]}" "$DEMO" ide --workspace "$WS2" --ide-name=Third
PID3=$LAST_PID
peer_attach demo3 "$PID3" "$TMP/in3"
expect "$OUT3" "stop session: ready" 'e["event"]=="ready"'
LOCK3=$(client get "$(head -n1 "$OUT3")" lockFile 2>/dev/null || echo "$LOCKDIR/none")
check "stop session: lock file exists" test -f "$LOCK3"
to_peer demo3 "$(printf 'open %s\nstop\nfrobnicate after-stop' "$F2")"
wait_exit "$PID3" "$T"
close_peer demo3
check "stop: clean exit 0 (rc=$RC)" test "$RC" -eq 0
check "stop: ready, stopped and nothing after stop" \
    jeval '[json.loads(l)["event"] for l in open(env["TMP"] + "/out3.jsonl")] == ["ready", "stopped"]'
check "stop: lock file removed" file_absent "$LOCK3"
check "stop: sanitizers clean" sanitizer_clean "$ERR3"
check "no lock files left in \$QWEN_HOME/ide" test -z "$(ls -A "$LOCKDIR" 2>/dev/null | grep -v '^\.')"

# ---------------------------------------------------------------------------
echo "# sessions 4 and 5: --cli gemini and --cli both (Gemini's file in \$TMPDIR/gemini/ide)"
export GEMDIR="$TMP/tmpdir/gemini/ide"
mkdir -p "$TMP/tmpdir"
# cli_session N CLI: a demo serving CLI, checked from its ready line to its stop.
cli_session() {
    local n=$1 cli=$2 out="$TMP/out$1.jsonl" err="$TMP/err$1.log" pid ready
    mkfifo "$TMP/in$n"
    spawn "$TMP/in$n" "$out" "$err" env "${SAN_ENV[@]}" TMPDIR="$TMP/tmpdir" "$DEMO" ide --workspace "$WS2" --cli "$cli"
    pid=$LAST_PID
    peer_attach "demo$n" "$pid" "$TMP/in$n"
    expect "$out" "--cli $cli: ready" 'e["event"]=="ready"'
    ready=$(head -n1 "$out")
    export CLI_PID=$pid CLI=$cli WS2
    check "--cli $cli: discoveryFiles.gemini is \$TMPDIR/gemini/ide/gemini-ide-server-<demo pid>-<port>.json" \
        jeval 'd["discoveryFiles"]["gemini"] == os.path.join(env["GEMDIR"], "gemini-ide-server-%s-%d.json" % (env["CLI_PID"], d["port"]))' "$ready"
    if [ "$cli" = gemini ]; then
        check "--cli gemini: no qwen lock (discoveryFiles.qwen null), lockFile is Gemini's file" \
            jeval 'd["discoveryFiles"]["qwen"] is None and d["lockFile"] == d["discoveryFiles"]["gemini"] and not (os.path.isdir(env["QWEN_HOME"] + "/ide") and os.listdir(env["QWEN_HOME"] + "/ide"))' "$ready"
        check "--cli gemini: env has GEMINI_CLI_IDE_* and no QWEN_CODE_IDE_*" \
            jeval 'd["env"]["GEMINI_CLI_IDE_SERVER_PORT"] == str(d["port"]) and d["env"]["GEMINI_CLI_IDE_WORKSPACE_PATH"] == env["WS2"] and d["env"]["GEMINI_CLI_IDE_PID"] == env["CLI_PID"] and not any(k.startswith("QWEN_CODE_IDE_") for k in d["env"])' "$ready"
    else
        check "--cli both: discoveryFiles.qwen is lockFile (\$QWEN_HOME/ide/<port>.lock)" \
            jeval 'd["discoveryFiles"]["qwen"] == d["lockFile"] == os.path.join(env["QWEN_HOME"], "ide", "%d.lock" % d["port"])' "$ready"
        check "--cli both: env has the variables of both CLIs" \
            jeval 'd["env"]["QWEN_CODE_IDE_SERVER_PORT"] == d["env"]["GEMINI_CLI_IDE_SERVER_PORT"] == str(d["port"]) and d["env"]["GEMINI_CLI_IDE_PID"] == env["CLI_PID"]' "$ready"
        check "--cli both: one port, one token; the qwen lock has ppid and ideInfo, Gemini's file ideInfo" \
            jeval '(lambda q, g: q["port"] == g["port"] == d["port"] and q["authToken"] == g["authToken"] and len(g["authToken"]) >= 16 and q["ppid"] == int(env["CLI_PID"]) and q["ideInfo"]["name"] and g["ideInfo"]["name"] and g["workspacePath"] == env["WS2"])(json.load(open(d["discoveryFiles"]["qwen"])), json.load(open(d["discoveryFiles"]["gemini"])))' "$ready"
    fi
    export GEMFILE
    GEMFILE=$(client get "$ready" discoveryFiles gemini 2>/dev/null || echo "$GEMDIR/none")
    check "--cli $cli: Gemini's file is mode 0600 with port, workspacePath, authToken, ideInfo" \
        jeval 'os.stat(env["GEMFILE"]).st_mode & 0o7777 == 0o600 and (lambda g: g["port"] == d["port"] and g["workspacePath"] == env["WS2"] and g["authToken"] and g["ideInfo"]["name"] and g["ideInfo"]["displayName"])(json.load(open(env["GEMFILE"])))' "$ready"
    to_peer "demo$n" stop
    wait_exit "$pid" "$T"
    close_peer "demo$n"
    check "--cli $cli: stop exits 0 (rc=$RC)" test "$RC" -eq 0
    check "--cli $cli: stop removes every discovery file" \
        jeval 'all(not os.path.exists(f) for f in d["discoveryFiles"].values() if f)' "$ready"
    check "--cli $cli: sanitizers clean" sanitizer_clean "$err"
}
cli_session 4 gemini
cli_session 5 both
check "no files left in \$TMPDIR/gemini/ide" test -z "$(ls -A "$GEMDIR" 2>/dev/null)"

# ---------------------------------------------------------------------------
# The subcommands' own harnesses, one check each (QC_SKIP_SESSIONS=1 /
# QC_SKIP_PLUGINS=1 leave one out).
for sub in sessions plugins; do
    skip_var="QC_SKIP_${sub^^}"
    [ "${!skip_var:-0}" = 1 ] && continue
    echo "# qcdemo $sub (tests/c/run_${sub}_asan.sh)"
    if NO_CARGO=1 bash "$HERE/run_${sub}_asan.sh"; then
        pass "qcdemo $sub: tests/c/run_${sub}_asan.sh"
    else
        fail "qcdemo $sub: tests/c/run_${sub}_asan.sh"
    fi
done

summary
[ "$FAILED" -eq 0 ]
