"""A synchronous test facade over the official MCP Python SDK (``mcp`` on PyPI).

The SDK client runs in an anyio event loop on a background thread (a
``BlockingPortal``) so tests can drive it from plain code while the main
thread plays the editor's UI thread.

Custom server notifications (``ide/contextUpdate``, ``ide/diffAccepted``...)
are not part of MCP's core tables, so ``ClientSession`` drops them unless a
``NotificationBinding`` is registered for the method (mcp 2.x: "vendor
notifications", delivered to the binding's handler in dispatch order). Every
binding here pushes ``(method, params)`` into one thread-safe queue.
"""

import contextlib
import json
import queue
import time

import anyio
import httpx2
from anyio.from_thread import start_blocking_portal
from mcp import ClientSession
from mcp.client.extension import NotificationBinding
from mcp.client.streamable_http import streamable_http_client
from pydantic import BaseModel, ConfigDict

IDE_NOTIFICATIONS = (
    "ide/contextUpdate",
    "ide/diffAccepted",
    "ide/diffRejected",
    "ide/diffClosed",
)


class AnyParams(BaseModel):
    """Keeps every field of a notification's params."""

    model_config = ConfigDict(extra="allow")


def read_lock(lock_file):
    with open(lock_file, encoding="utf-8") as f:
        return json.load(f)


class McpClient:
    """One MCP client session to a companion, found through its lock file."""

    def __init__(self, lock_file, token=None, timeout=20.0):
        self.lock = read_lock(lock_file)
        self.url = "http://127.0.0.1:{}/mcp".format(self.lock["port"])
        self.token = token if token is not None else self.lock["authToken"]
        self.timeout = timeout
        self.notifications = queue.Queue()
        self._portal_cm = start_blocking_portal()
        self._portal = self._portal_cm.__enter__()
        try:
            self._session_cm = self._portal.wrap_async_context_manager(self._connect())
            self.session = self._session_cm.__enter__()
        except BaseException:
            self._portal_cm.__exit__(None, None, None)
            raise

    def _binding(self, method):
        async def handler(params):
            self.notifications.put((method, params.model_dump()))

        return NotificationBinding(method=method, params_type=AnyParams, handler=handler)

    def _connect(self):
        client = self

        class _Ctx:
            async def __aenter__(self):
                self.stack = contextlib.AsyncExitStack()
                try:
                    http = await self.stack.enter_async_context(
                        httpx2.AsyncClient(
                            headers={"Authorization": "Bearer " + client.token},
                            timeout=httpx2.Timeout(30.0, read=300.0),
                            trust_env=False,  # loopback only: ignore any proxy settings
                        )
                    )
                    read, write = await self.stack.enter_async_context(
                        streamable_http_client(client.url, http_client=http)
                    )
                    session = await self.stack.enter_async_context(
                        ClientSession(
                            read,
                            write,
                            notification_bindings=[client._binding(m) for m in IDE_NOTIFICATIONS],
                        )
                    )
                    with anyio.fail_after(client.timeout):
                        await session.initialize()
                    return session
                except BaseException:
                    await self.stack.aclose()
                    raise

            async def __aexit__(self, *exc):
                await self.stack.aclose()

        return _Ctx()

    def _run(self, coro_fn, *args):
        async def bounded():
            with anyio.fail_after(self.timeout):
                return await coro_fn(*args)

        return self._portal.call(bounded)

    def list_tools(self):
        return self._run(self.session.list_tools)

    def call_tool(self, name, arguments):
        return self._run(self.session.call_tool, name, arguments)

    def wait_notification(self, method, predicate=None, timeout=None):
        """The params of the next ``method`` notification (others are kept aside)."""
        deadline = time.monotonic() + (timeout if timeout is not None else self.timeout)
        skipped = []
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        "no {} notification within the timeout (other notifications: {})".format(
                            method, [m for m, _ in skipped]
                        )
                    )
                try:
                    m, params = self.notifications.get(timeout=left)
                except queue.Empty:
                    continue
                if m == method and (predicate is None or predicate(params)):
                    return params
                skipped.append((m, params))
        finally:
            for item in skipped:
                self.notifications.put(item)

    def drain(self):
        out = []
        while True:
            try:
                out.append(self.notifications.get_nowait())
            except queue.Empty:
                return out

    def close(self):
        if self._portal_cm is None:
            return
        try:
            self._session_cm.__exit__(None, None, None)
        finally:
            cm, self._portal_cm = self._portal_cm, None
            cm.__exit__(None, None, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
