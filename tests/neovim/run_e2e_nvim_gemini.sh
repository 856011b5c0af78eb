#!/usr/bin/env bash
# Real-CLI end-to-end test of the Neovim plugin with Gemini CLI: a headless Neovim with
# the plugin set to cli = 'gemini' runs the real Gemini CLI (@google/gemini-cli, pinned)
# in the plugin's own terminal job (:GeminiRun), on the scripted fake Gemini API
# (tests/e2e/fake_gemini.py). The Neovim side is tests/neovim/test_e2e_nvim_gemini.lua.
#
#   tests/neovim/run_e2e_nvim_gemini.sh
#
# Checks:
#   discovery    start writes $TMPDIR/gemini/ide/gemini-ide-server-<nvim pid>-<port>.json
#                (mode 0600, port, workspacePath, authToken, ideInfo; no Qwen Code lock)
#   gemini-run   :GeminiRun runs gemini in the plugin's terminal job with the companion's
#                GEMINI_CLI_IDE_* variables (GEMINI_CLI_IDE_PID = Neovim), no TERM_PROGRAM
#   connect      gemini connects: its debug log lists openDiff + closeDiff from the IDE,
#                the companion counts one connected client
#   tui-ready    gemini's prompt shows in the terminal
#   context      main.rs focused, a Visual selection of a token on line 2 (Neovim stays in
#                Visual mode while the prompt is typed into the job), README.md open: the
#                model's request has exactly that editor context (path, cursor, selected
#                text, other open file)
#   add-focus    :QwenAdd in notes.txt focuses the Gemini terminal (the one used last)
#   add-prompt   the test then types E2E_ASK add … and Enter into the same job: the model's
#                request has `@notes.txt E2E_ASK add …`
#   add-content  ... and the file's content (a unique token): gemini read the file
#   diff-opened  a model edit (write_file of a new file) opens the plugin's diff view
#                (a qwen-diff:// buffer) with exactly the proposed text, nothing written yet;
#                its status line and message name Gemini CLI as the proposer
#   accept       a line added to the proposal in Neovim, then :QwenDiffAccept: the file
#                holds exactly the edited text, the model's tool result has the edit
#   connected    gemini's debug log shows no IDE connection error or close
#   quit         /quit ends gemini's job with status 0
#   stop         :QwenStop removes the discovery file
#   no-lua-error the Neovim side ran to its end
#   cleanup      Neovim exited by itself; gemini's process (by its pid) is gone
#
# Setup: the CLI is installed once into <repo>/target/e2e/gemini (npm, pinned); the
# library of target/release is used as it is (no build). Every process runs under
# `env -i` with HOME=<run>/home and TMPDIR=<run>/tmp (~/.gemini/settings.json: IDE mode
# on, API-key auth, no telemetry); gemini's own variables (the fake API, and
# REMOTE_CONTAINERS=true in a container: tests/e2e/README.md) are set by its command
# (gemini_command = { 'env', …, node, gemini.js }), not in Neovim's environment.
# Environment knobs: E2E_TURN_TIMEOUT (45 s per wait), E2E_KEEP=1 (keep the run
# directory), E2E_DIR (cache root, default <repo>/target/e2e), NVIM (nvim).
# Last line of output: `nvim-e2e-gemini: N passed, M failed`; exit status 0 only if
# nothing failed.
set -u -o pipefail
# shellcheck source=../lib/harness.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"

no_args "$@"

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
nvim_e2e_config
GEMINI_CACHE=$E2E_DIR/gemini
CHECKS=(discovery gemini-run connect tui-ready context add-focus add-prompt add-content diff-opened accept
  connected quit stop no-lua-error cleanup)
DEBUG_LOG=""
harness_init nvim-e2e-gemini named

dump_diag() {
  dump_begin
  [ -n "$DEBUG_LOG" ] && [ -f "$DEBUG_LOG" ] && {
    section "gemini debug log: IDE lines and errors (last 40)"
    grep -E 'IDE|openDiff|closeDiff|\[ERROR\]|\[WARN\]' "$DEBUG_LOG" | tail -n 40 | short
  }
  dump_model_requests
  dump_outputs
  dump_nvim_output
  dump_end
}

