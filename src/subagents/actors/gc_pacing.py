"""GC pacing: while the process holds many live runs, the cyclic GC's full passes walk only
what is new since the last one.

Why: a full (generation 2) pass walks every object the collector tracks, and CPython makes
one each time the tracked objects grew by a quarter since the last. A waiting run is ~30 of
them (its actor, mailbox, lock, events, its coroutine and frame, its behaviour's queues), so
100,000 waiting runs make ~15 passes of up to ~3 million objects while they start: about half
of the CPU of starting them (``benchmarks/scale.py`` counts the passes), for objects that
live as long as their runs and are never garbage while they do.

How: after each full pass that finds the process holding at least ``threshold`` live runs
(the pooled actors of every ``Dispatcher``), what survived the pass is frozen
(``gc.freeze()``: moved to the permanent generation, which no pass walks; reference counting
still frees whatever dies, only a cycle that dies frozen waits). From then on, what survives
each middle (generation 1) pass is frozen too: each object is walked twice by the collector
(as young, as middle), never by a full pass (the costliest walk: by then the objects are
scattered over the heap; ~9 us of CPU per run of the 100,000 ``benchmarks/scale.py``
starts, a tenth of it). A middle pass's survivors are reachable from outside the young
generations (from the oldest, or from what is frozen), alive as a full pass's are. And
while runs start in bulk (at least ``YOUNG_GROWTH`` more live than at the young pass
before), what survives a young (generation 0) pass is frozen as well: an object is walked
once. There the survivors are nearly all the new runs' own objects; the middle passes
walked each of them a second time (100,000 one-``spawn`` starts: 505-634 middle passes,
0.42-0.71 s of their threads' CPU; 289-299 and 0.23 s with this, 200-241 and 0.17-0.23 s
when any growth froze: runs start in bursts, and a young pass between two bursts leaves its
survivors to the next). While the live runs
hold steady or grow by a few, a young pass's survivors are left to the middle pass as
before: there they are mostly what is in flight (messages, the embedding program's own
objects), and a cycle among them that dies frozen waits for the thaw. (A freeze
resets CPython's counts of passes, so while something is frozen no full pass comes by
itself: the rules below are looked at after every middle pass as well.) What is frozen is
given back to the collector (``gc.unfreeze()``, walked and its dead cycles freed by the next
full pass) when:

- the runs that ended since the freeze reach half of those live at it (their actors are
  cycles: they wait at most that long),
- ``REFRESH`` full passes were made since, a middle pass counted as the share of a full
  pass CPython makes it (one full pass after ``gc.get_threshold()[2] + 1`` middle ones: its
  count of them must exceed the threshold), so the rule comes as often as before: the
  embedding program's own cycles that died frozen wait at most that long. A middle pass
  made while the live runs grew (since the pass before it) is not counted: CPython makes no
  full pass while the long-lived objects grow faster than a quarter of them, and a start
  of 100,000 waiting runs makes ~700 middle passes, REFRESH's share exactly, so the rule
  fell due at the end of such a start one time in a few and the next full pass walked the
  ~3 million objects given back (~1.4 s),
- the live runs fall below half the threshold, or a dispatcher closes and leaves fewer than
  the threshold (the process goes back to CPython's own pacing).

But never while a runtime closes (``holding``: from its close's start until its dispatcher
has closed), the first two rules held back until then. A mass ending is where they are met:
given back in the middle of a close of 100,000 waiting runs, the next full pass walked the
~3 million objects still frozen (~1-3 s, often the half of the close, one close in a few);
held, the close's passes walk only what is new, what is frozen is given back once the
dispatcher has closed (its actors have all stopped), and the pass that frees their cycles
comes later, at CPython's pacing, outside the close.

Below the threshold nothing changes, so a program with a few hundred runs never sees it; a
program that manages the GC itself can set ``PACING.threshold`` to ``None`` (off).
"""

from __future__ import annotations

import contextlib
import gc
import threading
import weakref
from collections.abc import Iterator
from typing import Any, Protocol

THRESHOLD = 1_000
"""Live runs in the process from which the full passes' survivors are frozen. From 10,000
(what it was first) the full passes made on the way there walked the whole heap, each
longer than the last: a quarter to a third of the CPU of starting 10,000 waiting runs
(benchmarks/scale.py, ``start_gc_full``); from 1,000 they are a few short ones."""

YOUNG_GROWTH = 10
"""More live runs than at the young pass before, from which that pass's survivors are frozen
(something being frozen already). A run is ~30 tracked objects, so 10 are ~300 of the ~700 a
young pass walks (CPython's first threshold): its survivors are mostly the new runs' own.
Runs started in bulk come in bursts (10,000 one-``spawn`` starts: 99% of the runs came
between two young passes 10 or more apart). A job that starts runs steadily, a few per
young pass, does not freeze them there: frozen at every young pass (any growth), a job
growing by ~90 runs a second beside a thread of its own making short-lived cycles held ten
times the dead cycles frozen (1,963 of its requests against 193 after 50 s; nothing is
given back while the runs only grow)."""

REFRESH = 64
"""Full passes after which what is frozen goes back to the collector anyway."""


class LiveRuns(Protocol):
    """What the pacing reads of a dispatcher: its live actors, and how many stopped so far."""

    @property
    def live(self) -> int: ...
    @property
    def stopped(self) -> int: ...


