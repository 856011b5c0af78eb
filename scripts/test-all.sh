#!/usr/bin/env bash
# Runs every test of the project, installing on a fresh machine what it needs.
#   bash scripts/test-all.sh
# Suites: Rust (fmt, clippy, unit/integration/header tests), the C demo and
# ABI tests under ASan, the Python binding + Sublime plugin (pytest, with the
# official MCP Python SDK), the Kotlin/JNA binding, and the real Qwen Code CLI
# end-to-end tests (IDE companion, plugin tools through the MCP bridge), the
# plugin view server in headless Chromium, the README's demo command itself,
# the macOS and Windows (MSVC) lints, the release artifacts of every platform
# and the editor packages made from them, and the Windows (mingw) build under
# Wine with the real CLI on Windows Node.
# Every suite runs even if an earlier one fails; the script exits non-zero if
# any failed.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
export CARGO_TERM_COLOR=never
# A CI machine builds once from scratch: incremental caches would only take
# disk (~1.3 GB). Locally they stay on.
if [ -n "${CI:-}" ]; then export CARGO_INCREMENTAL=0; fi
# Free disk is printed before and after: the suites together build the
# library for six targets, and a full disk fails them in confusing ways.
disk_free() { df -Ph "${CARGO_TARGET_DIR:-$root/target}" 2>/dev/null | awk 'NR==2 {print "== disk: " $4 " free of " $2 " (" $6 ")"}' || df -Ph . | awk 'NR==2 {print "== disk: " $4 " free"}'; }
mkdir -p "${CARGO_TARGET_DIR:-$root/target}"
disk_free

need=()
command -v tmux >/dev/null 2>&1 || need+=(tmux)
command -v ss >/dev/null 2>&1 || need+=(iproute2)
command -v make >/dev/null 2>&1 || need+=(make)
command -v cc >/dev/null 2>&1 || need+=(gcc)
command -v kotlinc >/dev/null 2>&1 || need+=(kotlin)
[ -f /usr/share/java/jna.jar ] || need+=(libjna-java)
command -v nvim >/dev/null 2>&1 || need+=(neovim)
# The render_pdf tests read the PDFs back with poppler (pdftotext, pdffonts,
# pdfinfo) and need a font with Hangul.
command -v pdftotext >/dev/null 2>&1 || need+=(poppler-utils)
[ -f /usr/share/fonts/truetype/nanum/NanumGothic.ttf ] || fc-list 2>/dev/null | grep -qi nanum || need+=(fonts-nanum)
[ -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need+=(fonts-dejavu-core)
if [ ${#need[@]} -gt 0 ]; then
  echo "== installing: ${need[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null \
    || echo "!! apt-get install failed"
fi

passed=0; failed=0; failures=()
suite() {
  local name=$1; shift
  echo
  echo "== $name: $*"
  local t0=$SECONDS
  if "$@"; then
    passed=$((passed+1)); echo "== $name: ok ($((SECONDS-t0)) s)"
  else
    failed=$((failed+1)); failures+=("$name"); echo "== $name: FAILED ($((SECONDS-t0)) s)"
  fi
}

suite rust-fmt cargo fmt --all -- --check
suite rust-clippy cargo clippy --workspace --all-targets --locked -- -D warnings
suite rust-tests cargo test --locked
suite rust-release-build cargo build --release --locked
# The release: every platform's library and bridge (zig, mingw-w64), the
# editor packages, checked; the package suites below test what it built.
suite dist bash tests/dist/run.sh
# macOS (aarch64, x86_64) and Windows (MSVC): type-checked and linted only.
suite cross-check bash scripts/cross-check.sh
suite c-demo bash tests/c/run_demo_asan.sh
suite python bash tests/python/run.sh
suite python-wheel bash tests/python/run_wheel.sh
suite sublime-package bash tests/sublime/run.sh
suite kotlin bash bindings/kotlin/run-tests.sh
suite neovim bash tests/neovim/run.sh
suite e2e-real-cli bash tests/e2e/run_e2e.sh
suite e2e-real-cli-sublime bash tests/e2e/run_e2e.sh --host sublime
suite e2e-neovim bash tests/neovim/run_e2e_nvim.sh
suite e2e-gemini-cli bash tests/e2e/run_e2e_gemini.sh
suite e2e-neovim-gemini bash tests/neovim/run_e2e_nvim_gemini.sh
suite interop-sessions bash tests/interop/run_sessions.sh
suite e2e-mcp-plugins bash tests/e2e/run_mcp_e2e.sh
suite views-browser bash tests/views/run_views_browser.sh
suite demo-smoke bash tests/demo/run_demo_smoke.sh
# Windows (mingw): the library's tests, the C demo and the real CLI on Windows
# Node, under Wine; then the C demo's cross-builds (mingw, reusing that debug
# DLL; macOS with zig's clang).
suite windows-wine bash tests/windows/run.sh
suite c-cross env QC_WINDOWS_LIBDIR="${CARGO_TARGET_DIR:-$root/target}/x86_64-pc-windows-gnu/debug" \
  QC_MACOS_LIBDIR="${QC_DIST_DIR:-$root/target/dist}/native/universal-apple-darwin" \
  QC_WINDOWS_DIST="${QC_DIST_DIR:-$root/target/dist}/native/x86_64-pc-windows-gnu" bash tests/c/build_cross.sh

echo
disk_free
du -sh "${CARGO_TARGET_DIR:-$root/target}" 2>/dev/null | awk '{print "== target: " $1}'
if [ $failed -gt 0 ]; then echo "failed suites: ${failures[*]}"; fi
echo "suites: $passed passed, $failed failed"
[ $failed -eq 0 ]
