#!/usr/bin/env bash
# Scripted test of `qcdemo plugins` (install, uninstall, list, call, serve,
# register-mcp) under ASan+UBSan.
#
#   tests/c/run_plugins_asan.sh        (from anywhere; builds what it needs)
#
# Uses the fixture plugins of tests/plugins/fixtures (hello, full,
# todo-quadrant and hostile/*) in a scratch plugins directory with an
# isolated HOME and QWEN_HOME, and checks: install (summary, replace, the
# refusal shape and exit 1), uninstall, list --json (parser-only tools with
# modelVisible false), call with every error kind (schema, unknown_tool,
# timeout, exited with exit code and stderr line, protocol, too_large,
# tool_error with the plugin's message, disabled), a plugin whose stdout
# is garbage (it never reaches ours) and a show_notification answered
# {"shown":true} and printed before the answer, serve (ready, ui_push,
# host_request answered by the demo, plugin_started / plugin_exit /
# plugin_disabled, every stdin command answered in order, `stop` too (its
# result the last line), stop / EOF / SIGTERM exit 0; the
# plugin MCP server in the ready line, reachable with the lock file's token,
# its lock file gone after stop), register-mcp (project scope keeping a
# comment, unchanged / replaced / removed, a bad settings file refused
# untouched, the user scope with the default bridge), that
# no plugin process is left at the end, and that ASan/LSan/UBSan report
# nothing. Ends with "c-plugins: N passed, M failed".
#
# Env: QC_TEST_TIMEOUT (seconds per wait, 30), QC_KEEP_TMP=1 keeps the
#      temporary directory, NO_CARGO=1 is passed to make. Needs `node`.
set -u
# shellcheck source=../lib/harness.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"

DEMO="$ROOT/target/c/qcdemo-asan"
FIX="$ROOT/tests/plugins/fixtures"
T=${QC_TEST_TIMEOUT:-30}
KEEP_RUN=${QC_KEEP_TMP:-0}
TMP=$(mktemp -d /tmp/qc-plug.XXXXXX)
harness_init c-plugins tap "$TMP"
DIR="$TMP/plugins"

# demo TAG ARGS... : `qcdemo-asan plugins ARGS` -> $TMP/TAG.out/.err, RC; OUT
# is its first stdout line.
demo() {
    local tag=$1
    shift
    env "${SAN_ENV[@]}" timeout 120 "$DEMO" plugins "$@" >"$TMP/$tag.out" 2>"$TMP/$tag.err"
    RC=$?
    OUT=$(head -n 1 "$TMP/$tag.out")
}

# one_line TAG: the command printed exactly one JSON line.
one_line() { [ "$(wc -l <"$TMP/$1.out")" -eq 1 ] && jeval 'd is not None' "$(cat "$TMP/$1.out")"; }

# call_kind TAG KIND ARGS... : `plugins call --dir DIR ARGS` fails with KIND and exit 1.
call_kind() {
    local tag=$1 kind=$2
    shift 2
    demo "$tag" call --dir "$DIR" "$@"
    check "call $tag: exit 1 (rc=$RC)" test "$RC" -eq 1
    check "call $tag: one line" one_line "$tag"
    check "call $tag: {ok:false, error.kind: $kind, message}" \
        jeval "d['ok'] is False and d['error']['kind']=='$kind' and bool(d['error']['message'])" "$OUT"
}

# Live processes started by a plugin of $DIR (their environment names a
# PLUGIN_DATA_DIR under it).
plugin_pids() {
    local p
    for p in /proc/[0-9]*; do
        { tr '\0' '\n' <"$p/environ"; } 2>/dev/null | grep -q "^PLUGIN_DATA_DIR=$DIR/" && echo "${p#/proc/}"
    done
}
no_plugin_process() { [ -z "$(plugin_pids)" ]; }

# ---------------------------------------------------------------------------
echo "# build"
build_c "build qcdemo-asan (-Wall -Wextra -Werror -Wpedantic)" asan
if ! command -v node >/dev/null; then
    fail "node is not installed"
    bail
fi

