"""Which of the runs a runtime holds live its command poll reads, at a poll, for an end
another writer wrote (``actors.ends_elsewhere`` reads them and ends them here).

Why a share of a round per poll, not every held run: a runtime may hold 100,000 waiting
runs; reading them all at each poll would cost it more than their waiting does. Every held
run is read at least once a round (``ROUND_S``, longer for more runs than ``RATE`` a
second), so an end elsewhere is noticed within about a round and a poll. While the store
says nobody else wrote (``RunStore.ended_by_others``: empty), nothing is read; when it
names the ends others made (a memory store), those alone are read; when it cannot tell
(None), a round is read from then on. Decided here, on plain data: no store, no thread, no
clock of its own (the poll's ``now``)."""

from __future__ import annotations

import math
from collections.abc import Collection

from subagents.store.base import READ_SLICE

ROUND_S = 2.0
"""How long a round of looks at every held run lasts at most (for up to ``RATE`` runs)."""
RATE = 5_000.0
"""How many held runs a second are read at most (a longer round for more runs)."""
GAP_S = 0.25
"""The least time between two looks (a PostgreSQL store's listener polls at each command)."""


class EndsLook:
    """Which held runs to read at this poll: a round over the runs held when it began, a
    share of it per poll by the time since the last (every run once a round). Decided here,
    read and ended by ``ended_elsewhere``; no I/O, no thread (tested alone)."""

    def __init__(self) -> None:
        self._todo: list[str] = []
        """What is left of the round under way (taken from its end)."""
        self._again = False
        """Another writer wrote while the round was under way: one more round after it."""
        self._last: float | None = None
        """When this last looked (monotonic)."""

    def due(self, held: Collection[str], now: float, written: bool) -> list[str]:
        """The ids of ``held`` to read at ``now`` (monotonic); ``written``: another writer may
        have written since the last call (a store that cannot say: always)."""
        last = self._last
        if last is not None and now - last < GAP_S:
            if written:
                self._again = True  # (not lost while this waits out its gap)
            return []
        self._last = now
        if written:
            if self._todo:
                self._again = True
            else:
                self._todo = list(held)
        elif not self._todo and self._again:
            self._again = False
            self._todo = list(held)
        if not self._todo:
            return []
        size = len(held)
        spent = GAP_S if last is None else now - last  # (the first: as after a gap)
        share = math.ceil(size * spent / max(ROUND_S, size / RATE))
        take = min(len(self._todo), max(READ_SLICE, share))
        due = self._todo[-take:]
        del self._todo[-take:]
        if not self._todo and self._again:
            self._again = False
            self._todo = list(held)
        return due

    def to_read(self, held: Collection[str], now: float, news: list[str] | None) -> list[str]:
        """The ids to read at ``now`` given the store's word (``RunStore.ended_by_others``):
        ``news`` the ends others made (read, with any share of a round under way), or None:
        it cannot tell, a round over ``held`` (``due``)."""
        due = self.due(held, now, news is None)
        return due + news if news else due
