"""A lint for standard-library APIs that Python 3.9-3.14 removed or deprecated.

Sublime Text runs this package on Python 3.8 before build 4205 and on
Python 3.14 from build 4205 on; vermin checks the 3.8 side (nothing newer
than 3.8 is used), this checks the other side (nothing 3.14 no longer has,
nor what is on its way out). vermin only reports minimum versions, and
ruff's pyupgrade rules rewrite old spellings rather than list removals, so
the table below is taken from the "Removed" and "Deprecated" sections of
"What's New In Python" 3.9, 3.10, 3.11, 3.12, 3.13 and 3.14 (the version
after each entry is the release that removed or deprecated it; "PEP 594"
is "Removing dead batteries from the standard library").

    python3 removed_apis.py PATH...     # exit 1 and one line a hit

A line that must keep such a use (for example behind a version check) says
why with ``# removed-api: ok <reason>``.
"""

import ast
import os
import sys

REMOVED, DEPRECATED = "removed", "deprecated"

#: module -> (kind, version, note)
MODULES = {
    "distutils": (REMOVED, "3.12", "PEP 632; use setuptools or sysconfig"),
    "imp": (REMOVED, "3.12", "use importlib"),
    "asynchat": (REMOVED, "3.12", "PEP 594; use asyncio"),
    "asyncore": (REMOVED, "3.12", "PEP 594; use asyncio"),
    "smtpd": (REMOVED, "3.12", "PEP 594"),
    "aifc": (REMOVED, "3.13", "PEP 594"),
    "audioop": (REMOVED, "3.13", "PEP 594"),
    "cgi": (REMOVED, "3.13", "PEP 594"),
    "cgitb": (REMOVED, "3.13", "PEP 594"),
    "chunk": (REMOVED, "3.13", "PEP 594"),
    "crypt": (REMOVED, "3.13", "PEP 594; use hashlib"),
    "imghdr": (REMOVED, "3.13", "PEP 594"),
    "mailcap": (REMOVED, "3.13", "PEP 594; use mimetypes"),
    "msilib": (REMOVED, "3.13", "PEP 594"),
    "nis": (REMOVED, "3.13", "PEP 594"),
    "nntplib": (REMOVED, "3.13", "PEP 594"),
    "ossaudiodev": (REMOVED, "3.13", "PEP 594"),
    "pipes": (REMOVED, "3.13", "PEP 594; use shlex.quote and subprocess"),
    "sndhdr": (REMOVED, "3.13", "PEP 594"),
    "spwd": (REMOVED, "3.13", "PEP 594"),
    "sunau": (REMOVED, "3.13", "PEP 594"),
    "telnetlib": (REMOVED, "3.13", "PEP 594"),
    "uu": (REMOVED, "3.13", "PEP 594; use base64"),
    "xdrlib": (REMOVED, "3.13", "PEP 594"),
    "lib2to3": (REMOVED, "3.13", ""),
    "tkinter.tix": (REMOVED, "3.13", ""),
    "typing.io": (REMOVED, "3.13", "import from typing"),
    "typing.re": (REMOVED, "3.13", "import from typing"),
    "sre_compile": (DEPRECATED, "3.11", "use re"),
    "sre_constants": (DEPRECATED, "3.11", "use re"),
    "sre_parse": (DEPRECATED, "3.11", "use re"),
    "formatter": (REMOVED, "3.10", ""),
    "parser": (REMOVED, "3.10", "use ast"),
    "symbol": (REMOVED, "3.10", "use ast"),
    "binhex": (REMOVED, "3.11", ""),
    "dummy_threading": (REMOVED, "3.9", "use threading"),
    "_dummy_thread": (REMOVED, "3.9", "use _thread"),
}

