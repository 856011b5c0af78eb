#!/usr/bin/env python3
"""Checks the Neovim plugin's LuaJIT cdefs against include/qwen_companion.h.

Every qc_ function prototype in a Lua long string ([[ ... ]]) of
examples/neovim must match the header's prototype (parsed by
tests/lib/header_protos.py, shared with the Python and Kotlin checks): the same
return type and, argument by argument, the same C type (a mismatch names the
function and the argument). Every other declaration that names a qc_
identifier (typedefs) must appear in the header, token for token (whitespace
and line breaks aside). Also: the plugin's ABI_VERSION, status codes and log
levels equal the header's macros, and every qc_ function the Lua code uses is
declared in a cdef. And the plugin stays in pull mode: no function-pointer
type in any cdef, no callback setter, no LuaJIT C API (private Lua state), no
ffi.cast.

    python3 tests/neovim/check_cdef.py [ROOT]

Prints one "ok"/"FAIL" line per check and exits non-zero on a failure.
"""

import pathlib
import re
import sys

ROOT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[2])
HEADER = ROOT / "include" / "qwen_companion.h"
sys.path.insert(0, str(ROOT / "tests" / "lib"))
import header_protos  # noqa: E402
PLUGIN = ROOT / "examples" / "neovim"

TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+|\S")
failures = 0


def check(ok, what, detail=""):
    global failures
    print(("ok   - " if ok else "FAIL - ") + what)
    if not ok:
        failures += 1
        if detail:
            print("       " + detail.replace("\n", "\n       "))


def norm(decl):
    return " ".join(TOKEN.findall(decl))


def c_declarations(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("#"))
    text = text.replace('extern "C" {', " ")
    return [norm(d) for d in text.split(";") if norm(d).strip("{} ")]


header_text = HEADER.read_text(encoding="utf-8")
header = set(c_declarations(header_text))
header = {d.strip("} ").strip() for d in header}
macros = {m.group(1): int(m.group(2)) for m in re.finditer(r"#define\s+(QC_\w+)\s+(\d+)", header_text)}

lua_files = sorted(PLUGIN.rglob("*.lua"))
declared = set()
used = set()
checked = 0
mismatched = []
cdef_decls = []
header_protos_by_name, _callbacks = header_protos.parse(HEADER)
proto_mismatches = header_protos.Mismatches()
protos_checked = 0
for f in lua_files:
    src = f.read_text(encoding="utf-8")
    rel = f.relative_to(ROOT)
    for block in re.finditer(r"\[\[(.*?)\]\]", src, flags=re.S):
        cdef_protos = header_protos.parse_c_prototypes(block.group(1))
        for name, proto in sorted(cdef_protos.items()):
            protos_checked += 1
            want = header_protos_by_name.get(name)
            if want is None:
                proto_mismatches.add("%s: %s" % (rel, name), "cdef'd but not declared in the header")
                continue
            # The cdef must use the header's own C types (LuaJIT converts by them).
            proto_mismatches.compare("%s: %s" % (rel, name), want, proto.ret, [p.ctype for p in proto.params],
                                     lambda ctype, is_return: (ctype,))
        for decl in c_declarations(block.group(1)):
            cdef_decls.append("%s: %s" % (rel, decl))
            if not re.search(r"\bqc_\w+", decl):
                continue
            checked += 1
            declared.update(re.findall(r"\b(qc_\w+)\b", decl))
            if re.search(r"\bqc_\w+\s*\(", decl) and not decl.startswith("typedef"):
                continue  # a function prototype: compared argument by argument above
            if decl not in header:
                mismatched.append("%s: %s" % (rel, decl))
    outside = re.sub(r"\[\[.*?\]\]", " ", src, flags=re.S)
    outside = re.sub(r"--[^\n]*", " ", outside)
    used.update(re.findall(r"\b(qc_[a-z_]+)\b", outside))

check(checked >= 20, "found the cdefs (%d qc_ declarations)" % checked)
check(protos_checked >= 20 and not proto_mismatches.lines,
      "every cdef'd qc_ function (%d) has the header's return and argument types" % protos_checked,
      proto_mismatches.report())
check(not mismatched, "every other cdef'd qc_ declaration appears verbatim in %s" % HEADER.relative_to(ROOT),
      "not in the header (whitespace aside):\n" + "\n".join(mismatched))
missing = sorted(n for n in used if n not in declared)
check(not missing, "every qc_ name used by the Lua code is cdef'd", "missing: %s" % ", ".join(missing))

capi = (PLUGIN / "lua" / "qwen_companion" / "capi.lua").read_text(encoding="utf-8")
abi = re.search(r"M\.ABI_VERSION\s*=\s*(\d+)", capi)
check(abi and int(abi.group(1)) == macros.get("QC_ABI_VERSION"),
      "ABI_VERSION (%s) == QC_ABI_VERSION (%s)" % (abi and abi.group(1), macros.get("QC_ABI_VERSION")))
codes = {k: int(v) for k, v in re.findall(r"\b(QC_[A-Z0-9_]+)\s*=\s*(\d+)", capi)}
want = {k: v for k, v in macros.items() if not k.startswith(("QC_LOG_", "QC_ABI_"))}
check(codes == want, "status codes match the header", "lua %r\nheader %r" % (codes, want))
levels = {"QC_LOG_" + k: int(v) for k, v in re.findall(r"\b(ERROR|WARN|INFO|DEBUG|TRACE)\s*=\s*(\d+)", capi)}
want = {k: v for k, v in macros.items() if k.startswith("QC_LOG_")}
check(levels == want, "log levels match the header", "lua %r\nheader %r" % (levels, want))

# Pull mode only: no Lua function may ever become a C callback (the library
# would call it on its own thread, inside Neovim's Lua state), and no private
# Lua state is created to host one.
fnptr = [d for d in cdef_decls if re.search(r"\(\s*\*", d)]
check(not fnptr, "no function-pointer type is cdef'd (nothing can be passed as a C callback)", "\n".join(fnptr))
setters = sorted(n for n in declared | used if re.search(r"_set_\w*callback$|^qc_reply_", n))
check(not setters, "no qc_*_set_*_callback / qc_reply_* is declared or used", ", ".join(setters))
pull = {"qc_companion_enable_events", "qc_companion_next_event", "qc_companion_respond"}
check(pull <= declared and pull <= used, "the pull-mode API is declared and used", "missing: %s" % sorted(pull - (declared & used)))
lua_api = sorted({m for f in lua_files for m in re.findall(r"\b(luaL?_\w+|ffi\.cast|lua_State)\b", f.read_text(encoding="utf-8"))})
check(not lua_api, "no LuaJIT C API (private Lua state) and no ffi.cast in the plugin", ", ".join(lua_api))
gone = [str(f.relative_to(ROOT)) for f in lua_files if f.name in ("bridge.lua", "callback_state.lua")]
check(not gone, "bridge.lua / callback_state.lua are gone", ", ".join(gone))

sys.exit(1 if failures else 0)
