"""Binding items of issue 12: ``request_timeout_ms`` as a keyword of
Companion, ``connected_clients``, and a ``__del__`` that never blocks the
collecting thread (the free runs on the finalizer thread)."""

import gc
import os
import threading
import time

import pytest

import qwen_companion
from qwen_companion import _handle
from conftest import wait_for  # noqa: E402


def test_request_timeout_ms_bounds_how_long_the_cli_waits(make_companion, workspace, mcp_connect):
    release = threading.Event()

    def slow_open_diff(path, content):
        release.wait(5)  # longer than the timeout

    c = make_companion(workspace_roots=[workspace], request_timeout_ms=300, open_diff=slow_open_diff)
    client = mcp_connect(c.lock_file)
    start = time.monotonic()
    try:
        result = client.call_tool("openDiff", {"filePath": os.path.join(workspace, "main.py"), "newContent": "x\n"})
    finally:
        release.set()
    elapsed = time.monotonic() - start
    assert result.is_error
    assert elapsed < 3.0, elapsed  # the 30 s default would still be waiting


def test_request_timeout_ms_is_checked_by_the_library(make_companion):
    with pytest.raises(qwen_companion.InvalidArgumentError) as e:
        make_companion(request_timeout_ms=5)
    assert "requestTimeoutMs" in str(e.value)


def test_connected_clients_counts_cli_sessions(make_companion, workspace, mcp_connect):
    c = make_companion(workspace_roots=[workspace])
    if not hasattr(c._lib, "qc_companion_connected_clients"):
        # a library without the count: a clear error, not a crash or a guess
        with pytest.raises(qwen_companion.NotFoundError):
            c.connected_clients()
        return
    assert c.connected_clients() == 0
    mcp_connect(c.lock_file)
    wait_for(lambda: c.connected_clients() == 1)
    assert c.connected_clients() == 1


def test_del_hands_the_free_to_the_finalizer_thread(lib_path, lock_dir, monkeypatch):
    """qc_companion_free waits for a running callable; here it is made slow:
    dropping the last reference must still return at once, and the handle
    is freed (lock file removed) on the finalizer thread."""
    c = qwen_companion.Companion(lock_dir=lock_dir, library=lib_path)
    lib, lock_file = c._lib, c.lock_file
    raw_free = lib.qc_companion_free
    seen = []

    def slow_free(handle):
        seen.append(threading.current_thread().name)
        time.sleep(1.0)  # a deliberately slow free: the behaviour under test
        return raw_free(handle)

    monkeypatch.setattr(lib, "qc_companion_free", slow_free, raising=False)
    start = time.monotonic()
    del c
    gc.collect()
    assert time.monotonic() - start < 0.5  # the collecting thread did not wait
    assert os.path.exists(lock_file)  # not freed yet: the free is still sleeping
    assert _handle._finalizer.idle(timeout=10)
    assert seen == ["qwen-companion-finalizer"]
    assert not os.path.exists(lock_file)


def test_close_still_frees_on_the_calling_thread(lib_path, lock_dir):
    c = qwen_companion.Companion(lock_dir=lock_dir, library=lib_path)
    lock_file = c.lock_file
    c.close()
    assert not os.path.exists(lock_file) and c.closed
    del c
    gc.collect()
    assert _handle._finalizer.idle(timeout=5)
