"""The commands other processes posted through the store, taken on the supervisor's thread
at each poll (``TakeCommands``): for the runs hosted here, and for ended runs nobody else
will take (``supervision.commands.forgotten_commands``).

Why apart from ``SupervisorActor``: what a poll asks the store is the poll's own concern
(which runs have commands pending, whose runtime is gone), not the actor's.

Why ``core.hosted()`` is read as a live view of the run table's keys, not a copy (a copy per
poll would be a set of every held run, 100,000 waiting ones included): the table changes on
the supervisor's thread alone, and the poll runs there (``PollCommands``, handled by
``SupervisorActor._question``), reading the view only before ``core.commands`` decides. The
table's other views are read on that thread too: ``Recovery.restore`` (the subscriptions of
the runs it took), ``Outage.begin`` (under ``SupervisorActor._halt``), ``core.stats``."""

from __future__ import annotations

import functools
from collections.abc import Callable

from subagents.actors.end_race import as_kept
from subagents.actors.ends_elsewhere import EndsElsewhere
from subagents.messages import RunRecord
from subagents.store.base import RunStore
from subagents.store.leases import live_owners
from subagents.store.snapshot import UNFINISHED
from subagents.store.writes import write_all
from subagents.supervision.commands import forgotten_commands
from subagents.supervision.core import SupervisorCore
from subagents.supervision.effects import Decision, Effect


class CommandPoll:
    """The supervisor's periodic look at the store (``PollCommands``): the commands other
    processes posted (``take_commands``), then the runs held live here that another writer
    ended (``actors.ends_elsewhere``), each in its own transaction."""

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
        self.ends = EndsElsewhere(core, store, lost)

    def take(self, now: float) -> list[Effect]:
        """The effects to carry out of both (the commands' first); ``now``: the runtime's
        clock (``take_commands``)."""
        effects = take_commands(self.core, self.store, now, self.lost)
        ended = self.ends.take()
        return effects + ended if ended else effects


def take_commands(
    core: SupervisorCore,
    store: RunStore,
    now: float,
    lost: Callable[[Exception, list[Effect]], None],
) -> list[Effect]:
    """Act on the commands pending: the claim commits with the writes that act on it; the
    effects to carry out after. The store is asked first which runs have commands pending:
    the claim names those, not every run held (sent to a cluster's head).

    A run another writer ended meanwhile (a stop posted for a run the poster saw live) keeps
    the store's end and its requester is told that one (``end_race.as_kept``): before, the
    refused end took the runtime through an outage. So does a run the poll's decision saves
    live (an answer, a send) that the store keeps ended: it is ended here as the store keeps
    it (``end_race.ended_here``), in the same transaction. The writes failing, the decision's
    runs' waiters are told (``lost``: ``SupervisorActor._lost``) before the failure is raised
    (the outage's): a stopped run's caller waited for ever, its end decided and lost."""
    pending = store.pending_command_runs()
    if not pending:
        return []
    hosted = core.hosted()  # a live view (read before ``core.commands``: the module's why)
    claim = [r for r in pending if r in hosted]
    alive: list[frozenset[str]] = []  # (the leases read once per poll, if asked at all)
    gone = functools.partial(_gone, store, now, alive)
    others = [r for r in pending if r not in hosted]
    claim += forgotten_commands(others, store.get_run, core.owner, gone)
    if not claim:
        return []
    decision: Decision | None = None
    try:
        with store.batch():
            decision = core.commands(store.take_commands(claim))
            writes, effects = as_kept(store, decision.writes, decision.effects, core)
            decision.effects[:] = effects
            if writes:
                write_all(store, writes)
    except Exception as exc:
        if decision is not None:  # decided (the core holds it), not written
            lost(exc, decision.effects)
        raise
    return decision.effects


def _gone(store: RunStore, now: float, alive: list[frozenset[str]], record: RunRecord) -> bool:
    """``record``'s runtime is gone (its lease is not alive at ``now``) and nothing of its
    tree is unfinished: nobody will take its commands (``forgotten_commands``). ``alive``:
    the live owners, read on the poll's first look and kept for the rest of it."""
    if not alive:
        alive.append(live_owners(store.leases(), now))
    if record.owner in alive[0]:
        return False
    return not store.list_runs(root_run_id=record.root_run_id, statuses=UNFINISHED)
