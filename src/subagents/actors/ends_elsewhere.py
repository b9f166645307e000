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

Which held runs a poll reads is decided in ``supervision.ends_look`` (``EndsLook``: a
share of a round per poll, every held run once a round), from the store's word on other
writers (``RunStore.ended_by_others``: nobody else wrote, so nothing is read; the ends
others made, read alone; or it cannot tell, a round); which of them ended, the store says
(``RunStore.ended_among``: SQLite, PostgreSQL and a cluster's head from the ids and
statuses alone, no record sent or decoded). Both are the protocol's, each with a default a
store of one's own inherits (docs/store.md, "One end per run"): no ability found by name.
Why not a read per run at its wake: that costs every wake (the hot path: a mail's
delivery) a store read."""

from __future__ import annotations

import time
from collections.abc import Callable

from subagents.actors.end_race import as_kept
from subagents.logs import get_logger
from subagents.store.base import READ_SLICE, RunStore
from subagents.store.writes import write_all
from subagents.supervision.core import SupervisorCore
from subagents.supervision.effects import Decision, Effect
from subagents.supervision.ends_look import EndsLook

log = get_logger("subagents.supervisor")


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

    def take(self) -> list[Effect]:
        """The runs held live here whose end another writer wrote (of those due: ``look``),
        ended here as the store keeps them, in one transaction; the effects to carry out
        after. The writes failing, their waiters are told (``lost``) before the failure is
        raised (the outage's)."""
        core, store = self.core, self.store
        due = self.look.to_read(core.hosted(), time.monotonic(), store.ended_by_others())
        live = [r for r in due if core.runs.live(r) is not None]
        ended: list[str] = []
        for at in range(0, len(live), READ_SLICE):
            ended += store.ended_among(live[at : at + READ_SLICE])
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
