"""The timer service: one thread, a heap of deadlines, cancellable keys.

pykka has no timers, and a thread per timer does not scale to thousands of runs. Every
deadline in the process (run timeouts, ``wait_for_message`` timeouts, restart backoff, hot
reload polling) goes through one of these. Callbacks run on the timer thread and must be
short: they are expected to ``tell`` an actor, never to do the work themselves.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import threading
import time
from collections import Counter
from collections.abc import Callable, Hashable
from typing import Any

import pykka

from subagents.logs import get_logger

log = get_logger("subagents.timer")

_CALL = object()
"""The message of an entry whose target is a callback, called with no argument."""

_Entry = tuple[int, float, Any, Any]
"""(seq, deadline, target, message): ``target.tell(message)`` when due, or ``target()`` when
the message is ``_CALL``. A tell needs no closure: a waiting run's timers (its deadline, its
``receive`` timeout) are one tuple each, not a function, its cells and their tuple, which
the cyclic GC walks at every full pass while the run waits."""


class TimerService:
    """Schedules callbacks at monotonic deadlines on one daemon thread.

    ``schedule(key, deadline, callback)`` replaces any pending timer with the same key;
    ``cancel(key)`` removes it. Both are O(log n) (lazy deletion from the heap).
    """

    def __init__(self, name: str = "subagents-timer") -> None:
        self._heap: list[tuple[float, int, Hashable]] = []
        self._entries: dict[Hashable, _Entry] = {}
        self._seq = itertools.count()
        self._lock = threading.Lock()
        """Held to change the heap and the entries: taken directly where nothing is waited
        for (``_put``, ``cancel``: a ``Condition``'s ``with`` is two Python calls more, on
        every run's start and end)."""
        self._cond = threading.Condition(self._lock)
        self._stopped = False
        self.scheduled = 0
        """Timers put in so far (``schedule``/``tell_at``, replacements included): what a
        test counts to see that a path arms no timer, or one."""
        self.scheduled_kinds: Counter[Hashable] = Counter()
        """The same, by kind: the first item of a key that is a tuple (``("wakes", run_id)``,
        ``("group linger", ...)``): what a test subtracts to count the others alone."""
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def schedule(self, key: Hashable, deadline: float, callback: Callable[[], None]) -> None:
        """Call ``callback`` once at ``deadline`` (``time.monotonic()`` seconds)."""
        self._put(key, deadline, callback, _CALL)

    def tell_at(
        self, key: Hashable, deadline: float, ref: pykka.ActorRef[Any], message: Any
    ) -> None:
        """Tell ``ref`` ``message`` once at ``deadline`` (an actor stopped by then: nothing)."""
        self._put(key, deadline, ref, message)

    def _put(self, key: Hashable, deadline: float, target: Any, message: Any) -> None:
        with self._lock:
            if self._stopped:
                return
            seq = next(self._seq)
            self.scheduled += 1
            if type(key) is tuple:
                self.scheduled_kinds[key[0]] += 1
            self._entries[key] = (seq, deadline, target, message)
            heapq.heappush(self._heap, (deadline, seq, key))
            if self._heap[0][1] == seq:
                self._cond.notify()

    def schedule_in(self, key: Hashable, delay: float, callback: Callable[[], None]) -> None:
        self.schedule(key, time.monotonic() + delay, callback)

    def cancel(self, key: Hashable) -> bool:
        """Forget the timer of ``key``; True if one was pending.

        Cancelled entries leave the heap lazily; when they outnumber the live ones the heap
        is rebuilt, so a long-lived runtime (a deadline per run, most cancelled) stays small.
        """
        with self._lock:
            found = self._entries.pop(key, None) is not None
            if len(self._heap) > 64 and len(self._heap) > 2 * len(self._entries):
                self._heap = [(e[1], e[0], k) for k, e in self._entries.items()]
                heapq.heapify(self._heap)
            return found

    def heap_size(self) -> int:
        """Entries in the heap, cancelled ones not yet dropped included (for tests)."""
        with self._cond:
            return len(self._heap)

    def pending(self) -> int:
        with self._cond:
            return len(self._entries)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread; pending timers never fire."""
        with self._cond:
            self._stopped = True
            self._entries.clear()
            self._heap.clear()
            self._cond.notify()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _next_due(self) -> _Entry | None:
        """Wait for the earliest live timer to be due and pop it (None when stopped)."""
        with self._cond:
            while not self._stopped:
                if not self._heap:
                    self._cond.wait()
                    continue
                deadline, seq, key = self._heap[0]
                entry = self._entries.get(key)
                if entry is None or entry[0] != seq:
                    heapq.heappop(self._heap)  # cancelled or replaced
                    continue
                now = time.monotonic()
                if deadline > now:
                    self._cond.wait(deadline - now)
                    continue
                heapq.heappop(self._heap)
                del self._entries[key]
                return entry
            return None

    def _loop(self) -> None:
        while True:
            entry = self._next_due()
            if entry is None:
                return
            _, _, target, message = entry
            try:
                if message is _CALL:
                    target()
                else:
                    with contextlib.suppress(pykka.ActorDeadError):
                        target.tell(message)
            except Exception:
                log.exception("timer callback failed")