export HOME="$TMP/home" QWEN_HOME="$TMP/qwen-home"
mkdir -p "$HOME" "$QWEN_HOME" "$TMP/session/.git"
export TMP DIR
cd "$TMP" || exit 1

# ---------------------------------------------------------------------------
echo "# usage"
env "${SAN_ENV[@]}" "$DEMO" plugins --help >"$TMP/usage.out" 2>"$TMP/usage.err"
check "plugins --help exits 0 with usage" grep -q '^usage: qcdemo plugins install' "$TMP/usage.out"
env "${SAN_ENV[@]}" "$DEMO" plugins call --dir "$DIR" only-one >"$TMP/usage2.out" 2>"$TMP/usage2.err"
RC=$?
check "call with missing arguments exits 2 (rc=$RC)" test "$RC" -eq 2
env "${SAN_ENV[@]}" "$DEMO" plugins call --dir "$DIR" a.b t '{bad' >"$TMP/usage3.out" 2>"$TMP/usage3.err"
RC=$?
check "call with bad PARAMS_JSON exits 2 (rc=$RC)" test "$RC" -eq 2
check "call with bad PARAMS_JSON: nothing on stdout" test ! -s "$TMP/usage3.out"
check "usage paths: sanitizers clean" sanitizer_clean "$TMP"/usage*.err

# ---------------------------------------------------------------------------
echo "# install"
demo inst.hello install "$FIX/hello" --dir "$DIR"
check "install hello: exit 0" test "$RC" -eq 0
check "install hello: one line" one_line inst.hello
check "install hello: {ok, plugin: id, version, tools}" \
    jeval 'd["ok"] is True and d["plugin"]["id"]=="com.example.hello" and d["plugin"]["version"]=="1.0.0" and d["plugin"]["tools"]==[{"name":"say_hello","modelVisible":True}] and d["plugin"]["replaced"] is False' "$OUT"
for f in full todo-quadrant hostile/crash-mid-call hostile/idle-hang hostile/content-not-array \
    hostile/big-results hostile/stdout-garbage hostile/crash-loop hostile/ui-push; do
    demo inst.x install "$FIX/$f" --dir "$DIR"
    check "install $f: ok" jeval 'd["ok"] is True' "$OUT"
done
demo inst.again install "$FIX/hello" --dir "$DIR"
check "re-install hello: replaced, previousVersion 1.0.0" \
    jeval 'd["ok"] and d["plugin"]["replaced"] is True and d["plugin"]["previousVersion"]=="1.0.0"' "$OUT"
demo inst.bad install "$FIX/invalid/annotations-not-boolean" --dir "$DIR"
check "install an invalid manifest: exit 1" test "$RC" -eq 1
check "install an invalid manifest: {ok:false, error: code invalid_manifest, message, problems}" \
    jeval 'd["ok"] is False and d["error"]["code"]=="invalid_manifest" and d["error"]["message"] and d["error"]["problems"][0]["path"]=="/tools/0/annotations/destructiveHint"' "$OUT"
demo inst.missing install "$TMP/no-such-folder" --dir "$DIR"
check "install a missing folder: exit 1 (rc=$RC)" test "$RC" -eq 1
check "install a missing folder: code not_found" jeval 'd["error"]["code"]=="not_found"' "$OUT"
check "install: sanitizers clean" sanitizer_clean "$TMP"/inst.*.err

# ---------------------------------------------------------------------------
echo "# list"
demo list list --dir "$DIR" --json
check "list --json: exit 0 (rc=$RC)" test "$RC" -eq 0
check "list --json: one line" one_line list
check "list --json: 10 plugins with id, name, version, enabled, tools" \
    jeval 'len(d)==10 and all(set(["id","name","version","enabled","tools"]) <= set(p) for p in d) and all(p["enabled"] is True for p in d)' "$OUT"
check "list --json: the parser-only tool is listed with modelVisible false" \
    jeval '{"name":"parse_markdown","modelVisible":False} in [p for p in d if p["id"]=="com.example.full"][0]["tools"]' "$OUT"
demo list.table list --dir "$DIR"
check "list (table): one row per plugin" test "$(wc -l <"$TMP/list.table.out")" -eq 10
check "list: sanitizers clean" sanitizer_clean "$TMP"/list*.err

