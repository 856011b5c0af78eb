#!/usr/bin/env bash
# Real-CLI end-to-end test of Neovim's "add to the prompt" and editor tools: a
# headless Neovim runs the real Qwen Code CLI (pinned) in the plugin's own
# terminal job (:QwenRun's terminal), on the scripted model
# (tests/e2e/fake_model.py). The Neovim side is tests/neovim/test_e2e_nvim.lua.
#
#   tests/neovim/run_e2e_nvim.sh
#
# Checks:
#   start          the companion, the plugin host and its MCP server start; the
#                  `qwen-companion-plugins` entry is written to the isolated
#                  HOME's settings.json (the bridge copied to ~/.qwen/companion/bin)
#   tools-listed   the plugin MCP server lists editor-diagnostics
#   terminal       the terminal job runs qwen in the workspace
#   tui-ready      qwen's prompt shows in the terminal
#   add-focus      :1,2QwenAdd (in the file's window) focuses the terminal
#   add-prompt     the test then types E2E_ADD and Enter into the same job: the
#                  model's request has `@notes.txt (lines 1-2) E2E_ADD …`
#   add-content    ... and the file's content (a unique token): the reference
#                  Neovim typed made qwen read the file
#   diag-call      the model calls mcp__qwen-companion-plugins__editor-diagnostics
#                  (prompt E2E_CALL; --approval-mode yolo)
#   diag-result    the tool result the model gets holds the diagnostic Neovim
#                  reported with vim.diagnostic.set (message, source, path, line
#                  2 and column 5: Neovim's 0-based byte column 4, converted)
#   no-lua-error   the Neovim side ran to its end
#
# Setup: the CLI is installed once into <repo>/target/e2e/qwen (npm, pinned); the
# library and qc-mcp-bridge of target/release are used as they are (no build).
# Isolated HOME (settings.json from the harness, IDE mode on), a scripted model.
# Environment knobs: E2E_TURN_TIMEOUT (45 s per wait), E2E_KEEP=1 (keep the run
# directory), E2E_DIR (cache root, default <repo>/target/e2e), NVIM (nvim).
# Last line of output: `nvim-e2e: N passed, M failed`; exit status 0 only if nothing failed.
set -u -o pipefail
# shellcheck source=../lib/harness.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"

no_args "$@"

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
nvim_e2e_config
QWEN_CACHE=$E2E_DIR/qwen
BRIDGE=$ROOT/target/release/qc-mcp-bridge
CHECKS=(start tools-listed terminal tui-ready add-focus add-prompt add-content diag-call diag-result no-lua-error)
harness_init nvim-e2e named

dump_diag() {
  dump_begin
  dump_debug_logs "$HOME_DIR/.qwen/debug" "MCP / @ / errors" '\[MCP\]|qwen-companion-plugins|@|\[ERROR\]'
  dump_model_requests
  dump_outputs
  dump_nvim_output
  dump_end
}

# ---------------------------------------------------------------- prerequisites
need_nvim
[ -f "$LIB" ] && [ -x "$BRIDGE" ] || abort "missing $LIB or $BRIDGE (cargo build --release)"
SETUP_T0=$(date +%s%N)
ensure_qwen || abort "could not install @qwen-code/qwen-code@$QWEN_VERSION with npm"
RUN=$(mktemp -d "${TMPDIR:-/tmp}/qc-nvim-e2e.XXXXXX") || abort "mktemp failed"
RUN=$(cd "$RUN" && pwd -P)
log "setup done in $(since "$SETUP_T0")s; run directory $RUN"

# ---------------------------------------------------------------- the isolated world
DEADLINE_MS=$(( $(ms_now) + STEP_TIMEOUT * 1000 ))
HOME_DIR=$RUN/home
WS=$RUN/ws
mkdir -p "$HOME_DIR/.qwen" "$WS"
qwen_settings ide > "$HOME_DIR/.qwen/settings.json"
TOKEN=$("$PYTHON" -c 'import secrets; print(secrets.token_hex(8))')
printf 'first line\nFILE_TOKEN_%s is the secret of this file\nthird line\n' "$TOKEN" > "$WS/notes.txt"
BASE_ENV=(PATH="$SYS_PATH" HOME="$HOME_DIR" LANG=C.UTF-8)

start_fake_model "$ROOT/tests/e2e/fake_model.py" env -i "${BASE_ENV[@]}"
fake_model_args "$(new_uuid)" yolo e2e-dummy-key
ARGV=$("$PYTHON" -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "$NODE" "$QWEN_PKG/cli-entry.js" "${QWEN_ARGS[@]}")

# ---------------------------------------------------------------- Neovim with qwen in its terminal
start_nvim_e2e "$HERE/test_e2e_nvim.lua" QWEN_CODE_SUPPRESS_YOLO_WARNING=1 \
  QCNV_TMP="$RUN" QCNV_WS="$WS" QCNV_TIMEOUT="$STEP_TIMEOUT" QCNV_MODEL_LOG="$RUN/model.jsonl" \
  QCNV_QWEN_ARGV="$ARGV" QCNV_TOKEN="$TOKEN"
# Neovim waits up to E2E_TURN_TIMEOUT for each of its steps (about five)
wait_nvim_exit 6
report_nvim_checks "$RUN/nv-e2e.json"
ENTRY_OK=$("$PYTHON" - "$HOME_DIR/.qwen/settings.json" "$HOME_DIR/.qwen/companion/bin/qc-mcp-bridge" <<'PY'
import json, sys
e = json.load(open(sys.argv[1]))["mcpServers"]["qwen-companion-plugins"]
print(1 if e["command"] == sys.argv[2] and e["args"] == ["plugins"] else 0)
PY
)
[ "$ENTRY_OK" = 1 ] || fail start "settings.json has no qwen-companion-plugins entry starting the copied bridge"
FINISHED=1
