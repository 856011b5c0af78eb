#!/usr/bin/env bash
# Cross-session interop (issue 4 §5): our participant, through the C demo
# `target/c/qcdemo sessions ...`, against the official `@qwen-code/sdk@0.1.14`
# `PeerEndpoint` and against the real Qwen Code CLI 0.24.4 (registry listing and an
# interactive TUI session under tmux with a scripted fake model). Nothing is skipped: a
# missing prerequisite is installed (npm, apt-get) or built (make -C examples/c); if that
# fails, the run fails.
#
#   tests/interop/run_sessions.sh
#
# Checks (one isolated HOME for the SDK part, another one for the TUI part):
#   SDK -> ours (qcdemo sessions listen; the SDK sends, awaits its receipts)
#     sdk-delivered       fromMode matching the listener's mode -> the listener prints the
#                         message, the SDK gets `delivered`
#     sdk-held-release    other fromMode -> `held` at both ends; `release` -> the message,
#                         the SDK gets held -> delivered
#     sdk-held-deny       no fromMode -> `held`; `deny` -> the SDK gets held -> denied
#     sdk-refused         --policy refuse -> the SDK gets `refused`, nothing printed
#     sdk-policy-accept   --policy accept -> delivered whatever fromMode says
#     sdk-duplicate       the same body again within 30 s -> the SDK gets `dropped`
#                         with dropReason duplicate
#     sdk-controller      an SDK endpoint with a token from `qwen sessions controllers
#                         add` sends with controller: true, no fromMode -> delivered,
#                         the listener sees origin controller and the grant's label
#   ours -> SDK
#     send-to-sdk         `qcdemo sessions send` -> the SDK's onMessage gets the text,
#                         fromMode; its `delivered` receipt reaches us (final)
#     listen-send-to-sdk  `send` on the listener's stdin -> the SDK sees the listener's
#                         name and fromMode; the receipt reaches the listener
#     send-to-sdk-refused an SDK endpoint without onMessage -> its `refused` reaches us
#   registry
#     ps-lists            `qwen sessions ps --json` lists our listeners (pid, name, kind
#                         external, ipcPath; no ipcToken)
#     ours-ps             `qcdemo sessions ps --json` lists the SDK's endpoint and is
#                         identical to `qwen sessions ps --json` (same records, fields)
#     ps-stop, ps-eof     after `stop` / stdin EOF the listener exits 0, its record is
#                         gone and `qwen sessions ps --json` stops listing it
#   interactive TUI (tmux; P = --approval-mode default, Y = --approval-mode yolo)
#     tui-registered      both TUIs publish records with an inbox
#     tui-prompting       to P: fromMode prompting -> delivered; bypass / none -> held
#     tui-bypass          to Y: fromMode bypass -> delivered; prompting -> held
#     tui-envelope        the message delivered to P reaches the fake model inside
#                         <cross_session_message from="<our inbox>" name="<our name>">
#     tui-controller      a token minted by `qwen sessions controllers add --json`:
#                         `qcdemo sessions send --controller-token` (no fromMode) ->
#                         delivered, the model sees origin="controller"
#     tui-send-message    Y's model calls send_message to our listener's name -> held in
#                         our inbox; `release` -> delivered; Y's debug log shows both of
#                         our receipts accepted; the tool result says "Sent to"
#   the Sublime package's Qwen Sessions (participant.py under the stub `sublime`
#   modules, driven by sublime_participant_driver.py, window folder subl-<tag>)
#     sublime-registered  the window is in the registry: `qwen sessions ps --json`
#                         lists sublime-subl-<tag>, kind external
#     sublime-send-selection  the selection, sent with "Send Selection" and P picked
#                         from the sessions list -> delivered in the messages panel; the
#                         model's next request holds it in <cross_session_message
#                         from="<its inbox>" name="sublime-subl-<tag>">
#     sublime-receive     inbox_policy accept; Y's send_message to the editor's name ->
#                         the messages panel shows it with Y's name (peer session)
#     sublime-held-release  inbox_policy default; Y's send_message -> held in the panel;
#                         Review Held Messages -> Release -> the panel shows it once; Y's
#                         debug log accepts pending -> held -> delivered, once each
#     sublime-stop        the window closes: the driver exits 0, record and socket gone
#     tui-expired         /quit in P -> our held messages there come back `expired`
#     listen-stop         the remaining listeners stop cleanly, their records are gone
#
# Setup: qwen 0.24.4 in <repo>/target/e2e/qwen (shared with tests/e2e), the SDK 0.1.14
#   in <repo>/target/interop/sdk (npm, pinned, reused while the version matches), tmux
#   via apt-get if missing, `make -C examples/c` (incremental).
# Knobs: INTEROP_NO_BUILD=1 (use target/c/qcdemo as it is), INTEROP_DEMO=path,
#   INTEROP_STEP_TIMEOUT (20 s per wait), INTEROP_TOTAL_TIMEOUT (240 s after setup),
#   INTEROP_KEEP=1 (keep the run directory even on success).
# Last line: `interop-sessions: N passed, M failed`; exit status 0 only if nothing failed.
set -u -o pipefail
# shellcheck source=../lib/harness.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"

no_args "$@"

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
SDK_VERSION=0.1.14
SDK_CACHE=$ROOT/target/interop/sdk
SDK_PKG=$SDK_CACHE/node_modules/@qwen-code/sdk
DEMO=${INTEROP_DEMO:-$ROOT/target/c/qcdemo}
STEP_TIMEOUT=${INTEROP_STEP_TIMEOUT:-20}
TOTAL_TIMEOUT=${INTEROP_TOTAL_TIMEOUT:-240}
BUILD_TIMEOUT=${INTEROP_BUILD_TIMEOUT:-1800}
KEEP_RUN=${INTEROP_KEEP:-0}

CHECKS=(sdk-delivered sdk-held-release sdk-held-deny sdk-refused sdk-policy-accept
  sdk-duplicate sdk-controller send-to-sdk listen-send-to-sdk send-to-sdk-refused
  ps-lists ours-ps ps-stop ps-eof
  tui-registered tui-prompting tui-bypass tui-envelope tui-controller tui-send-message
  sublime-registered sublime-send-selection sublime-receive sublime-held-release sublime-stop
  tui-expired listen-stop)
harness_init interop-sessions named

iu() { "$PYTHON" "$HERE/interop_util.py" "$@"; }

env_for() { # HOME -> a clean environment (env -i) for every process we start
  printf '%s\n' env -i PATH="$SYS_PATH" HOME="$1" LANG=C.UTF-8 RUST_BACKTRACE=1 \
    NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost
}
qwen_cli() { # HOME ARGS... -> runs the real CLI (non-interactive subcommands)
  local home=$1; shift
  local -a e; mapfile -t e < <(env_for "$home")
  (close_peer_fds; cd "$RUN" && timeout 30 "${e[@]}" QWEN_USAGE_STATISTICS_ENABLED=0 QWEN_TELEMETRY_ENABLED=0 \
    "$NODE" "$QWEN_PKG/cli-entry.js" "$@")
}
demo_run() { # HOME ARGS... -> one-shot qcdemo command, bounded
  local home=$1; shift
  local -a e; mapfile -t e < <(env_for "$home")
  (close_peer_fds; cd "$RUN" && exec timeout 40 "${e[@]}" "$DEMO" "$@")
}

