#!/usr/bin/env bash
# Scripted test of `qcdemo sessions` (ps, listen, send) under ASan+UBSan.
#
#   tests/c/run_sessions_asan.sh        (from anywhere; builds what it needs)
#
# Runs several `qcdemo-asan sessions listen` processes and one-shot
# `qcdemo-asan sessions send` processes in an isolated HOME, QWEN_HOME,
# XDG_RUNTIME_DIR and TMPDIR, and checks: ps (table and --json fields, and
# the same lines as the real `qwen sessions ps --json` when the CLI is
# installed), sends by name, [ref] and bare ref, an ambiguous name, hold /
# release / deny, refuse, mode parity, controller tokens, a process started
# by a session (own-process, the messaging token), receipts, unregistering on
# EOF, SIGTERM, and `stop` + SIGTERM together (held messages expire at the
# sender), the order of events, and that ASan/LSan/UBSan report nothing.
# Ends with "c-sessions: N passed, M failed[, K skipped]".
#
# Env: PYTHON (python3), QC_TEST_TIMEOUT (seconds per wait, 30),
#      QC_KEEP_TMP=1 keeps the temporary directory, NO_CARGO=1 is passed to make,
#      QWEN_CLI_JS (path of @qwen-code/qwen-code's cli.js for the ps comparison;
#      default: the pinned CLI, installed into target/e2e/qwen with npm if needed;
#      a failed install fails the check).
set -u
# shellcheck source=../lib/harness.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"

DEMO="$ROOT/target/c/qcdemo-asan"
T=${QC_TEST_TIMEOUT:-30}
KEEP_RUN=${QC_KEEP_TMP:-0}
declare -A LPID
# Under /tmp whatever TMPDIR says: socket paths must stay under 104 bytes.
TMP=$(mktemp -d /tmp/qc-sess.XXXXXX)
harness_init c-sessions tap "$TMP"

# listen TAG ARGS... : start `sessions listen ARGS` fed by a FIFO; wait for
# "ready" and export <TAG>_SID, <TAG>_REF, <TAG>_IPC, <TAG>_RECORD.
listen() {
    local tag=$1 ready
    shift
    mkfifo "$TMP/in.$tag"
    spawn "$TMP/in.$tag" "$TMP/out.$tag" "$TMP/err.$tag" env "${SAN_ENV[@]}" "$DEMO" sessions listen "$@"
    LPID[$tag]=$LAST_PID
    peer_attach "$tag" "$LAST_PID" "$TMP/in.$tag"
    expect_ready "$TMP/out.$tag" "$tag: ready event" "$TMP/err.$tag"
    ready=$READY
    export "${tag}_SID=$(client get "$ready" sessionId)" "${tag}_REF=$(client get "$ready" ref)" \
        "${tag}_IPC=$(client get "$ready" ipcPath)" "${tag}_RECORD=$(client get "$ready" record)"
}

# to TAG LINE : one command on the listener's stdin
to() { to_peer "$1" "$2"; }

# close_stdin TAG
close_stdin() { close_peer "$1"; }

# oneshot TAG ARGS... : `sessions send ARGS` -> $TMP/send.TAG.out/.err, RC
oneshot() {
    local tag=$1
    shift
    env "${SAN_ENV[@]}" timeout 90 "$DEMO" sessions send "$@" >"$TMP/send.$tag.out" 2>"$TMP/send.$tag.err"
    RC=$?
}

# The msgId of the first "sent" event of FILE whose "to" is TO.
sent_id() { client eval 'print([e["msgId"] for e in L(env["F"]) if e and e["event"]=="sent" and e["to"]==env["TO"]][0]) or True' 2>/dev/null; }

# ---------------------------------------------------------------------------
echo "# build"
build_c "build qcdemo-asan (-Wall -Wextra -Werror -Wpedantic)" asan