# ---------------------------------------------------------------------------
echo "# call"
demo call.ok call --dir "$DIR" com.example.hello say_hello '{"name":"Ada"}'
check "call ok: exit 0" test "$RC" -eq 0
check "call ok: {ok:true, result.content: Hello, Ada!}" \
    jeval 'd["ok"] is True and d["result"]["content"]==[{"type":"text","text":"Hello, Ada!"}]' "$OUT"
demo call.cwd call --dir "$DIR" com.example.full do_something '{}' --cwd /some/where --timeout-ms 8000
check "call --cwd reaches context.cwd; details passed on" \
    jeval '"Inspect /some/where" in d["result"]["content"][0]["text"] and len(d["result"]["details"]["todos"])==3' "$OUT"
call_kind schema schema com.example.hello say_hello '{"name":7}'
check "schema: errors name the path" jeval 'd["error"]["errors"][0]["path"]=="/name"' "$OUT"
call_kind unknown unknown_tool com.example.hello no_such_tool '{}'
call_kind toolerr tool_error com.example.full export_pdf '{"content":"x","outputPath":"relative.pdf"}'
check "tool_error: the plugin's own message" \
    jeval '"outputPath must be absolute" in json.dumps(d["error"])' "$OUT"
call_kind exited exited test.hostile.crash-mid-call explode '{}'
check "exited: exit code 3 and the stderr line" \
    jeval 'd["error"]["exitCode"]==3 and "boom mid-call" in d["error"]["stderrTail"]' "$OUT"
call_kind timeout timeout test.hostile.idle-hang hang '{}' --timeout-ms 300
call_kind protocol protocol test.hostile.content-not-array bad_content '{}'
call_kind toolarge too_large test.hostile.big-results big_20mib '{}'
demo garbage call --dir "$DIR" test.hostile.stdout-garbage answer '{}'
check "stdout garbage: ok, the real answer" \
    jeval 'd["ok"] and d["result"]["content"][0]["text"]=="real answer via IPC"' "$OUT"
check "stdout garbage: the plugin's stdout never reaches ours (one line)" one_line garbage
# show_notification in a one-shot call: the same handler as serve's.
demo notify call --dir "$DIR" local.todo-quadrant manage_todo_quadrant '{"action":"remind_now"}'
export NOTIFY_OUT="$TMP/notify.out"
check "call show_notification: exit 0 (rc=$RC)" test "$RC" -eq 0
check "call show_notification: two JSON lines, host_request then the answer" \
    jeval '[e.get("event") for e in L(env["NOTIFY_OUT"])]==["host_request", None]'
check "call show_notification: host_request printed as serve prints it, answered {shown:true}" \
    jeval 'L(env["NOTIFY_OUT"])[0]["capability"]=="show_notification" and L(env["NOTIFY_OUT"])[0]["plugin"]=="local.todo-quadrant" and L(env["NOTIFY_OUT"])[0]["answer"]=={"shown":True} and L(env["NOTIFY_OUT"])[0]["answered"] is True and "title" in L(env["NOTIFY_OUT"])[0]["params"] and isinstance(L(env["NOTIFY_OUT"])[0]["id"], int)'
check "call show_notification: the plugin got {shown:true} (Reminder shown.), the answer is the last line" \
    jeval 'L(env["NOTIFY_OUT"])[-1]["ok"] is True and L(env["NOTIFY_OUT"])[-1]["result"]["content"]==[{"type":"text","text":"Reminder shown."}] and L(env["NOTIFY_OUT"])[-1]["result"]["details"]=={"shown":True}'
check "call: no plugin process left after one-shot calls" no_plugin_process
check "call: sanitizers clean" sanitizer_clean "$TMP"/call.*.err "$TMP"/schema.err "$TMP"/unknown.err \
    "$TMP"/toolerr.err "$TMP"/exited.err "$TMP"/timeout.err "$TMP"/protocol.err "$TMP"/toolarge.err "$TMP"/garbage.err \
    "$TMP"/notify.err

