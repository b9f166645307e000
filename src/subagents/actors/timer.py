"""The timer service: one thread, a heap of deadlines, cancellable keys, no lock to arm.

pykka has no timers, and a thread per timer does not scale to thousands of runs. Every
deadline in the process (run timeouts, ``wait_for_message`` timeouts, restart backoff, hot
reload polling) goes through one of these. Callbacks run on the timer thread and must be
short: they are expected to ``tell`` an actor, never to do the work themselves.

Why no lock: arming and cancelling come from every thread at once (the supervisor arms each
run's deadline, every dispatcher thread each waiting run's receive timer), and a
``threading.Lock`` shared by threads that also take turns on the GIL convoys. A thread that
finds it held blocks with the GIL released; when the holder lets it go, the waiter owns the
lock at once but runs only when it gets the GIL back, a switch interval (5 ms) or several
later on a busy process, holding the lock all that time, so the next thread to arm blocks
too, and so on. Measured at 100,000 waiting runs started with one ``spawn`` each: the lock
was held 1-40 us by whoever ran, and waited for 15-100 ms (p50-p99) by whoever blocked,
hundreds of times; the dispatcher threads arming the runs' receive timers stood still.

So an arm or a cancel is one ``deque.append`` (a single C call under the GIL, never
blocking), and the timer's thread alone owns the heap and the table of entries: it takes in
what was put in line, in order, each time it wakes. It is woken (a ``SimpleQueue`` doorbell,
no Python lock either) only when an arm's deadline comes before the one it sleeps until, or
when the line grows past ``LINE_MAX`` (cancelled entries are then dropped, and the heap
rebuilt when they outnumber the live ones), so arming far deadlines one after another (a
waiting run's deadline and receive timeout) wakes nobody.

A cancel stops a timer whose deadline has not come: the thread takes in the line before it
fires anything, and again if more came while it looked. A cancel made as its timer fires
does not stop it (as before, the callers' messages are checked where they land: a
``Timeout`` against the run's deadline, a ``WAKES_DUE`` against the wakes armed).
"""

from __future__ import annotations

import collections
import contextlib
import heapq
import itertools
import math
import queue
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

_Entry = tuple[int, float, Any, Any, Hashable]
"""(seq, deadline, target, message, key): ``target.tell(message)`` when due, or
``target()`` when the message is ``_CALL``. A tell needs no closure: a waiting run's timers
(its deadline, its ``receive`` timeout) are one tuple each, not a function, its cells and
their tuple, which the cyclic GC walks at every full pass while the run waits. The same
tuple is what is put in line, then kept in the table: one allocation per arm."""

LINE_MAX = 1024
"""Arms and cancels put in line without waking the timer's thread, at most (then it is rung
to take them in): what bounds the line, and the heap's cancelled entries, of a runtime whose
runs arm and cancel far deadlines and never wake it otherwise."""


class _Sync:
    """Put in line by a reader (``pending``, ``scheduled``...): set once everything put in
    line before it is taken in."""

    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = threading.Event()


