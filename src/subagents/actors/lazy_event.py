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


class LazyEvent(threading.Event):
    """A ``threading.Event`` without a condition until the first ``wait``.

    No lock of its own, and none shared: it had one lock for every event of the process
    (it ordered ``set`` against the first ``wait`` making the condition), taken by every
    actor's stop and every run's cancel, on whichever thread. A lock shared by threads that
    also take turns on the GIL convoys (``actors/timer.py``): a closing runtime stopping
    100,000 actors on its dispatcher's threads found it held 668-1,333 times, and those
    threads waited 0.3/25/57 ms (p50/p99/max) for it, 2 thread-seconds in one close.

    The order without it: ``set`` stores the flag, then reads the condition; ``wait``
    stores the condition, then reads the flag (under the condition). Each step is one store
    or load under the GIL, so whichever of the two reads comes second sees the other's
    store: the setter notifies the condition (the waiter holds it from its look at the flag
    until it waits, so the notify finds it waiting), or the waiter sees the flag. Two first
    waits racing keep one condition (``dict.setdefault``: one step)."""

    _lazy: threading.Condition | None = None
    """The condition, once a ``wait`` made it (in the instance's dict from then on)."""

    def __init__(self) -> None:  # no super().__init__(): that makes the condition
        self._flag = False
        """The flag (``threading.Event``'s name for it). An agent actor reads its run's cancel
        signal's directly where it looks at it for every mail (``AgentActor.on_receive``, its
        flush): ``is_set``'s frame, three times a mail."""

    def _condition(self) -> threading.Condition:
        cond = self._lazy
        if cond is None:  # the first wait: the one made first is kept
            made = threading.Condition(threading.Lock())
            cond = self.__dict__.setdefault("_lazy", made)
        return cond

    def is_set(self) -> bool:
        return self._flag

    def set(self) -> None:
        self._flag = True
        cond = self._lazy  # (after the flag: see the class doc)
        if cond is not None:
            with cond:
                cond.notify_all()

    def clear(self) -> None:
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
