"""The binding's issue-22 surface: a companion for Qwen Code, Gemini CLI or
both (``cli``, ``gemini_dir``), ``Companion.discovery_files()``
(``qc_companion_discovery_files_json``), the terminal environment of every CLI
served, the ``gemini`` health check, against the real library; and the
binding with a library that lacks the new function."""

import json
import os
import stat
import types

import pytest

import qwen_companion

GEMINI_ENV = ("GEMINI_CLI_IDE_SERVER_PORT", "GEMINI_CLI_IDE_WORKSPACE_PATH", "GEMINI_CLI_IDE_PID")
QWEN_ENV = ("QWEN_CODE_IDE_SERVER_PORT", "QWEN_CODE_IDE_WORKSPACE_PATH")


def need(lib):
    if not hasattr(lib, "qc_companion_discovery_files_json"):
        pytest.fail("the library {} has no qc_companion_discovery_files_json (issue 22's core)".format(lib.path))


@pytest.fixture
def gemini_dir(tmp_path):
    return str(tmp_path / "gemini" / "ide")


def gemini_name(port):
    """The discovery file name Gemini CLI 0.61.0 looks for: the pid is the
    editor's (the process hosting the library: this one)."""
    return "gemini-ide-server-{}-{}.json".format(os.getpid(), port)


