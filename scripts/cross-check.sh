#!/usr/bin/env bash
# Lints the whole workspace (library, qc-mcp-bridge, tests, benches, examples)
# for the platforms whose code cannot run on a Linux machine: macOS (Apple
# silicon; Intel too when some code is gated on target_arch), and Windows
# (MSVC). `cargo clippy` type-checks everything
# `cargo check` does and then lints it, with warnings as errors.
#   bash scripts/cross-check.sh [TARGET...]
# The Windows GNU target (mingw) is built and its tests run under Wine by
# tests/windows/run.sh.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
export CARGO_TERM_COLOR=never

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(aarch64-apple-darwin x86_64-pc-windows-msvc)
  # The two macOS architectures compile the same Rust code unless something
  # is gated on the architecture: then Intel macOS is linted too. (Both are
  # built by scripts/dist.sh.)
  if grep -rqs --include='*.rs' 'target_arch' src tests benches examples; then
    targets+=(x86_64-apple-darwin)
  else
    echo "cross-check: no target_arch in the Rust code: x86_64-apple-darwin compiles what aarch64-apple-darwin does"
  fi
fi

installed=$(rustup target list --installed 2>/dev/null)
for t in "${targets[@]}"; do
  grep -qx "$t" <<<"$installed" || rustup target add "$t" || echo "!! rustup target add $t failed"
done

passed=0; failed=0
for t in "${targets[@]}"; do
  t0=$SECONDS
  if cargo clippy --workspace --all-targets --locked --target "$t" -- -D warnings; then
    passed=$((passed+1)); echo "ok: clippy --target $t ($((SECONDS-t0)) s)"
  else
    failed=$((failed+1)); echo "FAILED: clippy --target $t ($((SECONDS-t0)) s)"
  fi
done
echo "cross-check: $passed passed, $failed failed"
[ $failed -eq 0 ]
