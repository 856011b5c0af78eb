#!/usr/bin/env bash
# Builds and tests the Kotlin binding and the IntelliJ plugin's IDE-independent
# core against the real library, with Debian's kotlin + libjna-java (no Gradle,
# no Maven Central).
#
#   bindings/kotlin/run-tests.sh            # everything
#   bindings/kotlin/run-tests.sh binding    # one suite: binding | sessions | plugins | json | intellij
#                                           # (intellij-ui, intellij-sessions, intellij-editor,
#                                           #  intellij-gemini: parts of intellij)
#   bindings/kotlin/run-tests.sh docs       # only compile the Kotlin examples of the Markdown
#                                           # files (tests/docs/examples.py; also part of "everything")
#   bindings/kotlin/run-tests.sh dist       # only the distribution jar + IntelliJ zip built by
#                                           # build-dist.sh from $QC_DIST_DIR (default target/dist,
#                                           # made by scripts/dist.sh), run from the jar alone
#                                           # (tests/kotlin/test_dist.py; also part of "everything")
#
# Outputs go to target/kotlin/:
#   qwen-companion-kotlin.jar   the binding (needs jna.jar + kotlin-stdlib at run time)
#   tests.jar                   the IntelliJ core + the test program
#   ij-glue/                    the IntelliJ glue type-checked against API stubs (not a plugin)
#   dist-test/                  the "dist" suite's jar and IntelliJ zip (build-dist.sh output)
# Environment: KOTLINC (default kotlinc), JAVA (default java),
#   QC_KOTLIN_REBUILD=1 to recompile even when the jars are newer than the sources,
#   QC_KOTLIN_LIB (the library to test; default target/release/libqwen_companion.so),
#   QC_DIST_DIR (the dist folder the "dist" suite packs; default target/dist).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
OUT="$ROOT/target/kotlin"
LIB="${QC_KOTLIN_LIB:-$ROOT/target/release/libqwen_companion.so}"
JNA=/usr/share/java/jna.jar
STDLIB=/usr/share/java/kotlin-stdlib.jar
KOTLINC="${KOTLINC:-kotlinc}"
JAVA="${JAVA:-java}"

log() { printf '[run-tests] %s\n' "$*" >&2; }

# 1. Toolchain: Debian's kotlin (kotlinc 1.3.x) and libjna-java.
if ! command -v "$KOTLINC" >/dev/null 2>&1 || [ ! -f "$JNA" ] || [ ! -f "$STDLIB" ]; then
    log "installing kotlin and libjna-java with apt-get"
    SUDO=""
    if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq kotlin libjna-java >/dev/null
fi

# 2. The library.
if [ ! -f "$LIB" ]; then
    log "building the library (cargo build --release)"
    cargo build --release
fi

# 3. The JNA interface (Native.kt) matches the C header: every function's
#    argument and return types (tests/kotlin/check_native.py; seconds, so
#    before the slow compile).
if ! python3 tests/kotlin/check_native.py; then
    echo "kotlin: 0 passed, 1 failed (QcNative differs from include/qwen_companion.h)"
    exit 1
fi

# 4. Compile (two kotlinc runs: kotlinc is slow, keep units few).
mkdir -p "$OUT"
BINDING_SRC=(bindings/kotlin/src)
TEST_SRC=(examples/intellij/src/main/kotlin/qwen/companion/intellij/core tests/kotlin)
# JVM 11 bytecode: the binding uses java.lang.ref.Cleaner (Java 9+), so a
# Java 8 target would build classes that only fail when loaded (a test checks
# the class file version). IntelliJ 2024.3 runs on Java 21 (build.gradle.kts).
KFLAGS=(-jvm-target 11 -nowarn)

newer_than() { # newer_than JAR DIR... : true if some source is newer than JAR (or JAR missing)
    local jar="$1"; shift
    [ ! -f "$jar" ] && return 0
    [ -n "$(find "$@" -name '*.kt' -newer "$jar" -print -quit)" ]
}

compile() { # compile JAR CLASSPATH SRC...
    local jar="$1" cp="$2"; shift 2
    local tmp="$jar.tmp.jar"
    rm -f "$tmp"
    # kotlinc 1.3 prints a harmless -Xverify:none warning on JDK 13+.
    "$KOTLINC" "${KFLAGS[@]}" -cp "$cp" -d "$tmp" "$@" 2> >(grep -v -e 'Xverify:none' -e '^$' >&2)
    mv -f "$tmp" "$jar"
}

BINDING_JAR="$OUT/qwen-companion-kotlin.jar"
TESTS_JAR="$OUT/tests.jar"
if [ "${QC_KOTLIN_REBUILD:-0}" = 1 ] || newer_than "$BINDING_JAR" "${BINDING_SRC[@]}"; then
    log "compiling the binding -> $BINDING_JAR"
    compile "$BINDING_JAR" "$JNA" "${BINDING_SRC[@]}"
    rm -f "$TESTS_JAR"
