"""The lint for standard-library APIs removed or deprecated in Python 3.9-3.14
(removed_apis.py): it finds them, keeps quiet on clean code and allowed
lines, and the plugin and the binding are clean."""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import removed_apis  # noqa: E402

FIXTURE = '''\
import imp
import distutils.core
import os.path as osp
from collections import Mapping
from ast import Num
import datetime as dt
import asyncio, shutil, locale, threading

now = dt.datetime.utcnow()
loop = asyncio.get_event_loop()
shutil.rmtree("x", onerror=print)
lang = locale.getdefaultlocale()
threading.currentThread().setDaemon(True)
from pkgutil import find_loader
legacy = __import__("json").loads("1")  # not flagged: no keyword
ok = asyncio.get_event_loop()  # removed-api: ok guarded for the 3.8 host
'''


def whats(hits):
    return [(h.line, h.what, h.kind, h.version) for h in hits]


def test_finds_removed_and_deprecated_apis():
    got = whats(removed_apis.check_source(FIXTURE, "fixture.py"))
    assert got == [
        (1, "import imp", "removed", "3.12"),
        (2, "import distutils.core", "removed", "3.12"),
        (4, "from collections import Mapping", "removed", "3.10"),
        (5, "from ast import Num", "removed", "3.14"),
        (9, ".utcnow", "deprecated", "3.12"),
        (10, "asyncio.get_event_loop", "deprecated", "3.12"),
        (11, "rmtree(onerror=...)", "deprecated", "3.12"),
        (12, "locale.getdefaultlocale", "deprecated", "3.11"),
        (13, ".setDaemon", "deprecated", "3.10"),
        (13, "threading.currentThread", "deprecated", "3.10"),
        (14, "from pkgutil import find_loader", "removed", "3.14"),
    ]


def test_clean_code_has_no_hits():
    clean = "import os, json, threading\nthreading.current_thread()\njson.loads('1')\nos.path.join('a')\n"
    assert removed_apis.check_source(clean) == []


def test_cli_fails_on_a_hit_and_passes_clean_code(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import imp\nimp.reload\n")
    out = subprocess.run([sys.executable, os.path.join(HERE, "removed_apis.py"), str(tmp_path)],
                         stdout=subprocess.PIPE, universal_newlines=True)
    assert out.returncode == 1
    assert "bad.py:1: import imp (removed in Python 3.12; use importlib)" in out.stdout
    bad.write_text("import importlib\n")
    out = subprocess.run([sys.executable, os.path.join(HERE, "removed_apis.py"), str(tmp_path)],
                         stdout=subprocess.PIPE, universal_newlines=True)
    assert out.returncode == 0 and "1 files, 0 hits" in out.stdout
    out = subprocess.run([sys.executable, os.path.join(HERE, "removed_apis.py"), str(tmp_path / "none")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    assert out.returncode == 2 and "no such path" in out.stderr


def test_the_plugin_and_the_binding_are_clean():
    paths = [os.path.join(REPO, "examples", "sublime"), os.path.join(REPO, "bindings", "python", "qwen_companion")]
    count, hits = removed_apis.check_paths(paths)
    assert count >= 15
    assert [str(h) for h in hits] == []
