#!/usr/bin/env python3
"""Checks the Kotlin binding's JNA interface (bindings/kotlin/src/qwen/companion/
Native.kt, `interface QcNative`) against include/qwen_companion.h: every
function the header declares is bound (or listed in NOT_BOUND with the reason),
and each bound function's return and argument types are the JNA types its C
types map to (`jna_for`); each callback interface's `invoke` matches its
typedef argument by argument. The header is parsed by tests/lib/header_protos.py.

    python3 tests/kotlin/check_native.py [NATIVE_KT]

Prints one "ok"/"FAIL" line, the mismatches (function and argument named),
and exits non-zero on a mismatch.
"""

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "lib"))
import header_protos  # noqa: E402

NATIVE = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "bindings/kotlin/src/qwen/companion/Native.kt"

# Header functions the Kotlin binding deliberately does not bind: QcNative's
# load refuses a library lacking any bound function, so binding these would
# refuse libraries the binding works with today.
NOT_BOUND = {
    "qc_companion_enable_log_events": "pull-mode log events are for hosts without callbacks (LuaJIT); the Kotlin binding takes log lines through the log callback",
    "qc_plugin_host_enable_log_events": "pull-mode log events are for hosts without callbacks (LuaJIT); the Kotlin binding takes log lines through the log callback",
    "qc_participant_enable_log_events": "pull-mode log events are for hosts without callbacks (LuaJIT); the Kotlin binding takes log lines through the log callback",
    "qc_companion_connected_clients": "not used by the Kotlin binding (newer libraries only)",
    "qc_plugin_host_call_queued": "not used by the Kotlin binding (QwenPluginHost calls through qc_plugin_host_call_async)",
}

# The JNA callback interface of each C callback typedef.
CALLBACK_INTERFACES = {
    "qc_log_fn": "LogFn",
    "qc_free_fn": "FreeFn",
    "qc_open_diff_fn": "OpenDiffFn",
    "qc_close_diff_fn": "CloseDiffFn",
    "qc_json_fn": "JsonFn",
    "qc_plugin_capability_fn": "CapabilityFn",
}

_INTS = {"qc_status": "Int", "uint32_t": "Int", "int32_t": "Int", "uint64_t": "Long", "size_t": "Long"}
_BY_REF = {"int32_t *": "IntByReference", "uint32_t *": "IntByReference", "uint16_t *": "ShortByReference",
           "uint64_t *": "LongByReference"}
_HANDLES = ("qc_companion", "qc_participant", "qc_plugin_host", "qc_reply")


def jna_for(ctype, is_return, in_callback=False):
    """The Kotlin types the binding may use for a C type (first one named on a mismatch)."""
    base = ctype.replace("const ", "")
    if base == "void":
        return ("Unit",)
    if base in _INTS:
        return (_INTS[base],)
    if ctype in CALLBACK_INTERFACES:
        return (CALLBACK_INTERFACES[ctype] + "?",)
    if ctype in ("const char *", "const uint8_t *"):
        if is_return or in_callback:
            # Static strings returned / borrowed for a callback: read through the pointer.
            return ("Pointer?",)
        return ("ByteArray?", "String?")  # NUL-terminated UTF-8 (or bytes with a length)
    if ctype == "char *":
        return ("Pointer?",)  # an owned string given back to qc_string_free
    if ctype == "char **":
        return ("PointerByReference", "PointerByReference?")
    if base == "void *" or base in ["%s *" % h for h in _HANDLES]:
        return ("Pointer?",)
    if base in ["%s **" % h for h in _HANDLES]:
        return ("PointerByReference",)
    if base in _BY_REF:
        return (_BY_REF[base], _BY_REF[base] + "?")
    raise SystemExit("no JNA mapping for the C type %r: add one to jna_for" % ctype)


def kotlin_params(text):
    text = " ".join(text.split())
    if not text:
        return []
    out = []
    for part in text.split(","):
        name, _, typ = part.partition(":")
        out.append((name.strip(), typ.strip()))
    return out


def parse_native(text):
    """({fn: (ret, [(name, type)])}, {interface: (ret, [(name, type)])})."""
    fns, cbs = {}, {}
    for m in re.finditer(r"^[ \t]*fun (qc_\w+)\(([^)]*)\)[ \t]*(?::[ \t]*([\w?<>]+))?", text, re.M):
        fns[m.group(1)] = (m.group(3) or "Unit", kotlin_params(m.group(2)))
    for m in re.finditer(r"interface (\w+) : Callback \{\s*fun invoke\(([^)]*)\)[ \t]*(?::[ \t]*([\w?<>]+))?", text):
        cbs[m.group(1)] = (m.group(3) or "Unit", kotlin_params(m.group(2)))
    return fns, cbs


def mismatches(text):
    protos, callbacks = header_protos.parse()
    fns, cbs = parse_native(text)
    m = header_protos.Mismatches()
    for name in sorted(protos):
        if name not in fns and name not in NOT_BOUND:
            m.add(name, "declared in the header but not bound in QcNative (bind it or list it in NOT_BOUND)")
    for name in sorted(fns):
        if name not in protos:
            m.add(name, "bound in QcNative but not declared in the header")
            continue
        ret, params = fns[name]
        m.compare(name, protos[name], ret, [t for _, t in params], jna_for)
    for typedef, iface in sorted(CALLBACK_INTERFACES.items()):
        if typedef not in callbacks:
            m.add(iface, "maps %s, which the header does not declare" % typedef)
            continue
        if iface not in cbs:
            m.add(typedef, "no callback interface %s in QcNative" % iface)
            continue
        ret, params = cbs[iface]
        m.compare("%s.invoke (%s)" % (iface, typedef), callbacks[typedef], ret, [t for _, t in params],
                  lambda ct, r: jna_for(ct, r, True))
    for typedef in sorted(set(callbacks) - set(CALLBACK_INTERFACES)):
        m.add(typedef, "a header callback typedef with no JNA interface in CALLBACK_INTERFACES")
    return m, len(fns)


def main():
    m, bound = mismatches(NATIVE.read_text(encoding="utf-8"))
    if m.lines or bound < 90:
        print("FAIL - %s matches include/qwen_companion.h (%d functions bound)" % (NATIVE.name, bound))
        print("       " + m.report().replace("\n", "\n       "))
        return 1
    print("ok   - %s matches include/qwen_companion.h (%d functions, every argument and return type)"
          % (NATIVE.name, bound))
    return 0


if __name__ == "__main__":
    sys.exit(main())
