"""Lifecycle: how a run ends, exactly once; and, through ``starts``, how it starts.

- ``start``, ``start_queued``, ``restart_due``, ``moved``: a run takes its slot's turn, or
  goes again (``starts.Starts``, composed here: an ending frees a slot, and the queued runs
  that fit start; the parts that start runs reach them through the lifecycle as before).
- ``finish(run, end)``: the one way a run ends. Its live descendants are cancelled first (a
  run does not outlive its parent, unless it was spawned ``detach``: then it goes on, and
  its outcome goes to its nearest live ancestor), the move that ends it takes it to its
  terminal status (``End.move``, looked up in the table: ``transitions``), its slot frees,
  its outcome goes to its requester once (the outside, the parent's tool call, or the
  parent's mail for a background child; not to a parent ending in the same decision), its
  unread mail becomes dead letters, and queued runs take the freed slot.
- ``cancel``: the one cancellation walk: a subtree, deepest first; the slots it frees go to
  the queue once it is over (none to a run of the tree it ends).
- the endings a policy decides (``policy_book.PolicyBook``): over budget, a restart or a retry
  after a failure, a ``fail_parent`` child failing its parent.

It fires moves (``transitions``) and never chooses a status; and it appends to no shared
collector: each method returns what it decided (``effects.Decided``: the writes and effects,
in order, with those of the parts it asks: the run table's record writes, the mail room's
hand-over, notices and dead letters, parking's unparks), which the caller gathers.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import msgspec

from subagents.messages import (
    ChildDone,
    EventKind,
    JournalEntry,
    Mail,
    Outcome,
    RunFinished,
    RunStatus,
)
from subagents.store.writes import (
    DropPreview,
    DropSubscriptions,
    OutcomeDelivered,
    SaveOutcome,
    SaveRun,
)
from subagents.supervision.effects import (
    ArmDeadline,
    Decided,
    DisarmDeadline,
    ScheduleRestart,
    StopAgent,
    Tell,
    TellOutside,
)
from subagents.supervision.isolated import each, failure_reason
from subagents.supervision.limits import Limits
from subagents.supervision.mailroom import MailRoom
from subagents.supervision.outcomes import End, background_report, end_event, outcome_of
from subagents.supervision.parking import Parking
from subagents.supervision.policy_book import FAILURES_THAT_FAIL_PARENT, Again, PolicyBook
from subagents.supervision.progress import drop_preview
from subagents.supervision.requests import text_problem
from subagents.supervision.runs import RunState, RunTable
from subagents.supervision.slots import SlotPool
from subagents.supervision.starts import Starts
from subagents.supervision.transitions import Move, next_status
from subagents.supervision.tree import Prune

_COMPLETED = Move.COMPLETED
"""Read at every run's end: named once (an enum's member read through its class costs Python
3.11's ``EnumType.__getattr__`` slot, ~1.1k instructions: ``starts``)."""


