"""SpawnWindow: the root spawns told to the supervisor and not decided yet, at most a few.

Why: ``Runtime.spawn`` (and ``run``) TELL the supervisor their request and return without
waiting for its admission, so that one caller spawning in a loop does not pay a round trip
per run and the supervisor decides the spawns queued behind each other as one group (one
store commit; ``actors/spawn_group.py``). Two promises come with that, both kept here:

- nothing the caller does next sees the run as unknown: a call that reads the store
  (``get``, ``runs``, ``attach``, a wait, a handle's ``status``...) first waits here until
  the supervisor has decided the spawns it may concern (``settle``; the calls that ask the
  supervisor need not: its inbox is FIFO, the spawn's tell is ahead of them);
- a caller cannot fill memory while the supervisor is slow (a stalled store): at most
  ``SPAWN_WINDOW`` spawns are undecided per runtime; the next one waits for room
  (``enter``), and raises ``TimeoutError`` naming the stall after ``WINDOW_WAIT_S``.

The supervisor releases the window once per group it decided (``SpawnsDecided``, through
``RootWaiters.told``), not once per run.

Neither side takes a lock when nobody waits (the usual case): a spawn adds its id, then looks
at the size (over it: it takes the id back out and tries again under the lock, waking the
waiters first, as its try may have kept one out; then waits for room); a decision removes
its ids, then looks whether somebody waits (and only then takes the lock to wake them); a
waiter counts itself under the lock, then tries again before it waits. Each step is one C
call under the GIL, so whichever side looked second sees the other's step (no wake-up is
lost; no more than ``size`` spawns are ever let in: the last of them to look would have
seen them all). Why: the lock was shared by the spawning caller
(every spawn) and the supervisor (every decision), threads that take turns on the GIL: a
thread that finds such a lock held blocks with the GIL released, and once it owns the lock
it waits for the GIL holding it (``actors/timer.py``). At 100,000 one-``spawn`` starts the
caller found it held 25 times, waiting 10/39 ms (p50/p99).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

from subagents.runtime._supervisor_asks import RuntimeClosed

SPAWN_WINDOW = 1000
"""Most root spawns told and not yet decided, per runtime (a decision group is up to this
size too: ``actors.spawn_group.GROUP_MOST``)."""

WINDOW_WAIT_S = 30.0
"""How long a spawn waits for room in the window, and a read for a spawn's decision, before
``TimeoutError`` (the default of every ask of the supervisor)."""


class SpawnWindow:
    """The run ids of the root spawns told and not decided yet (at most ``size``)."""

    def __init__(
        self,
        deciding: Callable[[], bool] = lambda: False,
        size: int | None = None,
        wait_s: float = WINDOW_WAIT_S,
    ) -> None:
        self.deciding = deciding
        """Whether the caller is the supervisor's own thread (an event subscriber): it
        never waits for a decision, which would be its own."""
        self.size = SPAWN_WINDOW if size is None else size
        self.wait_s = wait_s
        self._undecided: set[str] = set()
        self._changed = threading.Condition(threading.Lock())
        self._closed = False
        self.blocked = 0
        """Callers waiting for room now (what a test waits on to see the window full)."""
        self.settling = 0
        """Callers waiting for a decision now (``settle``; what a test waits on)."""

    def __len__(self) -> int:
        return len(self._undecided)

    def __contains__(self, run_id: object) -> bool:
        """Whether ``run_id``'s spawn is told and not decided yet (no lock, no wait)."""
        return run_id in self._undecided

    def enter(self, run_id: str) -> None:
        """``run_id`` is about to be told: counted, once there is room (``TimeoutError``
        naming the stall if none is made within ``wait_s``; ``RuntimeClosed``)."""
        undecided = self._undecided  # the usual case, ``_let_in`` without its frame:
        undecided.add(run_id)  # room, no lock (the module doc)
        if not self._closed and len(undecided) <= self.size:
            return
        undecided.discard(run_id)  # (closed: ``_let_in`` raises it below)
        with self._changed:
            if self.blocked:  # (one may have found no room because of this id's try)
                self._changed.notify_all()
            self._wait_for_room(run_id)

    def _let_in(self, run_id: str) -> bool:
        """Add ``run_id``, then look: within ``size`` (True), or over it, and taken back out
        (False). ``RuntimeClosed`` once closed (it is taken back out as well)."""
        undecided = self._undecided
        undecided.add(run_id)
        if self._closed:
            undecided.discard(run_id)
            raise RuntimeClosed("the runtime is closed")
        if len(undecided) <= self.size:
            return True
        undecided.discard(run_id)
        return False

    def _wait_for_room(self, run_id: str) -> None:
        """(Under the lock.) Let ``run_id`` in once a decision makes room."""
        deadline = time.monotonic() + self.wait_s
        self.blocked += 1  # (before each look: a decision after it wakes this wait)
        try:
            while not self._let_in(run_id):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(
                        f"{len(self._undecided)} spawns are waiting for the supervisor's"
                        f" decision and none was decided within {self.wait_s:g} s: the"
                        " supervisor is stalled (a slow or locked store?)"
                    )
                self._changed.wait(left)
        finally:
            self.blocked -= 1

    def decided(self, run_ids: Iterable[str]) -> None:
        """The supervisor decided these spawns (admitted or refused): room is made, and
        whoever waits for them goes on. Ids not in the window are ignored."""
        self._undecided.difference_update(run_ids)
        if self.blocked or self.settling:  # (after the ids left: the module doc)
            with self._changed:
                self._changed.notify_all()  # (nobody waits, the usual case: no lock)

    def settle(self, run_id: str | None = None) -> None:
        """Return once the spawn of ``run_id`` (None: every spawn undecided now) is decided:
        at once when it is (or was never told). ``TimeoutError`` naming the stall."""
        undecided = self._undecided
        if run_id is None:
            if not undecided:
                return
        elif run_id not in undecided:  # the usual case: no lock taken
            return
        if self.deciding():  # its writes are committed before its events are published
            return
        with self._changed:
            awaited = {run_id} if run_id is not None else set(undecided)
            self.settling += 1
            try:
                ok = self._changed.wait_for(
                    lambda: self._closed or awaited.isdisjoint(undecided), self.wait_s
                )
            finally:
                self.settling -= 1
        if not ok:
            what = f"the spawn of {run_id}" if run_id is not None else "the spawns told"
            raise TimeoutError(
                f"the supervisor has not decided {what} within {self.wait_s:g} s: it is"
                " stalled (a slow or locked store?)"
            )

    def close(self) -> None:
        """The runtime closed: nothing is waited for any more, nothing more enters."""
        with self._changed:
            self._closed = True
            self._undecided.clear()
            self._changed.notify_all()