#: (module, name) -> (kind, version, note), for ``from module import name``
#: and ``module.name``
NAMES = {
    ("ast", "Num"): (REMOVED, "3.14", "use ast.Constant"),
    ("ast", "Str"): (REMOVED, "3.14", "use ast.Constant"),
    ("ast", "Bytes"): (REMOVED, "3.14", "use ast.Constant"),
    ("ast", "NameConstant"): (REMOVED, "3.14", "use ast.Constant"),
    ("ast", "Ellipsis"): (REMOVED, "3.14", "use ast.Constant"),
    ("pkgutil", "find_loader"): (REMOVED, "3.14", "use importlib.util.find_spec"),
    ("pkgutil", "get_loader"): (REMOVED, "3.14", "use importlib.util.find_spec"),
    ("sqlite3", "version"): (REMOVED, "3.14", "use sqlite3.sqlite_version"),
    ("sqlite3", "version_info"): (REMOVED, "3.14", "use sqlite3.sqlite_version_info"),
    ("urllib.request", "URLopener"): (REMOVED, "3.14", "use urllib.request.urlopen"),
    ("urllib.request", "FancyURLopener"): (REMOVED, "3.14", "use urllib.request.urlopen"),
    ("importlib.abc", "ResourceReader"): (REMOVED, "3.14", "use importlib.resources.abc"),
    ("importlib.abc", "Traversable"): (REMOVED, "3.14", "use importlib.resources.abc"),
    ("importlib.abc", "TraversableResources"): (REMOVED, "3.14", "use importlib.resources.abc"),
    ("asyncio", "AbstractChildWatcher"): (REMOVED, "3.14", ""),
    ("asyncio", "get_child_watcher"): (REMOVED, "3.14", ""),
    ("asyncio", "set_child_watcher"): (REMOVED, "3.14", ""),
    ("asyncio", "get_event_loop"): (DEPRECATED, "3.12", "raises RuntimeError without a current loop "
                                    "from 3.14: use asyncio.new_event_loop or get_running_loop"),
    ("asyncio", "iscoroutinefunction"): (DEPRECATED, "3.14", "use inspect.iscoroutinefunction"),
    ("asyncio", "coroutine"): (REMOVED, "3.11", "use async def"),
    ("locale", "resetlocale"): (REMOVED, "3.13", ""),
    ("locale", "format"): (REMOVED, "3.12", "use locale.format_string"),
    ("locale", "getdefaultlocale"): (DEPRECATED, "3.11", "use locale.getlocale / getencoding"),
    ("logging", "warn"): (REMOVED, "3.13", "use logging.warning"),
    ("webbrowser", "MacOSX"): (REMOVED, "3.13", "use webbrowser.MacOSXOSAScript"),
    ("typing", "ByteString"): (DEPRECATED, "3.12", "use collections.abc.Buffer or bytes"),
    ("collections.abc", "ByteString"): (DEPRECATED, "3.12", "use collections.abc.Buffer or bytes"),
    ("typing", "AnyStr"): (DEPRECATED, "3.13", ""),
    ("typing", "no_type_check_decorator"): (DEPRECATED, "3.13", ""),
    ("codecs", "open"): (DEPRECATED, "3.14", "use open()"),
    ("glob", "glob0"): (DEPRECATED, "3.13", "use glob.glob"),
    ("glob", "glob1"): (DEPRECATED, "3.13", "use glob.glob"),
    ("platform", "java_ver"): (DEPRECATED, "3.13", ""),
    ("http.server", "CGIHTTPRequestHandler"): (DEPRECATED, "3.13", ""),
    ("ssl", "wrap_socket"): (REMOVED, "3.12", "use SSLContext.wrap_socket"),
    ("ssl", "match_hostname"): (REMOVED, "3.12", ""),
    ("ssl", "RAND_pseudo_bytes"): (REMOVED, "3.12", ""),
    ("configparser", "SafeConfigParser"): (REMOVED, "3.12", "use ConfigParser"),
    ("inspect", "getargspec"): (REMOVED, "3.11", "use inspect.signature"),
    ("inspect", "formatargspec"): (REMOVED, "3.11", "use inspect.signature"),
    ("gettext", "lgettext"): (REMOVED, "3.11", ""),
    ("gettext", "ldgettext"): (REMOVED, "3.11", ""),
    ("gettext", "lngettext"): (REMOVED, "3.11", ""),
    ("gettext", "ldngettext"): (REMOVED, "3.11", ""),
    ("binascii", "a2b_hqx"): (REMOVED, "3.11", ""),
    ("binascii", "b2a_hqx"): (REMOVED, "3.11", ""),
    ("base64", "encodestring"): (REMOVED, "3.9", "use base64.encodebytes"),
    ("base64", "decodestring"): (REMOVED, "3.9", "use base64.decodebytes"),
    ("sys", "getcheckinterval"): (REMOVED, "3.9", "use sys.getswitchinterval"),
    ("sys", "setcheckinterval"): (REMOVED, "3.9", "use sys.setswitchinterval"),
    ("plistlib", "readPlist"): (REMOVED, "3.9", "use plistlib.load"),
    ("plistlib", "writePlist"): (REMOVED, "3.9", "use plistlib.dump"),
    ("threading", "currentThread"): (DEPRECATED, "3.10", "use threading.current_thread"),
    ("threading", "activeCount"): (DEPRECATED, "3.10", "use threading.active_count"),
    ("ssl", "PROTOCOL_TLS"): (DEPRECATED, "3.10", "use PROTOCOL_TLS_CLIENT / SERVER"),
    ("datetime", "utcnow"): (DEPRECATED, "3.12", "use datetime.now(timezone.utc)"),
    ("datetime", "utcfromtimestamp"): (DEPRECATED, "3.12", "use datetime.fromtimestamp(t, timezone.utc)"),
}
for _abc in ("Awaitable", "Coroutine", "AsyncIterable", "AsyncIterator", "AsyncGenerator", "Hashable",
             "Iterable", "Iterator", "Generator", "Reversible", "Sized", "Container", "Callable",
             "Collection", "Set", "MutableSet", "Mapping", "MutableMapping", "MappingView", "KeysView",
             "ItemsView", "ValuesView", "Sequence", "MutableSequence", "ByteString"):
    NAMES[("collections", _abc)] = (REMOVED, "3.10", "use collections.abc." + _abc)

