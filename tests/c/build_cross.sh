#!/usr/bin/env bash
# Cross-builds of the C demo (examples/c) for Windows and macOS, from Linux.
#
#   tests/c/build_cross.sh            (from anywhere)
#
# 1. Windows (mingw-w64): compiles every demo source with
#    x86_64-w64-mingw32-gcc -Wall -Wextra -Werror -Wpedantic (installed with
#    apt-get when missing), then, when a Windows build of the library is
#    there, links qcdemo.exe against its import library, checks what the
#    executable imports, and runs `qcdemo.exe --help` / `--version` under
#    Wine when Wine is installed, plus a short `qcdemo.exe ide` session
#    (ready, an error, stopped at EOF, lock file gone; with the ProcessPrng shim of
#    tests/windows/prng_shim next to it when Wine lacks ProcessPrng).
# 2. macOS: compiles every demo source with zig's clang (PyPI's ziglang,
#    installed into a venv under target/) for aarch64-macos and x86_64-macos,
#    -Werror as above, and links qcdemo when a macOS build of the library is
#    given.
# Prints "ok   - ..." / "FAIL - ..." per check, "SKIP: <what>: <why>" where a
# prerequisite cannot be had, and ends with "c-cross: N passed, M failed".
#
# Env: QC_WINDOWS_LIBDIR  folder with qwen_companion.dll and
#                         libqwen_companion.dll.a (default:
#                         $CARGO_TARGET_DIR/x86_64-pc-windows-gnu/release,
#                         CARGO_TARGET_DIR defaulting to target/; when set,
#                         it must hold them)
#      QC_MACOS_LIBDIR    folder with libqwen_companion.dylib (for aarch64 and
#                         x86_64 macOS, or one of them: the link is tried for
#                         the architectures the dylib has); no default
#      QC_PRNG_SHIM_SRC   folder of the ProcessPrng shim's source (default
#                         tests/windows/prng_shim)
#      QC_KEEP_TMP=1      keeps the output folder (target/c-cross.*)
#      PYTHON             python3 (for the ziglang venv)
set -u

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
TGT=${CARGO_TARGET_DIR:-$ROOT/target}
case $TGT in /*) ;; *) TGT=$ROOT/$TGT ;; esac
WIN_LIBDIR=${QC_WINDOWS_LIBDIR:-$TGT/x86_64-pc-windows-gnu/release}
MAC_LIBDIR=${QC_MACOS_LIBDIR:-}
PY=${PYTHON:-python3}
mkdir -p "$ROOT/target"
TMP=$(mktemp -d "$ROOT/target/c-cross.XXXXXX")
SRCS=(qcdemo qcdemo_common qcdemo_ide qcdemo_sessions qcdemo_plugins qcdemo_platform_posix qcdemo_platform_win32)
PASSED=0 FAILED=0

cleanup() { if [ "${QC_KEEP_TMP:-0}" = 1 ]; then echo "kept $TMP"; else rm -rf "$TMP"; fi; }
trap cleanup EXIT

pass() { PASSED=$((PASSED + 1)); echo "ok   - $*"; }
fail() { FAILED=$((FAILED + 1)); echo "FAIL - $*"; }
skip() { echo "SKIP: $1: $2"; }
# show FILE: the end of a log, indented
show() { tail -n 30 "$1" | sed 's/^/       /'; }

# macho_archs FILE: the architectures of a Mach-O file (thin or universal), one a
# line (arm64, x86_64, ...); nothing if FILE is not Mach-O.
macho_archs() {
    "$PY" - "$1" <<'PYEOF'
import struct, sys
names = {0x0100000C: "arm64", 0x01000007: "x86_64"}
try:
    data = open(sys.argv[1], "rb").read(4096)
except OSError:
    sys.exit(0)
magic = data[:4]
if magic in (b"\xcf\xfa\xed\xfe", b"\xce\xfa\xed\xfe"):
    print(names.get(struct.unpack("<I", data[4:8])[0], "other"))
elif magic == b"\xca\xfe\xba\xbe":
    for i in range(struct.unpack(">I", data[4:8])[0]):
        print(names.get(struct.unpack(">I", data[8 + 20 * i:12 + 20 * i])[0], "other"))
PYEOF
}

# wine_prng DIR: Rust's std (in qwen_companion.dll) needs ProcessPrng from
# bcryptprimitives.dll, which Wine 8 lacks. When Wine has none, the shim of
# tests/windows/prng_shim (QC_PRNG_SHIM_SRC) is built into DIR, next to the
# executable, where Windows looks first. Fails with WINE_WHY set when there is
# no way to get it.
wine_prng() {
    local dir=$1 builtin shim=${QC_PRNG_SHIM_SRC:-$ROOT/tests/windows/prng_shim}
    builtin=$(find /usr/lib /usr/lib64 /opt -path '*wine*' -path '*x86_64-windows*' -name bcryptprimitives.dll 2>/dev/null | head -n 1)
    if [ -n "$builtin" ] && x86_64-w64-mingw32-objdump -p "$builtin" | grep -q 'ProcessPrng'; then
        return 0
    fi
    if [ ! -f "$shim/bcryptprimitives.c" ] || [ ! -f "$shim/bcryptprimitives.def" ]; then
        WINE_WHY="$(wine --version 2>/dev/null) has no ProcessPrng (Rust's std needs it) and there is no shim source in $shim"
        return 1
    fi
    if ! "$MINGW_CC" -shared -O2 -s -o "$dir/bcryptprimitives.dll" "$shim/bcryptprimitives.c" \
        "$shim/bcryptprimitives.def" -ladvapi32 >"$TMP/prng-shim.log" 2>&1; then
        fail "build the ProcessPrng shim ($shim)"
        show "$TMP/prng-shim.log"
        WINE_WHY="the ProcessPrng shim did not build"
        return 1
    fi
    pass "ProcessPrng shim for Wine built next to qcdemo.exe"
}

# mk LOG ARGS...: make -C examples/c ARGS, output to LOG
mk() {
    local log=$1
    shift
    make -C "$ROOT/examples/c" NO_CARGO=1 "$@" >"$log" 2>&1
}

# compile_all NAME OUT MAKEARGS...: one check per demo source
compile_all() {
    local name=$1 out=$2 src
    shift 2
    for src in "${SRCS[@]}"; do
        if mk "$TMP/$name-$src.log" OUT="$out" "$@" "$out/obj/$src.o" && [ -s "$out/obj/$src.o" ]; then
            pass "$name: $src.c compiles (-Wall -Wextra -Werror -Wpedantic)"
        else
            fail "$name: $src.c compiles (-Wall -Wextra -Werror -Wpedantic)"
            show "$TMP/$name-$src.log"
        fi
    done
}

# ---------------------------------------------------------------- Windows (mingw-w64)
echo "# Windows: x86_64-w64-mingw32-gcc"
MINGW_CC=x86_64-w64-mingw32-gcc
if ! command -v "$MINGW_CC" >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1; then
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc-mingw-w64-x86-64; } \
            >"$TMP/apt-mingw.log" 2>&1
    fi
fi
if ! command -v "$MINGW_CC" >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1; then
        fail "install gcc-mingw-w64-x86-64 with apt-get"
        show "$TMP/apt-mingw.log"
    else
        skip "Windows build" "no $MINGW_CC and no apt-get to install it"
    fi
else
    WOUT=$TMP/mingw
    compile_all mingw "$WOUT" PLATFORM=mingw
    if [ -n "${QC_WINDOWS_LIBDIR:-}" ] && { [ ! -f "$WIN_LIBDIR/qwen_companion.dll" ] ||
        [ ! -f "$WIN_LIBDIR/libqwen_companion.dll.a" ]; }; then
        fail "mingw: QC_WINDOWS_LIBDIR ($WIN_LIBDIR) has qwen_companion.dll and libqwen_companion.dll.a"
    elif [ ! -f "$WIN_LIBDIR/qwen_companion.dll" ] || [ ! -f "$WIN_LIBDIR/libqwen_companion.dll.a" ]; then
        skip "mingw link of qcdemo.exe" "no Windows build of the library in $WIN_LIBDIR (cargo build --release --target x86_64-pc-windows-gnu, or set QC_WINDOWS_LIBDIR)"
    elif mk "$TMP/mingw-link.log" PLATFORM=mingw OUT="$WOUT" LIBDIR="$WIN_LIBDIR" && [ -f "$WOUT/qcdemo.exe" ] &&
        [ -f "$WOUT/qwen_companion.dll" ]; then
        pass "mingw: qcdemo.exe links against libqwen_companion.dll.a; qwen_companion.dll copied next to it"
        # It imports the library and Windows' own DLLs only (no libwinpthread, no libgcc).
        x86_64-w64-mingw32-objdump -p "$WOUT/qcdemo.exe" | sed -n 's/^\s*DLL Name: //p' >"$TMP/imports.txt"
        if grep -qx 'qwen_companion.dll' "$TMP/imports.txt" &&
            ! grep -viqE '^(qwen_companion|kernel32|msvcrt|shell32|user32|advapi32|api-ms-win-.*|ucrtbase)\.dll$' \
                "$TMP/imports.txt"; then
            pass "mingw: qcdemo.exe imports $(tr '\n' ' ' <"$TMP/imports.txt")"
        else
            fail "mingw: qcdemo.exe imports qwen_companion.dll and system DLLs only"
            sed 's/^/       /' "$TMP/imports.txt"
        fi
        if ! command -v wine >/dev/null 2>&1; then
            skip "running qcdemo.exe" "wine is not installed"
        elif ! wine_prng "$WOUT"; then
            skip "running qcdemo.exe under Wine" "$WINE_WHY"
        else
            export WINEPREFIX="$TMP/wineprefix" WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
            timeout 180 wine "$WOUT/qcdemo.exe" --help >"$TMP/wine-help.out" 2>"$TMP/wine-help.err"
            RC=$?
            if [ $RC -eq 0 ] && grep -q '^usage: qcdemo' "$TMP/wine-help.out" && ! grep -q $'\r' "$TMP/wine-help.out"; then
                pass "wine: qcdemo.exe --help prints the usage (lines end in \\n)"
            else
                fail "wine: qcdemo.exe --help prints the usage (rc=$RC)"
                show "$TMP/wine-help.err"
            fi
            VERSION=$(timeout 60 wine "$WOUT/qcdemo.exe" --version 2>>"$TMP/wine-help.err")
            if [[ $VERSION =~ ^[0-9]+\.[0-9]+\.[0-9]+[^[:space:]]*$ ]]; then
                pass "wine: qcdemo.exe --version prints qc_version() ($VERSION)"
            else
                fail "wine: qcdemo.exe --version prints qc_version() (got '$VERSION')"
                show "$TMP/wine-help.err"
            fi
            # ide: ready, one error, stopped at EOF; the lock file is gone.
            mkdir -p "$TMP/ws" "$TMP/qwen-home"
            winpath() { printf 'Z:%s' "${1//\//\\}"; }
            printf 'frobnicate now\n' | QWEN_HOME=$(winpath "$TMP/qwen-home") timeout 120 \
                wine "$WOUT/qcdemo.exe" ide --workspace "$(winpath "$TMP/ws")" >"$TMP/wine-ide.out" 2>"$TMP/wine-ide.err"
            RC=$?
            if [ $RC -eq 0 ] && [ "$(sed -n 's/^{"event":"\([a-z_]*\)".*/\1/p' "$TMP/wine-ide.out" | tr '\n' ' ')" = "ready error stopped " ] &&
                grep -qF '"message":"unknown command: frobnicate"' "$TMP/wine-ide.out" &&
                [ -d "$TMP/qwen-home/ide" ] && [ -z "$(ls -A "$TMP/qwen-home/ide")" ]; then
                pass "wine: qcdemo.exe ide: ready, error, stopped at EOF (exit 0), lock file removed"
            else
                fail "wine: qcdemo.exe ide: ready, error, stopped at EOF (rc=$RC)"
                sed 's/^/       /' "$TMP/wine-ide.out"
                show "$TMP/wine-ide.err"
            fi
            wineserver -k >/dev/null 2>&1
        fi
    else
        fail "mingw: qcdemo.exe links against libqwen_companion.dll.a"
        show "$TMP/mingw-link.log"
    fi