# Isolated: the real ~/.qwen, runtime dir and /tmp sockets are never touched.
export HOME="$TMP/home" QWEN_HOME="$TMP/qwen-home" XDG_RUNTIME_DIR="$TMP/run" TMPDIR="$TMP/tmp"
unset QWEN_CODE_MESSAGING_SOCKET QWEN_CODE_MESSAGING_TOKEN QWEN_CODE_IDE_SERVER_PORT QWEN_CODE_IDE_WORKSPACE_PATH
mkdir -p "$HOME" "$QWEN_HOME" "$XDG_RUNTIME_DIR" "$TMPDIR"
chmod 700 "$XDG_RUNTIME_DIR"
export TMP SESSIONS_DIR="$QWEN_HOME/sessions"
cd "$TMP" || exit 1

# ---------------------------------------------------------------------------
echo "# usage"
env "${SAN_ENV[@]}" "$DEMO" sessions --help >"$TMP/usage.out" 2>"$TMP/usage.err"
check "sessions --help exits 0 with usage" grep -q '^usage: qcdemo sessions ps' "$TMP/usage.out"
env "${SAN_ENV[@]}" "$DEMO" sessions frobnicate >/dev/null 2>>"$TMP/usage.err"
RC=$?
check "unknown sessions command exits 2 (rc=$RC)" test $RC -eq 2
env "${SAN_ENV[@]}" "$DEMO" sessions listen --policy maybe >/dev/null 2>>"$TMP/usage.err"
RC=$?
check "listen --policy maybe exits 2 (rc=$RC)" test $RC -eq 2
env "${SAN_ENV[@]}" "$DEMO" sessions send onlyaddress >/dev/null 2>>"$TMP/usage.err"
RC=$?
check "send without TEXT exits 2 (rc=$RC)" test $RC -eq 2
env "${SAN_ENV[@]}" "$DEMO" sessions send a b --controller-token= >/dev/null 2>>"$TMP/usage.err"
RC=$?
check "send with an empty --controller-token exits 2 (rc=$RC)" test $RC -eq 2
env "${SAN_ENV[@]}" "$DEMO" sessions send a b --wait -1 >/dev/null 2>>"$TMP/usage.err"
RC=$?
check "send --wait -1 exits 2 (rc=$RC)" test $RC -eq 2
env "${SAN_ENV[@]}" "$DEMO" sessions ps >"$TMP/ps0.out" 2>>"$TMP/usage.err"
check "ps with no session says so" grep -qx 'No Qwen Code sessions are registered right now.' "$TMP/ps0.out"
env "${SAN_ENV[@]}" "$DEMO" sessions ps --json >"$TMP/ps0.json" 2>>"$TMP/usage.err"
check "ps --json with no session prints nothing" test ! -s "$TMP/ps0.json"
check "usage paths: sanitizers clean" sanitizer_clean "$TMP/usage.err"

# ---------------------------------------------------------------------------
echo "# two listeners: alpha (mode parity, review class bypass), bravo (policy hold)"
listen A --name alpha --mode bypass
listen B --name bravo --policy hold
check "records and sockets exist" test -f "$A_RECORD" -a -f "$B_RECORD" -a -S "$A_IPC" -a -S "$B_IPC"
check "records live in \$QWEN_HOME/sessions, sockets under \$XDG_RUNTIME_DIR/qwen-socks" \
    jeval 'os.path.dirname(env["A_RECORD"])==env["SESSIONS_DIR"] and os.path.dirname(env["B_IPC"])==os.path.join(env["XDG_RUNTIME_DIR"],"qwen-socks")'
check "ready: ref is sha256(sessionId)[0:6], name as given" \
    jeval '__import__("hashlib").sha256(env["A_SID"].encode()).hexdigest()[:6]==env["A_REF"] and json.load(open(env["A_RECORD"]))["name"]=="alpha"'

