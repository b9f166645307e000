"""LazyEvent: a ``threading.Event`` that makes its condition only when somebody waits on it.

Why: every live run held three ``threading.Event``s (its actor's ``actor_stopped``, its
cancel signal, its root's waiter), nearly all of which are only ever set and asked
``is_set()``: nobody blocks on them. A ``threading.Event`` is a ``Condition`` with its lock,
its deque of waiters and two bound methods: ~1 KB and six objects the cyclic GC walks, per
event, and a few microseconds to make (measured, with the cheaper actor urn: 13.5 -> 10.0 KiB
and 59 -> 44 GC-tracked objects per waiting run). A LazyEvent is its flag until ``wait`` is
called; then it makes the condition, once, and behaves as a ``threading.Event`` does.

It is a subclass (``isinstance(e, threading.Event)`` holds, pykka's ``ActorRef`` and every
``CancelSignal`` user accept it); it overrides every method that touches the condition.
"""

from __future__ import annotations

import threading

_MAKING = threading.Lock()
"""Orders ``set`` against the first ``wait`` making the condition: a ``set`` either sees the
condition (and notifies it) or happens before it is made (and the maker sees the flag)."""


class LazyEvent(threading.Event):
    """A ``threading.Event`` without a condition until the first ``wait``."""

    def __init__(self) -> None:  # no super().__init__(): that makes the condition
        self._flag = False
        self._lazy: threading.Condition | None = None

    def _condition(self) -> threading.Condition:
        with _MAKING:
            cond = self._lazy
            if cond is None:
                cond = self._lazy = threading.Condition(threading.Lock())
            return cond

    def is_set(self) -> bool:
        return self._flag

    def set(self) -> None:
        with _MAKING:
            self._flag = True
            cond = self._lazy
        if cond is not None:
            with cond:
                cond.notify_all()

    def clear(self) -> None:
        with _MAKING:
            self._flag = False

    def wait(self, timeout: float | None = None) -> bool:
        if self._flag:
            return True
        cond = self._condition()
        with cond:
            if self._flag:
                return True
            return cond.wait(timeout)

    def _at_fork_reinit(self) -> None:
        if self._lazy is not None:
            self._lazy._at_fork_reinit()  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        status = "set" if self._flag else "unset"
        return f"<LazyEvent at {id(self):#x}: {status}>"
