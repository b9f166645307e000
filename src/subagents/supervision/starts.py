"""Starts: a run takes its slot's turn, or goes again after a restart's backoff or a move.

- ``start``: a run starts (the move ``started``, or ``started_again``: running by the
  table), is handed the mail that waited for it, given the checkpoint it resumes from and
  the answers its earlier start already had (``resumption``), and its deadline is armed;
- ``start_queued``: the queued runs that fit now, in order (a parked run given its slot
  back goes on instead: ``parking``);
- ``restart_due``: the backoff of a restart or a retry is over;
- ``moved``: the agent was lost with its host, and starts again elsewhere.

Why apart from ``lifecycle``: a run's start reads the resumption's reads, the mail that
waited, its standing; its end reads the tree below it, its requester, the policies that
restart it. The two meet in one place only: an ending frees a slot, and the queued runs
that fit start (``Lifecycle.finish`` -> ``start_queued``). Like every part, each method
returns what it decided (``effects.Decided``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from subagents.messages import EventKind, JournalEntry, Mail, RunRecord, RunStatus
from subagents.supervision.effects import ArmDeadline, Decided, StartRun
from subagents.supervision.mailroom import MailRoom
from subagents.supervision.parking import Parking
from subagents.supervision.policy_book import PolicyBook
from subagents.supervision.resumption import resumed_answers
from subagents.supervision.runs import ResumeReads, RunState, RunTable
from subagents.supervision.slots import SlotPool
from subagents.supervision.transitions import Move

# Members read on every run's start, named once: ``RunStatus.QUEUED`` read through its class
# goes through ``EnumType.__getattr__``'s slot in Python 3.11 (~1.1k instructions, callgrind),
# a module's name ~0.1k.
_QUEUED, _STARTED, _STARTED_AGAIN = RunStatus.QUEUED, Move.STARTED, Move.STARTED_AGAIN
_STARTED_EVENT = EventKind.STARTED


class Starts:
    """Starts runs, and starts them again; each call returns what it decided."""

    def __init__(
        self,
        runs: RunTable,
        now: Callable[[], float],
        mail: MailRoom,
        policies: PolicyBook,
        slots: SlotPool,
        parking: Parking,
        clock: Callable[[], float],
        answered_by: str | None = None,
    ) -> None:
        self.answered_by = answered_by
        """The model answering every run whatever it asks for (the offline one), recorded
        at each start as the record's ``answered_by``; None: the model asked for answers."""
        self.runs = runs
        self.now = now
        """Wall time: records and events."""
        self.mail = mail
        self.policies = policies
        self.slots = slots
        self.parking = parking
        self.clock = clock

    def _event(self, decided: Decided, state: RunState, kind: EventKind, **data: Any) -> None:
        decided.event(kind, state.record, self.now(), data)

    def start(
        self,
        state: RunState,
        mails: Sequence[Mail] = (),
        journal: Sequence[JournalEntry] = (),
        tree: Sequence[RunRecord] | None = None,
        deadline: float | None = None,
        into: Decided | None = None,
    ) -> Decided:
        """Start (or resume, when it has taken steps before) the run of ``state``; its
        timeout runs from now, unless ``deadline`` (the clock's) keeps an earlier one.
        ``into``: the caller's ``Decided``, added to and returned (a run admitted and
        started at once: no ``Decided`` of its own made and joined to its admission's).

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
        now = self.now()  # (read once: the start's record and its event)
        first = record.started_at if record.started_at is not None else now
        # its first start is out of the queue; any other is a start again
        move = _STARTED if record.status is _QUEUED else _STARTED_AGAIN
        decided = Decided() if into is None else into
        answered = self.answered_by
        decided.writes.append(self.runs.fire_started(state, move, first, answered))
        state.deadline = self.clock() + record.deadline_s if deadline is None else deadline
        pending: tuple[Mail, ...] = ()
        if state.inbox:  # (checked here: most starts have none, and this path is hot)
            pending, handed = self.mail.hand_over(state)
            decided.add(handed)
        if state.record.steps > 0:
            state.checkpoint = state.saved
        recovered = resumed_answers(state, self.runs, mails, journal, tree) if state.resumes else ()
        decided.effects.append(
            StartRun(
                record=state.record,
                spec=state.spec,
                deadline=state.deadline,
                pending_mail=pending,
                recovered=recovered,
                checkpoint=state.checkpoint,
                attempt=state.attempt,
                standing=self.runs.standing(state),
                park_at_wait=self.slots.queued_behind(state.run_id),
            )
        )
        # armed after the start (its thread wakes meanwhile): nothing is decided in between
        decided.effects.append(ArmDeadline(state.run_id, state.deadline))
        started = {"model": state.record.model, "resumed": state.record.steps > 0}
        decided.event(_STARTED_EVENT, state.record, now, started)
        return decided

    def start_queued(self) -> Decided:
        """Start the queued runs that fit now, in order (resumes first: a parked run given a
        slot back goes on instead)."""
        decided = Decided()
        for run_id in self.slots.start_queued():
            state = self.runs.get(run_id)
            assert state is not None
            unparked = self.parking.granted(state)
            decided.add(self.start(state) if unparked is None else unparked)
        return decided

    def restart_due(
        self, run_id: str, mails: Sequence[Mail], journal: Sequence[JournalEntry]
    ) -> Decided:
        """The backoff of a restart or retry is over: start the run again (from its
        checkpoint when it has steps, else from its seed)."""
        state = self.runs.live(run_id)
        if state is None:
            return Decided()
        entry = self.policies.restart_due(run_id)
        if entry is None:
            return Decided()
        state.checkpoint = entry.seed
        if self.parking.restarting(state):
            return self.start(state, mails, journal)
        state.reads = ResumeReads(mails, journal)  # it had parked: it starts with a slot
        return Decided()

    def moved(
        self, run_id: str, mails: Sequence[Mail], journal: Sequence[JournalEntry], reason: str
    ) -> Decided:
        """The agent of ``run_id`` was lost with its host (not the run's doing, so no restart
        is counted): started again as a new attempt under its first deadline, resumed from
        what the store keeps; whatever the lost attempt still reports is discarded
        (``RunTable.reporting``).

        It goes through admission as a restart does (``Parking.restarting``): a run that
        held its slot starts at once; one that had lent it (parked) waits for a slot, ahead
        of new admissions, like any parked run wanting its slot back. Started at once
        instead, the runs parked under a tight limit would all work together, over it."""
        decided = Decided()
        state = self.runs.live(run_id)
        if state is None or state.record.status not in (RunStatus.RUNNING, RunStatus.WAITING):
            return decided
        if self.policies.restarting(run_id):
            return decided  # it failed before the loss was heard of: its restart starts it
        attempt = state.attempt + 1
        self._event(
            decided, state, EventKind.RESTARTED, attempt=attempt, mode="moved", reason=reason
        )
        # its timeout keeps running: a move is not a new try, and must not lengthen it
        if self.parking.restarting(state):
            return decided.add(self.start(state, mails, journal, deadline=state.deadline))
        # it had parked: it starts when it gets a slot back
        state.reads = ResumeReads(mails, journal, deadline=state.deadline)
        return decided