# ---------------------------------------------------------------------------
echo "# ps"
env "${SAN_ENV[@]}" "$DEMO" sessions ps >"$TMP/ps.out" 2>"$TMP/ps.err"
check "ps: table header" grep -qE '^NAME +REF +KIND +PID +AGE +DIRECTORY$' "$TMP/ps.out"
check "ps: alpha row (ref, kind external, pid)" \
    grep -qE "^alpha +$A_REF +external +${LPID[A]} +[0-9]+[smhd] +$TMP\$" "$TMP/ps.out"
check "ps: bravo row" grep -qE "^bravo +$B_REF +external +${LPID[B]} " "$TMP/ps.out"
env "${SAN_ENV[@]}" "$DEMO" sessions ps --json >"$TMP/ps.json" 2>>"$TMP/ps.err"
check "ps --json: one line per live record, both listeners" \
    jeval 'sorted(e["sessionId"] for e in L(env["TMP"]+"/ps.json"))==sorted([env["A_SID"],env["B_SID"]])'
check "ps --json: exactly the fields of qwen sessions ps --json, in its order" \
    jeval 'all(list(e)==["schemaVersion","pid","procStart","pidNs","sessionId","cwd","name","startedAt","qwenVersion","kind","ipcPath"] for e in L(env["TMP"]+"/ps.json"))'
check "ps --json: values as in the records (no ipcToken), newest first" \
    jeval '[{k:v for k,v in json.load(open(env[t+"_RECORD"])).items() if k!="ipcToken"} for t in "BA"]==L(env["TMP"]+"/ps.json")'
check "ps: sanitizers clean" sanitizer_clean "$TMP/ps.err"

if [ -z "${QWEN_CLI_JS:-}" ]; then
    # The pinned CLI, installed once into target/e2e/qwen (as the e2e suites do).
    need_python_and_node
    if ensure_qwen; then QWEN_CLI_JS=$QWEN_PKG/cli.js; else QWEN_CLI_JS=""; fi
fi
QWEN_CMD=()
if [ -f "$QWEN_CLI_JS" ] && command -v node >/dev/null 2>&1; then
    QWEN_CMD=(node "$QWEN_CLI_JS")
elif command -v qwen >/dev/null 2>&1; then
    QWEN_CMD=(qwen)
