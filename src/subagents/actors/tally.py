"""Tally: a count that many threads add to without taking a lock, read now and then.

Why: a ``Dispatcher`` counts every actor started (on the supervisor's thread) and stopped (on
its own threads), for the GC's pacing and its spares. Under its lock, those two counts were
the lock's only per-run users, and a lock shared by threads that also take turns on the GIL
convoys (``actors/timer.py``): at 100,000 starts and their close the dispatcher's threads
found it held 65-164 times per close, and waited 20-24 ms (p50) and up to 240 ms for it,
2.6-4.3 thread-seconds in one close.

An ``add`` is one ``deque.append``: one C call under the GIL, never a wait. A read folds
what was added since the last read into the total (``popleft`` as many as it counted: an
add meanwhile stays for the next read) under a lock only readers take. Something that reads
it regularly (the dispatcher's watch thread, every ``stall_s``) keeps the deque short.
"""

from __future__ import annotations

import collections
import threading


class Tally:
    """A count that only grows: ``add`` from any thread, ``value`` from any thread."""

    __slots__ = ("_added", "_folded", "_folding")

    def __init__(self) -> None:
        self._added: collections.deque[None] = collections.deque()
        self._folded = 0
        self._folding = threading.Lock()  # (readers only: two folds would count twice)

    def add(self) -> None:
        """One more (no lock: one C call)."""
        self._added.append(None)

    @property
    def value(self) -> int:
        """Everything added so far (each ``add`` that returned before this read began)."""
        with self._folding:  # (nothing in it allocates what the cyclic GC tracks: no GC
            added = self._added  # callback, which may read a tally, runs inside it)
            count = len(added)
            for _ in range(count):
                added.popleft()
            self._folded += count
            return self._folded