def read(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def test_gemini_only_writes_geminis_discovery_file(make_companion, workspace, gemini_dir, lock_dir):
    c = make_companion(workspace_roots=[workspace], cli="gemini", gemini_dir=gemini_dir,
                       ide_name="Sublime Text", ide_id="sublime-text")
    need(c._lib)
    files = c.discovery_files()
    assert files == {"qwen": None, "gemini": os.path.join(gemini_dir, gemini_name(c.port))}
    assert c.lock_file == files["gemini"]  # the one file there is
    assert not os.path.exists(lock_dir) or os.listdir(lock_dir) == []  # no Qwen lock file
    doc = read(files["gemini"])
    assert doc["port"] == c.port and doc["workspacePath"] == workspace
    assert doc["ideInfo"] == {"name": "sublime-text", "displayName": "Sublime Text"}
    assert len(doc["authToken"]) >= 32
    assert stat.S_IMODE(os.stat(files["gemini"]).st_mode) == 0o600
    env = c.terminal_env()
    assert env == {"GEMINI_CLI_IDE_SERVER_PORT": str(c.port), "GEMINI_CLI_IDE_WORKSPACE_PATH": workspace,
                   "GEMINI_CLI_IDE_PID": str(os.getpid())}


def test_both_share_one_server_and_token(make_companion, workspace, gemini_dir, lock_dir, mcp_connect):
    c = make_companion(workspace_roots=[workspace], cli="both", gemini_dir=gemini_dir)
    need(c._lib)
    files = c.discovery_files()
    assert files["qwen"] == os.path.join(lock_dir, "{}.lock".format(c.port)) == c.lock_file
    assert files["gemini"] == os.path.join(gemini_dir, gemini_name(c.port))
    qwen, gemini = read(files["qwen"]), read(files["gemini"])
    assert qwen["port"] == gemini["port"] == c.port and qwen["authToken"] == gemini["authToken"]
    assert "ppid" in qwen and "ppid" not in gemini
    env = c.terminal_env()
    assert set(env) == set(QWEN_ENV + GEMINI_ENV)
    assert env["QWEN_CODE_IDE_SERVER_PORT"] == env["GEMINI_CLI_IDE_SERVER_PORT"] == str(c.port)

    # a client found through each file: both get the editor's context
    a, b = mcp_connect(files["qwen"]), mcp_connect(files["gemini"])
    main = os.path.join(workspace, "main.py")
    c.file_focused(main)
    for client in (a, b):
        client.wait_notification(
            "ide/contextUpdate",
            lambda p: any(f.get("path") == main for f in p["workspaceState"].get("openFiles", [])))
    assert c.connected_clients() == 2

    # new roots rewrite both; stop removes both, and there is nothing to list
    c.workspace_roots = [str(os.path.dirname(workspace))]
    assert read(files["qwen"])["workspacePath"] == read(files["gemini"])["workspacePath"] == os.path.dirname(workspace)
    c.stop()
    assert not os.path.exists(files["qwen"]) and not os.path.exists(files["gemini"])
    with pytest.raises(qwen_companion.NotRunningError):
        c.discovery_files()
    c.start()  # a new port, new files
    again = c.discovery_files()
    assert again["gemini"] == os.path.join(gemini_dir, gemini_name(c.port)) and os.path.isfile(again["gemini"])
    c.close()
    assert not os.path.exists(again["qwen"]) and not os.path.exists(again["gemini"])


def test_qwen_is_the_default(make_companion, workspace, gemini_dir):
    c = make_companion(workspace_roots=[workspace], gemini_dir=gemini_dir)
    need(c._lib)
    assert c.discovery_files() == {"qwen": c.lock_file, "gemini": None}
    assert set(c.terminal_env()) == set(QWEN_ENV)
    assert not os.path.exists(gemini_dir) or os.listdir(gemini_dir) == []


def test_a_bad_cli_is_an_error_naming_it(make_companion, gemini_dir):
    with pytest.raises(qwen_companion.InvalidArgumentError, match="claude"):
        make_companion(cli="claude", gemini_dir=gemini_dir)
    with pytest.raises(qwen_companion.InvalidArgumentError, match="Gemini"):
        make_companion(cli="Gemini", gemini_dir=gemini_dir)  # the names are lower case
    with pytest.raises(qwen_companion.CompanionError):
        make_companion(cli=2, gemini_dir=gemini_dir)


def test_the_config_dict_passes_cli_through(make_companion, workspace, gemini_dir):
    c = make_companion(workspace_roots=[workspace], config={"cli": "both", "geminiDir": gemini_dir})
    need(c._lib)
    assert c.discovery_files()["gemini"] == os.path.join(gemini_dir, gemini_name(c.port))


def test_the_default_gemini_dir_is_under_tmpdir(make_companion, workspace, tmp_path, monkeypatch):
    """Where Gemini CLI looks: ``<os.tmpdir()>/gemini/ide`` (Node.js's
    os.tmpdir() follows $TMPDIR)."""
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    c = make_companion(workspace_roots=[workspace], cli="gemini")
    need(c._lib)
    assert c.discovery_files()["gemini"] == os.path.join(str(tmp), "gemini", "ide", gemini_name(c.port))


def test_health_checks_gemini(make_companion, workspace, gemini_dir, tmp_path):
    c = make_companion(workspace_roots=[workspace], cli="both", gemini_dir=gemini_dir)
    need(c._lib)
    missing = str(tmp_path / "no-gemini")
    report = qwen_companion.health({"gemini": missing, "qwen": str(tmp_path / "no-qwen"),
                                    "node": str(tmp_path / "no-node")}, companion=c)
    checks = dict((ch["id"], ch) for ch in report["checks"])
    assert checks["gemini"]["status"] in ("error", "warn") and "no-gemini" in json.dumps(checks["gemini"])
    assert checks["lock_file"]["status"] == "ok"
    assert checks["lock_file"]["files"] == c.discovery_files()  # every discovery file
    # a companion serving Qwen Code only: the gemini check is off, unless the options ask for it
    q = make_companion(workspace_roots=[workspace], gemini_dir=gemini_dir)
    off = dict((ch["id"], ch) for ch in qwen_companion.health({"qwen": "qwen"}, companion=q)["checks"])
    assert off["gemini"]["status"] == "off"
    assert off["lock_file"]["files"] == {"qwen": q.lock_file, "gemini": None}
    asked = dict((ch["id"], ch) for ch in qwen_companion.health({"cli": "gemini", "gemini": missing},
                                                                companion=q)["checks"])
    assert asked["gemini"]["status"] in ("error", "warn") and "no-gemini" in json.dumps(asked["gemini"])
    with pytest.raises(qwen_companion.InvalidArgumentError, match="claude"):
        qwen_companion.health({"cli": "claude"})


def test_without_the_function_the_binding_says_so(make_companion, tmp_path):
    """A library from before issue 22 still loads; the method names what is missing."""
    c = make_companion(workspace_roots=[str(tmp_path)])
    real = c._lib
    try:
        c._lib = types.SimpleNamespace(version="0.1.0", path=real.path)
        with pytest.raises(qwen_companion.NotFoundError, match="qc_companion_discovery_files_json") as e:
            c.discovery_files()
        assert "update the package" in str(e.value)
    finally:
        c._lib = real


class _WithoutDiscoveryFiles(object):
    """A loaded library as one from before issue 22 looks: the same
    functions, less qc_companion_discovery_files_json."""

    def __init__(self, cdll):
        self._cdll = cdll

    def __getattr__(self, name):
        if name == "qc_companion_discovery_files_json":
            raise AttributeError(name)
        return getattr(self._cdll, name)


def test_the_binding_loads_a_library_without_it(make_companion, workspace):
    """The function is optional: a library without it still loads and runs a
    companion; only ``discovery_files`` needs it, and says so."""
    c = make_companion(workspace_roots=[workspace])
    real = c._lib
    old = qwen_companion._native.Library(_WithoutDiscoveryFiles(real._cdll), real.path)
    assert not hasattr(old, "qc_companion_discovery_files_json") and old.version == real.version
    try:
        c._lib = old
        assert c.lock_file.endswith("{}.lock".format(c.port))  # the rest works as before
        assert c.terminal_env()["QWEN_CODE_IDE_SERVER_PORT"] == str(c.port)
        with pytest.raises(qwen_companion.NotFoundError, match="serves Qwen Code only"):
            c.discovery_files()
    finally:
        c._lib = real