fi
if [ ${#QWEN_CMD[@]} -gt 0 ]; then
    timeout 120 "${QWEN_CMD[@]}" sessions ps --json >"$TMP/qwen-ps.json" 2>"$TMP/qwen-ps.err"
    RC=$?
    check "real CLI: qwen sessions ps --json exits 0 (rc=$RC)" test $RC -eq 0
    check "real CLI: qwen sessions ps --json prints the same lines as ours" \
        diff "$TMP/qwen-ps.json" "$TMP/ps.json"
else
    check "real CLI ps comparison: the pinned CLI could be installed" false
fi

# ---------------------------------------------------------------------------
echo "# one-shot sends to alpha: name, [ref], bare ref (fromMode bypass = alpha's class)"
i=0
for addr in alpha "[$A_REF]" "$A_REF"; do
    i=$((i + 1))
    export ADDR="$addr" TO="$addr" BODY="by address $addr" F="$TMP/send.addr$i.out"
    oneshot "addr$i" "$addr" "$BODY" --from-mode bypass --wait "$T"
    check "send $addr: exit 0 (rc=$RC)" test $RC -eq 0
    check "send $addr: sent, then the delivered receipt, nothing else" \
        jeval '[(e["event"],e.get("status")) for e in L(env["F"])]==[("sent",None),("receipt","delivered")] and L(env["F"])[0]["to"]==env["ADDR"] and L(env["F"])[0]["address"]=="alpha" and L(env["F"])[0]["toSessionId"]==env["A_SID"] and L(env["F"])[0]["confirmed"] is True'
    check "send $addr: the receipt carries the control frame as received" \
        jeval '(lambda s,r: r["msgId"]==s["msgId"] and r["previous"]=="pending" and r["frame"]["type"]=="control" and r["frame"]["action"]=="delivery_status" and r["frame"]["status"]=="delivered" and r["frame"]["origMsgId"]==s["msgId"] and r["frame"]["from"]==env["A_IPC"] and r["frame"]["msgId"]!=s["msgId"])(*L(env["F"]))'
    MID=$(sent_id)
    export MID
    expect "$TMP/out.A" "alpha: message by $addr, origin peer, frame as received" \
        'e["event"]=="message" and e["origin"]=="peer" and "controller" not in e and e["frame"]["msgId"]==env["MID"] and e["frame"]["message"]=={"role":"user","content":env["BODY"]} and e["frame"]["fromMode"]=="bypass" and e["frame"]["toSessionId"]==env["A_SID"] and e["frame"]["type"]=="user" and e["frame"]["msgV"]==1 and len(e["frame"]["replyToken"])==64 and e["frame"]["from"].endswith(".sock")'
done
check "one-shot senders left no record behind" \
    jeval 'sorted(os.listdir(env["SESSIONS_DIR"]))==sorted(os.path.basename(env[t+"_RECORD"]) for t in "AB")'
check "one-shot senders: sanitizers clean" sanitizer_clean "$TMP"/send.addr*.err

# ---------------------------------------------------------------------------
echo "# mode parity at alpha (review class bypass): absent or other fromMode -> held"
export F="$TMP/send.nomode.out" TO=alpha
oneshot nomode alpha "no mode asserted" --wait 3
check "send without --from-mode: exit 0 (sent) (rc=$RC)" test $RC -eq 0
check "send without --from-mode: sent, held receipt, wait ends (held is not final)" \
    jeval '[(e["event"],e.get("status")) for e in L(env["F"])]==[("sent",None),("receipt","held")]'
NOMODE=$(sent_id)
export NOMODE
expect "$TMP/out.A" "alpha: held event (cause no-mode-asserted) with the frame" \
    'e["event"]=="held" and e["msgId"]==env["NOMODE"] and e["cause"]=="no-mode-asserted" and e["origin"]=="peer" and e["sessionId"]==env["A_SID"] and e["frame"]["message"]["content"]=="no mode asserted" and "fromMode" not in e["frame"] and e["expiresAt"]>e["heldAt"]'
export F="$TMP/send.prompting.out"
oneshot prompting alpha "prompting mode" --from-mode prompting --wait 3
check "send --from-mode prompting to a bypass session: held receipt" \
    jeval '[(e["event"],e.get("status")) for e in L(env["F"])]==[("sent",None),("receipt","held")]'
MISMATCH=$(sent_id)
export MISMATCH
expect "$TMP/out.A" "alpha: held event (cause mode-mismatch)" \
    'e["event"]=="held" and e["msgId"]==env["MISMATCH"] and e["cause"]=="mode-mismatch" and e["frame"]["fromMode"]=="prompting"'
to A "release $NOMODE"
expect "$TMP/out.A" "alpha: release -> the message is delivered" \
    'e["event"]=="message" and e["frame"]["msgId"]==env["NOMODE"] and e["origin"]=="peer"'
to A "deny $MISMATCH"
to A "release $MISMATCH"
expect "$TMP/out.A" "alpha: release of a denied message -> error QC_NOT_FOUND" \
    'e["event"]=="error" and e["message"].startswith("release: QC_NOT_FOUND")'
check "alpha: each held message reported once" \
    jeval 'sorted(e["msgId"] for e in L(env["TMP"]+"/out.A") if e["event"]=="held")==sorted([env["NOMODE"],env["MISMATCH"]])'

# ---------------------------------------------------------------------------
echo "# bravo's policy hold: held -> release -> delivered, held -> deny -> denied (alpha sends)"
export F="$TMP/out.A" TO=bravo
to A "send bravo please hold this"
expect "$TMP/out.A" "alpha: sent to bravo" 'e["event"]=="sent" and e["to"]=="bravo" and e["toSessionId"]==env["B_SID"]'
H1=$(sent_id)
export H1
expect "$TMP/out.A" "alpha: held receipt" 'e["event"]=="receipt" and e["msgId"]==env["H1"] and e["status"]=="held" and e["frame"]["status"]=="held"'
export A_TOKEN
A_TOKEN=$(client eval 'print(json.load(open(env["A_RECORD"]))["ipcToken"]) or True')
expect "$TMP/out.B" "bravo: held event (explicit setting); frame from alpha with alpha's replyToken" \
    'e["event"]=="held" and e["msgId"]==env["H1"] and e["cause"]=="explicit-setting" and e["frame"]["from"]==env["A_IPC"] and e["frame"]["replyToken"]==env["A_TOKEN"] and e["frame"]["fromName"]=="alpha" and e["frame"]["message"]["content"]=="please hold this" and "fromMode" not in e["frame"]'
to B "release $H1"
expect "$TMP/out.B" "bravo: release -> message event" 'e["event"]=="message" and e["frame"]["msgId"]==env["H1"] and e["origin"]=="peer"'
expect "$TMP/out.A" "alpha: delivered receipt after held" \
    'e["event"]=="receipt" and e["msgId"]==env["H1"] and e["status"]=="delivered" and e["previous"]=="held"'
to A "send --from-mode bypass bravo deny this one"
expect "$TMP/out.A" "alpha: second send to bravo" 'e["event"]=="sent" and e["to"]=="bravo"' --count 2
H2=$(client eval 'print([e["msgId"] for e in L(env["F"]) if e["event"]=="sent" and e["to"]=="bravo"][1]) or True')
export H2
expect "$TMP/out.B" "bravo: held again (policy beats a matching mode)" 'e["event"]=="held" and e["msgId"]==env["H2"] and e["frame"]["fromMode"]=="bypass"'
to B "deny $H2"
expect "$TMP/out.A" "alpha: denied receipt" \
    'e["event"]=="receipt" and e["msgId"]==env["H2"] and e["status"]=="denied" and e["previous"]=="held" and e["frame"]["origMsgId"]==env["H2"]'
check "alpha: each sent line precedes the receipts of its message" \
    jeval '(lambda ev: all(min(i for i,e in enumerate(ev) if e["event"]=="receipt" and e["msgId"]==m) > [i for i,e in enumerate(ev) if e["event"]=="sent" and e["msgId"]==m][0] for m in (env["H1"],env["H2"])))(L(env["F"]))'
export F="$TMP/send.tobravo.out"
oneshot tobravo bravo "one-shot to a hold inbox" --from-mode prompting --wait 3
check "one-shot to bravo: sent, held receipt" \
    jeval '[(e["event"],e.get("status")) for e in L(env["F"])]==[("sent",None),("receipt","held")]'
TB=$(sent_id)
export TB
expect "$TMP/out.B" "bravo: held event for the one-shot send" 'e["event"]=="held" and e["msgId"]==env["TB"]'

# ---------------------------------------------------------------------------
echo "# a second bravo (policy refuse): ambiguous name, refused"
listen C --name bravo --policy refuse
export F="$TMP/out.A"
to A "send bravo which one"
expect "$TMP/out.A" "alpha: send to an ambiguous name -> send_failed listing both candidates" \
    'e["event"]=="send_failed" and e["to"]=="bravo" and e["status"]=="QC_INVALID_ARGUMENT" and "several sessions" in e["error"] and ("bravo [%s]" % env["B_REF"]) in e["error"] and ("bravo [%s]" % env["C_REF"]) in e["error"]'
export F="$TMP/send.ambiguous.out"
oneshot ambiguous bravo "which one" --wait 1
check "one-shot to an ambiguous name: exit 1 (rc=$RC)" test $RC -eq 1
check "one-shot to an ambiguous name: only send_failed" \
    jeval '[e["event"] for e in L(env["F"])]==["send_failed"] and env["C_REF"] in L(env["F"])[0]["error"]'
export F="$TMP/out.A" TO="[$C_REF]"
to A "send [$C_REF] are you there"
expect "$TMP/out.A" "alpha: send by [ref] to the refusing bravo" 'e["event"]=="sent" and e["to"]==env["TO"] and e["toSessionId"]==env["C_SID"]'
R1=$(sent_id)
export R1
expect "$TMP/out.A" "alpha: refused receipt" 'e["event"]=="receipt" and e["msgId"]==env["R1"] and e["status"]=="refused" and e["previous"]=="pending"'
export F="$TMP/send.refused.out"
oneshot refused "$C_REF" "bare ref to a refusing inbox" --wait "$T"
check "one-shot by bare ref to the refusing bravo: sent, refused (final), exit 0" \
    jeval '[(e["event"],e.get("status")) for e in L(env["F"])]==[("sent",None),("receipt","refused")]'
check "the refusing bravo printed no message and no held event" \
    jeval '[e["event"] for e in L(env["TMP"]+"/out.C")]==["ready"]'
to C "stop"
wait_exit "${LPID[C]}" "$T"
check "bravo #2: stop -> exit 0 (rc=$RC)" test "$RC" -eq 0
check "bravo #2: ready, stopped" jeval '[e["event"] for e in L(env["TMP"]+"/out.C")]==["ready","stopped"]'
check "bravo #2: record and socket removed" jeval 'not os.path.exists(env["C_RECORD"]) and not os.path.exists(env["C_IPC"])'
close_stdin C

# ---------------------------------------------------------------------------
echo "# controller tokens (as given on the auth line)"
export CTL_TOKEN="qpc_$(printf '%064d' 7)"
client eval 'json.dump({"schemaVersion":1,"controllers":[{"id":"c_0a1b2c3d","label":"ci bot","tokenHash":__import__("hashlib").sha256(env["CTL_TOKEN"].encode()).hexdigest(),"createdAt":1}]}, open(env["QWEN_HOME"]+"/peer-controllers.json","w")) or True' >/dev/null
chmod 600 "$QWEN_HOME/peer-controllers.json"
export F="$TMP/send.ctl.out"
oneshot ctl alpha "from the controller" --controller-token "$CTL_TOKEN" --wait "$T"
check "controller send: sent, delivered (no fromMode needed)" \
    jeval '[(e["event"],e.get("status")) for e in L(env["F"])]==[("sent",None),("receipt","delivered")]'
expect "$TMP/out.A" "alpha: message with origin controller and the grant's label" \
    'e["event"]=="message" and e["origin"]=="controller" and e["controller"]=="ci bot" and e["frame"]["message"]["content"]=="from the controller"'
export F="$TMP/send.badctl.out"
oneshot badctl alpha "unknown controller" --controller-token "not a qpc token" --wait 1
check "unknown controller token: still sent (exit 0), no receipt (dropped unread)" \
    jeval '[e["event"] for e in L(env["F"])]==["sent"]'
check "controller sends: sanitizers clean" sanitizer_clean "$TMP/send.ctl.err" "$TMP/send.badctl.err"

# ---------------------------------------------------------------------------
echo "# a process alpha started: the messaging token (own-process)"
to A "run $DEMO sessions send alpha from my child --wait $T >$TMP/child1.out 2>$TMP/child1.err"
expect "$TMP/out.A" "alpha: run ends with exit code 0" 'e["event"]=="ran" and e["exitCode"]==0 and "child1.out" in e["command"]'
check "child: sent to its parent with the messaging token, delivered" \
    jeval '[(e["event"],e.get("status"),e.get("parent")) for e in L(env["TMP"]+"/child1.out")]==[("sent",None,True),("receipt","delivered",None)] and L(env["TMP"]+"/child1.out")[0]["toSessionId"]==env["A_SID"]'
check "alpha: the child's message has origin own-process" \
    jeval '[e["origin"] for e in L(env["TMP"]+"/out.A") if e["event"]=="message" and e["frame"]["message"]["content"]=="from my child"]==["own-process"]'
to A "run $DEMO sessions send bravo from alpha child --wait 3 >$TMP/child2.out 2>$TMP/child2.err"
expect "$TMP/out.A" "alpha: second run ends" 'e["event"]=="ran" and "child2.out" in e["command"]'
check "child: a send to another session is an ordinary one (no parent flag)" \
    jeval '[(e["event"],e.get("status"),e.get("parent")) for e in L(env["TMP"]+"/child2.out")]==[("sent",None,None),("receipt","held",None)]'
expect "$TMP/out.B" "bravo: the child's message arrives as a peer's" \
    'e["event"]=="held" and e["origin"]=="peer" and e["frame"]["message"]["content"]=="from alpha child"'
check "children: sanitizers clean" sanitizer_clean "$TMP/child1.err" "$TMP/child2.err"

# ---------------------------------------------------------------------------
echo "# stdin errors at alpha"
to A "send"
to A "send onlyaddress"
to A "send --from-mode"
to A "release"
to A "frobnicate"
to A "send nobody-here hello"
expect "$TMP/out.A" "send without arguments -> error" 'e["event"]=="error" and e["message"].startswith("send: missing argument")'
expect "$TMP/out.A" "unknown command -> error" 'e["event"]=="error" and e["message"]=="unknown command: frobnicate"'
expect "$TMP/out.A" "unknown address -> send_failed QC_NOT_FOUND" \
    'e["event"]=="send_failed" and e["to"]=="nobody-here" and e["status"]=="QC_NOT_FOUND"'
check "error events: 5 from these lines, 1 from the earlier release" \
    jeval 'len([e for e in L(env["TMP"]+"/out.A") if e["event"]=="error"])==6'

# ---------------------------------------------------------------------------
echo "# EOF unregisters bravo: its held messages expire at the sender"
export F="$TMP/out.A" TO=bravo
to A "send bravo held until EOF"
expect "$TMP/out.A" "alpha: third send to bravo" 'e["event"]=="sent" and e["to"]=="bravo"' --count 3
E1=$(client eval 'print([e["msgId"] for e in L(env["F"]) if e["event"]=="sent" and e["to"]=="bravo"][2]) or True')
export E1
expect "$TMP/out.A" "alpha: held receipt" 'e["event"]=="receipt" and e["msgId"]==env["E1"] and e["status"]=="held"'
expect "$TMP/out.B" "bravo: held event" 'e["event"]=="held" and e["msgId"]==env["E1"]'
close_stdin B
wait_exit "${LPID[B]}" "$T"
check "bravo: EOF -> exit 0 (rc=$RC)" test "$RC" -eq 0
check "bravo: last line stopped" jeval 'L(env["TMP"]+"/out.B")[-1]=={"event":"stopped"}'
check "bravo: record and socket removed" jeval 'not os.path.exists(env["B_RECORD"]) and not os.path.exists(env["B_IPC"])'
expect "$TMP/out.A" "alpha: expired receipt (after held) for the message bravo held" \
    'e["event"]=="receipt" and e["msgId"]==env["E1"] and e["status"]=="expired" and e["previous"]=="held" and e["frame"]["status"]=="expired"'
check "bravo: sanitizers clean" sanitizer_clean "$TMP/err.B"

# ---------------------------------------------------------------------------
echo "# SIGTERM unregisters delta (review class prompting)"
listen D --name delta
export TO=delta
to A "send delta held until SIGTERM"
expect "$TMP/out.A" "alpha: sent to delta" 'e["event"]=="sent" and e["to"]=="delta"'
D1=$(sent_id)
export D1
expect "$TMP/out.D" "delta: held (no fromMode)" 'e["event"]=="held" and e["msgId"]==env["D1"] and e["cause"]=="no-mode-asserted"'
to A "send --from-mode prompting delta matching mode"
expect "$TMP/out.D" "delta: fromMode prompting (its class) is delivered" \
    'e["event"]=="message" and e["frame"]["message"]["content"]=="matching mode" and e["origin"]=="peer"'
kill -TERM "${LPID[D]}"
wait_exit "${LPID[D]}" "$T"
check "delta: SIGTERM -> exit 0 (rc=$RC)" test "$RC" -eq 0
check "delta: last line stopped" jeval 'L(env["TMP"]+"/out.D")[-1]=={"event":"stopped"}'
check "delta: record and socket removed" jeval 'not os.path.exists(env["D_RECORD"]) and not os.path.exists(env["D_IPC"])'
expect "$TMP/out.A" "alpha: expired receipt for the message delta held" \
    'e["event"]=="receipt" and e["msgId"]==env["D1"] and e["status"]=="expired" and e["previous"]=="held"'
check "delta: sanitizers clean" sanitizer_clean "$TMP/err.D"
close_stdin D

# ---------------------------------------------------------------------------
echo "# stop and SIGTERM together (echo, policy hold)"
listen E --name echo --policy hold
export TO=echo
to A "send echo held until stop and SIGTERM"
expect "$TMP/out.A" "alpha: sent to echo" 'e["event"]=="sent" and e["to"]=="echo"'
X1=$(sent_id)
export X1
expect "$TMP/out.E" "echo: held" 'e["event"]=="held" and e["msgId"]==env["X1"]'
to E "stop"
kill -TERM "${LPID[E]}"
wait_exit "${LPID[E]}" "$T"
check "echo: stop + SIGTERM -> exit 0 (rc=$RC)" test "$RC" -eq 0
check "echo: ready, held, stopped (once)" jeval '[e["event"] for e in L(env["TMP"]+"/out.E")]==["ready","held","stopped"]'
check "echo: record and socket removed" jeval 'not os.path.exists(env["E_RECORD"]) and not os.path.exists(env["E_IPC"])'
expect "$TMP/out.A" "alpha: expired receipt for the message echo held" \
    'e["event"]=="receipt" and e["msgId"]==env["X1"] and e["status"]=="expired"'
check "echo: sanitizers clean" sanitizer_clean "$TMP/err.E"
close_stdin E

# ---------------------------------------------------------------------------
echo "# alpha stops on EOF"
close_stdin A
wait_exit "${LPID[A]}" "$T"
check "alpha: EOF -> exit 0 (rc=$RC)" test "$RC" -eq 0
check "alpha: last line stopped" jeval 'L(env["TMP"]+"/out.A")[-1]=={"event":"stopped"}'
for tag in A B C D E; do
    check "$tag: every stdout line is a JSON event" client valid "$TMP/out.$tag"
done
check "every one-shot stdout line is a JSON event" \
    jeval 'all(e is not None and isinstance(e.get("event"),str) for f in os.listdir(env["TMP"]) if f.startswith("send.") and f.endswith(".out") for e in L(env["TMP"]+"/"+f))'
check "alpha: sanitizers clean" sanitizer_clean "$TMP/err.A"
check "one-shot senders: sanitizers clean (all)" sanitizer_clean "$TMP"/send.*.err
check "no record left in \$QWEN_HOME/sessions" test -z "$(ls -A "$SESSIONS_DIR" 2>/dev/null)"
check "no socket left under \$XDG_RUNTIME_DIR/qwen-socks" test -z "$(ls -A "$XDG_RUNTIME_DIR/qwen-socks" 2>/dev/null)"
check "no qwen-socks-* directory left in \$TMPDIR" test -z "$(ls -d "$TMPDIR"/qwen-socks-* 2>/dev/null)"
env "${SAN_ENV[@]}" "$DEMO" sessions ps >"$TMP/ps-end.out" 2>"$TMP/ps-end.err"
check "ps at the end: no session" grep -qx 'No Qwen Code sessions are registered right now.' "$TMP/ps-end.out"
check "ps at the end: sanitizers clean" sanitizer_clean "$TMP/ps-end.err"

summary
[ "$FAILED" -eq 0 ]
