#!/usr/bin/env bash
# Packages the Kotlin binding and the IntelliJ plugin for every platform, from
# the native builds of scripts/dist.sh:
#
#   bindings/kotlin/build-dist.sh --native DIST/native --version 0.1.0 --out DIST/kotlin [--intellij-out DIR]
#
# writes
#   DIST/kotlin/qwen-companion-kotlin-<version>.jar      the binding's classes, each platform's library and
#       qc-mcp-bridge under JNA's resource prefixes (linux-x86-64/, linux-aarch64/, darwin-aarch64/,
#       darwin-x86-64/, win32-x86-64/) and qwen-companion-natives.properties (their SHA-256)
#   DIST/intellij/qwen-companion-intellij-<version>.zip  (--intellij-out, default: intellij/ next to --out)
#       qwen-companion-intellij/lib/qwen-companion-intellij-<version>.jar  plugin classes + plugin.xml
#       qwen-companion-intellij/lib/qwen-companion-kotlin-<version>.jar    the jar above
#   (no Kotlin stdlib and no JNA: the IDE provides both to every plugin)
#
# Every target folder present under --native is packaged (at least one; an unknown or
# incomplete one is an error; universal-apple-darwin is not used: the per-CPU builds are).
# Compiles with Debian's kotlinc (no Gradle): the binding, and the plugin against
# the IntelliJ API stubs of tests/kotlin/intellij_api_stubs.py (see examples/intellij/README.md).
# QC_KT_BINDING_JAR / QC_KT_PLUGIN_CLASSES reuse classes run-tests.sh already compiled.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
JNA=/usr/share/java/jna.jar
KOTLINC="${KOTLINC:-kotlinc}"
die() { echo "build-dist: $*" >&2; exit 1; }
usage() { die "usage: $0 --native DIR --version X.Y.Z --out DIR [--intellij-out DIR]"; }

NATIVE="" VERSION="" OUTDIR="" IJ_OUT=""
while [ $# -gt 0 ]; do
    case "$1" in
        --native) [ $# -ge 2 ] || usage; NATIVE="$2"; shift 2 ;;
        --version) [ $# -ge 2 ] || usage; VERSION="$2"; shift 2 ;;
        --out) [ $# -ge 2 ] || usage; OUTDIR="$2"; shift 2 ;;
        --intellij-out) [ $# -ge 2 ] || usage; IJ_OUT="$2"; shift 2 ;;
        *) echo "build-dist: unknown argument '$1'" >&2; usage ;;
    esac
done
[ -n "$NATIVE" ] && [ -n "$VERSION" ] && [ -n "$OUTDIR" ] || usage
[ -d "$NATIVE" ] || die "--native $NATIVE is not a folder (run bash scripts/dist.sh first)"
[[ "$VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.-]+)?$ ]] || die "--version '$VERSION' is not a version like 0.1.0"
[ -n "$IJ_OUT" ] || IJ_OUT="$(dirname "$OUTDIR")/intellij"
for f in "$JNA" /usr/share/java/kotlin-stdlib.jar; do
    [ -f "$f" ] || die "$f is missing: apt-get install kotlin libjna-java"
done
command -v "$KOTLINC" >/dev/null 2>&1 || die "$KOTLINC not found: apt-get install kotlin"
# The since-build the Gradle build declares (examples/intellij/build.gradle.kts).
SINCE="$(sed -n 's/^ *sinceBuild = "\([0-9.]*\)".*/\1/p' "$ROOT/examples/intellij/build.gradle.kts")"
[ -n "$SINCE" ] || die "no sinceBuild in examples/intellij/build.gradle.kts"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/qc-kt-dist.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$OUTDIR" "$IJ_OUT"
KFLAGS=(-jvm-target 11 -nowarn)
kc() { "$KOTLINC" "${KFLAGS[@]}" "$@" 2> >(grep -v -e 'Xverify:none' -e '^$' >&2); }

# Fail on bad natives before the slow compiles.
python3 - "$ROOT/bindings/kotlin" "$NATIVE" <<'EOF' || exit 1
import sys
sys.path.insert(0, sys.argv[1])
import pack_dist
try:
    for triple, prefix, _ in pack_dist.natives(sys.argv[2]):
        print("build-dist: %s -> %s/" % (triple, prefix), file=sys.stderr)
except pack_dist.PackError as e:
    sys.exit("build-dist: %s" % e)
EOF

BINDING_CLASSES="${QC_KT_BINDING_JAR:-}"
if [ -z "$BINDING_CLASSES" ]; then
    echo "build-dist: compiling the binding" >&2
    BINDING_CLASSES="$WORK/binding-classes.jar"
    kc -module-name qwen-companion-kotlin -cp "$JNA" -d "$BINDING_CLASSES" "$ROOT/bindings/kotlin/src"
fi
JAR="$OUTDIR/qwen-companion-kotlin-$VERSION.jar"
python3 "$ROOT/bindings/kotlin/pack_dist.py" jar "$NATIVE" "$VERSION" "$BINDING_CLASSES" "$JAR"
echo "build-dist: wrote $JAR" >&2

PLUGIN_CLASSES="${QC_KT_PLUGIN_CLASSES:-}"
if [ -z "$PLUGIN_CLASSES" ]; then
    echo "build-dist: compiling the IntelliJ plugin against the API stubs" >&2
    python3 "$ROOT/tests/kotlin/intellij_api_stubs.py" "$WORK/ij-stubs"
    PLUGIN_CLASSES="$WORK/ij-classes"
    kc -module-name qwen-companion-intellij -cp "$JNA:$BINDING_CLASSES" -d "$PLUGIN_CLASSES" "$WORK/ij-stubs" "$ROOT/examples/intellij/src/main/kotlin"
fi
ZIP="$IJ_OUT/qwen-companion-intellij-$VERSION.zip"
python3 "$ROOT/bindings/kotlin/pack_dist.py" plugin "$VERSION" "$SINCE" "$PLUGIN_CLASSES" \
    "$ROOT/examples/intellij/src/main/resources" "$JAR" "$ZIP"
echo "build-dist: wrote $ZIP" >&2