class GcPacing:
    """The process's pacing of full GC passes (one, ``PACING``: the GC is process-wide)."""

    def __init__(
        self,
        threshold: int | None = THRESHOLD,
        refresh: int = REFRESH,
        young_growth: int = YOUNG_GROWTH,
    ) -> None:
        self.threshold = threshold
        self.refresh = refresh
        self.young_growth = young_growth
        self._sources: weakref.WeakSet[Any] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._frozen = False
        self._frozen_live = 0
        self._stopped_at_freeze = 0
        self._passes = 0
        self._middle_passes = 0
        self._live_seen = 0
        """The live runs at the last pass looked at (a middle pass after growth is not
        counted towards ``REFRESH``)."""
        self._stopped_gone = 0
        """The runs stopped by the sources unregistered so far: their ends still count
        towards the rule on runs ended since the freeze (``_stopped``)."""
        self._hooked = False
        self._holds = 0
        self.thaws = 0
        """What was frozen given back so far (what a test counts)."""
        self.held_passes = 0
        """Full passes made while ``holding`` with something frozen, that gave none of it
        back (what a test counts)."""
        self.middle_freezes = 0
        """Middle (generation 1) passes whose survivors were frozen (what a test counts)."""
        self.young_freezes = 0
        """Young (generation 0) passes whose survivors were frozen (what a test counts)."""
        self._live_young = 0
        """The live runs at the last pass looked at while something was frozen (a young
        pass's survivors are frozen only if they grew by ``young_growth`` since)."""

    @property
    def frozen(self) -> bool:
        """Whether it holds objects frozen now."""
        return self._frozen

    def register(self, source: LiveRuns) -> None:
        """Count ``source``'s live runs (a dispatcher, when it starts)."""
        with self._lock:
            self._sources.add(source)
            if not self._hooked:
                gc.callbacks.append(self._after_pass)
                self._hooked = True

    def unregister(self, source: LiveRuns) -> None:
        """``source`` closed: if fewer than the threshold are left, nothing stays frozen (once
        the last hold ends, if held: its pool may still be stopping actors)."""
        with self._lock:
            if source in self._sources:
                self._sources.discard(source)
                self._stopped_gone += source.stopped
            if self._frozen and not self._holds and not self._many(self._live()):
                self._thaw()

    @contextlib.contextmanager
    def holding(self) -> Iterator[None]:
        """While in it (a runtime closes), nothing frozen is given back: the rules (and a
        dispatcher's ``unregister``) are looked at again when the last hold ends."""
        with self._lock:
            self._holds += 1
        try:
            yield
        finally:
            with self._lock:
                self._holds -= 1
                live = self._live()
                if not self._holds and self._frozen and (not self._many(live) or self._due(live)):
                    self._thaw()

    def _live(self) -> int:
        return sum(s.live for s in list(self._sources))

    def _stopped(self) -> int:
        stopped: int = sum(s.stopped for s in list(self._sources))
        return self._stopped_gone + stopped

    def _many(self, live: int) -> bool:
        return self.threshold is not None and live >= self.threshold

    def _after_pass(self, phase: str, info: dict[str, Any]) -> None:
        """A ``gc.callbacks`` entry: at the end of each full pass, and of each middle or
        young pass while something is frozen, freeze or thaw."""
        if phase != "stop":
            return
        generation = info.get("generation")
        if generation != 2 and not self._frozen:  # (read unlocked: a stale answer costs
            return  # one pass)
        if not self._lock.acquire(blocking=False):  # (a register or close under way)
            return
        try:
            if generation == 0:
                self._young()
            else:
                self._decide(full=generation == 2)
        finally:
            self._lock.release()

    def _young(self) -> None:
        """After a young pass, something frozen: its survivors join what is frozen while
        runs start in bulk (the module doc, ``YOUNG_GROWTH``). Not once what is frozen is due
        to be given back: a freeze resets CPython's counts, so the middle pass that gives it
        back would never come while the runs kept growing."""
        if not self._frozen:  # (thawed since the unlocked look)
            return
        live = self._live()
        grew, self._live_young = live - self._live_young, live
        if grew >= max(1, self.young_growth) and not self._holds and not self._due(live):
            gc.freeze()
            self.young_freezes += 1

    def _decide(self, *, full: bool = True) -> None:
        """After a full pass (``full``) or a middle one: freeze what survived it, or give
        back what is frozen, or (a full pass, many live runs) freeze for the first time."""
        live = self._live()
        if self._frozen:
            if full:
                self._passes += 1
                self.held_passes += 1 if self._holds else 0
            elif live <= self._live_seen:  # (runs starting: not counted)
                self._middle_passes += 1
            self._live_seen = self._live_young = live
            if not self._holds and self._due(live):
                self._thaw()  # the next full pass walks it all and frees its dead cycles
                return
            gc.freeze()  # this pass's survivors join what is frozen
            if not full:
                self.middle_freezes += 1
            return
        if full and self._many(live):
            gc.freeze()
            self._frozen = True
            self._frozen_live = self._live_seen = self._live_young = live
            self._stopped_at_freeze = self._stopped()
            self._passes = self._middle_passes = 0

    def _due(self, live: int) -> bool:
        """Whether what is frozen goes back to the collector (the rules of the module doc)."""
        ended = self._stopped() - self._stopped_at_freeze
        return (
            self.threshold is None
            or live < self.threshold // 2
            or ended >= max(1, self._frozen_live // 2)
            or self._passes + self._middle_passes // (gc.get_threshold()[2] + 1) >= self.refresh
        )

    def _thaw(self) -> None:
        gc.unfreeze()
        self._frozen = False
        self.thaws += 1


PACING = GcPacing()
"""The process's one pacing, which every ``Dispatcher`` registers with."""
