"""Recovery: taking up the runs a crashed (or closed) runtime left unfinished.

Queued runs queue again; running and waiting runs want their slots back (ahead of the queued
runs, within the limits: a waiting one lends its slot when needed, ``parking``) and resume from
their last checkpoint (``resumption``); runs whose agent is gone fail, runs whose parent ended are
cancelled, ended runs whose outcome never reached a live requester are marked delivered. A
tree's count of admitted runs (``max_runs_per_tree``) is its records in the store.

The store is read by the actor (``store.snapshot``); the decisions here only use what it read.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

import msgspec

from subagents.definitions.spec import AgentSpec
from subagents.messages import ChildDone, RestoreReport, RunRecord, RunStatus
from subagents.store.leases import restartable_host
from subagents.store.snapshot import RestoreSnapshot, UnfinishedRun
from subagents.store.writes import OutcomeDelivered, ReleaseLease, SaveRun
from subagents.supervision.effects import Decided, Effect, TellOutside
from subagents.supervision.lifecycle import Lifecycle
from subagents.supervision.outcomes import End
from subagents.supervision.restored_spend import ended_spend
from subagents.supervision.runs import ResumeReads, RunState, RunTable
from subagents.supervision.slots import QueueFull, SlotKey, SlotPool
from subagents.supervision.topics import Topics
from subagents.supervision.transitions import Move


class Recovery:
    """Takes up a store's unfinished runs: queues the queued, resumes the running."""

    def __init__(
        self,
        runs: RunTable,
        lifecycle: Lifecycle,
        slots: SlotPool,
        lookup: Callable[[str], AgentSpec | None],
        slot_key: Callable[[AgentSpec, RunState | None], SlotKey],
        owner: str,
        topics: Topics,
    ) -> None:
        self.topics = topics
        self.runs = runs
        self.lifecycle = lifecycle
        self.slots = slots
        self.lookup = lookup
        self.slot_key = slot_key
        self.owner = owner
        self.taken: list[str] = []
        """The runs the last ``restore`` took up (held here from then on): what ``untake``
        lets go of when the store did not keep the takeover."""

    def restore(
        self, snapshot: RestoreSnapshot, roots: Collection[str] | None = None
    ) -> tuple[RestoreReport, Decided]:
        """Take up the orphaned runs of the snapshot (``roots``: only these trees).

        The trees a live runtime hosts (its lease is alive) are left to it, and so are those
        of a host being started again (``snapshot.restarting``: its new process takes them).
        Parents come before children (by depth). A run whose agent is no longer defined
        fails; a child whose parent has ended is cancelled (runs do not outlive parents), but a
        detached one (its ended ancestors are held again above it). Root
        runs come back without a caller: they are reported as orphans until someone attaches
        to them. The leases of the owners taken over are released, so that a host that was
        only stalled learns at its next renewal that it lost its runs. The report, and what
        the restore comes to."""
        report = RestoreReport()
        decided = Decided()
        me = self.owner
        self.taken = []
        restarting = self._restarting(snapshot)
        live = snapshot.live_owners | restarting
        elsewhere = {
            u.record.root_run_id
            for u in snapshot.unfinished
            if u.record.owner in live and u.record.owner != me
        }
        by_restart = {
            u.record.root_run_id for u in snapshot.unfinished if u.record.owner in restarting
        }
        self._hold_ended_ancestors(snapshot, roots, elsewhere)
        for unfinished in snapshot.unfinished:
            record = unfinished.record
            if record.run_id in self.runs:
                continue
            if roots is not None and record.root_run_id not in roots:
                continue
            if record.root_run_id in elsewhere:
                report.elsewhere.append(record.run_id)
                if record.root_run_id in by_restart:
                    report.restarting.append(record.run_id)
                continue
            if record.owner and record.owner != me and record.owner not in report.taken_from:
                report.taken_from.append(record.owner)
            # the tree's runs so far, ended ones included: its count of admitted runs (set
            # before any of them starts: a start hands the run its tree's count)
            self.runs.recount(record.root_run_id, snapshot.tree_runs.get(record.root_run_id, 0))
            decided.add(self._restore_one(unfinished, report))
        self._count_ended_spend(snapshot)
        # their topic subscriptions, before any of them starts (and publishes)
        held = self.runs.hosted()
        self.topics.restore(s for s in snapshot.subscriptions if s.run_id in held)
        # Runs that were running want their slots back first (ahead of the queued runs);
        # all start only as far as the limits allow (waiting ones park when needed).
        decided.add(self.lifecycle.start_queued())
        for ended in snapshot.undelivered:
            live_host = ended.owner in live and ended.owner != me
            if live_host or (roots is not None and ended.root_run_id not in roots):
                continue  # its live host delivers it; or a tree not asked for
            if ended.parent_run_id is None:
                report.orphans.append(ended.run_id)
            elif self.runs.live(ended.parent_run_id) is None:
                decided.writes.append(OutcomeDelivered(ended.run_id))
            # a live parent gets it through recovered messages when it resumes
        decided.writes.extend(ReleaseLease(owner) for owner in report.taken_from)
        return report, decided

    def _count_ended_spend(self, snapshot: RestoreSnapshot) -> None:
        """What the ended runs of each tree taken up spent, for its budgets (``restored_spend``):
        one walk of each tree's records, read already for its resumed runs; only of a tree
        with a budget (a budgeted run's descendants all have one: carved out of it) that
        this restore took (a run held before has its budget already, or the spend set by the
        restore that took it: walking it again kept an entry never read)."""
        trees: dict[str, Sequence[RunRecord]] = {}
        taken: set[str] | None = None  # by this restore: not a live host's, nor held before
        for unfinished in snapshot.unfinished:
            record = unfinished.record
            if not unfinished.tree or (
                record.token_budget is None and record.cost_budget_usd is None
            ):
                continue
            if taken is None:  # (built only when a budgeted tree is read: most have none)
                taken = set(self.taken)
            if record.run_id in taken:
                trees.setdefault(record.root_run_id, unfinished.tree)
        for tree in trees.values():
            self.runs.spent_before.update(ended_spend(tree, self.runs))

    def untake(self, effects: list[Effect]) -> list[Effect]:
        """The last restore's writes were not committed (the store failed): the store still
        has its runs as the crashed owner's, so they are let go of here, as if never taken
        (their slots and subscriptions too), rather than stopped and recorded failed by
        this runtime once the store works again (before: then no restore ran them again):
        a restore (this runtime's or the next one's) takes them up whole. Of the restore's
        ``effects``, those kept: not the tellings of the end of a run let go of."""
        taken, self.taken = frozenset(self.taken), []
        for run_id in taken:
            self.slots.release(run_id)
            self.topics.drop(run_id)
        self.runs.forget(taken)
        return [e for e in effects if not _tells_end_of(e, taken)]

    def _hold_ended_ancestors(
        self, snapshot: RestoreSnapshot, roots: Collection[str] | None, elsewhere: set[str]
    ) -> None:
        """Hold again, as ended, the ancestors of the detached runs that outlived them: the
        tree above a detached run stays whole (its root, the ``maxDepth`` of its ancestors,
        who gets its outcome), and is forgotten once nothing in it is live."""
        for record in snapshot.ended_ancestors:
            root = record.root_run_id
            if record.run_id in self.runs or root in elsewhere:
                continue
            if roots is not None and root not in roots:
                continue
            spec = self.lookup(record.agent) or AgentSpec(name=record.agent, description="-")
            self.runs.add(RunState(record=record, spec=spec, request_id=record.request_id))
            self.taken.append(record.run_id)
            if record.parent_run_id is None:
                self.runs.ended_roots.append(record.run_id)

    def _restarting(self, snapshot: RestoreSnapshot) -> frozenset[str]:
        """The owners being started again, treated as alive: their new process takes their
        trees up. Except this runtime's own predecessors (a restarted host's runtime, whose
        owner ends with the same host name): this is that new process."""
        mine = restartable_host(self.owner)
        return frozenset(
            o for o in snapshot.restarting if mine is None or restartable_host(o) != mine
        )

    def _restore_one(self, unfinished: UnfinishedRun, report: RestoreReport) -> Decided:
        record = unfinished.record
        spec = self.lookup(record.agent)
        parent = self.runs.get(record.parent_run_id)
        if record.owner != self.owner:
            record = msgspec.structs.replace(record, owner=self.owner)
        state = RunState(
            record=record,
            spec=spec or AgentSpec(name=record.agent, description="(missing)"),
            request_id=record.request_id,
            inbox={m.mail_id: m for m in unfinished.inbox},
            saved=unfinished.checkpoint,
            checkpoint=unfinished.checkpoint,  # (a continued run's seed before a step)
        )
        self.runs.add(state)
        self.taken.append(record.run_id)
        decided = Decided()
        if record.owner != unfinished.record.owner:  # adopted: kept as this runtime's
            decided.writes.append(SaveRun(state.record))
        if record.parent_run_id is None:
            report.orphans.append(record.run_id)
        if spec is None:
            report.failed.append(record.run_id)
            error = f"agent {record.agent!r} is no longer defined"
            return decided.add(
                self.lifecycle.finish(state, End(Move.FAILED, "unknown_agent", error))
            )
        outlives = record.detached and parent is not None  # its parent ended: it goes on
        if record.parent_run_id is not None and (
            parent is None or (parent.record.status.terminal and not outlives)
        ):
            report.cancelled.append(record.run_id)
            error = "its parent ended before the restart"
            return decided.add(
                self.lifecycle.finish(state, End(Move.CANCELLED, "cancelled", error))
            )
        key = self.slot_key(spec, parent)
        if record.status is RunStatus.QUEUED:
            # Queued again, started once every running run has its slot back (restore()).
            try:
                self.slots.enqueue(record.run_id, key)
            except QueueFull as exc:
                report.failed.append(record.run_id)
                failed = End(Move.FAILED, "queue_full", str(exc))
                return decided.add(self.lifecycle.finish(state, failed))
            report.requeued.append(record.run_id)
        else:
            # It resumes when it has a slot, ahead of the queued runs: more runs may have been
            # live than the limits allow (parked ones), and all would work at once on resume.
            reads = ResumeReads(unfinished.mails, unfinished.journal, unfinished.tree)
            if self.slots.want_back(record.run_id, key):
                decided.add(self.lifecycle.start(state, reads.mails, reads.journal, reads.tree))
            else:
                state.reads = reads
            report.resumed.append(record.run_id)
        return decided


def _tells_end_of(effect: Effect, run_ids: frozenset[str]) -> bool:
    """Whether ``effect`` tells the outside of the end of one of ``run_ids``."""
    if not isinstance(effect, TellOutside) or not isinstance(effect.message, ChildDone):
        return False
    return effect.message.outcome.run_id in run_ids