# At cleanup: the peers get `stop` (they remove their records) before their EOF.
peer_stop_line() { case $1 in sdk*|subl) echo '{"cmd":"stop"}' ;; *) echo stop ;; esac; }
# The TUIs' inboxes, looked up before they are killed: qwen keeps its (empty) socket
# directory after /quit, and a killed TUI leaves its socket; both are removed once the
# TUIs are gone.
TUI_SOCKS=()
harness_before_kill() {
  local id name
  for id in "${REC_P:-}" "${REC_Y:-}"; do
    [ -n "$id" ] && name=$(jget "$id" ipcPath 2>/dev/null) && TUI_SOCKS+=("$name")
  done
  for id in "${SID_P:-}" "${SID_Y:-}"; do
    [ -n "$id" ] && [ -n "${HOME_T:-}" ] || continue
    name=$(iu find-record "$HOME_T/.qwen/sessions" --eq "sessionId=$id" --require-ipc 2>/dev/null) || continue
    name=$(jget "$name" ipcPath 2>/dev/null) && TUI_SOCKS+=("$name")
  done
}
harness_after_kill() {
  local name
  for name in "${TUI_SOCKS[@]}"; do
    case $name in
      */qwen-socks-????????????????/*.sock) rm -f "$name"; rmdir "${name%/*}" 2>/dev/null ;;
    esac
  done
}

dump_diag() {
  local f
  dump_begin
  dump_outputs
  dump_debug_log "${DEBUG_P:-}" "PEER lines (last 40)" '\[PEER_|send_message|tool_call|ERROR'
  dump_debug_log "${DEBUG_Y:-}" "PEER lines (last 40)" '\[PEER_|send_message|tool_call|ERROR'
  dump_model_requests
  for f in "$RUN"/home-*/.qwen/sessions; do
    [ -d "$f" ] || continue
    section "records in $f"
    iu records "$f"
  done
  dump_panes
  dump_end
}

# ---------------------------------------------------------------- prerequisites
need_python_and_node

SETUP_T0=$(date +%s%N)
ensure_qwen || abort "could not install @qwen-code/qwen-code@$QWEN_VERSION with npm"
npm_pinned "$SDK_CACHE" "$SDK_PKG" "@qwen-code/sdk@$SDK_VERSION" "$SDK_VERSION" \
  || abort "could not install @qwen-code/sdk@$SDK_VERSION with npm"
ensure_tmux || abort "tmux is missing and apt-get could not install it"
RUN=$(mktemp -d "${TMPDIR:-/tmp}/qc-interop.XXXXXX") || abort "mktemp failed"
RUN=$(cd "$RUN" && pwd -P)
if [ "${INTEROP_NO_BUILD:-0}" != 1 ] && [ "$DEMO" = "$ROOT/target/c/qcdemo" ]; then
  log "building the demo (incremental): make -C examples/c"
  make_examples_c "$RUN/build.out" || abort "make -C examples/c failed (build.out in the diagnostics)"
fi
[ -x "$DEMO" ] || abort "no demo binary at $DEMO"
"$DEMO" sessions --help > "$RUN/demo-help.out" 2>&1 \
  || abort "'$DEMO sessions --help' failed: the demo has no sessions subcommands"
log "setup done in $(since "$SETUP_T0")s; run directory $RUN"

# ---------------------------------------------------------------- the isolated worlds
DEADLINE_MS=$(( $(ms_now) + TOTAL_TIMEOUT * 1000 ))
T_TEST=$(date +%s%N)
TAG=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
HOME_S=$RUN/home-sdk     # SDK <-> ours, registry listing
HOME_T=$RUN/home-tui     # the interactive TUIs and our listener next to them
WS_P=$RUN/ws-p WS_Y=$RUN/ws-y
mkdir -p "$HOME_S/.qwen" "$HOME_T/.qwen" "$WS_P" "$WS_Y"
qwen_settings > "$HOME_S/.qwen/settings.json"
qwen_settings > "$HOME_T/.qwen/settings.json"
mapfile -t ENV_S < <(env_for "$HOME_S")
mapfile -t ENV_T < <(env_for "$HOME_T")

# ---------------------------------------------------------------- TUIs first (they boot slowly)
start_fake_model "$HERE/fake_model_sessions.py" "${ENV_T[@]}" PYTHONDONTWRITEBYTECODE=1

SID_P=$(new_uuid) SID_Y=$(new_uuid)
DEBUG_P=$HOME_T/.qwen/debug/$SID_P.txt
DEBUG_Y=$HOME_T/.qwen/debug/$SID_Y.txt
TMUX_HOME=$RUN
tmux_dir qci
tui_script() { # NAME WS SID APPROVAL -> $RUN/tui-NAME.sh
  fake_model_args "$3" "$4" interop-dummy-key
  write_tui_script "tui-$1" "$2" "${ENV_T[@]}" TERM=xterm-256color QWEN_USAGE_STATISTICS_ENABLED=0 \
    QWEN_TELEMETRY_ENABLED=0 "$NODE" "$QWEN_PKG/cli-entry.js" "${QWEN_ARGS[@]}"
}
tui_script p "$WS_P" "$SID_P" default
tui_script y "$WS_Y" "$SID_Y" yolo
tmux_start p "$RUN/tui-p.sh" y "$RUN/tui-y.sh" || abort "could not start tmux"
log "TUIs started in tmux (server $TMUX_SERVER_PID, panes ${PANE_PIDS[*]}): P --approval-mode default ($SID_P), Y --approval-mode yolo ($SID_Y)"
# The controller tokens are minted while everything else boots.
mint_token() { # HOME LABEL NAME
  (qwen_cli "$1" sessions controllers add --label "$2" --json > "$RUN/$3.out" 2> "$RUN/$3.err"; echo $? > "$RUN/$3.rc") &
  track "$!"
}
token_of() { # NAME -> prints the token (waits for the minting)
  wait_until test -s "$RUN/$1.rc" || return 1
  head -n 1 "$RUN/$1.out" 2>/dev/null | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["token"])' 2>/dev/null
}
mint_token "$HOME_T" "interop-$TAG" controller
mint_token "$HOME_S" "interop-sdk-$TAG" controller-sdk

# ================================================================ part 1: SDK <-> ours
T1=$(date +%s%N)
SDK_NAME=qci-sdk-$TAG SDK_R_NAME=qci-sdkr-$TAG
L1=qci-l1-$TAG L2=qci-l2-$TAG L3=qci-l3-$TAG
start_peer sdk "${ENV_S[@]}" "$NODE" "$HERE/sdk_peer.mjs" --sdk "$SDK_CACHE" --name "$SDK_NAME"
start_peer sdkr "${ENV_S[@]}" "$NODE" "$HERE/sdk_peer.mjs" --sdk "$SDK_CACHE" --name "$SDK_R_NAME" --no-on-message
start_peer l1 "${ENV_S[@]}" "$DEMO" sessions listen --name "$L1" --mode prompting
start_peer l2 "${ENV_S[@]}" "$DEMO" sessions listen --name "$L2" --policy refuse
start_peer l3 "${ENV_S[@]}" "$DEMO" sessions listen --name "$L3" --policy accept --mode bypass
for p in sdk sdkr l1 l2 l3; do
  wait_json "$RUN/$p.out" 0 --watch-pid "${PEER_PID[$p]}" --eq event=ready \
    || abort "$p never printed its ready line ($WHY)"
  log "$p ready (pid ${PEER_PID[$p]}): $(printf '%s' "$JSON_LINE" | cut -c1-300)"