class TimerService:
    """Schedules callbacks at monotonic deadlines on one daemon thread.

    ``schedule(key, deadline, callback)`` replaces any pending timer with the same key;
    ``cancel(key)`` removes it. Both only put a line in a deque (any thread, no lock): the
    timer's thread applies them in order (lazy deletion from the heap).
    """

    def __init__(self, name: str = "subagents-timer") -> None:
        self._line: collections.deque[Any] = collections.deque()
        """Arms (an ``_Entry``), cancels (a 1-tuple of the key) and syncs, from any thread."""
        self._doorbell: queue.SimpleQueue[None] = queue.SimpleQueue()
        self._sleep_until = math.inf
        """The deadline the timer's thread sleeps until (-inf while it is awake: it takes
        in the line before it sleeps). An arm before it rings the doorbell."""
        self._rung = False
        """The line's length rang the doorbell and the thread has not woken since."""
        self._heap: list[tuple[float, int, Hashable]] = []
        self._entries: dict[Hashable, _Entry] = {}
        """The heap and the live entries: the timer's thread alone touches them."""
        self._seq = itertools.count()
        self._stopped = False
        self._scheduled = 0
        self._kinds: Counter[Hashable] = Counter()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def schedule(self, key: Hashable, deadline: float, callback: Callable[[], None]) -> None:
        """Call ``callback`` once at ``deadline`` (``time.monotonic()`` seconds; one past:
        at once; ``inf``: never). Refused here, not on the timer's thread: a key that is not
        hashable (``TypeError``), a deadline ``float()`` does not take (its error), NaN
        (``ValueError``)."""
        self._put(key, deadline, callback, _CALL)

    def tell_at(
        self, key: Hashable, deadline: float, ref: pykka.ActorRef[Any], message: Any
    ) -> None:
        """Tell ``ref`` ``message`` once at ``deadline`` (an actor stopped by then: nothing)."""
        self._put(key, deadline, ref, message)

    def _put(self, key: Hashable, deadline: float, target: Any, message: Any) -> None:
        hash(key)  # a bad key or deadline is the caller's TypeError, here, not the timer
        if type(deadline) is not float:  # thread's, later (it would end the thread)
            deadline = float(deadline)
        if deadline != deadline:  # NaN: never due nor not due, and a wait for it ends the
            raise ValueError(f"timer {key!r}: the deadline is NaN")  # thread (every timer)
        if self._stopped:
            return
        line = self._line
        line.append((next(self._seq), deadline, target, message, key))
        if deadline < self._sleep_until:
            self._doorbell.put(None)  # earlier than it sleeps until
        elif len(line) > LINE_MAX and not self._rung:
            self._ring_for_length()

    def schedule_in(self, key: Hashable, delay: float, callback: Callable[[], None]) -> None:
        self.schedule(key, time.monotonic() + delay, callback)

    def cancel(self, key: Hashable) -> None:
        """Forget the timer of ``key``, if one is pending (its deadline not come yet: it
        never fires).

        Cancelled entries leave the heap lazily; when they outnumber the live ones the heap
        is rebuilt, so a long-lived runtime (a deadline per run, most cancelled) stays small.
        """
        hash(key)  # (a bad key: the caller's TypeError)
        if self._stopped:  # (nobody takes the line in any more: it would stay there)
            return
        line = self._line
        line.append((key,))
        if len(line) > LINE_MAX and not self._rung:
            self._ring_for_length()

    def _ring_for_length(self) -> None:
        self._rung = True  # (set by any thread, cleared by the timer's: see _wake_up)
        self._doorbell.put(None)

    # -- what tests read: each first waits until what was put in line so far is taken in --

    @property
    def scheduled(self) -> int:
        """Timers put in so far (``schedule``/``tell_at``, replacements included): what a
        test counts to see that a path arms no timer, or one."""
        self._sync()
        return self._scheduled

    @property
    def scheduled_kinds(self) -> Counter[Hashable]:
        """The same, by kind: the first item of a key that is a tuple (``("wakes", run_id, n)``,
        ``("group linger", ...)``): what a test subtracts to count the others alone."""
        self._sync()
        return Counter(self._kinds)

    def heap_size(self) -> int:
        """Entries in the heap, cancelled ones not yet dropped included (for tests)."""
        self._sync()
        return len(self._heap)

    def pending(self) -> int:
        self._sync()
        return len(self._entries)

    def _sync(self, timeout: float = 30.0) -> None:
        if self._stopped or not self._thread.is_alive():
            return
        if threading.current_thread() is self._thread:
            self._take_in()
            return
        sync = _Sync()
        self._line.append(sync)
        self._doorbell.put(None)
        deadline = time.monotonic() + timeout
        while not sync.done.wait(0.5):  # (a thread that stopped meanwhile never sets it)
            if not self._thread.is_alive() or time.monotonic() >= deadline:
                return

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread; pending timers never fire."""
        self._stopped = True
        self._doorbell.put(None)
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    # -- the timer's thread ---------------------------------------------------------------

    def _take_in(self) -> None:
        """Apply what was put in line, in order (on the timer's thread only)."""
        line, entries, heap = self._line, self._entries, self._heap
        push, kinds = heapq.heappush, self._kinds
        syncs: list[_Sync] = []
        while line:
            item = line.popleft()
            if type(item) is tuple:
                if len(item) == 5:
                    key = item[4]
                    entries[key] = item
                    push(heap, (item[1], item[0], key))
                    self._scheduled += 1
                    if type(key) is tuple and key:  # (``()``: a key of no kind)
                        kinds[key[0]] += 1
                else:
                    entries.pop(item[0], None)
            else:
                syncs.append(item)
        if len(heap) > 64 and len(heap) > 2 * len(entries):
            self._heap = [(e[1], e[0], k) for k, e in entries.items()]
            heapq.heapify(self._heap)
        for sync in syncs:
            sync.done.set()

    def _next_due(self) -> _Entry | None:
        """Wait for the earliest live timer to be due and take it (None when stopped)."""
        entries = self._entries
        while not self._stopped:
            self._sleep_until = -math.inf  # awake: arms need not ring
            self._rung = False
            self._take_in()
            heap = self._heap
            while heap:
                _, seq, key = heap[0]
                entry = entries.get(key)
                if entry is not None and entry[0] == seq:
                    break
                heapq.heappop(heap)  # cancelled or replaced
            now = time.monotonic()
            if heap and heap[0][0] <= now:
                if self._line:
                    continue  # what came meanwhile first (a cancel of it, perhaps)
                key = heapq.heappop(heap)[2]
                return entries.pop(key)
            until = heap[0][0] if heap else math.inf
            self._sleep_until = until
            if self._line:
                continue  # put in line before it said when it sleeps until: not rung
            wait = None if until == math.inf else min(until - now, threading.TIMEOUT_MAX)
            with contextlib.suppress(queue.Empty):
                self._doorbell.get(timeout=wait)
            with contextlib.suppress(queue.Empty):
                while True:  # the rings that came together
                    self._doorbell.get_nowait()
        return None

    def _loop(self) -> None:
        while True:
            entry = self._next_due()
            if entry is None or self._stopped:  # (stopped as it took this one: not fired)
                break
            _, _, target, message, _ = entry
            try:
                if message is _CALL:
                    target()
                else:
                    with contextlib.suppress(pykka.ActorDeadError):
                        target.tell(message)
            except Exception:
                log.exception("timer callback failed")
        self._sleep_until = -math.inf  # stopped: nothing to ring for
        self._entries.clear()
        self._heap.clear()
        while self._line:  # (a reader waiting in _sync is let go)
            item = self._line.popleft()
            if type(item) is _Sync:
                item.done.set()
