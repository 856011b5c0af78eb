"""Runs py38_smoke.py on a real Python 3.8 (Sublime Text's plugin host) when
one is available: $QC_PYTHON38, python3.8 on PATH, or a pyenv 3.8. vermin
(tests/python/run.sh and test_native.py) checks the syntax in any case."""

import glob
import os
import shutil
import subprocess

import pytest

from conftest import HERE


def find_python38():
    candidates = [os.environ.get("QC_PYTHON38"), shutil.which("python3.8")]
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.8*/bin/python3.8")), reverse=True)
    for c in candidates:
        if not c or not os.access(c, os.X_OK):
            continue
        try:  # e.g. a pyenv shim without that version selected fails here
            out = subprocess.run(
                [c, "-c", "import sys; print(sys.version_info[:2] == (3, 8))"],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                universal_newlines=True,
                timeout=30,
            )
        except (OSError, subprocess.SubprocessError):
            continue
        if out.returncode == 0 and out.stdout.strip() == "True":
            return c
    return None


PY38 = find_python38()


@pytest.mark.skipif(PY38 is None, reason="no Python 3.8 interpreter on this machine")
def test_binding_and_plugin_on_python38(lib_path):
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONHOME", None)
    out = subprocess.run(
        [PY38, os.path.join(HERE, "py38_smoke.py"), lib_path],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        universal_newlines=True,
        timeout=120,
    )
    assert out.returncode == 0 and "PY38 SMOKE OK" in out.stdout, out.stdout
