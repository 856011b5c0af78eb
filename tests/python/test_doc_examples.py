"""Every Python and C example in the project's Markdown files runs against
the real library (extracted by tests/docs/examples.py; fragments get the
hidden prelude/epilogue written next to them in the Markdown). Each runs in
its own process with a throwaway HOME and QWEN_HOME."""

import os
import shutil
import subprocess
import sys

import pytest

from conftest import BINDING_DIR, INSTALLED, REPO

sys.path.insert(0, os.path.join(REPO, "tests", "docs"))
import examples  # noqa: E402

TIMEOUT = 60


def _ids(found):
    return [e.where for e in found]


PYTHON_EXAMPLES = examples.examples("python")
C_EXAMPLES = examples.examples("c")


def test_examples_are_found():
    # The READMEs have examples; an extractor finding none would make the
    # tests below vacuous.
    where = _ids(PYTHON_EXAMPLES) + _ids(C_EXAMPLES)
    assert any(w.startswith("README.md:") for w in _ids(PYTHON_EXAMPLES)), where
    assert any(w.startswith("bindings/python/README.md:") for w in where), where
    assert any(w.startswith("README.md:") for w in _ids(C_EXAMPLES)), where


def _env(tmp_path, lib_path):
    home = tmp_path / "home"
    home.mkdir()
    env = dict(os.environ)
    env.update({
        "HOME": str(home),
        "QWEN_HOME": str(home / ".qwen"),
        "QWEN_COMPANION_LIB": lib_path,
        "PYTHONPATH": BINDING_DIR,
        "QC_EXAMPLES_REPO": REPO,  # hidden preludes find the checkout's fixtures with it
    })
    if INSTALLED:  # the examples run as a user's would: the wheel's package and library
        del env["QWEN_COMPANION_LIB"], env["PYTHONPATH"]
    return env


def _check(proc, what, program):
    assert proc.returncode == 0, "{} failed (status {}):\n--- program\n{}\n--- stdout\n{}\n--- stderr\n{}".format(
        what, proc.returncode, program, proc.stdout, proc.stderr)


@pytest.mark.parametrize("example", PYTHON_EXAMPLES, ids=_ids(PYTHON_EXAMPLES))
def test_python_example_runs(example, tmp_path, lib_path):
    program = example.program()
    script = tmp_path / "example.py"
    script.write_text(program, encoding="utf-8")
    proc = subprocess.run([sys.executable, str(script)], cwd=str(tmp_path),
                          env=_env(tmp_path, lib_path), capture_output=True,
                          text=True, timeout=TIMEOUT)
    _check(proc, example.where, program)


@pytest.mark.parametrize("example", C_EXAMPLES, ids=_ids(C_EXAMPLES))
def test_c_example_compiles_and_runs(example, tmp_path, lib_path):
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    assert cc, "no C compiler (cc) on PATH"
    program = example.program()
    src = tmp_path / "example.c"
    src.write_text(program, encoding="utf-8")
    exe = tmp_path / "example"
    lib_dir = os.path.dirname(os.path.abspath(lib_path))
    build = subprocess.run(
        [cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-Wpedantic",
         "-D_POSIX_C_SOURCE=200809L", "-I", os.path.join(REPO, "include"),
         "-o", str(exe), str(src), lib_path, "-Wl,-rpath," + lib_dir, "-lpthread"],
        capture_output=True, text=True, timeout=TIMEOUT)
    _check(build, example.where + " (compile)", program)
    proc = subprocess.run([str(exe)], cwd=str(tmp_path), env=_env(tmp_path, lib_path),
                          capture_output=True, text=True, timeout=TIMEOUT)
    _check(proc, example.where + " (run)", program)