done

# sdk_send PEER TO CONTENT [FROMMODE] [final]: the SDK endpoint PEER sends and prints
# send_result (-> $SENT_ID); sdk_awaited then waits for its awaitReceipt line.
SDK_SEQ=0
sdk_send() {
  local peer=$1 to=$2 content=$3 mode=${4:-} final=${5:-false} id cmd from
  SDK_SEQ=$((SDK_SEQ + 1)); id=s$SDK_SEQ
  cmd=$("$PYTHON" -c 'import json,sys; a=sys.argv; d={"cmd":"send","id":a[1],"to":a[2],"content":a[3],"final":a[5]=="true","timeoutMs":15000}
if a[4]: d["fromMode"]=a[4]
print(json.dumps(d))' "$id" "$to" "$content" "$mode" "$final")
  from=$(lines_of "$RUN/$peer.out")
  to_peer "$peer" "$cmd" || return 1
  wait_json "$RUN/$peer.out" "$from" --eq event=send_result --eq "id=$id" || { WHY="no send_result ($WHY)"; return 1; }
  SENT_LINE=$JSON_LINE
  [ "$(jget "$SENT_LINE" kind)" = sent ] || { WHY="SDK send did not go out: $SENT_LINE"; return 1; }
  SENT_ID=$(jget "$SENT_LINE" msgId)
  SDK_FROM=$from SDK_ID=$id SDK_PEER=$peer
}
sdk_awaited() { # -> $JSON_LINE = the awaited line of the last sdk_send
  wait_json "$RUN/$SDK_PEER.out" "$SDK_FROM" --eq event=awaited --eq "id=$SDK_ID"
}
sdk_receipt() { # PEER MSGID STATUS FROM -> waits for onReceipt with that status
  wait_json "$RUN/$1.out" "$4" --eq event=receipt --eq "msgId=$2" --eq "status=$3"
}

# sdk_try CHECK LISTENER MODE: CHECK starts (CUR, T0, BODY=CHECK-TAG); the SDK endpoint
# sends BODY with fromMode MODE ("" for none) to our listener (l1, l2 or l3) and awaits
# its first receipt -> ST. L_PEER, L_OUT, L_FROM: the listener, its output from here on.
sdk_try() {
  CUR=$1; T0=$(date +%s%N)
  BODY="$1-$TAG"
  L_PEER=$2 L_OUT=$RUN/$2.out
  L_FROM=$(lines_of "$L_OUT")
  local to
  case $2 in l1) to=$L1 ;; l2) to=$L2 ;; l3) to=$L3 ;; esac
  sdk_send sdk "$to" "$BODY" "$3" && sdk_awaited || return 1
  ST=$(jget "$JSON_LINE" status)
}
# The listener printed BODY as a delivered message (-> $JSON_LINE).
listener_got_body() { wait_json "$L_OUT" "$L_FROM" --eq event=message --eq "frame.message.content=$BODY"; }
# How many messages [with BODY] the listener printed since sdk_try.
listener_messages() { count_json "$L_OUT" --from "$L_FROM" --eq event=message ${1:+--eq "frame.message.content=$1"}; }
# held_then VERB: the first receipt is `held` and the listener printed a held line naming
# $SENT_ID; VERB (release or deny) it on the listener.
held_then() {
  [ "$ST" = held ] || { WHY="the SDK's first receipt is '$ST', expected held: $JSON_LINE"; return 1; }
  wait_json "$L_OUT" "$L_FROM" --eq event=held --contains "$SENT_ID" \
    || { WHY="the listener printed no held line naming $SENT_ID ($WHY)"; return 1; }
  log "listener: $(printf '%s' "$JSON_LINE" | cut -c1-300)"
  to_peer "$L_PEER" "$1 $SENT_ID"
}

# -- sdk-delivered: fromMode prompting to a prompting listener.
if sdk_try sdk-delivered l1 prompting; then
  if [ "$ST" = delivered ] && listener_got_body; then
    MSG=$JSON_LINE
    if [ "$(jget "$MSG" frame.fromName)" = "$SDK_NAME" ] && [ "$(jget "$MSG" frame.fromMode)" = prompting ] \
        && [ "$(jget "$MSG" origin)" = peer ]; then
      pass $CUR "listener printed the message (origin peer, fromName $SDK_NAME, fromMode prompting), the SDK got delivered ($(since "$T0")s)"
    else
      fail $CUR "message printed with unexpected attribution: $MSG"
    fi
  else
    fail $CUR "SDK receipt '$ST', listener message: ${WHY:-none}"
  fi
else
  fail $CUR "$WHY"
fi

# -- sdk-held-release: fromMode bypass to a prompting listener -> held; release.
if sdk_try sdk-held-release l1 bypass && held_then release; then
  if sdk_receipt sdk "$SENT_ID" delivered "$SDK_FROM"; then
    PREV=$(jget "$JSON_LINE" previous)
    if [ "$PREV" = held ] && listener_got_body; then
      pass $CUR "held at both ends, release -> the SDK got held -> delivered, listener printed it ($(since "$T0")s)"
    else
      fail $CUR "after release: previous '$PREV', listener message: ${WHY:-?}"
    fi
  else
    fail $CUR "no delivered receipt reached the SDK after release ($WHY)"
  fi
else
  fail $CUR "$WHY"
fi

# -- sdk-held-deny: no fromMode -> held; deny.
if sdk_try sdk-held-deny l1 "" && held_then deny; then
  if sdk_receipt sdk "$SENT_ID" denied "$SDK_FROM"; then
    if [ "$(listener_messages "$BODY")" = 0 ]; then
      pass $CUR "held, deny -> the SDK got held -> denied, nothing delivered ($(since "$T0")s)"
    else
      fail $CUR "the denied message was printed as delivered"
    fi
  else
    fail $CUR "no denied receipt reached the SDK ($WHY)"
  fi
else
  fail $CUR "$WHY"
fi

# -- sdk-refused: --policy refuse.
if sdk_try sdk-refused l2 prompting; then
  if [ "$ST" = refused ]; then
    sleep 0.3
    if [ "$(listener_messages)" = 0 ]; then
      pass $CUR "the SDK got refused, the listener printed nothing ($(since "$T0")s)"
    else
      fail $CUR "refused, but the listener printed a message"
    fi
  else
    fail $CUR "the SDK's receipt is '$ST', expected refused"
  fi
else
  fail $CUR "$WHY"
fi

# -- sdk-policy-accept: --policy accept --mode bypass, fromMode prompting -> delivered.
if sdk_try sdk-policy-accept l3 prompting; then
  if [ "$ST" = delivered ] && listener_got_body; then
    pass $CUR "policy accept delivered a mismatching fromMode; the SDK got delivered ($(since "$T0")s)"
  else
    fail $CUR "the SDK's receipt is '$ST' (expected delivered); listener: ${WHY:-ok}"
  fi
else
  fail $CUR "$WHY"
fi

