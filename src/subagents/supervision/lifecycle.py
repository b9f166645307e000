"""Lifecycle: how a run starts, goes again, and ends, exactly once.

- ``start``: a run takes its slot's turn: it is marked running, handed the mail that waited
  for it, given the checkpoint it resumes from and the answers its earlier start already had
  (``recovery``), and its deadline is armed.
- ``finish(run, end)``: the one way a run ends. Its live descendants are cancelled first (a
  run does not outlive its parent), it takes its terminal status (``transitions``), its slot
  frees, its outcome goes to its requester once (the outside, the parent's tool call, or the
  parent's mail for a background child; not to a parent ending in the same decision), its
  unread mail becomes dead letters, and queued
  runs take the freed slot.
- ``cancel``: the one cancellation walk: a subtree, deepest first.
- the endings a policy decides (``policing.PolicyBook``): over budget, a restart or a retry
  after a failure, a ``fail_parent`` child failing its parent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from subagents.messages import (
    ChildDone,
    EventKind,
    JournalEntry,
    Mail,
    Outcome,
    RunFinished,
    RunRecord,
    RunStatus,
    Usage,
)
from subagents.store.writes import OutcomeDelivered, SaveOutcome
from subagents.supervision.effects import (
    ArmDeadline,
    DisarmDeadline,
    Effects,
    ScheduleRestart,
    StartRun,
    StopAgent,
    Tell,
    TellOutside,
)
from subagents.supervision.limits import Limits
from subagents.supervision.mailroom import MailRoom
from subagents.supervision.parking import Parking
from subagents.supervision.policing import FAILURES_THAT_FAIL_PARENT, Again, PolicyBook
from subagents.supervision.requests import text_problem
from subagents.supervision.resumption import Recovered, recovered_messages
from subagents.supervision.runs import ResumeReads, RunState, RunTable
from subagents.supervision.slots import SlotPool
from subagents.supervision.transitions import Move, next_status

_STATUS_EVENT = {
    RunStatus.COMPLETED: EventKind.COMPLETED,
    RunStatus.FAILED: EventKind.FAILED,
    RunStatus.CANCELLED: EventKind.CANCELLED,
    RunStatus.TIMED_OUT: EventKind.TIMED_OUT,
    RunStatus.BUDGET_EXCEEDED: EventKind.BUDGET_EXCEEDED,
}


def usage_data(usage: Usage) -> dict[str, Any]:
    """A run's usage as an end event carries it: plain JSON data (the event is kept by the
    store and read back as JSON), every counter of ``Usage`` by name."""
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
        "cost_usd": usage.cost_usd,
        "model_calls": usage.model_calls,
    }


@dataclass(frozen=True)
class End:
    """How a run ends: the move that ends it (its terminal status is the lifecycle table's),
    its result or error; ``below``: why its live descendants are cancelled (default: its
    parent ended); ``unread``: mail its agent says it had not read."""

    move: Move
    error_kind: str | None = None
    error: str | None = None
    result: str | None = None
    below: str | None = None
    unread: Sequence[str] = ()
    typed: bool = False
    """``result`` is the JSON text of a function agent's value (``Outcome.value``)."""


class Lifecycle:
    """Starts, restarts and ends runs."""

    def __init__(
        self,
        runs: RunTable,
        effects: Effects,
        mail: MailRoom,
        policies: PolicyBook,
        slots: SlotPool,
        parking: Parking,
        clock: Callable[[], float],
        limits: Limits,
    ) -> None:
        self.parking = parking
        self.limits = limits
        self.runs = runs
        self.effects = effects
        self.mail = mail
        self.policies = policies
        self.slots = slots
        self.clock = clock
        self._ending: set[str] = set()
        """Runs whose end is being decided now (a ``finish`` or a cancel walk in progress):
        their descendants' outcomes are not handed to them (they would arrive at an agent
        that is stopping, as a tool answer nobody reads)."""

    # ---- starting --------------------------------------------------------------------------

    def start(
        self,
        state: RunState,
        mails: Sequence[Mail] = (),
        journal: Sequence[JournalEntry] = (),
        tree: Sequence[RunRecord] | None = None,
        deadline: float | None = None,
    ) -> None:
        """Start (or resume, when it has taken steps before) the run of ``state``; its
        timeout runs from now, unless ``deadline`` (the clock's) keeps an earlier one.

        For a resumed run: ``mails``, its mail so far (sent and received), ``journal``, a
        function agent's, and ``tree``, the records of its root's tree (default: those held
        in memory, or those read for it when its start had to wait for a slot: ``reads``);
        it is handed the answers its calls already got (``resumption``), so that it does not
        send or spawn again what an earlier start did."""
        if state.reads is not None:
            if not (mails or journal or tree is not None):
                mails, journal, tree = state.reads.mails, state.reads.journal, state.reads.tree
            if deadline is None:
                deadline = state.reads.deadline
            state.reads = None
        self.parking.starting(state)
        record = state.record
        state.resumes = record.started_at is not None and not state.from_scratch
        state.from_scratch = False
        state.attempt += 1
        # a run's start is its first one: a restart, a retry or a resume after its host was
        # lost keeps it, so its elapsed time counts its whole life (`subagents info`). The
        # recorded start is read before the deadline's clock, so a run never times out
        # before started_at + its timeout (the two clocks are read apart)
        first = record.started_at if record.started_at is not None else self.effects.now()
        # its first start is out of the queue; any other is a start again
        move = Move.STARTED if record.status is RunStatus.QUEUED else Move.STARTED_AGAIN
        self.runs.fire(state, move, started_at=first)
        state.deadline = self.clock() + record.deadline_s if deadline is None else deadline
        pending = self.mail.hand_over(state)
        if state.record.steps > 0:
            state.checkpoint = state.saved
        recovered: tuple[Recovered, ...] = ()
        if state.resumes:  # what the earlier start already did is not done again
            if tree is None:
                tree = self.runs.tree_records(state.record.root_run_id)
            recovered = recovered_messages(state.run_id, tree, mails, journal)
        self.effects.effects.append(ArmDeadline(state.run_id, state.deadline))
        self.effects.effects.append(
            StartRun(
                record=state.record,
                spec=state.spec,
                deadline=state.deadline,
                pending_mail=pending,
                recovered=recovered,
                checkpoint=state.checkpoint,
                attempt=state.attempt,
                ancestors=self.runs.ancestors(state),
            )
        )
        self.runs.emit(
            state, EventKind.STARTED, model=state.record.model, resumed=state.record.steps > 0
        )

    def start_queued(self) -> None:
        """Start the queued runs that fit now, in order (resumes first: a parked run given a
        slot back goes on instead)."""
        for run_id in self.slots.start_queued():
            state = self.runs.get(run_id)
            assert state is not None
            if self.parking.granted(state):
                self.start(state)

    def restart_due(
        self, run_id: str, mails: Sequence[Mail], journal: Sequence[JournalEntry]
    ) -> None:
        """The backoff of a restart or retry is over: start the run again (from its
        checkpoint when it has steps, else from its seed)."""
        state = self.runs.live(run_id)
        if state is None:
            return
        entry = self.policies.restart_due(run_id)
        if entry is None:
            return
        state.checkpoint = entry.seed
        if self.parking.restarting(state):
            self.start(state, mails, journal)
        else:  # it had parked: it starts when it gets a slot back
            state.reads = ResumeReads(mails, journal)

    def moved(
        self, run_id: str, mails: Sequence[Mail], journal: Sequence[JournalEntry], reason: str
    ) -> None:
        """The agent of ``run_id`` was lost with its host (not the run's doing, so no restart
        is counted): started again as a new attempt under its first deadline, resumed from
        what the store keeps; whatever the lost attempt still reports is discarded
        (``RunTable.reporting``).

        It goes through admission as a restart does (``Parking.restarting``): a run that
        held its slot starts at once; one that had lent it (parked) waits for a slot, ahead
        of new admissions, like any parked run wanting its slot back. Started at once
        instead, the runs parked under a tight limit would all work together, over it."""
        state = self.runs.live(run_id)
        if state is None or state.record.status not in (RunStatus.RUNNING, RunStatus.WAITING):
            return
        if self.policies.restarting(run_id):
            return  # it failed before the loss was heard of: its restart starts it, once
        self.runs.emit(
            state, EventKind.RESTARTED, attempt=state.attempt + 1, mode="moved", reason=reason
        )
        # its timeout keeps running: a move is not a new try, and must not lengthen it
        if self.parking.restarting(state):
            self.start(state, mails, journal, deadline=state.deadline)
        else:  # it had parked: it starts when it gets a slot back
            state.reads = ResumeReads(mails, journal, deadline=state.deadline)

    # ---- ending ----------------------------------------------------------------------------

    def finish(self, state: RunState, end: End) -> None:
        """Give ``state`` its one terminal status and deliver its outcome once."""
        record = state.record
        if record.status.terminal:
            return
        status = next_status(record.run_id, record.status, end.move)  # before any change
        self.runs.ended(state)
        self._ending.add(record.run_id)
        try:
            self.cancel_below(state, end.below or f"its parent {record.agent} ended ({status})")
        finally:
            self._ending.discard(record.run_id)
        outcome = Outcome(
            run_id=record.run_id,
            status=status,
            result=end.result,
            error_kind=end.error_kind,
            error=end.error,
            usage=record.usage,
            steps=record.steps,
            typed=end.typed,
        )
        self.runs.fire(state, end.move, ended_at=self.effects.now(), outcome=outcome)
        self.effects.writes.append(SaveOutcome(outcome))
        self.slots.release(record.run_id)
        self.effects.effects.append(DisarmDeadline(record.run_id))
        self.runs.emit(
            state,
            _STATUS_EVENT[status],
            error_kind=end.error_kind,
            error=end.error,
            steps=record.steps,
            tool_calls=record.tool_calls,
            usage=usage_data(record.usage),
        )
        self._deliver(state, outcome)
        self.mail.dead_letters(state, end.unread)
        self.parking.ended(state)
        self.start_queued()

    def _deliver(self, state: RunState, outcome: Outcome) -> None:
        """Hand ``outcome`` to the requester: the outside, the parent's tool call, or mail."""
        record = state.record
        parent_id = record.parent_run_id
        if parent_id is None:
            done = ChildDone(request_id=state.request_id or record.run_id, outcome=outcome)
            self.effects.effects.append(TellOutside(done))
        else:
            parent = self.runs.get(parent_id)
            if parent_id in self._ending:
                pass  # the parent is ending too: its agent stops without reading it
            elif self._fail_parent(state, outcome):
                pass  # the parent failed with this child's reason instead
            elif parent is not None and not parent.record.status.terminal:
                if record.background:
                    report = msgspec.json.encode(
                        {
                            "run_id": record.run_id,
                            "agent": record.agent,
                            "status": str(outcome.status),
                            "result": outcome.result,
                            "error": outcome.error,
                        }
                    ).decode()
                    self.mail.notify(state, parent_id, f"[background result] {report}")
                else:
                    assert state.request_id is not None
                    message = ChildDone(request_id=state.request_id, outcome=outcome)
                    self.effects.effects.append(Tell(parent_id, message))
        self.effects.writes.append(OutcomeDelivered(record.run_id))

    def cancel(self, state: RunState, reason: str) -> list[str]:
        """Cancel ``state`` and its live descendants, deepest first; the ids cancelled."""
        return self._cancel_walk(state.run_id, reason, include_top=True)

    def cancel_below(self, state: RunState, reason: str) -> None:
        """Cancel the live descendants of ``state``, deepest first."""
        if self.runs.tree.has_children(state.run_id):
            self._cancel_walk(state.run_id, reason, include_top=False)

    def _cancel_walk(self, top: str, reason: str, *, include_top: bool) -> list[str]:
        cancelled: list[str] = []
        walk = [r for r in self.runs.tree.deepest_first(top) if include_top or r != top]
        ending = set(walk) - self._ending
        self._ending |= ending
        try:
            for run_id in walk:
                target = self.runs.live(run_id)
                if target is None:
                    continue
                self.finish(target, End(Move.CANCELLED, "cancelled", reason))
                self.effects.effects.append(StopAgent(run_id))
                cancelled.append(run_id)
        finally:
            self._ending -= ending
        return cancelled

    # ---- endings a report or a timer brings ------------------------------------------------

    def finished(self, state: RunState, report: RunFinished) -> None:
        """The run's agent ended by itself: completed, or failed (unless a policy restarts
        or retries it)."""
        unread = report.unread_mail
        too_large = text_problem("the result", report.result or "", self.limits.max_text_chars)
        if report.error_kind is None and too_large is not None:
            self.finish(state, End(Move.FAILED, "bad_result", too_large, unread=unread))
        elif report.error_kind is None:
            completed = End(Move.COMPLETED, result=report.result, unread=unread, typed=report.typed)
            self.finish(state, completed)
        elif self.clock() >= state.deadline:
            # A call cut short by the deadline reports before the timer does: same cause.
            self.time_out(state, unread)
        else:
            again = self.policies.again(state, report)
            if isinstance(again, Again):
                self._go_again(state, again, report)
            else:
                self.finish(state, End(Move.FAILED, again.error_kind, again.error, unread=unread))

    def timeout(self, run_id: str) -> None:
        """The deadline of ``run_id`` passed: it times out, its descendants are cancelled."""
        state = self.runs.live(run_id)
        if state is None:
            return
        if self.clock() < state.deadline:  # re-armed meanwhile (restart)
            self.effects.effects.append(ArmDeadline(run_id, state.deadline))
            return
        self.time_out(state)

    def time_out(self, state: RunState, unread: Sequence[str] = ()) -> None:
        agent = state.record.agent
        self.finish(
            state,
            End(
                Move.TIMED_OUT,
                "timeout",
                f"{agent} ran past its {state.record.deadline_s:g} s timeout",
                below=f"its ancestor {agent} timed out",
                unread=unread,
            ),
        )
        self.effects.effects.append(StopAgent(state.run_id))

    def over_budget(self, state: RunState) -> None:
        why = self.policies.why_over(state)
        self.finish(state, End(Move.OVER_BUDGET, "budget", why, below=f"its ancestor {why}"))
        self.effects.effects.append(StopAgent(state.run_id))

    def _go_again(self, state: RunState, again: Again, report: RunFinished) -> None:
        """Restart ``state`` (from its checkpoint; its children keep running and report to
        it) or retry it (from scratch; the old attempt's children go with it), after
        ``again.delay_s``."""
        record = state.record
        if again.retry:
            self.cancel_below(state, f"its parent {record.agent} is retrying")
            self.runs.update(state, retries=again.attempt, steps=0)
            state.from_scratch = True
        else:
            self.runs.update(state, restarts=record.restarts + 1)
        self.runs.emit(
            state,
            EventKind.RESTARTED,
            attempt=again.attempt,
            mode="retry" if again.retry else "restart",
            delay_s=round(again.delay_s, 4),
            error_kind=report.error_kind,
            error=report.error,
        )
        self.effects.effects.append(ScheduleRestart(record.run_id, again.delay_s))

    def _fail_parent(self, state: RunState, outcome: Outcome) -> bool:
        """A ``fail_parent`` child failed: its parent fails with the child's reason (or goes
        again, if its own policy says so). True when the parent was failed (the child's
        outcome then goes nowhere else)."""
        record = state.record
        if record.on_failure != "fail_parent" or outcome.status not in FAILURES_THAT_FAIL_PARENT:
            return False
        parent = self.runs.live(record.parent_run_id)
        if parent is None:
            return False
        reason = f"child {record.agent} ({record.run_id}) {outcome.status}"
        if outcome.error:
            reason += f": {outcome.error}"
        report = RunFinished(run_id=parent.run_id, error_kind="child_failed", error=reason)
        again = self.policies.again(parent, report)
        if isinstance(again, Again):
            self._go_again(parent, again, report)
        else:
            self.finish(parent, End(Move.FAILED, "child_failed", again.error))
        self.effects.effects.append(StopAgent(parent.run_id))
        return True