#: method names unambiguous enough to flag on any object -> (kind, version, note)
METHODS = {
    "utcnow": (DEPRECATED, "3.12", "datetime.utcnow: use datetime.now(timezone.utc)"),
    "utcfromtimestamp": (DEPRECATED, "3.12", "datetime.utcfromtimestamp: use fromtimestamp(t, timezone.utc)"),
    "isAlive": (REMOVED, "3.9", "Thread.isAlive: use is_alive"),
    "getchildren": (REMOVED, "3.9", "Element.getchildren: use list(elem)"),
    "getiterator": (REMOVED, "3.9", "ElementTree.getiterator: use iter"),
    "setDaemon": (DEPRECATED, "3.10", "Thread.setDaemon: set .daemon"),
    "isDaemon": (DEPRECATED, "3.10", "Thread.isDaemon: read .daemon"),
    "notifyAll": (DEPRECATED, "3.10", "Condition.notifyAll: use notify_all"),
    "isSet": (DEPRECATED, "3.10", "Event.isSet: use is_set"),
    "readfp": (REMOVED, "3.12", "ConfigParser.readfp: use read_file"),
    "assertEquals": (REMOVED, "3.12", "use assertEqual"),
    "assertNotEquals": (REMOVED, "3.12", "use assertNotEqual"),
    "assertRegexpMatches": (REMOVED, "3.12", "use assertRegex"),
    "assertRaisesRegexp": (REMOVED, "3.12", "use assertRaisesRegex"),
    "assertDictContainsSubset": (REMOVED, "3.12", ""),
    "failUnless": (REMOVED, "3.12", "use assertTrue"),
    "failIf": (REMOVED, "3.12", "use assertFalse"),
    "is_reserved": (DEPRECATED, "3.13", "PurePath.is_reserved: use os.path.isreserved"),
    "co_lnotab": (DEPRECATED, "3.12", "use co_lines()"),
}

