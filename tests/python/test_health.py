"""The binding's issue-21 functions: ``health()`` (``qc_health_json``) and
``Companion.open_diffs()`` (``qc_companion_open_diffs_json``), against the
real library, and their behaviour with a library that lacks them."""

import json
import os
import types

import pytest

import qwen_companion

IDS = ("library", "qwen", "node", "lock_file", "clis", "plugin_mcp", "participant")


def need(lib, name):
    if not hasattr(lib, name):
        pytest.fail("the library {} has no {} (issue 21's core)".format(lib.path, name))


def test_report_lines_show_each_check_in_order():
    report = {"library": {"version": "0.2.0", "abi": 1, "platform": "linux-x86_64"},
              "checks": [{"id": "qwen", "status": "warn", "summary": "qwen 0.25.0 (tested: 0.24.4)",
                          "detail": "newer than tested\nworks mostly"},
                         {"id": "node", "status": "ok", "summary": "node 22.1.0"},
                         {"id": "participant", "status": "off", "summary": "none"},
                         {"id": "clis", "status": "odd", "summary": "?"}]}
    assert qwen_companion.health_report_lines(report) == [
        "qwen-companion 0.2.0 (ABI 1, linux-x86_64)",
        "[WARN] qwen: qwen 0.25.0 (tested: 0.24.4)",
        "      newer than tested",
        "      works mostly",
        "[OK] node: node 22.1.0",
        "[OFF] participant: none",
        "[ODD] clis: ?"]


def test_health_reports_the_library_and_a_missing_qwen(lib_path, make_companion, tmp_path):
    lib = qwen_companion.load_library(lib_path)
    need(lib, "qc_health_json")
    c = make_companion(workspace_roots=[str(tmp_path)])
    report = qwen_companion.health({"qwen": str(tmp_path / "no-qwen"), "node": str(tmp_path / "no-node")},
                                   companion=c)
    assert report["library"]["version"] == lib.version and report["library"]["abi"] == qwen_companion.ABI_VERSION
    checks = dict((ch["id"], ch) for ch in report["checks"])
    assert set(IDS) - {"participant"} <= set(checks), sorted(checks)
    assert checks["qwen"]["status"] in ("error", "warn") and checks["node"]["status"] in ("error", "warn")
    assert "no-qwen" in json.dumps(checks["qwen"])  # it says where it looked
    assert checks["lock_file"]["status"] == "ok"
    for ch in report["checks"]:
        assert ch["status"] in ("ok", "warn", "error", "off") and ch["summary"]
    assert checks.get("participant", {"status": "off"})["status"] == "off"
    # a closed object is refused by the binding, bad options by type
    c.close()
    with pytest.raises(qwen_companion.ClosedError):
        qwen_companion.health(companion=c)
    with pytest.raises(TypeError):
        qwen_companion.health(options="qwen")
    with pytest.raises(TypeError):
        qwen_companion.health(companion=object())


def test_open_diffs_names_the_proposing_session(make_companion, mcp_connect, tmp_path):
    got = []
    c = make_companion(workspace_roots=[str(tmp_path)], open_diff=lambda path, text: got.append(c.open_diffs()))
    need(c._lib, "qc_companion_open_diffs_json")
    assert c.open_diffs() == {"clients": 0, "diffs": []}
    client = mcp_connect(c.lock_file)
    path = os.path.join(str(tmp_path), "a.py")
    result = client.call_tool("openDiff", {"filePath": path, "newContent": "x\n"})
    assert not result.is_error
    found = c.open_diffs()
    assert found["clients"] == 1
    (diff,) = found["diffs"]
    assert diff["filePath"] == path and diff["session"]["label"] == "CLI #1" and diff["session"]["id"]
    assert got and got[0]["diffs"][0]["filePath"] == path  # from inside the open-diff callable
    c.diff_reject(path)
    assert c.open_diffs()["diffs"] == []


def test_without_the_functions_the_binding_says_so(make_companion, tmp_path):
    """A library from before issue 21: NotFoundError naming what is missing."""
    c = make_companion(workspace_roots=[str(tmp_path)])
    real = c._lib
    old = types.SimpleNamespace(version="0.1.0", path=real.path)
    try:
        c._lib = old
        with pytest.raises(qwen_companion.NotFoundError, match="qc_companion_open_diffs_json"):
            c.open_diffs()
        with pytest.raises(qwen_companion.NotFoundError, match="no health report"):
            qwen_companion.health(companion=c)
    finally:
        c._lib = real
