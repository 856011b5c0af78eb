"""The Companion class without an MCP client: configuration, errors, lock
file, editor events (checked through context()), lifetime and logging."""

import json
import logging
import os
import stat
import threading

import pytest

import qwen_companion
from qwen_companion import Companion
from conftest import wait_for  # noqa: E402


# -- configuration errors ---------------------------------------------------


def test_bad_json_config_is_invalid_json(make_companion):
    with pytest.raises(qwen_companion.InvalidJsonError) as info:
        make_companion(config="{not json")
    assert info.value.status == 3 and info.value.status_name == "QC_INVALID_JSON"
    assert "invalid companion config" in info.value.message


def test_unknown_config_field_is_invalid_json(make_companion):
    with pytest.raises(qwen_companion.InvalidJsonError, match="bogus"):
        make_companion(config={"bogus": 1})


def test_relative_workspace_root_is_invalid_argument(make_companion):
    with pytest.raises(qwen_companion.InvalidArgumentError, match="not an absolute path"):
        make_companion(workspace_roots=["relative/dir"])


def test_out_of_range_debounce_is_invalid_argument(make_companion):
    with pytest.raises(qwen_companion.InvalidArgumentError):
        make_companion(debounce_ms=10 ** 6)


def test_config_string_excludes_other_arguments(lib_path):
    with pytest.raises(TypeError):
        Companion(config="{}", ide_name="x", library=lib_path)


def test_config_string_is_passed_verbatim(make_companion, lock_dir, workspace):
    c = make_companion(config=json.dumps({"lockDir": lock_dir, "workspaceRoots": [workspace], "ideName": "Raw"}))
    assert c.workspace_roots == [workspace] and c.ide_name == "Raw"
    assert os.path.dirname(c.lock_file) == lock_dir


# -- server and lock file ---------------------------------------------------


def test_lock_file_contents_and_modes(make_companion, lock_dir, workspace):
    c = make_companion(workspace_roots=[workspace], ide_name="Sublime Text", ide_id="sublime-text")
    assert c.running
    assert c.lock_file == os.path.join(lock_dir, "{}.lock".format(c.port))
    with open(c.lock_file, encoding="utf-8") as f:
        lock = json.load(f)
    assert lock["port"] == c.port
    assert lock["workspacePath"] == workspace
    assert lock["ppid"] == os.getpid()
    assert lock["ideInfo"] == {"name": "sublime-text", "displayName": "Sublime Text"}
    assert len(lock["authToken"]) >= 32
    assert stat.S_IMODE(os.stat(c.lock_file).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(lock_dir).st_mode) == 0o700


def test_default_lock_dir_honours_qwen_home(make_companion):
    # conftest points QWEN_HOME at a temporary directory: never the real ~/.qwen
    c = make_companion(lock_dir=None)
    assert c.lock_file.startswith(os.path.join(os.environ["QWEN_HOME"], "ide") + os.sep)


def test_terminal_env(make_companion, workspace, tmp_path):
    other = str(tmp_path)
    c = make_companion(workspace_roots=[workspace, other])
    env = c.terminal_env()
    assert env["QWEN_CODE_IDE_SERVER_PORT"] == str(c.port)
    assert env["QWEN_CODE_IDE_WORKSPACE_PATH"] == os.pathsep.join([workspace, other])


def test_workspace_roots_update_rewrites_lock_file(make_companion, workspace, tmp_path):
    c = make_companion(workspace_roots=[workspace])
    c.workspace_roots = [str(tmp_path)]
    assert c.workspace_roots == [str(tmp_path)]
    with open(c.lock_file, encoding="utf-8") as f:
        assert json.load(f)["workspacePath"] == str(tmp_path)
    assert c.terminal_env()["QWEN_CODE_IDE_WORKSPACE_PATH"] == str(tmp_path)
    with pytest.raises(qwen_companion.InvalidArgumentError):
        c.set_workspace_roots(["not/absolute"])
    assert c.workspace_roots == [str(tmp_path)]
    with pytest.raises(TypeError):
        c.set_workspace_roots("/a/single/string")


def test_start_stop_errors(make_companion):
    c = make_companion(start=False)
    assert not c.running
    with pytest.raises(qwen_companion.NotRunningError):
        c.port
    with pytest.raises(qwen_companion.NotRunningError):
        c.lock_file
    with pytest.raises(qwen_companion.NotRunningError):
        c.terminal_env()
    c.start()
    first = c.lock_file
    with pytest.raises(qwen_companion.AlreadyRunningError):
        c.start()
    c.stop()
    assert not os.path.exists(first)
    with pytest.raises(qwen_companion.NotRunningError):
        c.stop()
    c.start()  # allowed again after a stop
    assert os.path.exists(c.lock_file)