# ---------------------------------------------------------------------------
echo "# serve"
mkfifo "$TMP/serve.in"
spawn -C "$TMP/session" "$TMP/serve.in" "$TMP/serve.out" "$TMP/serve.err" \
    env "${SAN_ENV[@]}" "$DEMO" plugins serve --dir "$DIR" --timeout-ms 8000
SPID=$LAST_PID
peer_attach serve "$SPID" "$TMP/serve.in"
expect_ready "$TMP/serve.out" "serve: ready event" "$TMP/serve.err"
check "serve: ready names the session folder and the plugins" \
    jeval 'd["cwd"]==env["TMP"]+"/session" and "com.example.full" in d["plugins"] and d["pluginsDir"]==env["DIR"]' "$READY"
check "serve: ready carries the plugin MCP server (url, bearer header, env naming the demo's pid, lock file, tools)" \
    jeval '(lambda m: m["serverName"]=="qwen-companion-plugins" and m["url"].startswith("http://127.0.0.1:") and m["url"].endswith("/mcp") and m["headers"]["Authorization"].startswith("Bearer ") and m["env"]=={"QWEN_COMPANION_PLUGINS_PID": m["lockFile"].rsplit("/",1)[1][:-len(".lock")]} and m["lockFile"].startswith(env["QWEN_HOME"]+"/companion/plugins-mcp/") and "hello_say_hello" in m["tools"] and "plugins-status" in m["tools"])(d["mcp"])' "$READY"
check "serve: ready carries the view server's views and panels (with their page URLs)" \
    jeval '(lambda v, p: ("local.todo-quadrant","quadrant") in [(x["plugin"],x["id"]) for x in v] and ("com.example.full","board") in [(x["plugin"],x["id"]) for x in v] and [x["plugin"] for x in p]==["com.example.full"] and all(x["url"].startswith("http://127.0.0.1:") and "/v/" in x["url"] for x in v+p))(d["views"], d["panels"])' "$READY"
MCP_LOCK=$(client get "$READY" mcp lockFile)
export MCP_LOCK
check "serve: the MCP lock file exists" test -f "$MCP_LOCK"
check "serve: the lock file holds the ready line's token" \
    jeval '"Bearer "+json.load(open(env["MCP_LOCK"]))["authToken"]==d["mcp"]["headers"]["Authorization"]' "$READY"
check "serve: an MCP client initializes with the lock file's token" \
    client init --lock "$MCP_LOCK" --state "$TMP/mcp.state"
client list --state "$TMP/mcp.state" >"$TMP/mcp.list" 2>"$TMP/mcp.list.err"
check "serve: tools/list over MCP lists the plugin tools" \
    jeval '"hello_say_hello" in [t["name"] for t in d["tools"]] and "plugins-status" in [t["name"] for t in d["tools"]]' "$(cat "$TMP/mcp.list")"
export S="$TMP/serve.out"
to_peer serve 'call test.hostile.ui-push progress {"steps":3}'
expect "$S" "serve: call ui-push answered" 'e["event"]=="result" and e["command"]=="call" and e["ok"]'
check "serve: 3 ui_push events with channel and payload, in order, before the result" jeval '(
[e["payload"] for e in L(env["S"]) if e["event"]=="ui_push"]==[{"step":1,"of":3},{"step":2,"of":3},{"step":3,"of":3}]
and all(e["channel"]=="progress" and e["plugin"]=="test.hostile.ui-push" for e in L(env["S"]) if e["event"]=="ui_push")
and max(i for i,e in enumerate(L(env["S"])) if e["event"]=="ui_push") < [i for i,e in enumerate(L(env["S"])) if e["event"]=="result"][0])'
check "serve: plugin_started with its pid" \
    jeval 'any(e["event"]=="plugin_started" and e["plugin"]=="test.hostile.ui-push" and e["pid"]>0 for e in L(env["S"]))'
to_peer serve 'call local.todo-quadrant manage_todo_quadrant {"action":"remind_now"}'
expect "$S" "serve: host_request show_notification printed with the demo's answer" \
    'e["event"]=="host_request" and e["capability"]=="show_notification" and e["plugin"]=="local.todo-quadrant" and e["answer"]=={"shown":True} and e["answered"] is True and "title" in e["params"]'
