# Shared by scripts/dist.sh and tests/dist/run.sh (sourced): the platforms,
# their file names, the tools.

# Every platform the release has, in the order the docs list them.
DIST_TRIPLES=(x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu x86_64-pc-windows-gnu
  aarch64-apple-darwin x86_64-apple-darwin universal-apple-darwin)
# The oldest glibc the Linux builds need (RHEL 8, Debian 10, Ubuntu 18.10).
DIST_GLIBC=2.28
# The oldest macOS (Big Sur; also the oldest the Node.js Qwen Code needs runs on).
DIST_MACOS=11.0
# The editor packagers run after the native files, each as
#   CMD --native DIR/native --version V --out DIR/NAME
DIST_PACKAGERS=(
  "python:python3 bindings/python/build_wheels.py"
  "kotlin:bash bindings/kotlin/build-dist.sh"
  "sublime:python3 examples/sublime/package.py"
)

dist_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DIST_VENV=${CARGO_TARGET_DIR:-$dist_root/target}/ziglang-venv

dist_known() { local t; for t in "${DIST_TRIPLES[@]}"; do [ "$t" = "$1" ] && return 0; done; return 1; }
dist_version() { sed -n 's/^version = "\(.*\)"$/\1/p' "$dist_root/Cargo.toml" | head -n 1; }
dist_lib_name() {
  case $1 in
    *-windows-*) echo qwen_companion.dll ;;
    *-apple-darwin) echo libqwen_companion.dylib ;;
    *) echo libqwen_companion.so ;;
  esac
}
dist_bridge_name() { case $1 in *-windows-*) echo qc-mcp-bridge.exe ;; *) echo qc-mcp-bridge ;; esac; }
dist_zig_version() { "$DIST_VENV/bin/python" -m ziglang version 2>/dev/null; }

# Installs what the build needs (idempotent): Rust targets, Debian's llvm and
# mingw-w64, the pinned zig + cargo-zigbuild in a venv. Sets DIST_LIPO.
dist_tools() {
  local t need=() installed
  installed=$(rustup target list --installed 2>/dev/null)
  for t in aarch64-unknown-linux-gnu x86_64-pc-windows-gnu aarch64-apple-darwin x86_64-apple-darwin; do
    grep -qx "$t" <<<"$installed" || rustup target add "$t" >/dev/null 2>&1 \
      || { echo "dist: rustup target add $t failed" >&2; return 1; }
  done
  command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1 || need+=(gcc-mingw-w64-x86-64)
  command -v llvm-readobj >/dev/null 2>&1 || need+=(llvm)
  if [ ${#need[@]} -gt 0 ]; then
    echo "dist: installing ${need[*]} (apt-get)"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"; } >/dev/null 2>&1 \
      || { echo "dist: apt-get install ${need[*]} failed" >&2; return 1; }
  fi
  DIST_LIPO=$(command -v llvm-lipo || ls /usr/bin/llvm-lipo-* 2>/dev/null | sort -V | tail -n 1)
  [ -n "$DIST_LIPO" ] || { echo "dist: no llvm-lipo (Debian package llvm)" >&2; return 1; }
  dist_zig_venv || return 1
  export DIST_LIPO
}

# The venv with the pinned zig and cargo-zigbuild (scripts/dist/tools.txt);
# zig's caches under target/, not in $HOME.
dist_zig_venv() {
  local stamp=$DIST_VENV/.tools.sha256 want
  want=$(sha256sum <"$dist_root/scripts/dist/tools.txt" | cut -d' ' -f1)
  export ZIG_GLOBAL_CACHE_DIR=${ZIG_GLOBAL_CACHE_DIR:-$(dirname "$DIST_VENV")/zig-cache}
  export ZIG_LOCAL_CACHE_DIR=${ZIG_LOCAL_CACHE_DIR:-$ZIG_GLOBAL_CACHE_DIR}
  [ -x "$DIST_VENV/bin/cargo-zigbuild" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ] && return 0
  echo "dist: installing $(grep -v '^#' "$dist_root/scripts/dist/tools.txt" | tr '\n' ' ')into $DIST_VENV"
  if [ ! -x "$DIST_VENV/bin/pip" ]; then
    . "$dist_root/tests/lib/venv.sh"
    qc_make_venv python3 "$DIST_VENV" || return 1
  fi
  "$DIST_VENV/bin/pip" install -q --disable-pip-version-check -r "$dist_root/scripts/dist/tools.txt" \
    || { echo "dist: pip install -r scripts/dist/tools.txt failed" >&2; return 1; }
  echo "$want" >"$stamp"
}

# Where the release's files are published: the https base URL of a GitHub
# release ({version} stands for the version), for the files that name it
# (the Sublime repository.json). $QC_RELEASE_BASE_URL, else taken from the
# checkout's GitHub `origin`, else the project's placeholder account OWNER
# (said on stderr: set QC_RELEASE_BASE_URL before publishing).
dist_release_base_url() {
  if [ -n "${QC_RELEASE_BASE_URL:-}" ]; then echo "$QC_RELEASE_BASE_URL"; return; fi
  local origin repo
  origin=$(git -C "$dist_root" remote get-url origin 2>/dev/null || true)
  repo=$(printf '%s' "$origin" | sed -n -E 's#^(https://github\.com/|git@github\.com:|ssh://git@github\.com/)([^/]+/[^/]+)$#\2#p' | sed 's/\.git$//')
  if [ -n "$repo" ]; then
    echo "https://github.com/$repo/releases/download/v{version}"
  else
    echo "dist: origin '${origin:-none}' is not on GitHub: the Sublime repository.json points at OWNER/qwen-companion (set QC_RELEASE_BASE_URL)" >&2
    echo "https://github.com/OWNER/qwen-companion/releases/download/v{version}"
  fi
}