def test_close_removes_lock_file_and_is_idempotent(make_companion):
    c = make_companion()
    lock = c.lock_file
    assert os.path.exists(lock)
    c.close()
    assert not os.path.exists(lock)
    assert c.closed
    c.close()  # second close is a no-op
    assert "closed" in repr(c)


def test_use_after_close_is_a_clear_error(make_companion):
    c = make_companion()
    c.close()
    for call in (
        lambda: c.port,
        lambda: c.file_opened("/tmp/x"),
        lambda: c.diff_accept("/tmp/x"),
        lambda: c.context(),
        lambda: c.start(),
        lambda: c.set_open_diff_callback(lambda p, t: None),
    ):
        with pytest.raises(qwen_companion.ClosedError, match="closed"):
            call()
    assert issubclass(qwen_companion.ClosedError, qwen_companion.InvalidHandleError)


def test_context_manager_closes(lib_path, lock_dir):
    with Companion(lock_dir=lock_dir, library=lib_path) as c:
        lock = c.lock_file
        assert os.path.exists(lock)
    assert c.closed and not os.path.exists(lock)


def test_close_from_another_thread_while_in_use(make_companion, workspace):
    c = make_companion()
    path = os.path.join(workspace, "main.py")
    errors = []
    started = threading.Event()

    def hammer():
        try:
            while True:
                c.file_focused(path)
                started.set()
        except qwen_companion.ClosedError:
            pass
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    t = threading.Thread(target=hammer)
    t.start()
    assert started.wait(5)  # the hammer is in use of the companion
    c.close()
    t.join(5)
    assert not t.is_alive() and errors == []


def test_callbacks_are_released_after_close(make_companion):
    lib = qwen_companion.load_library()
    before = len(lib.callbacks)
    c = make_companion(open_diff=lambda p, t: None, close_diff=lambda p: None, log=lambda l, m: None)
    assert len(lib.callbacks) == before + 3
    c.set_open_diff_callback(lambda p, t: None)  # replacing finalizes the old one
    assert len(lib.callbacks) == before + 3
    c.close()
    assert len(lib.callbacks) == before


# -- errors from calls ------------------------------------------------------


def test_diff_calls_for_unknown_path_are_not_found(make_companion):
    c = make_companion()
    for call in (c.diff_accept, c.diff_reject, c.diff_closed):
        with pytest.raises(qwen_companion.NotFoundError) as info:
            call("/no/such/diff.txt")
        assert info.value.status == 8 and "no open diff" in info.value.message
    with pytest.raises(qwen_companion.NotFoundError):
        c.diff_accept("/no/such/diff.txt", "edited")


def test_diff_calls_when_stopped_are_not_running(make_companion):
    c = make_companion(start=False)
    with pytest.raises(qwen_companion.NotRunningError):
        c.diff_reject("/x")


def test_cursor_errors(make_companion, workspace):
    c = make_companion()
    with pytest.raises(qwen_companion.NotFoundError, match="no file has the focus"):
        c.set_cursor(None, 1, 1)
    with pytest.raises(qwen_companion.InvalidArgumentError, match="1-based"):
        c.set_cursor(os.path.join(workspace, "main.py"), 0, 1)
    with pytest.raises(qwen_companion.InvalidArgumentError):
        c.set_cursor(os.path.join(workspace, "main.py"), 2 ** 32, 1)
    with pytest.raises(TypeError):
        c.set_cursor(os.path.join(workspace, "main.py"), "1", 1)


def test_python_side_argument_checks(make_companion):
    c = make_companion()
    with pytest.raises(qwen_companion.InvalidArgumentError, match="NUL"):
        c.file_opened("/tmp/a\0b")
    with pytest.raises(ValueError):  # InvalidArgumentError is a ValueError
        c.file_opened("/tmp/a\0b")
    with pytest.raises(TypeError):
        c.file_opened(b"/tmp/bytes")
    with pytest.raises(qwen_companion.InvalidUtf8Error):
        c.file_opened("/tmp/\udcff")
    with pytest.raises(qwen_companion.InvalidArgumentError):
        c.set_log_callback(None, 9)


def test_bad_context_json_is_invalid_json(make_companion):
    c = make_companion()
    with pytest.raises(qwen_companion.InvalidJsonError):
        c.set_context("{")
    with pytest.raises(qwen_companion.InvalidJsonError):
        c.set_context({"workspaceState": {"openFiles": [{"path": 3}]}})


# -- editor events, seen through context() ---------------------------------


def files(c):
    return c.context()["workspaceState"]["openFiles"]