class Lifecycle:
    """Ends runs, restarts them, and (``starts``) starts them; each call returns what it
    decided."""

    def __init__(
        self,
        runs: RunTable,
        now: Callable[[], float],
        mail: MailRoom,
        policies: PolicyBook,
        slots: SlotPool,
        parking: Parking,
        clock: Callable[[], float],
        limits: Limits,
        answered_by: str | None = None,
    ) -> None:
        self.starts = Starts(runs, now, mail, policies, slots, parking, clock, answered_by)
        self.start = self.starts.start
        self.start_queued = self.starts.start_queued
        self.restart_due = self.starts.restart_due
        self.moved = self.starts.moved
        """The starts' own (``starts.Starts``), named here: the parts that start runs (the
        core, admission, recovery) hold the lifecycle, and an ending starts queued runs."""
        self.parking = parking
        self.limits = limits
        self.runs = runs
        self.now = now
        """Wall time: records and events."""
        self.mail = mail
        self.policies = policies
        self.slots = slots
        self.clock = clock
        self.ending: set[str] = set()
        """Runs whose end is being decided now (a ``finish`` or a cancel walk in progress):
        their descendants' outcomes are not handed to them (they would arrive at an agent
        that is stopping, as a tool answer nobody reads); and the slots their descendants
        free go to the queue only once none is left (``_cancel_walk``)."""

    def _event(self, decided: Decided, state: RunState, kind: EventKind, **data: Any) -> None:
        decided.event(kind, state.record, self.now(), data)

    # ---- ending ----------------------------------------------------------------------------

    def finish(self, state: RunState, end: End) -> Decided:
        """Give ``state`` its one terminal status and deliver its outcome once."""
        decided = Decided()
        record = state.record
        if record.status.terminal:
            return decided
        status = next_status(record.run_id, record.status, end.move)  # before any change
        self.runs.ended(state)
        if record.run_id in self.runs.tree.parents:  # (``has_children``, without its calls)
            self.ending.add(record.run_id)
            try:
                below = end.below or f"its parent {record.agent} ended ({status})"
                decided.add(self.cancel_below(state, below))
            finally:
                self.ending.discard(record.run_id)
        outcome = outcome_of(record, status, end)
        now = self.now()  # (its end's time: the record's and its end event's)
        writes = decided.writes
        writes.append(self.runs.fire_ended(state, status, now, outcome))
        # delivered below, in this decision: one write says both (no OutcomeDelivered after)
        writes.append(SaveOutcome(outcome, delivered=True))
        if state.preview is not None:  # (most runs end between steps)
            writes += drop_preview(state)
        self.slots.release(record.run_id)
        kind, data = end_event(record, status, end)
        decided.event(kind, state.record, now, data)
        self._hand(decided, state, outcome)
        # disarmed after (its requester wakes first): a Timeout meanwhile finds it ended
        decided.effects.append(DisarmDeadline(record.run_id))
        if state.inbox:  # the callees' own checks, made here: most runs end with none
            decided.add(self.mail.dead_letters(state, end.unread))
        if state.run_id in self.mail.topics:
            decided.add(self.mail.topics.ended(state.run_id))
        self.parking.ended(state)
        waiting = self.slots.waiting  # (``queue_length``, without its three calls)
        if (waiting[0] or waiting[1]) and not self.ending:  # (a walk's: at its end)
            decided.add(self.start_queued())
        return decided

    def deliver(self, state: RunState, outcome: Outcome) -> Decided:
        """Hand ``outcome`` to the requester (``_hand``), and say the store need not hand it
        again (``OutcomeDelivered``: for an outcome kept by a write of its own)."""
        decided = Decided()
        self._hand(decided, state, outcome)
        decided.writes.append(OutcomeDelivered(state.run_id))
        return decided

    def _hand(self, decided: Decided, state: RunState, outcome: Outcome) -> None:
        """Hand ``outcome`` to the requester: the outside, the parent's tool call, or mail;
        nobody when the parent ends in the same decision (``ending``). Added to
        ``decided`` (a run's end is on the supervisor's hot path: no ``Decided`` of its
        own to add)."""
        record = state.record
        parent_id = record.parent_run_id
        if parent_id is None:
            done = ChildDone(request_id=state.request_id or record.run_id, outcome=outcome)
            decided.effects.append(TellOutside(done))
        elif parent_id not in self.ending:  # else its agent stops without reading it
            parent = self.runs.get(parent_id)
            failed = self._fail_parent(state, outcome)
            if failed is not None:
                decided.add(failed)  # the parent failed with this child's reason instead
            elif parent is not None and not parent.record.status.terminal:
                if record.background:
                    report = background_report(record, outcome)
                    decided.add(self.mail.notify(state, parent_id, report))
                else:
                    assert state.request_id is not None
                    message = ChildDone(request_id=state.request_id, outcome=outcome)
                    decided.effects.append(Tell(parent_id, message))
            elif record.detached:
                decided.add(self._report_detached(state, outcome))

    def _report_detached(self, state: RunState, outcome: Outcome) -> Decided:
        """A detached child ended after its parent: its outcome is mailed to its nearest
        live ancestor (its parent's requester, or above), if any; the store keeps it
        either way (the outside reads it there: ``wait_any``, ``subagents wait``)."""
        for ancestor in self.runs.tree.ancestors(state.run_id):
            if ancestor in self.ending:
                return Decided()  # ending with this decision: nobody above would read it
            if self.runs.live(ancestor) is not None:
                report = background_report(state.record, outcome, "detached result")
                return self.mail.notify(state, ancestor, report)
        return Decided()

    def cancel(
        self, state: RunState, reason: str, *, tree: bool = True
    ) -> tuple[list[str], Decided]:
        """Cancel ``state`` and its live descendants, deepest first; the ids cancelled.
        ``tree`` False (a stop of its turn): its detached children (and theirs) go on."""
        return self.cancel_each([state], reason, turns=() if tree else (state.run_id,))

    def cancel_each(
        self, tops: Sequence[RunState], reason: str, turns: Collection[str] = ()
    ) -> tuple[list[str], Decided]:
        """``cancel`` each of ``tops`` (``tree`` False for those in ``turns``) in one walk."""
        pruned = [(s.run_id, self._detached if s.run_id in turns else None) for s in tops]
        return self._cancel_walk(pruned, reason, include_top=True)

    def cancel_below(self, state: RunState, reason: str) -> Decided:
        """Cancel the live descendants of ``state``, deepest first, but its detached
        children (and theirs): they outlive it."""
        if not self.runs.tree.has_children(state.run_id):
            return Decided()
        return self._cancel_walk([(state.run_id, self._detached)], reason, include_top=False)[1]

    def _detached(self, run_id: str) -> bool:
        return (held := self.runs.get(run_id)) is not None and held.record.detached

    def _cancel_walk(
        self, tops: Sequence[tuple[str, Prune]], reason: str, *, include_top: bool
    ) -> tuple[list[str], Decided]:
        decided = Decided()
        cancelled: list[str] = []
        deepest_first = self.runs.tree.deepest_first
        walk = [r for t, prune in tops for r in deepest_first(t, prune) if include_top or r != t]
        ending = set(walk) - self.ending
        self.ending |= ending
        cancelled_end = End(Move.CANCELLED, "cancelled", reason)

        def cancel_one(run_id: str) -> Decided:
            target = self.runs.live(run_id)
            if target is None:
                return Decided()
            one = self.finish(target, cancelled_end)
            one.effects.append(StopAgent(run_id))
            cancelled.append(run_id)
            return one

        def failed_one(run_id: str, exc: Exception) -> Decided | None:
            ended = self.ended_by_bug(run_id, exc)
            if ended is not None:  # the walk ended it too: its stop's reply names it
                cancelled.append(run_id)
            return ended

        try:  # a run whose cancel raises (a bug) ends failed alone (``isolated``)
            each(walk, cancel_one, decided, failed_one, self.mail.ledger)
        finally:
            self.ending -= ending
        # The slots the walk freed go to the queue now that every run it ended has left it:
        # run by run, a parked run of the tree (queued for its slot back) went on
        # (``Unpark``: its code ran, a tool called, a mail sent) or a moved one started,
        # before the walk stopped it. Not while an ending above is decided (``finish``).
        if self.slots.queue_length() and not self.ending:
            decided.add(self.start_queued())
        return cancelled, decided

    def moved_all(
        self,
        run_ids: Sequence[str],
        reason: str,
        reads: Mapping[str, tuple[Sequence[Mail], Sequence[JournalEntry]]],
    ) -> Decided:
        """``moved`` each of ``run_ids`` (the runs a lost host held), each alone: one whose
        handling raises (a bug) ends failed with the error (``isolated``)."""
        out = Decided()

        def move(run_id: str) -> Decided:
            mails, journal = reads.get(run_id, ((), ()))
            return self.moved(run_id, mails, journal, reason)

        each(run_ids, move, out, self.ended_by_bug, self.mail.ledger)
        return out

    def ended_by_bug(self, run_id: str, exc: Exception) -> Decided | None:
        """What an item of a batch that is a live run comes to when its handling raised (a
        bug: ``isolated.each``): it ends failed with the error (recorded so, its waiter told,
        its slot freed, its agent stopped), as a spawn whose admission raised once its run
        was held (``Admission._failed``): neither the store nor its waiter keeps a run the
        core has lost track of. One that the raising item had ended in memory (its end's
        writes and effects lost with it) is recorded failed so, its waiter told, its deadline
        disarmed, its unread mail dead (back in its inbox: ``inbox_ledger``), its
        subscriptions and preview dropped in the store too (as ``finish`` ends a run: it may
        have dropped them in memory before raising). None: no run by that id held (nothing
        owed)."""
        state = self.runs.get(run_id)
        if state is None:
            return None
        end = End(Move.FAILED, "supervisor", failure_reason(exc))
        if not state.record.status.terminal:
            decided = self.finish(state, end)
        else:  # memory says it ended, the store does not: written as its waiter is told
            decided, now = Decided(), self.now()
            outcome = outcome_of(state.record, RunStatus.FAILED, end)
            state.record = msgspec.structs.replace(
                state.record, status=RunStatus.FAILED, ended_at=now, outcome=outcome
            )
            decided.writes += (SaveRun(state.record), SaveOutcome(outcome, delivered=True))
            self.slots.release(run_id)
            kind, data = end_event(state.record, RunStatus.FAILED, end)
            decided.event(kind, state.record, now, data)
            self._hand(decided, state, outcome)
            decided.effects.append(DisarmDeadline(run_id))
            if state.inbox:
                decided.add(self.mail.dead_letters(state, ()))
            self.mail.topics.drop(run_id)
            state.preview = None
            decided.writes += (DropSubscriptions(run_id), DropPreview(run_id))
            self.parking.ended(state)
        decided.effects.append(StopAgent(run_id))
        return decided

    # ---- endings a report or a timer brings ------------------------------------------------

    def finished(self, state: RunState, report: RunFinished) -> Decided:
        """The run's agent ended by itself: completed, or failed (unless a policy restarts
        or retries it)."""
        unread = report.unread_mail
        result, cap = report.result or "", self.limits.max_text_chars
        too_large = None  # (an ASCII result within the cap, most: ``text_problem``'s calls saved)
        if len(result) > cap or not result.isascii():
            too_large = text_problem("the result", result, cap)
        if report.error_kind is None and too_large is not None:
            return self.finish(state, End(Move.FAILED, "bad_result", too_large, unread=unread))
        if report.error_kind is None:
            completed = End(_COMPLETED, result=report.result, unread=unread, typed=report.typed)
            return self.finish(state, completed)
        if self.clock() >= state.deadline:
            # A call cut short by the deadline reports before the timer does: same cause.
            return self.time_out(state, unread)
        again = self.policies.again(state, report)
        if isinstance(again, Again):
            return self._go_again(state, again, report)
        return self.finish(state, End(Move.FAILED, again.error_kind, again.error, unread=unread))

    def timeout(self, run_id: str) -> Decided:
        """The deadline of ``run_id`` passed: it times out, its descendants are cancelled."""
        state = self.runs.live(run_id)
        if state is None:
            return Decided()
        if self.clock() < state.deadline:  # re-armed meanwhile (restart)
            rearmed = Decided()
            rearmed.effects.append(ArmDeadline(run_id, state.deadline))
            return rearmed
        return self.time_out(state)

    def time_out(self, state: RunState, unread: Sequence[str] = ()) -> Decided:
        agent = state.record.agent
        decided = self.finish(
            state,
            End(
                Move.TIMED_OUT,
                "timeout",
                f"{agent} ran past its {state.record.deadline_s:g} s timeout",
                below=f"its ancestor {agent} timed out",
                unread=unread,
            ),
        )
        decided.effects.append(StopAgent(state.run_id))
        return decided

    def over_budget(self, state: RunState, ancestor: RunState | None = None) -> Decided:
        """``state`` spent past its budget, or (a detached run) past its ``ancestor``'s."""
        why = self.policies.why_over(ancestor or state)
        error = why if ancestor is None else f"its ancestor {why}"
        end = End(Move.OVER_BUDGET, "budget", error, below=f"its ancestor {why}")
        decided = self.finish(state, end)
        decided.effects.append(StopAgent(state.run_id))
        return decided

    def _go_again(self, state: RunState, again: Again, report: RunFinished) -> Decided:
        """Restart ``state`` (from its checkpoint; its children keep running and report to
        it) or retry it (from scratch; the old attempt's children go with it), after
        ``again.delay_s``."""
        decided = Decided()
        record = state.record
        if again.retry:
            decided.add(self.cancel_below(state, f"its parent {record.agent} is retrying"))
            decided.writes.append(self.runs.update(state, retries=again.attempt, steps=0))
            state.from_scratch = True
        else:
            decided.writes.append(self.runs.update(state, restarts=record.restarts + 1))
        self._event(
            decided,
            state,
            EventKind.RESTARTED,
            attempt=again.attempt,
            mode="retry" if again.retry else "restart",
            delay_s=round(again.delay_s, 4),
            error_kind=report.error_kind,
            error=report.error,
        )
        decided.effects.append(ScheduleRestart(record.run_id, again.delay_s))
        return decided

    def _fail_parent(self, state: RunState, outcome: Outcome) -> Decided | None:
        """A ``fail_parent`` child failed: its parent fails with the child's reason (or goes
        again, if its own policy says so); what that comes to, or None when the parent was
        not failed (the child's outcome then goes to it as usual)."""
        record = state.record
        if record.on_failure != "fail_parent" or outcome.status not in FAILURES_THAT_FAIL_PARENT:
            return None
        parent = self.runs.live(record.parent_run_id)
        if parent is None:
            return None
        reason = f"child {record.agent} ({record.run_id}) {outcome.status}"
        if outcome.error:
            reason += f": {outcome.error}"
        report = RunFinished(run_id=parent.run_id, error_kind="child_failed", error=reason)
        again = self.policies.again(parent, report)
        if isinstance(again, Again):
            decided = self._go_again(parent, again, report)
        else:
            decided = self.finish(parent, End(Move.FAILED, "child_failed", again.error))
        decided.effects.append(StopAgent(parent.run_id))
        return decided
