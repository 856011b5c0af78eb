#!/usr/bin/env bash
# Builds the release artifacts: the library and qc-mcp-bridge for every
# platform, stripped, one archive per platform, then each editor's package,
# and last a manifest and SHA256SUMS over everything.
#   bash scripts/dist.sh [--out DIR] [--target TRIPLE]... [--no-packages]
#
# Output (DIR defaults to $QC_DIST_DIR, else target/dist; emptied first):
#   VERSION                          the crate's version
#   native/<triple>/                 the library and the bridge, stripped
#   qwen-companion-<version>-<triple>.tar.gz   (Windows: .zip) the same two
#                                    files and the C header, in a folder of
#                                    that name
#   python/    wheels               (bindings/python/build_wheels.py)
#   kotlin/, intellij/   binding jar, IntelliJ plugin zip  (bindings/kotlin/build-dist.sh)
#   sublime/   Package Control package and repository.json (examples/sublime/package.py)
#   manifest.json, SHA256SUMS        written last
#
# Triples: x86_64-unknown-linux-gnu and aarch64-unknown-linux-gnu (linked by
# zig against glibc 2.28), x86_64-pc-windows-gnu (Debian's mingw-w64),
# aarch64-apple-darwin and x86_64-apple-darwin (macOS 11) (zig,
# no Apple SDK needed), and universal-apple-darwin (llvm-lipo of the two).
# Tools: the pinned PyPI packages of scripts/dist/tools.txt (zig,
# cargo-zigbuild) in a venv under target/, Debian's llvm and mingw-w64, the
# Rust targets from rustup. Nothing else is downloaded.
# A platform that fails to build is reported with the build's own last lines
# and left out; the script then exits non-zero.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
export CARGO_TERM_COLOR=never
# shellcheck source=scripts/dist/lib.sh
. "$root/scripts/dist/lib.sh"

out=${QC_DIST_DIR:-$root/target/dist}
targets=()
packages=1
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift 2 ;;
    --target) targets+=("$2"); shift 2 ;;
    --no-packages) packages=0; shift ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "dist: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=("${DIST_TRIPLES[@]}")
for t in "${targets[@]}"; do
  dist_known "$t" || { echo "dist: unknown target $t (one of: ${DIST_TRIPLES[*]})" >&2; exit 2; }