fi
if [ "${QC_KOTLIN_REBUILD:-0}" = 1 ] || newer_than "$TESTS_JAR" "${TEST_SRC[@]}"; then
    log "compiling the IntelliJ core + tests -> $TESTS_JAR"
    # -Xfriend-paths: the tests may use the binding's `internal` declarations (HandleGuard).
    KFLAGS+=("-Xfriend-paths=$BINDING_JAR")
    compile "$TESTS_JAR" "$JNA:$BINDING_JAR" "${TEST_SRC[@]}"
fi

# 5. Type-check the IntelliJ platform glue against hand-written API stubs
#    (catches Kotlin mistakes; it is not a real platform build). Skip with
#    QC_KOTLIN_GLUE_CHECK=0.
GLUE_SRC=(examples/intellij/src/main/kotlin)
GLUE_STAMP="$OUT/intellij-glue.checked"
if [ "${QC_KOTLIN_GLUE_CHECK:-1}" = 1 ] && { [ "${QC_KOTLIN_REBUILD:-0}" = 1 ] || newer_than "$GLUE_STAMP" "${GLUE_SRC[@]}" || [ tests/kotlin/intellij_api_stubs.py -nt "$GLUE_STAMP" ] || [ tests/kotlin/intellij_ui_stubs.py -nt "$GLUE_STAMP" ] || [ tests/kotlin/intellij_editor_stubs.py -nt "$GLUE_STAMP" ] || [ "$BINDING_JAR" -nt "$GLUE_STAMP" ]; }; then
    log "type-checking the IntelliJ glue against API stubs"
    rm -rf "$OUT/ij-stubs" "$OUT/ij-glue"
    python3 tests/kotlin/intellij_api_stubs.py "$OUT/ij-stubs"
    "$KOTLINC" "${KFLAGS[@]}" -cp "$JNA:$BINDING_JAR" -d "$OUT/ij-glue" "$OUT/ij-stubs" "${GLUE_SRC[@]}" \
        2> >(grep -v -e 'Xverify:none' -e '^$' >&2)
    touch "$GLUE_STAMP"
fi

# 6. The Kotlin examples of the Markdown files (README.md, bindings/*/README.md,
#    examples/*/README.md) compile against the binding: extracted with their
#    hidden preludes by tests/docs/examples.py, compiled in one kotlinc run.
if [ "${1:-}" = "" ] || [ "${1:-}" = docs ]; then
    DOCS_OUT="$OUT/doc-examples"
    rm -rf "$DOCS_OUT"
    mkdir -p "$DOCS_OUT/src"
    mapfile -t DOC_EXAMPLES < <(python3 tests/docs/examples.py write kotlin "$DOCS_OUT/src")
    if [ "${#DOC_EXAMPLES[@]}" = 0 ]; then
        echo "kotlin: 0 passed, 1 failed (no Kotlin examples found in the Markdown files)"
        exit 1
    fi
    log "compiling ${#DOC_EXAMPLES[@]} Kotlin doc examples"
    if ! "$KOTLINC" "${KFLAGS[@]}" -cp "$JNA:$BINDING_JAR" -d "$DOCS_OUT/classes" "${DOC_EXAMPLES[@]}" \
        2> >(grep -v -e 'Xverify:none' -e '^$' >&2); then
        echo "kotlin: 0 passed, 1 failed (a Kotlin example of the Markdown files does not compile)"
        exit 1
    fi
    if [ "${1:-}" = docs ]; then
        echo "kotlin: ${#DOC_EXAMPLES[@]} passed, 0 failed"
        exit 0
    fi
fi

# 7. The distribution: build-dist.sh packs $QC_DIST_DIR/native (reusing the
#    classes compiled above) and test_dist.py runs the jar with nothing else.
run_dist() {
    local env=(QC_KT_BINDING_JAR="$BINDING_JAR")
    if [ -f "$GLUE_STAMP" ] && [ -d "$OUT/ij-glue/qwen/companion/intellij" ]; then env+=(QC_KT_PLUGIN_CLASSES="$OUT/ij-glue"); fi
    env "${env[@]}" JAVA="$JAVA" timeout 900 python3 tests/kotlin/test_dist.py
}
if [ "${1:-}" = dist ]; then
    run_dist
    exit $?
fi

# 8. Run. The library is found through jna.library.path (the binding's
#    default lookup); qc.test.lib is only used by the explicit-path test.
log "running (library $LIB)"
set +e
timeout 300 "$JAVA" \
    -Djna.library.path="$(dirname "$LIB")" \
    -Dqc.test.lib="$LIB" \
    -cp "$TESTS_JAR:$BINDING_JAR:$JNA:$STDLIB" \
    qwen.companion.tests.MainKt "$@"
rc=$?
set -e
if [ $rc -eq 124 ]; then echo "kotlin: 0 passed, 1 failed (timeout)"; fi
if [ "${1:-}" = "" ]; then
    log "testing the distribution jar and IntelliJ zip"
    run_dist || rc=1
fi
exit $rc
