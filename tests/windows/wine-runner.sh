#!/usr/bin/env bash
# Cargo runner for x86_64-pc-windows-gnu: runs a Windows test binary under Wine in the
# suite's private WINEPREFIX (made by tests/windows/setup.sh) and returns its exit code.
#
#   export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER=x86_64-w64-mingw32-gcc
#   export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER=$PWD/tests/windows/wine-runner.sh
#   cargo test --target x86_64-pc-windows-gnu ...
#
# The Windows Node of setup.sh is on the program's PATH (WINEPATH), so `node` resolves.
# stdin is /dev/null: a Windows program reading a Linux tty under Wine can hang.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"
if [ ! -f "$WINEPREFIX/system.reg" ]; then
  echo "wine-runner: no WINEPREFIX at $WINEPREFIX; run tests/windows/setup.sh first" >&2
  exit 125
fi
[ $# -ge 1 ] || { echo "usage: wine-runner.sh PROGRAM.exe [ARGS...]" >&2; exit 2; }
# The Windows Node for the plugin tests (tests/plugins/windows.rs), as a Windows path.
[ -f "$QC_WIN_NODE" ] && export QC_TEST_NODE=${QC_TEST_NODE:-$(qc_win_path "$QC_WIN_NODE")}
# exec: a timeout or kill aimed at this script reaches the Windows program itself.
exec wine "$@" </dev/null
