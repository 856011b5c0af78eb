"""The machinery shared by :class:`Companion` and :class:`Participant`.

Both wrap one native handle (``qc_companion *``, ``qc_participant *``) the
same way; :class:`NativeHandle` does it once:

- the handle's lifetime: created by ``qc_<kind>_new``, freed exactly once by
  :meth:`NativeHandle._free` (``close``, ``with``, ``__del__``, or at
  interpreter exit for objects still alive then), and :class:`ClosedError`
  for any call after that, also for a call racing a ``close`` on another
  thread;
- fallible calls with the handle first and the ``char **error`` last
  (:meth:`~NativeHandle._call`, :meth:`~NativeHandle._call_string`,
  :meth:`~NativeHandle._call_json`);
- registering callables: the ctypes thunk is pinned in the library's
  :class:`~qwen_companion._native.CallbackRegistry` until the library's
  ``qc_free_fn`` finalizer runs; removing one passes a NULL function pointer;
- the log callable (``set_log_callback``), which also receives the
  exceptions escaping the other callables.

It must stay importable by Sublime Text's plugin host (Python 3.8).
"""

import atexit
import ctypes
import json
import logging
import threading
import weakref

from typing import Any, Callable, Dict, List, Optional, Tuple, Union  # noqa: F401 (type comments)

from . import _native
from ._native import (
    ClosedError,
    InvalidHandleError,
    LOG_ERROR,
    LOG_INFO,
    PY_LOG_LEVELS,
    describe_exception,
    encode,
    run_guarded,
)

LogCallable = Callable[[int, str], Any]

library_logger = logging.getLogger("qwen_companion.library")
logger = logging.getLogger("qwen_companion")


def camel(name):
    # type: (str) -> str
    """``snake_case`` -> ``camelCase`` (the library's JSON keys)."""
    head, _, tail = name.partition("_")
    parts = tail.split("_") if tail else []
    return head + "".join(p[:1].upper() + p[1:] for p in parts)


def config_json(config, given):
    # type: (Optional[Union[str, Dict[str, Any]]], Dict[str, Any]) -> Tuple[str, Dict[str, Any]]
    """The ``config_json`` for ``qc_<kind>_new`` and the settings it holds.

    ``config`` is a dict that the ``given`` (camelCase) arguments are merged
    over, or a JSON string passed to the library verbatim; then no argument
    may be given, and the settings are what the string holds (``{}`` if it
    is not a JSON object: the library reports that).
    """
    if isinstance(config, str):
        if given:
            raise TypeError("config given as a JSON string: pass no other configuration arguments")
        try:
            parsed = json.loads(config)
        except ValueError:
            parsed = None
        return config, parsed if isinstance(parsed, dict) else {}
    settings = dict(config or {})
    settings.update(given)
    return json.dumps(settings), settings


def closed_at_exit():
    # type: () -> weakref.WeakSet
    """A new weak set of handles that are closed when the interpreter exits
    (library threads must not call into an interpreter that is shutting down).

    Each set gets its own ``atexit`` handler: sets made later are closed first.
    """
    live = weakref.WeakSet()  # type: weakref.WeakSet

    def close_all():
        # type: () -> None
        for handle in list(live):
            try:
                handle.close()
            except BaseException:
                pass

    atexit.register(close_all)
    return live


class _Finalizer(object):
    """One daemon thread (``qwen-companion-finalizer``, started on first use)
    that frees the handles of collected objects, in order."""

    def __init__(self):
        # type: () -> None
        self._lock = threading.Lock()
        self._queue = []  # type: List[Tuple[Any, str, int]]
        self._wake = threading.Condition(self._lock)
        self._thread = None  # type: Optional[threading.Thread]
        self._running = False  # a free is under way

    def free(self, lib, free_fn, handle):
        # type: (Any, str, int) -> None
        """Queues ``free_fn(handle)``; never blocks (takes only this lock,
        which no library call is made under)."""
        with self._lock:
            self._queue.append((lib, free_fn, handle))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="qwen-companion-finalizer")
                self._thread.daemon = True
                self._thread.start()
            self._wake.notify()

    def _run(self):
        # type: () -> None
        while True:
            with self._lock:
                while not self._queue:
                    self._wake.wait()
                lib, free_fn, handle = self._queue.pop(0)
                self._running = True
            try:
                status = getattr(lib, free_fn)(handle)
                if status not in (_native.QC_OK, _native.QC_INVALID_HANDLE):
                    logger.warning("%s of a collected object failed: %s", free_fn, status)
            except BaseException:
                logger.error("%s of a collected object failed", free_fn, exc_info=True)
            finally:
                with self._lock:
                    self._running = False

    def idle(self, timeout=5.0):
        # type: (float) -> bool
        """Waits until every queued free has run (for tests); True if so."""
        import time

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if not self._queue and not self._running:
                    return True
            time.sleep(0.01)
        return False


