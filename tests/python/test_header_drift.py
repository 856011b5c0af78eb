"""The ctypes prototypes of the Python binding (qwen_companion/_native.py)
match include/qwen_companion.h: every function of the header, every family,
is prototyped, with each argument's and the return's ctypes type the one the
C type maps to (callbacks compared with their typedef, argument by argument).

The header is parsed by tests/lib/header_protos.py (shared with the Kotlin and
Neovim checks); the C-to-ctypes mapping is `ctypes_for` below.
"""

import ctypes
import os
import sys

from conftest import REPO

sys.path.insert(0, os.path.join(REPO, "tests", "lib"))
import header_protos  # noqa: E402

from qwen_companion import _native  # noqa: E402

PROTOS, CALLBACKS = header_protos.parse(os.path.join(REPO, "include", "qwen_companion.h"))

_SCALARS = {
    "void": None,
    "qc_status": ctypes.c_uint32,
    "uint32_t": ctypes.c_uint32,
    "int32_t": ctypes.c_int32,
    "uint64_t": ctypes.c_uint64,
    "uint16_t": ctypes.c_uint16,
    "size_t": ctypes.c_size_t,
}
_HANDLES = ("qc_companion", "qc_participant", "qc_plugin_host", "qc_reply")


def desc(t):
    """A readable, comparable name for a ctypes type (None is void)."""
    if t is None:
        return "None"
    if isinstance(t, type) and issubclass(t, ctypes._CFuncPtr):
        return "CFUNCTYPE(%s; %s)" % (desc(t._restype_), ", ".join(desc(a) for a in t._argtypes_))
    if isinstance(t, type) and issubclass(t, ctypes._Pointer):
        return "POINTER(%s)" % desc(t._type_)
    return t.__name__


def ctypes_for(ctype, is_return, in_callback=False):
    """The ctypes types (as `desc` names) the binding may use for a C type;
    the first is the one named in a failure."""
    base = ctype.replace("const ", "")
    if base in _SCALARS:
        return (desc(_SCALARS[base]),)
    if ctype in CALLBACKS:
        cb = CALLBACKS[ctype]
        # A callback's arguments: a `const char *` with a length may hold NUL
        # bytes, so the binding may take it as a raw pointer.
        args = ["/".join(ctypes_for(p.ctype, False, True)) for p in cb.params]
        return ("CFUNCTYPE(%s; %s)" % (ctypes_for(cb.ret, True, True)[0], ", ".join(args)),)
    if ctype in ("const char *", "const uint8_t *"):
        # Borrowed input (or a static string returned: qc_version, qc_status_name).
        return (desc(ctypes.c_char_p), desc(ctypes.c_void_p)) if in_callback else (desc(ctypes.c_char_p),)
    if ctype == "char *":
        # An owned string handed back to qc_string_free: a raw pointer (c_char_p would copy it).
        return (desc(ctypes.c_void_p),)
    if ctype == "char **":
        # An owned string out (freed with qc_string_free): POINTER(c_void_p) keeps the pointer.
        return (desc(ctypes.POINTER(ctypes.c_void_p)),)
    if base in ("void *",) or base in ("%s *" % h for h in _HANDLES):
        return (desc(ctypes.c_void_p),)
    if base in ("%s **" % h for h in _HANDLES):
        return (desc(ctypes.POINTER(ctypes.c_void_p)),)
    if base.endswith(" *") and base[:-2] in _SCALARS:
        return (desc(ctypes.POINTER(_SCALARS[base[:-2]])),)
    raise AssertionError("no ctypes mapping for the C type %r: add one to ctypes_for" % ctype)


def expect_matching(callback_args):
    """`expect` for Mismatches.compare; callback arguments are already
    expanded to their CFUNCTYPE description by ctypes_for."""

    def expect(ctype, is_return):
        if ctype in CALLBACKS:
            # Compare the CFUNCTYPE argument by argument (below), not as a whole.
            return (callback_args.get(ctype, ctype),)
        return ctypes_for(ctype, is_return)

    return expect


def binding_mismatches(prototypes, optional=None):
    m = header_protos.Mismatches()
    for name in sorted(PROTOS):
        if name not in prototypes and name not in (optional or {}):
            m.add(name, "declared in the header but not prototyped in _native.PROTOTYPES "
                        "(or OPTIONAL_PROTOTYPES, for a function the binding does without)")
    for name in sorted(prototypes):
        if name not in PROTOS:
            m.add(name, "prototyped in _native.PROTOTYPES but not declared in the header")
    callback_names = {}
    for table in (prototypes, optional or {}):
        for name, (restype, argtypes) in sorted(table.items()):
            proto = PROTOS.get(name)
            if proto is None:
                if table is not prototypes:
                    m.add(name, "prototyped in OPTIONAL_PROTOTYPES but not declared in the header")
                continue
            args = [desc(a) for a in argtypes]
            for i, (a, p) in enumerate(zip(argtypes, proto.params)):
                if p.ctype in CALLBACKS:
                    callback_names[p.ctype] = desc(a)
                    cb = CALLBACKS[p.ctype]
                    if not (isinstance(a, type) and issubclass(a, ctypes._CFuncPtr)):
                        m.add(name, "argument %d (%s) is %s, the header's %s needs a CFUNCTYPE" % (i + 1, p.name, desc(a), p.ctype))
                        continue
                    m.compare(
                        "%s argument %d (%s, %s)" % (name, i + 1, p.name, p.ctype),
                        cb,
                        desc(a._restype_),
                        [desc(x) for x in a._argtypes_],
                        lambda ct, r: ctypes_for(ct, r, True),
                    )
            m.compare(name, proto, desc(restype), args, expect_matching(callback_names))
    return m


def test_the_header_parses():
    assert len(PROTOS) >= 90, sorted(PROTOS)
    assert "qc_plugin_host_views_start" in PROTOS and "qc_mcp_register" in PROTOS
    assert [p.ctype for p in PROTOS["qc_companion_new"].params] == ["const char *", "qc_companion **", "char **"]
    assert [p.ctype for p in CALLBACKS["qc_log_fn"].params] == ["void *", "uint32_t", "const char *"]


def test_every_prototype_matches_the_header():
    m = binding_mismatches(_native.PROTOTYPES, _native.OPTIONAL_PROTOTYPES)
    assert not m.lines, "_native.py differs from include/qwen_companion.h:\n" + m.report()


def test_a_wrong_argument_type_is_named():
    """The check can fail: a prototype with one wrong argument is reported
    with the function and the argument."""
    broken = dict(_native.PROTOTYPES)
    restype, argtypes = broken["qc_plugin_host_respond"]
    broken["qc_plugin_host_respond"] = (restype, [argtypes[0], ctypes.c_uint32] + list(argtypes[2:]))
    lines = binding_mismatches(broken, _native.OPTIONAL_PROTOTYPES).lines
    assert len(lines) == 1 and lines[0].startswith("qc_plugin_host_respond: argument 2 (request_id)"), lines
    broken = dict(_native.PROTOTYPES)
    restype, argtypes = broken["qc_companion_set_log_callback"]
    bad_log = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_char_p)
    broken["qc_companion_set_log_callback"] = (restype, [argtypes[0], bad_log] + list(argtypes[2:]))
    lines = binding_mismatches(broken, _native.OPTIONAL_PROTOTYPES).lines
    assert any("qc_companion_set_log_callback argument 2 (cb, qc_log_fn): argument 2 (level)" in l for l in lines), lines