# ---------------------------------------------------------------- prerequisites
need_nvim
[ -f "$LIB" ] || abort "missing $LIB (cargo build --release)"
SETUP_T0=$(date +%s%N)
ensure_gemini || abort "could not install @google/gemini-cli@$GEMINI_VERSION with npm"
RUN=$(mktemp -d "${TMPDIR:-/tmp}/qc-nvim-e2e-gemini.XXXXXX") || abort "mktemp failed"
RUN=$(cd "$RUN" && pwd -P)
log "setup done in $(since "$SETUP_T0")s; Gemini CLI $("$NODE" "$GEMINI_PKG/bundle/gemini.js" --version 2>/dev/null); run directory $RUN"

# ---------------------------------------------------------------- the isolated world
DEADLINE_MS=$(( $(ms_now) + STEP_TIMEOUT * 1000 ))
HOME_DIR=$RUN/home
TMP_DIR=$RUN/tmp
WS=$RUN/ws
mkdir -p "$HOME_DIR/.gemini" "$TMP_DIR" "$WS/src"
gemini_settings > "$HOME_DIR/.gemini/settings.json"
TAG=$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')
printf 'fn main() {\n    let E2E_SELECTED_%s = 42;\n    println!("{}", E2E_SELECTED_%s);\n}\n' "$TAG" "$TAG" \
  > "$WS/src/main.rs"
printf '# e2e workspace\n' > "$WS/README.md"
printf 'first line\nFILE_TOKEN_%s is the secret of this file\nthird line\n' "$TAG" > "$WS/notes.txt"
BASE_ENV=(PATH="$SYS_PATH" HOME="$HOME_DIR" TMPDIR="$TMP_DIR" LANG=C.UTF-8)

start_fake_model "$ROOT/tests/e2e/fake_gemini.py" env -i "${BASE_ENV[@]}"
gemini_model_env
DEBUG_LOG=$RUN/gemini-debug.log
ARGV=$("$PYTHON" -c 'import json, sys; print(json.dumps(sys.argv[1:]))' env "${GEMINI_MODEL_ENV[@]}" \
  GEMINI_DEBUG_LOG_FILE="$DEBUG_LOG" "$NODE" "$GEMINI_PKG/bundle/gemini.js")

# ---------------------------------------------------------------- Neovim with gemini in its terminal
start_nvim_e2e "$HERE/test_e2e_nvim_gemini.lua" \
  QCNV_TMP="$RUN" QCNV_WS="$WS" QCNV_TIMEOUT="$STEP_TIMEOUT" QCNV_MODEL_LOG="$RUN/model.jsonl" \
  QCNV_GEMINI_ARGV="$ARGV" QCNV_DEBUG_LOG="$DEBUG_LOG" QCNV_TAG="$TAG" QCNV_PYTHON="$PYTHON" \
  QCNV_E2E_UTIL="$ROOT/tests/e2e/e2e_util.py" QCNV_GEMINI_DIR="$TMP_DIR/gemini/ide"
log "nvim started (pid $NVIM_PID)"
# Neovim waits up to E2E_TURN_TIMEOUT for each of its steps (about eight)
NVIM_EXITED=0
wait_nvim_exit 9 && NVIM_EXITED=1
report_nvim_checks "$RUN/nv-e2e-gemini.json" cleanup

# cleanup: Neovim quit by itself, and gemini (its terminal job) is gone by its pid.
GEMINI_PID=$(jget "$(cat "$RUN/nv-e2e-gemini.extra.json")" gemini_pid)
GEM_FILE=$(jget "$(cat "$RUN/nv-e2e-gemini.extra.json")" discovery_file)
if [ "$NVIM_EXITED" != 1 ]; then
  fail cleanup "Neovim did not exit after its last step ($WHY)"
elif [ -n "$GEMINI_PID" ] && ! STEP_NOW=5 wait_until eval '! proc_alive "$GEMINI_PID"'; then
  fail cleanup "gemini (pid $GEMINI_PID) still runs after Neovim exited"
elif [ -n "$GEM_FILE" ] && [ -e "$GEM_FILE" ]; then
  fail cleanup "the discovery file $GEM_FILE is left after Neovim exited"
else
  pass cleanup "Neovim exited; gemini (pid ${GEMINI_PID:-none}) is gone; no discovery file left"
fi
FINISHED=1