expect "$S" "serve: the plugin saw the answer (Reminder shown.)" \
    'e["event"]=="result" and e["command"]=="call" and e["ok"] and e["result"]["content"][0]["text"]=="Reminder shown."'
to_peer serve 'visible com.example.full'
to_peer serve 'options com.example.full mode'
printf '# notes\n' >"$TMP/doc.md"
to_peer serve "parse text/markdown $TMP/doc.md"
to_peer serve 'call com.example.hello say_hello {"name":1}'
to_peer serve 'unload com.example.full'
to_peer serve 'startup-finished'
to_peer serve 'enable no.such.plugin'
to_peer serve 'visible'
expect "$S" "serve: the last command is answered" 'e["event"]=="error" and "visible" in e["message"]'
check "serve: one result per command, in command order" jeval '
[e["command"] for e in L(env["S"]) if e["event"]=="result"]==["call","call","visible","options","parse","call","unload","startup-finished","enable"]'
check "serve: visible uses the session folder (a git repository) as context.cwd" \
    jeval '[e for e in L(env["S"]) if e["event"]=="result" and e["command"]=="visible"][0]["visible"] is True'
check "serve: options is an array, Auto first" \
    jeval '[o["value"] for o in [e for e in L(env["S"]) if e["event"]=="result" and e["command"]=="options"][0]["options"]]==["auto","fast","accurate"]'
check "serve: parse gives an object with success" \
    jeval '[e for e in L(env["S"]) if e["event"]=="result" and e["command"]=="parse"][0]["parsed"]=={"success":True,"text":"# notes\n"}'
check "serve: a failed call carries error.kind" \
    jeval '[e for e in L(env["S"]) if e["event"]=="result" and e["command"]=="call"][2]["error"]["kind"]=="schema"'
check "serve: unload ends the plugin (plugin_exit, expected)" \
    jeval 'any(e["event"]=="plugin_exit" and e["plugin"]=="com.example.full" and e["expected"] is True for e in L(env["S"]))'
check "serve: startup-finished starts the onStartupFinished plugins" \
    jeval 'sorted(s["plugin"] for s in [e for e in L(env["S"]) if e["event"]=="result" and e["command"]=="startup-finished"][0]["started"])==["com.example.full","local.todo-quadrant"]'
check "serve: enable of an unknown plugin is refused" \
    jeval '[e for e in L(env["S"]) if e["event"]=="result" and e["command"]=="enable"][0]["ok"] is False'

# The crash-loop breaker: three unexpected exits, then disabled without a spawn.
for i in 1 2 3; do
    to_peer serve 'call test.hostile.crash-loop ping {}'
    expect "$S" "serve: crash-loop answers ping ($i)" 'e["event"]=="result" and e["command"]=="call" and e.get("result",{}).get("content",[{}])[0].get("text")=="pong"' --count "$i"
    expect "$S" "serve: crash-loop exit $i (plugin_exit, not expected)" 'e["event"]=="plugin_exit" and e["plugin"]=="test.hostile.crash-loop" and e["expected"] is False' --count "$i"
done
expect "$S" "serve: plugin_disabled with the plugin id" 'e["event"]=="plugin_disabled" and e["plugin"]=="test.hostile.crash-loop" and e["reason"]'
to_peer serve 'call test.hostile.crash-loop ping {}'
expect "$S" "serve: a call of the disabled plugin fails disabled" \
    'e["event"]=="result" and e["command"]=="call" and not e["ok"] and e["error"]["kind"]=="disabled"'
to_peer serve 'enable test.hostile.crash-loop'
expect "$S" "serve: enable answers ok" 'e["event"]=="result" and e["command"]=="enable" and e["ok"]'