def test_editor_events_shape_the_context(make_companion, workspace):
    c = make_companion(workspace_roots=[workspace])
    main = os.path.join(workspace, "main.py")
    readme = os.path.join(workspace, "README.md")
    assert files(c) == []
    c.file_opened(readme)
    c.file_opened(main)
    c.file_focused(main)
    c.set_cursor(None, 3, 7)
    c.set_selection(None, "print")
    f = files(c)
    assert [x["path"] for x in f] == [main, readme]
    assert f[0]["isActive"] is True
    assert f[0]["cursor"] == {"line": 3, "character": 7}
    assert f[0]["selectedText"] == "print"
    assert "isActive" not in f[1] or f[1]["isActive"] is False

    c.set_selection(main, None)
    assert "selectedText" not in files(c)[0]

    # a cursor in another file moves the focus there
    c.set_cursor(readme, 1, 1)
    f = files(c)
    assert f[0]["path"] == readme and f[0]["isActive"] is True

    renamed = os.path.join(workspace, "RENAMED.md")
    os.rename(readme, renamed)
    c.file_renamed(readme, renamed)
    assert files(c)[0]["path"] == renamed

    c.file_closed(renamed)
    assert [x["path"] for x in files(c)] == [main]

    c.set_trusted(False)
    assert c.context()["workspaceState"]["isTrusted"] is False


def test_only_real_files_are_sent(make_companion, workspace):
    c = make_companion()
    c.file_opened(os.path.join(workspace, "does-not-exist.py"))
    c.file_opened("relative.py")
    c.file_opened(workspace)  # a directory
    assert files(c) == []


def test_long_selection_is_truncated_within_the_cap(make_companion, workspace):
    c = make_companion()
    main = os.path.join(workspace, "main.py")
    c.file_focused(main)
    c.set_selection(main, "\U0001F600" * 10000)  # 20000 UTF-16 units
    text = files(c)[0]["selectedText"]
    assert text.endswith("... [TRUNCATED]")
    assert len(text.encode("utf-16-le")) // 2 <= 16384


def test_non_ascii_and_nul_in_selection(make_companion, tmp_path):
    p = tmp_path / "ünï cödé.txt"
    p.write_text("x", encoding="utf-8")
    c = make_companion()
    c.file_focused(str(p))
    c.set_selection(str(p), "a\0b é")
    f = files(c)[0]
    assert f["path"] == str(p) and f["selectedText"] == "a\0b é"


def test_set_context_replaces_state(make_companion, workspace):
    c = make_companion()
    main = os.path.join(workspace, "main.py")
    c.set_context(
        {
            "workspaceState": {
                "openFiles": [
                    {"path": main, "timestamp": 10, "isActive": True, "cursor": {"line": 2, "character": 1}}
                ],
                "isTrusted": False,
            }
        }
    )
    ctx = c.context()
    assert ctx["workspaceState"]["isTrusted"] is False
    assert ctx["workspaceState"]["openFiles"][0]["cursor"] == {"line": 2, "character": 1}


def test_path_like_arguments(make_companion, workspace):
    import pathlib

    c = make_companion(workspace_roots=[pathlib.Path(workspace)])
    c.file_focused(pathlib.Path(workspace) / "main.py")
    assert files(c)[0]["path"] == os.path.join(workspace, "main.py")
    assert c.workspace_roots == [workspace]


# -- logging ----------------------------------------------------------------


def test_log_callable_runs_on_the_library_thread(make_companion):
    lines = []
    c = make_companion(
        log=lambda level, msg: lines.append((level, msg, threading.current_thread() is threading.main_thread())),
        log_level=qwen_companion.LOG_DEBUG,
    )
    port = c.port
    assert wait_for(lambda: any("listening on 127.0.0.1:{}".format(port) in m for _, m, _ in lines))
    assert all(level in (1, 2, 3, 4) for level, _, _ in lines)
    assert not any(on_main for _, _, on_main in lines)


def test_library_lines_go_to_logging_by_default(make_companion, caplog):
    caplog.set_level(logging.INFO, logger="qwen_companion.library")
    c = make_companion()
    port = c.port
    assert wait_for(
        lambda: any(
            r.name == "qwen_companion.library" and "listening on 127.0.0.1:{}".format(port) in r.getMessage()
            for r in caplog.records
        )
    )


def test_exception_in_log_callable_is_contained(make_companion, caplog):
    calls = []

    def bad_log(level, msg):
        calls.append(msg)
        raise RuntimeError("log sink broke")

    c = make_companion(log=bad_log)
    assert wait_for(lambda: calls)
    assert wait_for(lambda: any("exception in the log callable" in r.getMessage() for r in caplog.records))
    c.stop()
    c.start()
    assert wait_for(lambda: len(calls) >= 3)  # still delivered after the exception