_finalizer = _Finalizer()


class NativeHandle(object):
    """Base of the classes that own one native handle (see the module docs).

    A subclass sets the class attributes below, calls :meth:`_init_handle`
    first thing in ``__init__``, :meth:`_create` once its configuration JSON
    is ready, and implements ``close`` (with its own docstring) as
    ``self._free()``.
    """

    #: The public class name (``repr``), e.g. ``"Companion"``.
    _NAME = "NativeHandle"
    #: What ``ClosedError`` calls the object, e.g. ``"the companion"``.
    _WHAT = "the object"
    #: ``qc_<kind>_new`` and ``qc_<kind>_free``.
    _NEW_FN = ""
    _FREE_FN = ""
    #: ``qc_<kind>_set_log_callback``.
    _LOG_SETTER = ""
    #: The live objects of the subclass (a :func:`closed_at_exit` set).
    _LIVE = None  # type: Optional[weakref.WeakSet]

    _handle = None  # type: Optional[int]

    def _init_handle(self, library):
        # type: (Optional[Any]) -> None
        """Loads the library; until :meth:`_create` the object counts as closed."""
        self._handle = None
        self._lock = threading.Lock()
        self._lib = _native.load(library)
        self._log_fn = None  # type: Optional[LogCallable]

    def _create(self, config_json, setup):
        # type: (str, Callable[[], None]) -> None
        """``qc_<kind>_new(config_json)``, then ``setup()`` (registering the
        callables...); the object is closed again when ``setup`` raises."""
        out = ctypes.c_void_p()
        self._lib.call(self._NEW_FN, encode(config_json, "config"), ctypes.byref(out))
        self._handle = out.value
        live = self._LIVE
        if live is not None:
            live.add(self)
        try:
            setup()
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------
    # lifetime

    def close(self):
        # type: () -> None
        self._free()

    def __enter__(self):
        # type: () -> Any
        return self

    def __exit__(self, *exc):
        # type: (*Any) -> None
        self.close()

    def __del__(self):
        # type: () -> None
        """A collected object's handle is freed on the finalizer thread, never
        on the collecting one: ``qc_<kind>_free`` waits for a running callable
        of the object, and the thread the garbage collector happens to run on
        (a UI thread) may be the very one that callable waits for."""
        try:
            handle, self._handle = self._handle, None  # no other reference: no race
            if handle is not None:
                _finalizer.free(self._lib, self._FREE_FN, handle)
        except BaseException:
            pass

    def __repr__(self):
        # type: () -> str
        state = "closed" if self._handle is None else self._repr_state()
        return "<qwen_companion.{} {}>".format(self._NAME, state)

    def _repr_state(self):
        # type: () -> str
        """The ``repr`` of an open object, after its class name."""
        return "open"

    @property
    def closed(self):
        # type: () -> bool
        """True once :meth:`close` was called."""
        return self._handle is None

    def _free(self):
        # type: () -> None
        """Frees the handle once (later calls do nothing)."""
        with self._lock:
            handle, self._handle = self._handle, None
        if handle is None:
            return
        live = self._LIVE
        if live is not None:
            live.discard(self)
        status = getattr(self._lib, self._FREE_FN)(handle)
        if status not in (_native.QC_OK, _native.QC_INVALID_HANDLE):
            raise _native.make_error(status, "{} failed".format(self._FREE_FN))

    def _closed_error(self):
        # type: () -> ClosedError
        return ClosedError("{} is closed".format(self._WHAT), _native.QC_INVALID_HANDLE)

    def _h(self):
        # type: () -> int
        handle = self._handle
        if handle is None:
            raise self._closed_error()
        return handle

    # ------------------------------------------------------------------
    # calls

    def _call(self, fname, *args):
        # type: (str, *Any) -> None
        """``fname(handle, *args, &error)``."""
        try:
            self._lib.call(fname, self._h(), *args)
        except InvalidHandleError:
            if self._handle is None:  # closed by another thread meanwhile
                raise self._closed_error()
            raise

    def _call_string(self, fname, *args):
        # type: (str, *Any) -> str
        """``fname(handle, *args, &out, &error)``, returning ``out``."""
        try:
            return self._lib.call_string(fname, self._h(), *args)
        except InvalidHandleError:
            if self._handle is None:  # closed by another thread meanwhile
                raise self._closed_error()
            raise

    def _call_json(self, fname, *args):
        # type: (str, *Any) -> Any
        """:meth:`_call_string`, parsed as JSON."""
        return json.loads(self._call_string(fname, *args))

    # ------------------------------------------------------------------
    # callables

    def _report_callback_error(self, what, e):
        # type: (str, BaseException) -> None
        log_fn = self._log_fn
        if log_fn is None:
            return  # already logged through `logging` by run_guarded
        try:
            log_fn(LOG_ERROR, "exception in {}: {}".format(what, describe_exception(e)))
        except BaseException:
            logger.error("exception in the log callable", exc_info=True)

    def _error_reporter(self, what):
        # type: (str) -> Callable[[BaseException], None]
        """A function reporting an exception of the callable ``what`` to the
        log callable; it holds the object weakly (a thunk must not keep it alive)."""
        me = weakref.ref(self)

        def report(e):
            # type: (BaseException) -> None
            owner = me()
            if owner is not None:
                owner._report_callback_error(what, e)

        return report

    def _register_callback(self, setter, thunk, *extra):
        # type: (str, Any, *Any) -> None
        """``setter(handle, thunk, key, free_thunk, *extra, &error)``; ``thunk``
        stays pinned until the library calls the finalizer with ``key``."""
        lib = self._lib
        key = lib.callbacks.add(thunk)
        try:
            self._call(setter, thunk, key, lib.callbacks.free_thunk, *extra)
        except BaseException:
            lib.callbacks.discard(key)
            raise

    def _set_callback(self, setter, fn_type, fn, make_thunk):
        # type: (str, Any, Optional[Any], Callable[[], Callable[..., Any]]) -> None
        """Registers ``fn_type(make_thunk())`` with ``setter`` (see
        :meth:`_register_callback`), or removes the callback when ``fn`` is ``None``."""
        if fn is None:
            # fn_type() is a NULL function pointer (ctypes refuses None here).
            self._call(setter, fn_type(), None, _native.FREE_FN())
            return
        self._register_callback(setter, fn_type(make_thunk()))

    def set_log_callback(self, fn, level=LOG_INFO):
        # type: (Optional[LogCallable], int) -> None
        """Sets the log callable ``fn(level, message)`` for library lines up to
        ``level``; ``None`` forwards them to the ``logging`` logger
        ``qwen_companion.library``. Runs on the library thread."""
        if level not in PY_LOG_LEVELS:
            raise _native.InvalidArgumentError(
                "level must be LOG_ERROR (1) .. LOG_TRACE (5), got {!r}".format(level),
                _native.QC_INVALID_ARGUMENT,
            )
        if fn is None:
            def sink(lvl, message):
                # type: (int, str) -> None
                library_logger.log(PY_LOG_LEVELS.get(lvl, logging.INFO), "%s", message)
        else:
            sink = fn

        def thunk(_user_data, lvl, message):
            # type: (Any, int, Optional[bytes]) -> None
            def failed(e):
                # type: (BaseException) -> None
                return None  # logged by run_guarded; never re-enter the log callable

            run_guarded("the log callable", lambda: sink(int(lvl), _native.decode(message)), failed)

        self._register_callback(self._LOG_SETTER, _native.LOG_FN(thunk), level)
        self._log_fn = fn