# -- sdk-duplicate: the same body twice from one sender within 30 s.
if sdk_try sdk-duplicate l1 prompting && [ "$ST" = delivered ]; then
  if sdk_send sdk "$L1" "$BODY" prompting && sdk_awaited; then
    ST=$(jget "$JSON_LINE" status)
    if [ "$ST" = dropped ] && sdk_receipt sdk "$SENT_ID" dropped "$SDK_FROM" \
        && [ "$(jget "$JSON_LINE" dropReason)" = duplicate ]; then
      N=$(listener_messages "$BODY")
      if [ "$N" = 1 ]; then
        pass $CUR "second copy -> the SDK got dropped/duplicate; delivered once ($(since "$T0")s)"
      else
        fail $CUR "dropped/duplicate, but the listener printed the body $N times"
      fi
    else
      fail $CUR "the repeat got '$ST' (dropReason '$(jget "$JSON_LINE" dropReason 2>/dev/null)'), expected dropped/duplicate"
    fi
  else
    fail $CUR "repeat: $WHY"
  fi
else
  fail $CUR "first copy not delivered: ${WHY:-$JSON_LINE}"
fi

# -- sdk-controller: a controller grant of this Qwen home, presented by the SDK.
CUR=sdk-controller; T0=$(date +%s%N)
SDK_C_NAME=qci-sdkc-$TAG
if ! CTOKEN=$(token_of controller-sdk) || [ -z "$CTOKEN" ]; then
  fail $CUR "qwen sessions controllers add --json gave no token: $(head -c 300 "$RUN/controller-sdk.err" 2>/dev/null)"
else
  start_peer sdkc "${ENV_S[@]}" "$NODE" "$HERE/sdk_peer.mjs" --sdk "$SDK_CACHE" --name "$SDK_C_NAME" --controller-token "$CTOKEN"
  if ! wait_json "$RUN/sdkc.out" 0 --watch-pid "${PEER_PID[sdkc]}" --eq event=ready; then
    fail $CUR "the SDK endpoint with the token did not start ($WHY)"
  else
    BODY="sdk-controller-$TAG"
    L1_FROM=$(lines_of "$RUN/l1.out")
    SENT_LINE="" ST=""
    CMD=$("$PYTHON" -c 'import json,sys; print(json.dumps({"cmd":"send","id":"c1","to":sys.argv[1],"content":sys.argv[2],"controller":True,"timeoutMs":15000}))' "$L1" "$BODY")
    to_peer sdkc "$CMD"
    if wait_json "$RUN/sdkc.out" 0 --eq event=awaited --eq id=c1; then ST=$(jget "$JSON_LINE" status); fi
    if [ "$ST" != delivered ]; then
      fail $CUR "the SDK's controller send got '${ST:-no receipt}' ($WHY): $(tail -n 2 "$RUN/sdkc.out" | tr '\n' '|' | cut -c1-300)"
    elif ! wait_json "$RUN/l1.out" "$L1_FROM" --eq event=message --eq "frame.message.content=$BODY"; then
      fail $CUR "delivered, but the listener printed no message ($WHY)"
    elif [ "$(jget "$JSON_LINE" origin)" != controller ] || [ "$(jget "$JSON_LINE" controller)" != "interop-sdk-$TAG" ]; then
      fail $CUR "delivered with origin '$(jget "$JSON_LINE" origin)' label '$(jget "$JSON_LINE" controller)', expected controller / interop-sdk-$TAG"
    else
      pass $CUR "controller send without fromMode -> delivered, origin controller, label interop-sdk-$TAG ($(since "$T0")s)"
    fi
  fi
fi

# -- send-to-sdk: `qcdemo sessions send` -> SDK endpoint.
CUR=send-to-sdk; T0=$(date +%s%N)
BODY="send-to-sdk-$TAG" SEND_NAME=qci-send-$TAG
S_FROM=$(lines_of "$RUN/sdk.out")
demo_run "$HOME_S" sessions send "$SDK_NAME" "$BODY" --from-mode prompting --wait 10 --name "$SEND_NAME" \
  > "$RUN/send1.out" 2> "$RUN/send1.err"
RC=$?
if wait_json "$RUN/sdk.out" "$S_FROM" --eq event=message --eq "content=$BODY"; then
  MSG=$JSON_LINE
  SENT_ID=$(iu ps-find "$RUN/send1.out" --eq event=sent | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["msgId"])' 2>/dev/null)
  if [ "$(jget "$MSG" fromMode)" != prompting ] || [ "$(jget "$MSG" fromName)" != "$SEND_NAME" ]; then
    fail $CUR "the SDK got the message with fromMode '$(jget "$MSG" fromMode)' fromName '$(jget "$MSG" fromName)', expected prompting / $SEND_NAME"
  elif [ -z "$SENT_ID" ] || [ "$SENT_ID" != "$(jget "$MSG" msgId)" ]; then
    fail $CUR "qcdemo sessions send printed no sent line with the msgId the SDK saw ($(jget "$MSG" msgId)), status $RC"
  elif ! iu ps-find "$RUN/send1.out" --eq event=receipt --eq "msgId=$SENT_ID" --eq status=delivered > /dev/null; then
    fail $CUR "the SDK got the message but our send printed no delivered receipt (status $RC)"
  elif [ "$RC" != 0 ]; then
    fail $CUR "sent and delivered, but qcdemo sessions send exited $RC"
  else
    pass $CUR "the SDK got it (fromName $SEND_NAME, fromMode prompting); its delivered receipt reached us; exit 0 ($(since "$T0")s)"
  fi
else
  fail $CUR "the SDK endpoint never got the message ($WHY); send exited $RC"
fi

# -- listen-send-to-sdk: `send` on the listener's stdin.
CUR=listen-send-to-sdk; T0=$(date +%s%N)
BODY="listen-send-to-sdk-$TAG"
S_FROM=$(lines_of "$RUN/sdk.out"); L1_FROM=$(lines_of "$RUN/l1.out")
to_peer l1 "send --from-mode bypass $SDK_NAME $BODY"
if wait_json "$RUN/sdk.out" "$S_FROM" --eq event=message --eq "content=$BODY"; then
  MSG=$JSON_LINE
  if [ "$(jget "$MSG" fromName)" != "$L1" ] || [ "$(jget "$MSG" fromMode)" != bypass ]; then
    fail $CUR "SDK saw fromName '$(jget "$MSG" fromName)' fromMode '$(jget "$MSG" fromMode)', expected $L1 / bypass"
  elif ! wait_json "$RUN/l1.out" "$L1_FROM" --eq event=sent; then
    fail $CUR "the listener printed no sent line ($WHY)"
  else
    SENT_ID=$(jget "$JSON_LINE" msgId)
    if wait_json "$RUN/l1.out" "$L1_FROM" --eq event=receipt --eq "msgId=$SENT_ID" --eq status=delivered; then
      pass $CUR "SDK got it from $L1 (bypass); its delivered receipt reached the listener ($(since "$T0")s)"
    else
      fail $CUR "no delivered receipt for $SENT_ID on the listener ($WHY)"
    fi
  fi
else
  fail $CUR "the SDK never got the message ($WHY)"
fi

# -- send-to-sdk-refused: an SDK endpoint without onMessage answers refused.
CUR=send-to-sdk-refused; T0=$(date +%s%N)
BODY="send-to-sdk-refused-$TAG"
demo_run "$HOME_S" sessions send "$SDK_R_NAME" "$BODY" --from-mode prompting --wait 10 > "$RUN/send2.out" 2> "$RUN/send2.err"
RC=$?
if iu ps-find "$RUN/send2.out" --eq event=receipt --eq status=refused > /dev/null; then
  pass $CUR "the SDK's refused receipt reached us; exit $RC ($(since "$T0")s)"