fi

# ---------------------------------------------------------------- macOS (zig cc)
echo "# macOS: zig cc (PyPI ziglang)"
# The pinned zig of the release build (scripts/dist/tools.txt), same venv.
. "$ROOT/scripts/dist/lib.sh"
VENV=$DIST_VENV
dist_zig_venv >"$TMP/venv.log" 2>&1
if ! "$VENV/bin/python" -m ziglang version >/dev/null 2>&1; then
    if command -v "$PY" >/dev/null 2>&1; then
        fail "install ziglang into $VENV"
        show "$TMP/venv.log"
    else
        skip "macOS build" "no $PY to install ziglang with"
    fi
else
    ZIG_CC="$VENV/bin/python -m ziglang cc"
    for arch in aarch64 x86_64; do
        MOUT=$TMP/macos-$arch
        MARCH=$([ $arch = aarch64 ] && echo arm64 || echo x86_64)
        compile_all "macos-$arch" "$MOUT" PLATFORM=macos CC="$ZIG_CC -target $arch-macos"
        if [ -z "$MAC_LIBDIR" ]; then
            skip "macos-$arch link of qcdemo" "QC_MACOS_LIBDIR is not set (a folder with a macOS libqwen_companion.dylib)"
        elif [ ! -f "$MAC_LIBDIR/libqwen_companion.dylib" ]; then
            fail "macos-$arch: $MAC_LIBDIR/libqwen_companion.dylib exists"
        elif ! macho_archs "$MAC_LIBDIR/libqwen_companion.dylib" | grep -qx "$MARCH"; then
            skip "macos-$arch link of qcdemo" "$MAC_LIBDIR/libqwen_companion.dylib has no $arch code"
        elif mk "$TMP/macos-$arch-link.log" PLATFORM=macos OUT="$MOUT" LIBDIR="$MAC_LIBDIR" \
            CC="$ZIG_CC -target $arch-macos" && [ "$(macho_archs "$MOUT/qcdemo")" = "$MARCH" ]; then
            pass "macos-$arch: qcdemo links against libqwen_companion.dylib (a Mach-O $MARCH executable)"
        else
            fail "macos-$arch: qcdemo links against libqwen_companion.dylib"
            show "$TMP/macos-$arch-link.log"
        fi
    done
fi

echo "c-cross: $PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
