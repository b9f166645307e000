"""LatchFuture: pykka's ``ThreadingFuture`` on one lock instead of a condition.

Why: every ``ask`` (``Runtime.spawn``, a step or a tool start reported by an LLM agent, a
stop) makes a future. pykka's ``ThreadingFuture`` is a ``threading.Condition`` (an ``RLock``,
a deque of waiters, a new lock per ``wait``): a few microseconds to make and several lock
operations per side. A one-shot result needs less: a lock taken when the future is made and
released when its result is set; ``get`` takes it (waiting as long as it must) and gives it
back at once, so every later ``get`` passes straight through. It is pykka's documented
extension point (``Actor._create_future``); the semantics are ``ThreadingFuture``'s: one
result or exception, ``queue.Full`` on a second ``set``, ``pykka.Timeout`` on a timeout, get
hooks (``map``, ``join``, ``filter``, ``reduce``) as pykka's ``Future`` defines them.
"""

from __future__ import annotations

import queue
import sys
import threading
from typing import TYPE_CHECKING, Any, TypeVar

import pykka
from pykka._threading import ThreadingFutureResult

if TYPE_CHECKING:
    from pykka._future import GetHookFunc
    from pykka._types import OptExcInfo

T = TypeVar("T")

_SETTING = threading.Lock()
"""Makes the check-and-set of a result one step (two racing ``set`` calls: one wins, the other
gets ``queue.Full``, as with ``ThreadingFuture``)."""


class LatchFuture(pykka.ThreadingFuture[T]):
    """A ``ThreadingFuture`` whose waiting is one lock, released once the result is set."""

    def __init__(self) -> None:  # no ThreadingFuture.__init__: that makes the condition
        pykka.Future.__init__(self)
        self._result: ThreadingFutureResult | None = None
        self._latch = threading.Lock()
        self._latch.acquire()

    def get(self, *, timeout: float | None = None) -> Any:
        if self._result is None:
            if timeout is None:
                self._latch.acquire()
            elif not self._latch.acquire(timeout=max(0.0, timeout)):
                raise pykka.Timeout(f"{timeout} seconds")
            self._latch.release()  # open for every later get
        result = self._result
        if result is None:  # released by a get hook: pykka's Future.get calls it (once)
            return pykka.Future.get(self, timeout=timeout)
        if result.exc_info is not None:
            exc_type, exc_value, exc_traceback = result.exc_info
            assert exc_type is not None
            if exc_value is None:
                exc_value = exc_type()
            if exc_value.__traceback__ is not exc_traceback:
                raise exc_value.with_traceback(exc_traceback)
            raise exc_value
        return result.value

    def _settle(self, result: ThreadingFutureResult) -> None:
        with _SETTING:
            if self._result is not None or self._get_hook is not None:
                raise queue.Full
            self._result = result
        self._latch.release()

    def set(self, value: Any | None = None) -> None:
        self._settle(ThreadingFutureResult(value=value))

    def set_exception(self, exc_info: OptExcInfo | None = None) -> None:
        assert exc_info is None or len(exc_info) == 3
        self._settle(ThreadingFutureResult(exc_info=exc_info or sys.exc_info()))

    def set_get_hook(self, func: GetHookFunc[T]) -> None:
        with _SETTING:
            if self._result is not None or self._get_hook is not None:
                raise queue.Full
            pykka.Future.set_get_hook(self, func)
        self._latch.release()  # a get passes through to the hook