else
  fail $CUR "no refused receipt printed (status $RC): $(tr '\n' '|' < "$RUN/send2.out" | cut -c1-300)"
fi
log "part 1 (SDK) done in $(since "$T1")s"

# ================================================================ part 2: registry listing
T2=$(date +%s%N)
CUR=ps-lists; T0=$(date +%s%N)
qwen_cli "$HOME_S" sessions ps --json > "$RUN/ps1.out" 2> "$RUN/ps1.err"
RC=$?
PS_PROBLEMS=""
for p in l1 l2 l3; do
  case $p in l1) n=$L1 ;; l2) n=$L2 ;; l3) n=$L3 ;; esac
  if line=$(iu ps-find "$RUN/ps1.out" --eq "pid=${PEER_PID[$p]}" --eq "name=$n"); then
    [ "$(jget "$line" kind)" = external ] || PS_PROBLEMS+=" $n: kind '$(jget "$line" kind)';"
    jget "$line" ipcPath > /dev/null || PS_PROBLEMS+=" $n: no ipcPath;"
    ! jget "$line" ipcToken > /dev/null || PS_PROBLEMS+=" $n: ipcToken shown;"
  else
    PS_PROBLEMS+=" $n (pid ${PEER_PID[$p]}) not listed;"
  fi
done
if [ "$RC" = 0 ] && [ -z "$PS_PROBLEMS" ]; then
  pass $CUR "qwen sessions ps --json lists $L1, $L2, $L3 (pid, kind external, ipcPath) ($(since "$T0")s)"
else
  fail $CUR "status $RC;$PS_PROBLEMS output: $(tr '\n' '|' < "$RUN/ps1.out" | cut -c1-400)"
fi

CUR=ours-ps; T0=$(date +%s%N)
SDK_PID=$(jget "$(head -n 1 "$RUN/sdk.out")" pid)
demo_run "$HOME_S" sessions ps --json > "$RUN/ours-ps.out" 2> "$RUN/ours-ps.err"
RC=$?
if [ "$RC" != 0 ] || ! iu ps-find "$RUN/ours-ps.out" --eq "name=$SDK_NAME" --eq "pid=$SDK_PID" > /dev/null; then
  fail $CUR "status $RC; $SDK_NAME (pid $SDK_PID) not listed: $(tr '\n' '|' < "$RUN/ours-ps.out" | cut -c1-400)"
elif ! DIFF=$(iu same-lines "$RUN/ps1.out" "$RUN/ours-ps.out"); then
  fail $CUR "lists the SDK endpoint, but differs from qwen sessions ps --json: $DIFF"
else
  pass $CUR "qcdemo sessions ps --json lists the SDK endpoint $SDK_NAME (pid $SDK_PID) and is line for line qwen's ($(wc -l < "$RUN/ours-ps.out" | tr -d ' ') records)"
fi

# -- ps-stop / ps-eof: unregister on `stop` and on stdin EOF.
to_peer l2 stop
close_peer l3
for p in l2 l3; do
  case $p in l2) CUR=ps-stop; how=stop ;; l3) CUR=ps-eof; how="stdin EOF" ;; esac
  peer_exit_status "$p"; RC=$?
  if [ "$RC" != 0 ]; then
    fail $CUR "after $how the listener $([ "$RC" = 255 ] && echo "did not exit" || echo "exited with status $RC")"
  elif iu find-record "$HOME_S/.qwen/sessions" --eq "pid=${PEER_PID[$p]}" > /dev/null; then
    fail $CUR "after $how the listener exited but its record is still there"
  fi
done
close_peer l2
qwen_cli "$HOME_S" sessions ps --json > "$RUN/ps2.out" 2> "$RUN/ps2.err"
RC=$?
for p in l2 l3; do
  case $p in l2) CUR=ps-stop; n=$L2; how=stop ;; l3) CUR=ps-eof; n=$L3; how="stdin EOF" ;; esac
  if [ "$RC" != 0 ]; then
    fail $CUR "qwen sessions ps --json failed (status $RC)"
  elif iu ps-find "$RUN/ps2.out" --eq "name=$n" > /dev/null; then
    fail $CUR "qwen sessions ps --json still lists $n after $how"
  elif ! iu ps-find "$RUN/ps2.out" --eq "name=$L1" > /dev/null; then
    fail $CUR "qwen sessions ps --json lists nothing of ours any more (not even $L1): $(tr '\n' '|' < "$RUN/ps2.out" | cut -c1-300)"
  else
    pass $CUR "after $how: exit 0, record removed, no longer listed ($L1 still is)"
  fi
done
log "part 2 (registry) done in $(since "$T2")s"

# ================================================================ part 3: the interactive TUI
T3=$(date +%s%N)
LT=qci-tui-$TAG
start_peer lt "${ENV_T[@]}" "$DEMO" sessions listen --name "$LT" --mode prompting
wait_json "$RUN/lt.out" 0 --watch-pid "${PEER_PID[lt]}" --eq event=ready || abort "lt never printed its ready line ($WHY)"
LT_READY=$JSON_LINE
LT_IPC=$(iu find-record "$HOME_T/.qwen/sessions" --eq "pid=${PEER_PID[lt]}" --require-ipc | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["ipcPath"])' 2>/dev/null)
log "lt ready (pid ${PEER_PID[lt]}, inbox $LT_IPC): $(printf '%s' "$LT_READY" | cut -c1-300)"
# The Sublime package's participant (one window on $WS_S) boots while the TUIs do.
WS_S=$RUN/subl-$TAG SUBL_NAME=sublime-subl-$TAG
mkdir -p "$WS_S"
start_peer subl "${ENV_T[@]}" PYTHONDONTWRITEBYTECODE=1 "$PYTHON" "$HERE/sublime_participant_driver.py" \
  --workspace "$WS_S" --library "$ROOT/target/release/libqwen_companion.so" --lock-dir "$RUN/subl-ide"

CUR=tui-registered; T0=$(date +%s%N)
tui_record() { REC=$(iu find-record "$HOME_T/.qwen/sessions" --eq "sessionId=$1" --require-ipc); }
tui_up() { tui_record "$1" && file_has "$2" "RemoteInput: watching"; }
# A cold TUI start takes 5-15 s; allow up to 60 s from here on a loaded machine.
if STEP_NOW=60 wait_until tui_up "$SID_P" "$DEBUG_P" && REC_P=$REC \
    && STEP_NOW=60 wait_until tui_up "$SID_Y" "$DEBUG_Y" && REC_Y=$REC; then
  NAME_P=$(jget "$REC_P" name) NAME_Y=$(jget "$REC_Y" name)
  if [ "$(jget "$REC_P" kind)" = tui ] && [ "$(jget "$REC_Y" kind)" = tui ]; then
    pass $CUR "P = $NAME_P (pid $(jget "$REC_P" pid)), Y = $NAME_Y (pid $(jget "$REC_Y" pid)), both with an inbox ($(since "$T_TEST")s after start)"
  else
    fail $CUR "records not of kind tui: $REC_P / $REC_Y"
  fi
else
  fail $CUR "the TUIs did not publish records with ipcPath / watch their input ($WHY); records: $(iu records "$HOME_T/.qwen/sessions" | tr '\n' '|')"
  abort "no TUI to talk to"