done
case $out in /*) ;; *) out=$root/$out ;; esac

version=$(dist_version)
# Archives and packages carry this time, so the same commit gives the same bytes.
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || echo 1577836800)}
export SOURCE_DATE_EPOCH
tgt=${CARGO_TARGET_DIR:-$root/target}
problems=()
say() { echo "dist: $*"; }
t0=$SECONDS

# ---------------------------------------------------------------- tools
dist_tools || exit 1

# ---------------------------------------------------------------- build
want() { local t; for t in "${targets[@]}"; do [ "$t" = "$1" ] && return 0; done; return 1; }
# universal-apple-darwin needs both macOS architectures.
if want universal-apple-darwin; then
  want aarch64-apple-darwin || targets+=(aarch64-apple-darwin)
  want x86_64-apple-darwin || targets+=(x86_64-apple-darwin)
fi

# Stripped by the release profile (strip = "symbols" in Cargo.toml: the
# linker drops the symbol table, on macOS before its ad-hoc signature, which
# Apple silicon requires, so the signature stays valid): the files are the
# ones `cargo build --release` makes, for each platform.
# macOS: MACOSX_DEPLOYMENT_TARGET below; zig would otherwise stamp its own
# newest version as the minimum.
build_log=$tgt/dist-build.log
: >"$build_log"

zig_specs=()
for t in "${targets[@]}"; do
  case $t in
    *-linux-gnu) zig_specs+=(--target "$t.$DIST_GLIBC") ;;
    *-apple-darwin) [ "$t" = universal-apple-darwin ] || zig_specs+=(--target "$t") ;;
  esac
done
if [ ${#zig_specs[@]} -gt 0 ]; then
  say "cargo zigbuild ${zig_specs[*]}"
  t=$SECONDS
  # One cargo run for all zig targets: the two cores stay busy across them.
  if ! PATH="$DIST_VENV/bin:$PATH" MACOSX_DEPLOYMENT_TARGET=$DIST_MACOS \
      cargo zigbuild --release --locked --lib --bin qc-mcp-bridge "${zig_specs[@]}" >>"$build_log" 2>&1; then
    problems+=("cargo zigbuild failed: $(grep -E '^error' "$build_log" | head -3 | tr '\n' ' ')")
    tail -n 30 "$build_log"
  fi
  say "zig targets built in $((SECONDS-t)) s"
fi
if want x86_64-pc-windows-gnu; then
  say "cargo build --target x86_64-pc-windows-gnu (mingw-w64)"
  t=$SECONDS
  if ! CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER=x86_64-w64-mingw32-gcc \
      cargo build --release --locked --lib --bin qc-mcp-bridge --target x86_64-pc-windows-gnu >>"$build_log" 2>&1; then
    problems+=("x86_64-pc-windows-gnu: cargo build failed: $(grep -E '^error' "$build_log" | tail -3 | tr '\n' ' ')")
    tail -n 30 "$build_log"
  fi
  say "Windows built in $((SECONDS-t)) s"
fi

# ---------------------------------------------------------------- collect
rm -rf "$out"
mkdir -p "$out/native"
echo "$version" >"$out/VERSION"
built=()
for t in "${targets[@]}"; do
  [ "$t" = universal-apple-darwin ] && continue
  lib=$(dist_lib_name "$t"); bridge=$(dist_bridge_name "$t")
  src=$tgt/$t/release
  if [ ! -f "$src/$lib" ] || [ ! -f "$src/$bridge" ]; then
    problems+=("$t: no $lib / $bridge in $src (see $build_log)")
    continue
  fi
  mkdir -p "$out/native/$t"
  cp "$src/$lib" "$src/$bridge" "$out/native/$t/"
  built+=("$t")
done
if want universal-apple-darwin; then
  a=$out/native/aarch64-apple-darwin; x=$out/native/x86_64-apple-darwin; u=$out/native/universal-apple-darwin
  if [ -d "$a" ] && [ -d "$x" ]; then
    mkdir -p "$u"
    for f in libqwen_companion.dylib qc-mcp-bridge; do
      "$DIST_LIPO" -create "$a/$f" "$x/$f" -output "$u/$f" || problems+=("universal-apple-darwin: llvm-lipo $f failed")
    done
    chmod 755 "$u/qc-mcp-bridge"
    built+=(universal-apple-darwin)
  else
    problems+=("universal-apple-darwin: needs both macOS builds")
  fi
fi

# ---------------------------------------------------------------- check
# Every file: the right format and architecture, every qc_ function of the
# header exported, the platform floor (glibc, macOS minimum), the bridge runs
# where this machine can run it. The same checks run as a test
# (tests/dist/run.sh) on a finished DIR.
ok_targets=()
for t in "${built[@]}"; do
  if msg=$(python3 "$root/scripts/dist/check_native.py" --header include/qwen_companion.h \
      --version "$version" --glibc "$DIST_GLIBC" --macos "$DIST_MACOS" "$t" "$out/native/$t" 2>&1); then
    ok_targets+=("$t"); echo "$msg"
  else
    problems+=("$t: $msg"); rm -rf "${out:?}/native/$t"
  fi
done

# ---------------------------------------------------------------- archives
for t in "${ok_targets[@]}"; do
  python3 "$root/scripts/dist/files.py" archive "$out" --version "$version" --triple "$t" \
    --add include/qwen_companion.h || problems+=("$t: archive failed")
done

# ---------------------------------------------------------------- packages
if [ $packages = 1 ]; then
  QC_RELEASE_BASE_URL=$(dist_release_base_url)
  export QC_RELEASE_BASE_URL
  for p in "${DIST_PACKAGERS[@]}"; do
    name=${p%%:*}; cmd=${p#*:}
    say "package $name: $cmd"
    # shellcheck disable=SC2086
    if ! (cd "$root" && $cmd --native "$out/native" --version "$version" --out "$out/$name"); then
      problems+=("package $name failed")
    fi
  done
fi

# ---------------------------------------------------------------- manifest
python3 "$root/scripts/dist/files.py" write "$out" --version "$version" \
  --commit "$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)" \
  --tool "rustc=$(rustc -V)" --tool "zig=$(dist_zig_version)" \
  --tool "cargo-zigbuild=$("$DIST_VENV/bin/cargo-zigbuild" --version 2>/dev/null | head -1)" \
  --tool "mingw=$(x86_64-w64-mingw32-gcc --version 2>/dev/null | head -1)" \
  --tool "llvm-lipo=$("$DIST_LIPO" --version 2>/dev/null | grep -m1 -i version)" \
  || problems+=("manifest failed")

say "$out: ${#ok_targets[@]} platforms (${ok_targets[*]}) in $((SECONDS-t0)) s"
if [ ${#problems[@]} -gt 0 ]; then
  for p in "${problems[@]}"; do echo "dist: PROBLEM: $p" >&2; done
  exit 1
fi
