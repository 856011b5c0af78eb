#!/usr/bin/env bash
# The release artifacts: builds them (scripts/dist.sh into $QC_DIST_DIR, else
# target/dist) and checks what was built, independently of the build:
#   bash tests/dist/run.sh            build, then check
#   bash tests/dist/run.sh --check    check an existing release folder only
# Checks: every platform present with its archive; `sha256sum -c SHA256SUMS`;
# manifest.json, SHA256SUMS and the archives agree with the files; each
# platform's files (scripts/dist/check_native.py: format, architecture,
# exports, stripped, glibc / macOS floor, install name, code signature; the
# Linux x86_64 library loaded and the bridge run); the archives rebuilt from
# the same files are the same bytes; the script's own refusals.
# The editor packages are tested by their suites (python, kotlin, neovim).
# Last line: `dist: N passed, M failed`.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
. scripts/dist/lib.sh
out=${QC_DIST_DIR:-$root/target/dist}
passed=0; failed=0
ok() { passed=$((passed+1)); echo "ok   $*"; }
bad() { failed=$((failed+1)); echo "FAIL $*"; }
check() { local name=$1; shift; if out_text=$("$@" 2>&1); then ok "$name"; else bad "$name"; echo "$out_text" | tail -n 20 | sed 's/^/     /'; fi; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

if [ "${1:-}" != --check ]; then
  t=$SECONDS
  if bash scripts/dist.sh --out "$out"; then ok "scripts/dist.sh built every platform and package ($((SECONDS-t)) s)"
  else bad "scripts/dist.sh ($((SECONDS-t)) s)"; fi
fi
version=$(dist_version)
[ "$(cat "$out/VERSION" 2>/dev/null)" = "$version" ] && ok "VERSION is the crate's ($version)" \
  || bad "VERSION in $out is '$(cat "$out/VERSION" 2>/dev/null)', the crate is $version"

for t in "${DIST_TRIPLES[@]}"; do
  check "native/$t" python3 scripts/dist/check_native.py --header include/qwen_companion.h --version "$version" \
    --glibc "$DIST_GLIBC" --macos "$DIST_MACOS" "$t" "$out/native/$t"
  echo "     $(printf '%s' "$out_text" | tail -n 1)"
done
check "sha256sum -c SHA256SUMS" bash -c "cd '$out' && sha256sum --quiet --strict -c SHA256SUMS"
check "manifest, SHA256SUMS and archives agree with the files" python3 scripts/dist/files.py verify "$out"

# Reproducible archives: the same files and time give the same bytes.
mkdir -p "$tmp/again"
cp -R "$out/native" "$out/VERSION" "$tmp/again/"
same=1
for t in "${DIST_TRIPLES[@]}"; do
  [ -d "$out/native/$t" ] || continue
  SOURCE_DATE_EPOCH=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["sourceDateEpoch"])' "$out/manifest.json") \
    python3 scripts/dist/files.py archive "$tmp/again" --version "$version" --triple "$t" --add include/qwen_companion.h >/dev/null
  for a in "$tmp/again"/qwen-companion-*; do
    cmp -s "$a" "$out/$(basename "$a")" || { same=0; echo "     $(basename "$a") differs when rebuilt"; }
  done
  rm -f "$tmp/again"/qwen-companion-*
done
[ $same = 1 ] && ok "archives rebuilt from the same files are identical" || bad "archives are not reproducible"

# A tampered file is caught by both checks.
cp -R "$out" "$tmp/tampered"
printf 'x' >>"$tmp/tampered/native/x86_64-unknown-linux-gnu/qc-mcp-bridge"
if (cd "$tmp/tampered" && sha256sum --quiet -c SHA256SUMS >/dev/null 2>&1); then bad "sha256sum missed a changed file"
else ok "sha256sum -c catches a changed file"; fi
if python3 scripts/dist/files.py verify "$tmp/tampered" >/dev/null 2>&1; then bad "files.py verify missed a changed file"
else ok "files.py verify catches a changed file"; fi

# The platform checks fail on a wrong file: another architecture's library,
# and a macOS library changed after it was signed.
mkdir -p "$tmp/wrong-arch" "$tmp/resigned"
cp "$out/native/x86_64-unknown-linux-gnu/qc-mcp-bridge" "$out/native/aarch64-unknown-linux-gnu/libqwen_companion.so" "$tmp/wrong-arch/" 2>/dev/null
msg=$(python3 scripts/dist/check_native.py --header include/qwen_companion.h --version "$version" \
  x86_64-unknown-linux-gnu "$tmp/wrong-arch" 2>&1) && bad "check_native accepted an aarch64 library as x86_64" \
  || { grep -q "not an ELF x86_64" <<<"$msg" && ok "check_native refuses another architecture's library" || bad "wrong-arch: $msg"; }
cp "$out/native/aarch64-apple-darwin/"* "$tmp/resigned/" 2>/dev/null
python3 - "$tmp/resigned/libqwen_companion.dylib" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[len(b) // 3] ^= 0xFF
open(p, "wb").write(b)
PY
msg=$(python3 scripts/dist/check_native.py --header include/qwen_companion.h --version "$version" \
  aarch64-apple-darwin "$tmp/resigned" 2>&1) && bad "check_native accepted a dylib changed after signing" \
  || { grep -q "code signature does not match" <<<"$msg" && ok "check_native refuses a dylib changed after signing" || bad "resigned: $msg"; }

# The script's refusals: an unknown platform or argument, with the reason.
msg=$(bash scripts/dist.sh --target riscv64-unknown-linux-gnu 2>&1); rc=$?
[ $rc = 2 ] && grep -q "unknown target riscv64-unknown-linux-gnu" <<<"$msg" && ok "dist.sh refuses an unknown platform (status 2)" \
  || bad "dist.sh --target riscv64…: status $rc, '$msg'"
msg=$(bash scripts/dist.sh --frobnicate 2>&1); rc=$?
[ $rc = 2 ] && grep -q "unknown argument --frobnicate" <<<"$msg" && ok "dist.sh refuses an unknown argument (status 2)" \
  || bad "dist.sh --frobnicate: status $rc, '$msg'"

echo "dist: $passed passed, $failed failed"
[ $failed = 0 ]