fi

# lt_send TO BODY [MODE] -> $SENT_ID; the receipt is awaited with lt_receipt.
lt_send() {
  local to=$1 body=$2 mode=${3:-} from
  from=$(lines_of "$RUN/lt.out")
  if [ -n "$mode" ]; then to_peer lt "send --from-mode $mode $to $body"; else to_peer lt "send $to $body"; fi
  wait_json "$RUN/lt.out" "$from" --watch-pid "${PEER_PID[lt]}" --eq event=sent \
    || { wait_json "$RUN/lt.out" "$from" --eq event=send_failed; WHY="no sent line (send_failed: ${JSON_LINE:-none})"; return 1; }
  SENT_ID=$(jget "$JSON_LINE" msgId)
  LT_SEND_FROM=$from
}
lt_receipt() { # MSGID -> $JSON_LINE = the first receipt, $ST its status
  wait_json "$RUN/lt.out" "$LT_SEND_FROM" --eq event=receipt --eq "msgId=$1" && ST=$(jget "$JSON_LINE" status)
}

# -- tui-prompting: P runs --approval-mode default -> review class "prompting".
CUR=tui-prompting; T0=$(date +%s%N)
M_FROM=$(lines_of "$RUN/model.jsonl")
ENV_BODY="tui-prompting-delivered-$TAG"
OUT=""
declare -A HELD_AT_P=()
for spec in "prompting:delivered:$ENV_BODY" "bypass:held:tui-prompting-bypass-$TAG" "none:held:tui-prompting-none-$TAG"; do
  mode=${spec%%:*}; rest=${spec#*:}; want=${rest%%:*}; body=${rest#*:}
  [ "$mode" = none ] && mode=""
  if lt_send "$NAME_P" "$body" "$mode" && lt_receipt "$SENT_ID"; then
    OUT+=" ${mode:-none}->$ST"
    [ "$ST" = "$want" ] || { fail $CUR "fromMode '${mode:-none}' to P gave '$ST', expected $want"; }
    [ "$ST" = held ] && HELD_AT_P[$SENT_ID]=1
  else
    fail $CUR "fromMode '${mode:-none}' to P: $WHY"
  fi
done
pass $CUR "to P (default = prompting):$OUT ($(since "$T0")s)"

# -- tui-envelope: the delivered one reaches the model inside the envelope.
CUR=tui-envelope; T0=$(date +%s%N)
if wait_json "$RUN/model.jsonl" "$M_FROM" --eq peer_envelope=true --has "last_user_text=$ENV_BODY"; then
  if ENV_TXT=$(iu envelope "$JSON_LINE" "$ENV_BODY"); then
    HEAD=$(printf '%s\n' "$ENV_TXT" | head -n 1)
    WANT_HEAD="<cross_session_message from=\"$LT_IPC\" name=\"$LT\">"
    if [ "$HEAD" = "$WANT_HEAD" ]; then
      pass $CUR "the model got $HEAD ... $ENV_BODY ($(since "$T0")s)"
    else
      fail $CUR "envelope head is '$HEAD', expected '$WANT_HEAD'"
    fi
  else
    fail $CUR "no envelope around $ENV_BODY: $(iu user-text-tail "$JSON_LINE" 300)"
  fi
else
  fail $CUR "no model request carried a <cross_session_message> with $ENV_BODY ($WHY)"
fi

# -- tui-bypass: Y runs --approval-mode yolo -> review class "bypass".
CUR=tui-bypass; T0=$(date +%s%N)
OUT=""
for spec in "bypass:delivered:tui-bypass-delivered-$TAG" "prompting:held:tui-bypass-prompting-$TAG"; do
  mode=${spec%%:*}; rest=${spec#*:}; want=${rest%%:*}; body=${rest#*:}
  if lt_send "$NAME_Y" "$body" "$mode" && lt_receipt "$SENT_ID"; then
    OUT+=" $mode->$ST"
    [ "$ST" = "$want" ] || fail $CUR "fromMode '$mode' to Y gave '$ST', expected $want"
  else
    fail $CUR "fromMode '$mode' to Y: $WHY"
  fi
done
pass $CUR "to Y (yolo = bypass):$OUT ($(since "$T0")s)"

# -- tui-controller: minted token, no fromMode -> delivered with origin="controller".
CUR=tui-controller; T0=$(date +%s%N)
TOKEN=$(token_of controller)
if [ -z "$TOKEN" ]; then
  fail $CUR "qwen sessions controllers add --json gave no token (status $(cat "$RUN/controller.rc" 2>/dev/null)): $(head -c 300 "$RUN/controller.err" 2>/dev/null)"
else
  BODY="tui-controller-$TAG"
  M_FROM=$(lines_of "$RUN/model.jsonl")
  demo_run "$HOME_T" sessions send "$NAME_P" "$BODY" --controller-token "$TOKEN" --wait 15 > "$RUN/send-ctl.out" 2> "$RUN/send-ctl.err"
  RC=$?
  if ! iu ps-find "$RUN/send-ctl.out" --eq event=receipt --eq status=delivered > /dev/null; then
    fail $CUR "no delivered receipt (status $RC): $(tr '\n' '|' < "$RUN/send-ctl.out" | cut -c1-300) $(head -c 200 "$RUN/send-ctl.err")"
  elif wait_json "$RUN/model.jsonl" "$M_FROM" --eq peer_envelope=true --has "last_user_text=$BODY" \
      && ENV_TXT=$(iu envelope "$JSON_LINE" "$BODY"); then
    HEAD=$(printf '%s\n' "$ENV_TXT" | head -n 1)
    case $HEAD in
      *'origin="controller"'*"controller=\"interop-$TAG\""*) pass $CUR "delivered; the model got $HEAD ($(since "$T0")s)" ;;
      *) fail $CUR "delivered, but the envelope is '$HEAD' (want origin=\"controller\" controller=\"interop-$TAG\")" ;;
    esac
  else
    fail $CUR "delivered, but the model never saw $BODY in an envelope ($WHY)"
  fi
fi

# -- tui-send-message: Y's model calls send_message with our name.
CUR=tui-send-message; T0=$(date +%s%N)
SM_TOKEN="tui-send-message-$TAG"
LT_FROM=$(lines_of "$RUN/lt.out"); M_FROM=$(lines_of "$RUN/model.jsonl")
tui_submit tui-y "please E2E_PEER_SEND to=$LT msg=$SM_TOKEN"
if ! wait_json "$RUN/lt.out" "$LT_FROM" --watch-pid "${PEER_PID[lt]}" --eq event=held --eq "frame.message.content=$SM_TOKEN"; then
  if wait_json "$RUN/lt.out" "$LT_FROM" --eq event=message --eq "frame.message.content=$SM_TOKEN"; then
    fail $CUR "Y's message was delivered at once, expected held (Y is bypass, our listener prompting)"
  else
    fail $CUR "Y's send_message never reached our inbox ($WHY); model: $("$PYTHON" "$HUTIL" model-summary "$RUN/model.jsonl" | tail -n 2 | cut -c1-300)"
  fi