to_peer serve 'scheme dark'
expect "$S" "serve: scheme dark answered" 'e["event"]=="result" and e["command"]=="scheme" and e["ok"] and e["colorScheme"]=="dark"'
to_peer serve 'scheme blue'
expect "$S" "serve: scheme blue refused" 'e["event"]=="result" and e["command"]=="scheme" and not e["ok"] and e["error"]["status"]=="QC_INVALID_ARGUMENT"'
to_peer serve 'stop'
wait_exit "$SPID" "$T"
close_peer serve
check "serve: stop exits 0 (rc=$RC)" test "$RC" -eq 0
check "serve: stop is answered: its result is the last line, after stopped" \
    jeval 'L(env["S"])[-2:]==[{"event":"stopped"},{"event":"result","command":"stop","ok":True}]'
check "serve: one result per command, stop's last" jeval '
[e["command"] for e in L(env["S"]) if e["event"]=="result"][-3:]==["scheme","scheme","stop"]'
check "serve: stop removes the MCP lock file" test ! -e "$MCP_LOCK"
check "serve: every line is a JSON event" client valid "$S"
check "serve: no plugin process left after stop" no_plugin_process
check "serve: sanitizers clean" sanitizer_clean "$TMP/serve.err"

# EOF and SIGTERM end every plugin and exit 0 too.
for how in eof sigterm; do
    mkfifo "$TMP/$how.in"
    spawn -C "$TMP/session" "$TMP/$how.in" "$TMP/$how.out" "$TMP/$how.err" \
        env "${SAN_ENV[@]}" "$DEMO" plugins serve --dir "$DIR"
    P=$LAST_PID
    peer_attach "$how" "$P" "$TMP/$how.in"
    expect_ready "$TMP/$how.out" "serve ($how): ready" "$TMP/$how.err"
    to_peer "$how" 'call com.example.hello say_hello {"name":"X"}'
    expect "$TMP/$how.out" "serve ($how): call answered" 'e["event"]=="result" and e["ok"]'
    check "serve ($how): the plugin runs" test -n "$(plugin_pids)"
    if [ "$how" = eof ]; then
        close_peer "$how"
    else
        kill -TERM "$P"
    fi
    wait_exit "$P" "$T"
    close_peer "$how"
    check "serve ($how): exit 0 (rc=$RC)" test "$RC" -eq 0
    check "serve ($how): stopped is the last line (no stop result: no stop command)" \
        jeval 'L(env["TMP"]+"/'"$how"'.out")[-1]=={"event":"stopped"} and not any(e.get("command")=="stop" for e in L(env["TMP"]+"/'"$how"'.out"))'
    check "serve ($how): no plugin process left" no_plugin_process
    check "serve ($how): sanitizers clean" sanitizer_clean "$TMP/$how.err"
done

# ---------------------------------------------------------------------------
echo "# register-mcp"
mkdir -p "$TMP/proj/.qwen"
printf '#!/bin/sh\nexit 1\n' >"$TMP/bridge"
chmod +x "$TMP/bridge"
PSET="$TMP/proj/.qwen/settings.json"
printf '{\n  // mine\n  "theme": "dark"\n}\n' >"$PSET"
export PSET BRIDGE="$TMP/bridge" ROOT
cd "$TMP/proj" || exit 1
demo reg.add register-mcp --scope project --bridge "$TMP/bridge"
check "register-mcp project: exit 0 (rc=$RC), one line" test "$RC" -eq 0 -a "$(wc -l <"$TMP/reg.add.out")" -eq 1
check "register-mcp project: {ok, added, settings, approve}" \
    jeval 'd["ok"] is True and d["change"]=="added" and d["settings"]==env["PSET"] and d["approve"]=="qwen mcp approve qwen-companion-plugins"' "$OUT"
check "register-mcp project: the comment stays, the entry names the bridge" \
    jeval 'open(env["PSET"]).read().startswith("{\n  // mine\n") and ("\"command\": \"%s\"" % env["BRIDGE"]) in open(env["PSET"]).read()'
demo reg.again register-mcp --scope project --bridge "$TMP/bridge"
check "register-mcp again: unchanged" jeval 'd["ok"] and d["change"]=="unchanged"' "$OUT"
demo reg.always register-mcp --scope project --bridge "$TMP/bridge" --always-load-tools
check "register-mcp --always-load-tools: replaced, alwaysLoadTools true" \
    jeval 'd["change"]=="replaced" and "\"alwaysLoadTools\": true" in open(env["PSET"]).read()' "$OUT"