#: (function name, keyword) -> (kind, version, note)
KEYWORDS = {
    ("rmtree", "onerror"): (DEPRECATED, "3.12", "use onexc"),
    ("loads", "encoding"): (REMOVED, "3.9", "json.loads(encoding=) is gone"),
    ("localtime", "isdst"): (REMOVED, "3.14", "email.utils.localtime(isdst=) is gone"),
}

ALLOW = "removed-api: ok"


class Hit(object):
    def __init__(self, path, line, what, entry):
        self.path, self.line, self.what = path, line, what
        self.kind, self.version, self.note = entry

    def __str__(self):
        return "{}:{}: {} ({} in Python {}{})".format(
            self.path, self.line, self.what, self.kind, self.version, "; " + self.note if self.note else "")


def _module_entry(name):
    """The table entry for module ``name`` or a package it is in."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        entry = MODULES.get(".".join(parts[:i]))
        if entry:
            return ".".join(parts[:i]), entry
    return None, None


def _dotted(node):
    """``a.b.c`` of an attribute chain on a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def check_source(source, path="<source>"):
    tree = ast.parse(source, filename=path)
    lines = source.splitlines()
    hits = []
    aliases = {}  # local name -> module it names (import x.y as z; from x import y)

    def add(node, what, entry):
        text = lines[node.lineno - 1] if 0 < node.lineno <= len(lines) else ""
        if ALLOW not in text:
            hits.append(Hit(path, node.lineno, what, entry))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                mod, entry = _module_entry(a.name)
                if entry:
                    add(node, "import " + a.name, entry)
                if a.asname:
                    aliases[a.asname] = a.name
                else:
                    aliases[a.name.split(".")[0]] = a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            mod, entry = _module_entry(node.module)
            if entry:
                add(node, "from {} import ...".format(node.module), entry)
            for a in node.names:
                full = node.module + "." + a.name
                sub, sub_entry = _module_entry(full)
                if sub_entry and not entry:
                    add(node, "from {} import {}".format(node.module, a.name), sub_entry)
                named = NAMES.get((node.module, a.name))
                if named:
                    add(node, "from {} import {}".format(node.module, a.name), named)
                aliases[a.asname or a.name] = full
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            dotted = _dotted(node)
            if dotted:
                head, _, rest = dotted.partition(".")
                full = aliases.get(head, head) + ("." + rest if rest else "")
                owner, _, name = full.rpartition(".")
                entry = NAMES.get((owner, name))
                if entry and head in aliases:
                    add(node, full, entry)
                    continue
            entry = METHODS.get(node.attr)
            if entry:
                add(node, "." + node.attr, entry)
        elif isinstance(node, ast.Call):
            func = node.func
            fname = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            for kw in node.keywords:
                entry = KEYWORDS.get((fname, kw.arg))
                if entry:
                    add(node, "{}({}=...)".format(fname, kw.arg), entry)
    return sorted(hits, key=lambda h: (h.path, h.line, h.what))


def python_files(paths):
    for p in paths:
        if os.path.isfile(p):
            yield p
            continue
        for folder, dirs, files in os.walk(p):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for f in sorted(files):
                if f.endswith(".py"):
                    yield os.path.join(folder, f)


def check_paths(paths):
    hits = []
    count = 0
    for path in python_files(paths):
        count += 1
        with open(path, encoding="utf-8") as f:
            hits.extend(check_source(f.read(), path))
    return count, hits


def main(argv):
    if not argv:
        sys.exit(__doc__)
    missing = [p for p in argv if not os.path.exists(p)]
    if missing:
        print("removed_apis: no such path: " + ", ".join(missing), file=sys.stderr)
        return 2
    count, hits = check_paths(argv)
    for h in hits:
        print(h)
    if count == 0:
        print("removed_apis: no Python files under " + ", ".join(argv), file=sys.stderr)
        return 2
    print("removed_apis: {} files, {} hits".format(count, len(hits)))
    return 1 if hits else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