else
  HELD_LINE=$JSON_LINE
  IN_ID=$(jget "$HELD_LINE" msgId)
  log "held in our inbox: $(printf '%s' "$HELD_LINE" | cut -c1-300)"
  to_peer lt "release $IN_ID"
  if ! wait_json "$RUN/lt.out" "$LT_FROM" --eq event=message --eq "frame.message.content=$SM_TOKEN"; then
    fail $CUR "released $IN_ID, but the listener printed no message ($WHY)"
  else
    MSG=$JSON_LINE
    if [ "$(jget "$MSG" frame.fromName)" != "$NAME_Y" ] || [ "$(jget "$MSG" frame.fromMode)" != bypass ]; then
      fail $CUR "message attributed to '$(jget "$MSG" frame.fromName)' / '$(jget "$MSG" frame.fromMode)', expected $NAME_Y / bypass"
    elif ! wait_until file_has "$DEBUG_Y" "delivery status from $LT: held -> delivered for $IN_ID"; then
      fail $CUR "Y's debug log never accepted our receipts for $IN_ID: $(grep -F 'delivery status' "$DEBUG_Y" | tail -n 3 | tr '\n' '|')"
    elif ! file_has "$DEBUG_Y" "delivery status from $LT: pending -> held for $IN_ID"; then
      fail $CUR "Y accepted delivered but not our held receipt for $IN_ID"
    elif ! wait_json "$RUN/model.jsonl" "$M_FROM" --eq last_role=tool --has "decision.text=Sent to $LT"; then
      fail $CUR "the tool result never said 'Sent to $LT' ($WHY)"
    else
      HOW=$("$PYTHON" "$HUTIL" wait-json "$RUN/model.jsonl" --from "$M_FROM" --has "decision.why=peer send" --timeout 0 2>/dev/null)
      HOW=$(jget "$HOW" decision.why 2>/dev/null)
      pass $CUR "Y's model called send_message (${HOW:-?}); it reached us held; release -> Y logged pending -> held -> delivered for $IN_ID ($(since "$T0")s)"
    fi
  fi
fi

# ================================================================ the Sublime package's participant
subl_cmd() { # JSON-object-body... -> one command line to the driver
  to_peer subl "$("$PYTHON" -c 'import json,sys; print(json.dumps(dict(zip(sys.argv[1::2], sys.argv[2::2]))))' "$@")"
}
# y_send TOKEN: Y's model calls send_message to the editor's name with TOKEN; waits for
# the tool result (-> $WHY on failure).
y_send() {
  local from
  from=$(lines_of "$RUN/model.jsonl")
  tui_submit tui-y "please E2E_PEER_SEND to=$SUBL_NAME msg=$1"
  Y_SENT_FROM=$from
}
y_sent() { wait_json "$RUN/model.jsonl" "$Y_SENT_FROM" --eq last_role=tool --has "decision.text=Sent to $SUBL_NAME"; }

CUR=sublime-registered; T0=$(date +%s%N)
SUBL_OK=0
if ! wait_json "$RUN/subl.out" 0 --watch-pid "${PEER_PID[subl]}" --eq event=ready; then
  fail $CUR "the driver never printed its ready line ($WHY)"
else
  SUBL_READY=$JSON_LINE
  SUBL_IPC=$(jget "$SUBL_READY" ipcPath)
  qwen_cli "$HOME_T" sessions ps --json > "$RUN/ps-subl.out" 2> "$RUN/ps-subl.err"
  if [ "$(jget "$SUBL_READY" name)" != "$SUBL_NAME" ]; then
    fail $CUR "the window's participant is named '$(jget "$SUBL_READY" name)', expected $SUBL_NAME"
  elif ! line=$(iu ps-find "$RUN/ps-subl.out" --eq "name=$SUBL_NAME" --eq kind=external --eq "pid=$(jget "$SUBL_READY" pid)"); then
    fail $CUR "qwen sessions ps --json does not list $SUBL_NAME (kind external): $(tr '\n' '|' < "$RUN/ps-subl.out" | cut -c1-400)"
  else
    SUBL_OK=1
    pass $CUR "qwen sessions ps --json lists $SUBL_NAME (kind external, pid $(jget "$SUBL_READY" pid), ipcPath $(jget "$line" ipcPath)) ($(since "$T0")s)"
  fi
fi

CUR=sublime-send-selection; T0=$(date +%s%N)
SEL_TOKEN="sublime-selection-$TAG"
if [ "$SUBL_OK" = 1 ]; then
  S_FROM=$(lines_of "$RUN/subl.out"); M_FROM=$(lines_of "$RUN/model.jsonl")
  subl_cmd cmd send-selection to "$NAME_P" text "$SEL_TOKEN"
  if ! wait_json "$RUN/subl.out" "$S_FROM" --eq event=picked; then
    fail $CUR "the sessions list never offered $NAME_P ($WHY): $(grep -F '"error"' "$RUN/subl.out" | tail -n 1 | cut -c1-300)"
  elif ! wait_json "$RUN/subl.out" "$S_FROM" --eq event=panel --has "text=to $NAME_P: delivered - $SEL_TOKEN"; then
    fail $CUR "the messages panel never said 'to $NAME_P: delivered' ($WHY): $(grep -F '"panel"' "$RUN/subl.out" | tail -n 2 | tr '\n' '|' | cut -c1-300)"
  elif ! wait_json "$RUN/model.jsonl" "$M_FROM" --eq peer_envelope=true --has "last_user_text=$SEL_TOKEN"; then
    fail $CUR "delivered, but no model request carried a <cross_session_message> with $SEL_TOKEN ($WHY)"
  elif ! ENV_TXT=$(iu envelope "$JSON_LINE" "$SEL_TOKEN"); then
    fail $CUR "no envelope around $SEL_TOKEN: $(iu user-text-tail "$JSON_LINE" 300)"
  else
    HEAD=$(printf '%s\n' "$ENV_TXT" | head -n 1)
    BODY_LINE=$(printf '%s\n' "$ENV_TXT" | sed -n 2p)
    WANT_HEAD="<cross_session_message from=\"$SUBL_IPC\" name=\"$SUBL_NAME\">"
    if [ "$HEAD" != "$WANT_HEAD" ]; then
      fail $CUR "envelope head is '$HEAD', expected '$WANT_HEAD'"
    elif [ "$BODY_LINE" != "$SEL_TOKEN" ]; then
      fail $CUR "the envelope holds '$BODY_LINE', expected exactly the selection $SEL_TOKEN"
    else
      pass $CUR "selection -> $NAME_P delivered (panel); the model got $HEAD $SEL_TOKEN ($(since "$T0")s)"
    fi
  fi
else
  fail $CUR "the driver is not registered"
fi

CUR=sublime-receive; T0=$(date +%s%N)
RCV_TOKEN="sublime-receive-$TAG"
if [ "$SUBL_OK" = 1 ]; then
  S_FROM=$(lines_of "$RUN/subl.out")
  subl_cmd cmd policy value accept
  if ! wait_json "$RUN/subl.out" "$S_FROM" --eq event=result --eq cmd=policy --eq policy=accept; then
    fail $CUR "inbox_policy accept not applied ($WHY)"
  else
    y_send "$RCV_TOKEN"
    if ! wait_json "$RUN/subl.out" "$S_FROM" --watch-pid "${PEER_PID[subl]}" --eq event=panel \
        --has "text=message from $NAME_Y (peer session):" --has "text=    $RCV_TOKEN"; then
      fail $CUR "Y's message never showed in the messages panel ($WHY); model: $("$PYTHON" "$HUTIL" model-summary "$RUN/model.jsonl" | tail -n 2 | cut -c1-300)"
    elif ! y_sent; then
      fail $CUR "shown, but Y's tool result never said 'Sent to $SUBL_NAME' ($WHY)"
    else
      pass $CUR "Y's send_message -> the panel shows 'message from $NAME_Y (peer session): $RCV_TOKEN' ($(since "$T0")s)"
    fi
  fi