demo reg.rm register-mcp --scope project --remove
check "register-mcp --remove: removed, comment kept" \
    jeval 'd["ok"] and d["change"]=="removed" and "qwen-companion-plugins" not in open(env["PSET"]).read() and "// mine" in open(env["PSET"]).read()' "$OUT"
printf '{\n  "theme": "dark",\n}\n' >"$PSET"
cp "$PSET" "$TMP/bad.copy"
demo reg.bad register-mcp --scope project --bridge "$TMP/bridge"
check "register-mcp on a settings file with a trailing comma: exit 1 (rc=$RC)" test "$RC" -eq 1
check "register-mcp on a bad settings file: {ok:false, error: QC_INVALID_JSON, line 3}" \
    jeval 'd["ok"] is False and d["error"]["status"]=="QC_INVALID_JSON" and "line 3" in d["error"]["message"]' "$OUT"
check "register-mcp on a bad settings file: the file is untouched" cmp -s "$PSET" "$TMP/bad.copy"
demo reg.rel register-mcp --scope project --bridge bridge
check "register-mcp with a relative bridge: exit 1, QC_INVALID_ARGUMENT" \
    jeval 'd["ok"] is False and d["error"]["status"]=="QC_INVALID_ARGUMENT"' "$OUT"
demo reg.noscope register-mcp --bridge "$TMP/bridge"
check "register-mcp without --scope: exit 2 (rc=$RC)" test "$RC" -eq 2
cd "$TMP" || exit 1
# The demo is linked against the library in $CARGO_TARGET_DIR/release (see
# examples/c/Makefile); qc-mcp-bridge is built next to it.
RELEASE=${CARGO_TARGET_DIR:-$ROOT/target}
case $RELEASE in /*) ;; *) RELEASE=$ROOT/$RELEASE ;; esac
export RELEASE=$RELEASE/release
if [ -x "$RELEASE/qc-mcp-bridge" ]; then
    demo reg.user register-mcp --scope user
    check "register-mcp user: the default bridge next to the library, in \$QWEN_HOME/settings.json" \
        jeval 'd["ok"] and d["settings"]==env["QWEN_HOME"]+"/settings.json" and "approve" not in d and os.path.realpath(json.load(open(d["settings"]))["mcpServers"]["qwen-companion-plugins"]["command"])==os.path.realpath(env["RELEASE"]+"/qc-mcp-bridge")' "$OUT"
    demo reg.user.rm register-mcp --scope user --remove
    check "register-mcp user --remove: removed" jeval 'd["ok"] and d["change"]=="removed"' "$OUT"
fi
check "register-mcp: sanitizers clean" sanitizer_clean "$TMP"/reg.*.err

# ---------------------------------------------------------------------------
echo "# uninstall"
demo uninst uninstall com.example.hello --dir "$DIR"
check "uninstall: exit 0, {ok:true, id, dataRemoved:false}" \
    jeval 'd=={"ok":True,"id":"com.example.hello","dataRemoved":False}' "$OUT"
demo uninst.again uninstall com.example.hello --dir "$DIR"
check "uninstall again: exit 1 (rc=$RC)" test "$RC" -eq 1
check "uninstall again: the install refusal shape, code not_found" \
    jeval 'd["ok"] is False and d["error"]["code"]=="not_found" and d["error"]["message"]' "$OUT"
demo uninst.data uninstall local.todo-quadrant --dir "$DIR" --remove-data
check "uninstall --remove-data: dataRemoved" jeval 'd["ok"] and d["dataRemoved"] is True' "$OUT"
demo list.end list --dir "$DIR" --json
check "list after uninstall: 8 plugins, hello gone" \
    jeval 'len(d)==8 and "com.example.hello" not in [p["id"] for p in d]' "$OUT"
check "uninstall: sanitizers clean" sanitizer_clean "$TMP"/uninst*.err "$TMP"/list.end.err

check "no plugin process left at the end" no_plugin_process
for pid in $(plugin_pids); do kill -KILL "$pid" 2>/dev/null; done
summary
[ "$FAILED" -eq 0 ]
