"""A restore's takeover of the orphaned runs, read, decided and committed in one transaction
of the store; decided again when the store refuses it for another writer's end.

Why a module: the takeover is the supervisor's one read-decide-write of the store (the
leases, the snapshot, the core's restore, its writes), and its failure handling is its own.

Why decided again: between the snapshot's read and the takeover's commit another writer
may end a run the restore takes up or ends (where nothing holds the read's rows: PostgreSQL,
where a stranger's end does not take the leases' locks; a cluster's store, whose batch is no
transaction across calls). The store refuses the takeover then (``AlreadyEnded``: an end is
neither written twice nor undone by a live save) with everything in it; before, that
refusal went through the store outage, as a full disk does: every live run of the runtime
stopped and recorded failed, and the runtime's start failed. Now the runs it took are let
go of (``Recovery.untake``, as for any failure: nothing of it was committed) and the
restore is read and decided again, up to ``end_race.TRIES`` times: the run ended meanwhile
is no longer unfinished in the snapshot, so its end, whoever wrote it, stands, and the rest
of the takeover goes on. Past the tries, or failing otherwise, the outage's as before.
"""

from __future__ import annotations

from collections.abc import Callable

from subagents.actors.end_race import TRIES
from subagents.logs import get_logger
from subagents.store.base import AlreadyEnded, RunStore, StoreError
from subagents.store.leases import live_owners
from subagents.store.snapshot import read_snapshot
from subagents.store.writes import write_all
from subagents.supervision.core import SupervisorCore
from subagents.supervision.effects import Decision, Effect

log = get_logger("subagents.supervisor")


def restored(
    store: RunStore,
    core: SupervisorCore,
    now: float,
    roots: frozenset[str] | None,
    lost: Callable[[Exception, list[Effect]], None],
) -> Decision:
    """The core's takeover of the orphaned runs, committed (decided again when another
    writer's end refused it: the module's why). Liveness (the leases, and which dead owners
    Ray is starting again) is read in the transaction of the takeover and handed to the core
    with the rest of the snapshot. Its writes failing (or the commit), it is rolled back
    before the failure is handled (``lost``: ``SupervisorActor._lost``): a run it records
    failed is committed on its own before its waiter is told so, not told of a record the
    rollback then removed. The store failing, the runs it took are let go of first
    (``Recovery.untake``): the store keeps them the crashed owner's."""
    for tries_left in range(TRIES - 1, -1, -1):
        decision: Decision | None = None
        try:
            with store.batch():
                decision = _taken(store, core, now, roots)
                write_all(store, decision.writes)
            return decision
        except AlreadyEnded as exc:
            if decision is None or not tries_left:
                _failed(exc, decision, core, lost)
                raise
            core.recovery.untake(decision.effects)  # (nothing of it committed: decided again)
            log.warning(
                "a restore was refused: another writer ended a run it took up; read and"
                " decided again",
                error=str(exc),
            )
        except Exception as exc:
            _failed(exc, decision, core, lost)
            raise
    raise AssertionError("unreachable: the last try returns or raises")


def _taken(
    store: RunStore, core: SupervisorCore, now: float, roots: frozenset[str] | None
) -> Decision:
    """The takeover decided on what ``store`` holds now (inside its open batch)."""
    alive = live_owners(store.leases(), now)
    counted = core.limits.max_runs_per_tree is not None  # a tree's size matters
    # a cluster's store tells which dead owners are tree hosts being restarted
    listed = getattr(store, "host_listed", None)
    snapshot = read_snapshot(store, alive, count_trees=counted, listed=listed)
    return core.restore(snapshot, roots)


def _failed(
    exc: Exception,
    decision: Decision | None,
    core: SupervisorCore,
    lost: Callable[[Exception, list[Effect]], None],
) -> None:
    """A takeover decided (the core holds it) and not written: its waiters told (``lost``),
    its runs let go of first if the store failed."""
    if decision is not None:
        effects = decision.effects
        if isinstance(exc, StoreError):  # not kept: its runs let go of
            effects = core.recovery.untake(effects)
        lost(exc, effects)