else
  fail $CUR "the driver is not registered"
fi

CUR=sublime-held-release; T0=$(date +%s%N)
HELD_TOKEN="sublime-held-$TAG"
if [ "$SUBL_OK" = 1 ]; then
  S_FROM=$(lines_of "$RUN/subl.out")
  subl_cmd cmd policy value default
  if ! wait_json "$RUN/subl.out" "$S_FROM" --eq event=result --eq cmd=policy --eq policy=default; then
    fail $CUR "inbox_policy default not applied ($WHY)"
  else
    y_send "$HELD_TOKEN"
    if ! wait_json "$RUN/subl.out" "$S_FROM" --watch-pid "${PEER_PID[subl]}" --eq event=panel \
        --has "text=held for your review: from $NAME_Y" --has "text=$HELD_TOKEN"; then
      fail $CUR "Y's message was never shown as held ($WHY): $(grep -F '"panel"' "$RUN/subl.out" | tail -n 2 | tr '\n' '|' | cut -c1-300)"
    else
      H_FROM=$(lines_of "$RUN/subl.out")
      subl_cmd cmd held
      HELD_ID=""
      if wait_json "$RUN/subl.out" "$H_FROM" --eq event=held --contains "$HELD_TOKEN"; then
        HELD_ID=$(printf '%s' "$JSON_LINE" | "$PYTHON" -c 'import json,sys; t=sys.argv[1]; print([h["msgId"] for h in json.load(sys.stdin)["items"] if h["text"]==t][0])' "$HELD_TOKEN" 2>/dev/null)
      fi
      if [ -z "$HELD_ID" ]; then
        fail $CUR "the hold buffer does not list $HELD_TOKEN ($WHY)"
      else
        R_FROM=$(lines_of "$RUN/subl.out")
        subl_cmd cmd review msgId "$HELD_ID" action release
        if ! wait_json "$RUN/subl.out" "$R_FROM" --eq event=panel --has "text=message from $NAME_Y (peer session):" --has "text=    $HELD_TOKEN"; then
          fail $CUR "released $HELD_ID, but the panel never showed the message ($WHY)"
        elif ! wait_until file_has "$DEBUG_Y" "delivery status from $SUBL_NAME: held -> delivered for $HELD_ID"; then
          fail $CUR "Y's debug log never accepted our delivered receipt for $HELD_ID: $(grep -F 'delivery status' "$DEBUG_Y" | tail -n 3 | tr '\n' '|')"
        elif ! file_has "$DEBUG_Y" "delivery status from $SUBL_NAME: pending -> held for $HELD_ID"; then
          fail $CUR "Y accepted delivered but not our held receipt for $HELD_ID"
        else
          sleep 1
          SHOWN=$(count_json "$RUN/subl.out" --eq event=panel --has "text=message from $NAME_Y (peer session):" --has "text=$HELD_TOKEN")
          RCPT=$(grep -cF "delivery status from $SUBL_NAME: held -> delivered for $HELD_ID" "$DEBUG_Y")
          if [ "$SHOWN" != 1 ] || [ "$RCPT" != 1 ]; then
            fail $CUR "released once, but the panel showed it $SHOWN times and Y logged $RCPT delivered receipts"
          else
            pass $CUR "held in the panel; Review -> Release: shown once, Y logged pending -> held -> delivered for $HELD_ID once ($(since "$T0")s)"
          fi
        fi
      fi
    fi
  fi
else
  fail $CUR "the driver is not registered"
fi

CUR=sublime-stop; T0=$(date +%s%N)
S_FROM=$(lines_of "$RUN/subl.out")
subl_cmd cmd stop
if ! wait_json "$RUN/subl.out" "$S_FROM" --eq event=stopped --eq recordGone=true; then
  fail $CUR "the driver did not report its record removed ($WHY)"
else
  peer_exit_status subl; RC=$?
  close_peer subl
  if [ "$RC" != 0 ]; then
    fail $CUR "the driver exited with status $RC"
  elif iu find-record "$HOME_T/.qwen/sessions" --eq "name=$SUBL_NAME" > /dev/null; then
    fail $CUR "a record named $SUBL_NAME is still in the registry"
  elif [ -n "${SUBL_IPC:-}" ] && [ -e "$SUBL_IPC" ]; then
    fail $CUR "the window's socket $SUBL_IPC is still there"
  elif grep -qF '"event": "error"' "$RUN/subl.out"; then
    fail $CUR "the driver reported errors: $(grep -F '"event": "error"' "$RUN/subl.out" | head -n 2 | tr '\n' '|' | cut -c1-300)"
  else
    pass $CUR "window closed: exit 0, record and socket removed ($(since "$T0")s)"
  fi
fi

# -- tui-expired: /quit in P -> our messages held there come back expired.
CUR=tui-expired; T0=$(date +%s%N)
tmux_quit p
if wait_until test -s "$RUN/tui-p.rc"; then
  MISSING=""
  for id in "${!HELD_AT_P[@]}"; do
    wait_json "$RUN/lt.out" 0 --eq event=receipt --eq "msgId=$id" --eq status=expired || MISSING+=" $id"
  done
  if [ ${#HELD_AT_P[@]} -eq 0 ]; then
    fail $CUR "nothing was held at P to expire"
  elif [ -z "$MISSING" ]; then
    pass $CUR "P exited ($(cat "$RUN/tui-p.rc")); ${#HELD_AT_P[@]} held messages came back expired ($(since "$T0")s)"
  else
    fail $CUR "no expired receipt for:$MISSING"
  fi
else
  fail $CUR "P did not exit after /quit ($WHY)"
fi

# -- listen-stop: the remaining listeners stop cleanly.
CUR=listen-stop; T0=$(date +%s%N)
to_peer lt stop; to_peer l1 stop
PROBLEMS=""
for p in lt l1; do
  peer_exit_status "$p"; RC=$?
  [ "$RC" = 0 ] || PROBLEMS+=" $p exit status $RC;"
  close_peer "$p"
done
iu find-record "$HOME_T/.qwen/sessions" --eq "pid=${PEER_PID[lt]}" > /dev/null && PROBLEMS+=" lt record left;"
iu find-record "$HOME_S/.qwen/sessions" --eq "pid=${PEER_PID[l1]}" > /dev/null && PROBLEMS+=" l1 record left;"
[ -n "$LT_IPC" ] && [ -e "$LT_IPC" ] && PROBLEMS+=" lt socket $LT_IPC left;"
if [ -z "$PROBLEMS" ]; then
  pass $CUR "both exited 0, records and socket removed ($(since "$T0")s)"
else
  fail $CUR "$PROBLEMS"
fi
# Y leaves through /quit too (not a check), so that it removes its record and socket.
if [ ! -s "$RUN/tui-y.rc" ]; then
  tmux_quit y
  for _ in $(seq 1 50); do [ -s "$RUN/tui-y.rc" ] && break; sleep 0.1; done
fi
log "part 3 (TUI) done in $(since "$T3")s; checks took $(since "$T_TEST")s"

FINISHED=1
exit 0
