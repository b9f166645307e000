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
        with self._changed:
            if len(self._undecided) >= self.size and not self._closed:
                self._wait_for_room()
            if self._closed:
                raise RuntimeClosed("the runtime is closed")
            self._undecided.add(run_id)

    def _wait_for_room(self) -> None:
        deadline = time.monotonic() + self.wait_s
        self.blocked += 1
        try:
            while len(self._undecided) >= self.size and not self._closed:
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
        with self._changed:
            undecided = self._undecided
            before = len(undecided)
            undecided.difference_update(run_ids)
            if (self.blocked or self.settling) and len(undecided) != before:
                self._changed.notify_all()  # (nobody waits, the usual case: no notify)

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
