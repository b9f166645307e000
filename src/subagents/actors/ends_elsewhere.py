"""The runs held live here that another writer ended, noticed at the command poll and ended
here as the store keeps them (``SupervisorCore.ended_elsewhere``), whether or not this
runtime saves them again.

Why: the store keeps one end per run and refuses a live save over it (``end_race``), so a
run ended elsewhere (a stranger's write, `subagents stop` of a run it took for orphaned, a
cluster peer) was let go here only when it next saved: a run waiting for mail that never
comes held its slot until the runtime closed, and a function agent ended while it slept
woke and went on with its side effects, the store saying it had ended. Now the supervisor
looks, at its command poll (every ``command_poll_s``: it reads the store then anyway), at
the stored records of the runs it holds live, a slice at a time (``EndsLook``), and a run
the store keeps ended is ended here in one transaction as a refused live save is
(``end_race.as_kept``: its agent stopped, its slot freed, its children but the detached
cancelled, its requester told the end the store keeps): a woken agent's next step or tool
call is never admitted (its actor was stopped before: the stop is ahead of any later wake
in its mailbox).

Why a slice per poll, not every held run: a runtime may hold 100,000 waiting runs; reading
them all at each poll would cost it more than their waiting does. Every held run is read
at least once a round (``ROUND_S``, longer for more runs than ``RATE`` a second), so an end
elsewhere is noticed within about a round and a poll. Why not a read per run at its wake:
that costs every wake (the hot path: a mail's delivery) a store read. A SQLite store says
whether any other connection committed since it last looked (``written_elsewhere``:
``PRAGMA data_version``, one call): while none did, nothing is read at all (a runtime alone
on its file, the durable ping-pong's case); when one did, one full round is read from then
on. A SQLite or PostgreSQL store answers with the ended ids alone (``ended_among``: no
record sent or decoded; SQLite's ~50x less CPU a run than ``get_runs``). A memory store
has one writer, the program holding it: the ends it saved through ``save_run`` (the
runtime writes through ``write_all``'s ``_apply_batch``) are kept for the next look
(``store.ends_log``), which reads those alone and makes no round (the in-memory judges'
runs are never read)."""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Collection
from typing import Any

from subagents.actors.end_race import as_kept
from subagents.logs import get_logger
from subagents.store.base import READ_SLICE, DamagedRow, RunStore
from subagents.store.writes import write_all
from subagents.supervision.core import SupervisorCore
from subagents.supervision.effects import Decision, Effect

log = get_logger("subagents.supervisor")

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


def written_elsewhere(store: RunStore) -> Callable[[], bool]:
    """``store``'s (under its fence) word on whether another connection wrote since it was
    last asked; a store that cannot say: always (every poll looks)."""
    inner: Any = getattr(store, "writes_go_to", store)
    said = getattr(inner, "written_elsewhere", None)
    return said if callable(said) else _always


def _always() -> bool:
    return True


class EndsElsewhere:
    """The supervisor's looks at its held runs' ends (``take``, at each command poll)."""

    def __init__(
        self,
        core: SupervisorCore,
        store: RunStore,
        lost: Callable[[Exception, list[Effect]], None],
    ) -> None:
        """``lost``: told a decision's effects whose writes failed (``SupervisorActor._lost``)."""
        self.core = core
        self.store = store
        self.lost = lost
        self.look = EndsLook()
        self.written = written_elsewhere(store)
        inner: Any = getattr(store, "writes_go_to", store)
        log_: Any = getattr(inner, "ends_log", None)
        self.since: Callable[[], list[str] | None] | None = None if log_ is None else log_.take
        """The ids of the ends others saved since it was last asked (a memory store)."""
        among = getattr(inner, "ended_among", None)
        self.among: Callable[[list[str]], list[str]] = (
            among if callable(among) else functools.partial(_ended, store)
        )
        """Which of some ids the store keeps ended: a store's own read of their ids alone
        (PostgreSQL: no record sent or decoded), else their records read (``_ended``)."""

    def take(self) -> list[Effect]:
        """The runs held live here whose end another writer wrote (of those due: ``look``),
        ended here as the store keeps them, in one transaction; the effects to carry out
        after. The writes failing, their waiters are told (``lost``) before the failure is
        raised (the outage's)."""
        core, store = self.core, self.store
        if self.since is None:
            due = self.look.due(core.hosted(), time.monotonic(), self.written())
        else:  # (a memory store: the ends others saved, a round only if it lost count)
            ids = self.since()
            due = self.look.due(core.hosted(), time.monotonic(), ids is None) + (ids or [])
        live = [r for r in due if core.runs.live(r) is not None]
        ended: list[str] = []
        for at in range(0, len(live), READ_SLICE):
            ended += self.among(live[at : at + READ_SLICE])
        if not ended:
            return []
        log.warning("runs held here were ended by another writer: ended here too", runs=ended)
        decision: Decision | None = None
        try:
            with store.batch():
                decision = core.ended_elsewhere(ended)
                writes, effects = as_kept(store, decision.writes, decision.effects, core)
                decision.effects[:] = effects
                if writes:
                    write_all(store, writes)
        except Exception as exc:
            if decision is not None:  # decided (the core holds it), not written
                self.lost(exc, decision.effects)
            raise
        return decision.effects


def _ended(store: RunStore, run_ids: list[str]) -> list[str]:
    """Those of ``run_ids`` whose record the store keeps ended. A damaged record (a row that
    does not read as one) is skipped, named in the log, and the rest read one by one: a
    look at ends stops no run and halts no runtime for a row it cannot read."""
    try:
        stored = store.get_runs(run_ids)
    except DamagedRow:
        stored = {}
        for run_id in run_ids:
            try:
                record = store.get_run(run_id)
            except DamagedRow as exc:
                log.warning(
                    "a held run's record cannot be read: its end not looked at", error=str(exc)
                )
                continue
            if record is not None:
                stored[run_id] = record
    return [r for r, record in stored.items() if record.status.terminal]
