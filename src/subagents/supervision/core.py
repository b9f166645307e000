"""SupervisorCore: every decision the supervisor makes, as a plain single-threaded class.

The supervisor actor feeds it one message at a time; each call returns a ``Decision``: the
answer for the sender, the store writes to carry out at once, and the effects (start an
agent, tell it something, hand an outcome to the outside, arm a deadline, publish an event)
to carry out once those writes are committed. The core does no I/O: no store, no clock, no
OS. The clocks are injected; the reads it needs are given to it (a restore's snapshot, the
mail a restarted run sent, and ``read_run``: the record of a run it does not hold).

It is composed of parts, one concept each; each returns what it decides (``Decided``), which
the core alone gathers into the message's ``Effects``:

- ``runs`` (``runs.RunTable``): the runs in memory, their tree, their status changes
  (each a move looked up in the lifecycle table, ``transitions``);
- ``admission`` (``admission``): spawns admitted, queued or refused; the slots and the queue;
- ``parking`` (``parking``): waiting runs lend their slots to queued runs (no deadlock);
- ``reports`` (``reports``): a live run's reports of its work (steps, tools, journal) kept;
- ``lifecycle`` (``lifecycle``): starts, restarts, the one ``finish``, the one cancel walk;
- ``mail`` (``mailroom``): routing, delivery, receipts, dead letters;
- ``policies`` (``policy_book``): budgets, restarts, retries, ``fail_parent``;
- ``recovery`` (``recovery``): taking up what a crashed runtime left;
- ``stops`` (``stops``): a stop request decided, and its reply told to a requesting run;
- ``approvals`` (functions): a run's ask kept as a pending approval, an answer told to it.

Invariants kept here:
- a run reaches exactly one terminal status; its outcome is delivered to its requester once
  (late reports for a finished run are discarded);
- nothing is acknowledged before it is written: writes come first in every decision, and the
  actor carries out the effects only after they are committed.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Collection, Mapping, Sequence, Set

from subagents.definitions.spec import AgentSpec
from subagents.messages import (
    Command,
    EventKind,
    Journal,
    JournalEntry,
    Mail,
    MailPosted,
    MailRead,
    Parked,
    Placed,
    RunFinished,
    RunRecord,
    SendMail,
    SlotWanted,
    SpawnRequest,
    StepTaken,
    StopRequest,
    StopRequested,
    Subscribe,
    SupervisorStats,
    ToolAnswered,
    ToolCalled,
    ToolStarting,
    WaitingChanged,
)
from subagents.store.snapshot import RestoreSnapshot
from subagents.supervision import approvals
from subagents.supervision.admission import Admission, AdmissionError
from subagents.supervision.closing import close_all, ended_elsewhere, store_recovered
from subagents.supervision.commands import commanded
from subagents.supervision.continuation import Continued
from subagents.supervision.effects import Decision, Effects
from subagents.supervision.lifecycle import Lifecycle
from subagents.supervision.limits import Limits
from subagents.supervision.mailroom import MailRoom
from subagents.supervision.parking import Parking
from subagents.supervision.policy_book import PolicyBook
from subagents.supervision.progress import Progress
from subagents.supervision.recorded import Recorded
from subagents.supervision.recovery import Recovery
from subagents.supervision.reports import Reports
from subagents.supervision.requesters import Requesters
from subagents.supervision.runs import RunTable
from subagents.supervision.settling import Settling
from subagents.supervision.slots import SlotPool
from subagents.supervision.stops import Stops

__all__ = ["AdmissionError", "Decision", "SupervisorCore"]


class SupervisorCore:
    """Admission, queueing, delivery, mail routing, stops, deadlines, policies, restore."""

    def __init__(
        self,
        *,
        lookup: Callable[[str], AgentSpec | None],
        names: Callable[[], list[str]],
        read_run: Callable[[str], RunRecord | None] = lambda _run_id: None,
        limits: Limits | None = None,
        default_model: str = "sonnet",
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], float] = time.time,
        owner: str = "",
        rng: random.Random | None = None,
        runtime_mode: str | None = None,
        answered_by: str | None = None,
        published: Callable[[EventKind], bool] | None = None,
    ) -> None:
        self.limits = limits or Limits()
        self.clock = clock  # monotonic time: deadlines and restart windows
        self.owner = owner
        """The id this runtime stamps on the runs it hosts; its lease (``store.leases``)
        says whether it is alive. Given by the Runtime (``host:pid:nonce``)."""
        self.read_run = read_run
        self.effects = Effects(now)
        self.runs = RunTable()
        self.slots = SlotPool(
            global_limit=self.limits.max_concurrency,
            per_tier=self.limits.per_tier,
            queue_bound=self.limits.queue_bound,
        )
        self.policies = PolicyBook(self.runs, self.limits, clock, rng)
        self.parking = Parking(self.runs, now, self.slots, self.policies, self.limits)
        self.mail = MailRoom(self.runs, now, read_run, self.limits)
        self.lifecycle = Lifecycle(
            self.runs,
            now,
            self.mail,
            self.policies,
            self.slots,
            self.parking,
            clock,
            self.limits,
            answered_by,  # the offline model standing in for every model (RunRecord.answered_by)
        )
        self.admission = Admission(
            self.runs,
            now,
            self.lifecycle,
            self.policies,
            self.slots,
            self.parking,
            limits=self.limits,
            lookup=lookup,
            names=names,
            default_model=default_model,
            owner=owner,
            runtime_mode=runtime_mode,
        )
        self.progress = Progress(self.runs, now)
        self.reports = Reports(
            self.runs, now, self.mail, self.progress, self.policies, self.lifecycle
        )
        self.requesters = Requesters(self.runs, self.lifecycle, read_run)
        self.recorded_parts = Recorded(self.runs, self.mail, published)  # (who listens)
        self.stops = Stops(self.runs, self.lifecycle, read_run)
        self.settling = Settling(self.runs, now, self.parking, self.lifecycle, self.recorded_parts)
        topics, slot_key = self.mail.topics, self.parking.slot_key
        self.recovery = Recovery(
            self.runs, self.lifecycle, self.slots, lookup, slot_key, owner, topics
        )

    def _decided(self, reply: object = None) -> Decision:
        """The decision of the message just handled. Whatever it changed (a run queued,
        waiting, ended, parked...), a queued run whose slots only waiting runs hold gets
        them now (``parking``: no deadlock); finished trees are forgotten."""
        waiting = self.slots.waiting
        if waiting[0] or waiting[1]:  # (``queue_length``, without its three calls)
            self.effects.take(self.parking.make_room())
        if self.runs.ended_roots:  # (a spawn's decision ends nothing: no call)
            forgotten = self.runs.prune()
            if forgotten:
                self.policies.forget(forgotten)
        return self.effects.decision(reply)

    # ---- requests --------------------------------------------------------------------------

    def spawn(self, req: SpawnRequest, continued: Continued | None = None) -> Decision:
        """Admit (start or queue) or refuse a run; the reply is a ``SpawnReply``.
        ``continued``: the run ``req.continues`` names, as the store keeps it."""
        self.effects.begin()
        return self._decided(self.effects.gather(self.admission.spawn_one(req, continued)))

    def spawn_many(self, reqs: Sequence[SpawnRequest]) -> Decision:
        """Admit (start or queue) or refuse many runs in one decision, in order, each by
        the rules of ``spawn`` (one refused does not refuse the others; a run admitted
        earlier in the batch counts against the limits of the later ones). The reply is
        their ``SpawnReply``s in order. Why one decision: the actor writes it in one
        store transaction and its caller waits once, not once per run."""
        self.effects.begin()
        replies = self.effects.gather(self.admission.spawn_all(reqs))
        return self._decided(tuple(replies))

    def stop(self, req: StopRequest) -> Decision:
        """Stop a run and its subtree; a run may only stop its own descendants. The reply is
        a ``StopReply`` (also told to a requesting run)."""
        self.effects.begin()
        reply = self.effects.gather(self.stops.one(req))
        self.effects.take(self.stops.answer(req, reply))
        return self._decided(reply)

    def stop_requested(self, req: StopRequested) -> Decision:
        """Stop every live run ``req.requested_by`` requested (its children, or the roots
        for the outside), each with its subtree, with one reason, in one decision. The reply
        is a ``StopReply`` (also told to a requesting run)."""
        self.effects.begin()
        reply = self.effects.gather(self.requesters.stop(req))
        self.effects.take(self.stops.answer(req, reply))
        return self._decided(reply)

    def send_mails(self, msgs: Sequence[SendMail]) -> Decision:
        """Mail: one send, or a run of consecutive ones (mostly one sender's step). The
        reply is their ``MailAck``s in order; each sending run is also told its own."""
        self.effects.begin()
        return self._decided(self.effects.gather(self.mail.send(msgs)))

    def subscribe(self, msg: Subscribe) -> Decision:
        """A run subscribes to a topic of its tree, or unsubscribes (``topics.py``)."""
        self.effects.begin()
        reporting = self.runs.reporting(msg.run_id, msg.attempt)
        self.effects.take(self.mail.topics.decide(msg, reporting))
        return self._decided()

    def mails_posted(self, msg: MailPosted) -> Decision:
        """Mail a run took straight to its recipients, heard of after (``Recorded.posted``)."""
        self.effects.begin()
        self.effects.take(self.recorded_parts.posted(msg))  # (published only if wanted)
        return self._decided()

    def mail_reads(self, msgs: Sequence[MailRead]) -> Decision:
        """Read receipts (one, or a run of consecutive ones)."""
        self.effects.begin()
        self.effects.take(self.recorded_parts.reads(msgs))  # (each alone: ``isolated``)
        return self._decided()

    def journal(self, msg: Journal) -> Decision:
        """A function agent's journal of one handling (``Recorded.journal``)."""
        self.effects.begin()
        self.effects.take(self.recorded_parts.journal(msg))
        return self._decided()

    def recorded(self, msgs: Sequence[MailPosted | Journal | MailRead]) -> Decision:
        """Reports that only record what happened (a run of the late line's), in order, in
        one decision (``supervision/recorded.py``); the reply: a ``RecordsDecided`` (those
        whose handling failed, a bug, each with its error, left out; the others' kept)."""
        self.effects.begin()
        return self._decided(self.effects.gather(self.recorded_parts.all(msgs)))

    def settled(self, msgs: Sequence[Journal | WaitingChanged]) -> Decision:
        """Consecutive journals and waiting reports (of one ``Batch``, or of many runs held
        together: ``actors/settle_line.py``) in one decision, in order; the reply: those
        whose handling failed (a bug), each with its error, left out alone (the others'
        kept, as ``recorded``'s: one run's bug must not drop up to a hundred runs' reports)."""
        self.effects.begin()
        return self._decided(self.effects.gather(self.settling.all(msgs)))

    def stop_all(self, reason: str = "runtime closed") -> Decision:
        """Cancel every run (the runtime closes), in one pass (``closing.close_all``);
        the reply is the ids cancelled. Nothing is admitted after it."""
        self.effects.begin()
        self.admission.closing = True
        return self._decided(tuple(self.effects.gather(close_all(self.lifecycle, reason))))

    def ended_elsewhere(self, run_ids: Collection[str]) -> Decision:
        """Runs held live here that the store keeps ended by another writer (a save of one
        refused: ``actors.end_race``), ended here as any end is (``closing.ended_elsewhere``);
        their writer keeps the store's end in place of this one, and tells that one."""
        self.effects.begin()
        self.effects.take(ended_elsewhere(self.lifecycle, run_ids))
        return self._decided()

    def closing(self) -> None:
        """The runtime closes while the store fails (its runs were stopped as it failed):
        nothing is admitted after it, the store working again or not (as ``stop_all``)."""
        self.admission.closing = True

    def store_recovered(self, reason: str, unheld: Sequence[RunRecord]) -> Decision:
        """The store takes writes again after failing with ``reason`` (a full disk freed):
        every run held here, and each of ``unheld``, ends failed with the store's error
        (``closing.store_recovered``). The reply is the ids ended; then the runtime goes on."""
        self.effects.begin()
        ended, closed = store_recovered(self.lifecycle, reason, unheld, self.effects.now)
        self.effects.take(closed)
        return self._decided(tuple(ended))

    # ---- reports from agents ---------------------------------------------------------------

    def step_taken(self, msg: StepTaken) -> Decision:
        """A model call: its usage, its checkpoint, the mail it showed; over budget, stop
        (``Reports.step_taken``)."""
        self.effects.begin()
        self.effects.take(self.reports.step_taken(msg))
        return self._decided()

    def tool_answered(self, msg: ToolAnswered) -> Decision:
        """A tool result kept in the run's checkpoint (``Reports.tool_answered``)."""
        self.effects.begin()
        self.effects.take(self.reports.tool_answered(msg))
        return self._decided()

    def tool_starting(self, msg: ToolStarting) -> Decision:
        """A side-effecting call about to run, journaled; the reply: may it (``Reports``)."""
        self.effects.begin()
        self.effects.take(self.reports.tool_starting(msg))
        return self._decided(self.runs.reporting(msg.run_id, msg.attempt) is not None)

    def approval_report(self, msg: approvals.Report) -> Decision:
        """A run's ask, or its taking of an answer (``approvals.reported``)."""
        self.effects.begin()
        self.effects.take(approvals.reported(self.runs, msg, self.effects.now()))
        return self._decided()

    def tool_called(self, msg: ToolCalled) -> Decision:
        """A tool call counted on the run's record (``Reports.tool_called``)."""
        self.effects.begin()
        self.effects.take(self.reports.tool_called(msg))
        return self._decided()

    def waiting_changed(self, msg: WaitingChanged) -> Decision:
        """A run waits or works again (``settling``)."""
        self.effects.begin()
        self.effects.take(self.settling.one(msg))
        return self._decided()

    def parked(self, msg: Parked) -> Decision:
        """A run gave its slot back (``parking``): queued runs take it."""
        self.effects.begin()
        state = self.runs.reporting(msg.run_id, msg.attempt)
        parked = self.parking.parked(state) if state is not None else None
        if parked is not None:
            self.effects.take(parked)
            self.effects.take(self.lifecycle.start_queued())
        return self._decided()

    def slot_wanted(self, msg: SlotWanted) -> Decision:
        """A parked run received something: it gets a slot again, ahead of new admissions."""
        self.effects.begin()
        state = self.runs.reporting(msg.run_id, msg.attempt)
        unparked = self.parking.slot_wanted(state) if state is not None else None
        if unparked is not None:
            self.effects.take(unparked)
        return self._decided()

    def finished(self, msg: RunFinished) -> Decision:
        """An agent ended by itself. A late report for a finished run is discarded."""
        self.effects.begin()
        state = self.runs.reporting(msg.run_id, msg.attempt)
        if state is not None:
            self.effects.take(self.lifecycle.finished(state, msg))
        return self._decided()

    # ---- timers ----------------------------------------------------------------------------

    def timeout(self, run_id: str) -> Decision:
        """The deadline of ``run_id`` passed: it times out, its descendants are cancelled."""
        self.effects.begin()
        self.effects.take(self.lifecycle.timeout(run_id))
        return self._decided()

    def restart_due(
        self, run_id: str, mails: Sequence[Mail] = (), journal: Sequence[JournalEntry] = ()
    ) -> Decision:
        """The backoff of a restart is over. ``mails`` (the run's mail so far) and
        ``journal`` (a function agent's) are read from the store by the actor: a resumed run
        is handed what its earlier start already did, and does not do it again."""
        self.effects.begin()
        self.effects.take(self.lifecycle.restart_due(run_id, mails, journal))
        return self._decided()

    def host_lost(
        self,
        run_ids: Sequence[str],
        reason: str,
        reads: Mapping[str, tuple[Sequence[Mail], Sequence[JournalEntry]]],
    ) -> Decision:
        """The agents of ``run_ids`` were lost with the process that hosted them (a cluster
        node): each live one is started again, resumed from its checkpoint with the answers
        its calls already got. ``reads``: each run's mail so far and journal, read from the
        store by the actor (as for ``restart_due``)."""
        self.effects.begin()
        self.effects.take(self.lifecycle.moved_all(run_ids, reason, reads))
        return self._decided()

    def placed(self, message: Placed) -> Decision:
        """A cluster placed a run's start on a node (``Placed``): recorded, not decided."""
        self.effects.begin()
        self.effects.take(self.runs.placed(message, self.effects.now))
        return self._decided()

    # ---- the store's side: restore and commands --------------------------------------------

    def restore(self, snapshot: RestoreSnapshot, roots: Collection[str] | None = None) -> Decision:
        """Take up the orphaned runs of the store (``roots``: only these trees); the reply
        is a ``RestoreReport``."""
        self.effects.begin()
        return self._decided(self.effects.gather(self.recovery.restore(snapshot, roots)))

    def hosted(self) -> Set[str]:
        """Runs held here, whose commands the actor claims (ended ones while their tree is): a
        live view, read on the supervisor's thread before it decides (``actors.command_poll``)."""
        return self.runs.held()

    def commands(self, commands: Sequence[Command]) -> Decision:
        """Act on the stop, send and approval commands other processes posted through the
        store (``supervision.commands``: consecutive stops are one cancel walk)."""
        self.effects.begin()
        now = self.effects.now
        self.effects.take(commanded(commands, self.runs, self.lifecycle, self.mail, now))
        return self._decided()

    # ---- views -----------------------------------------------------------------------------

    def tree_records(self, run_id: str) -> tuple[RunRecord, ...]:
        """The records of ``run_id``'s tree held in memory, the freshest there are (none
        for a tree not held here): what views of a live tree lay over the store's."""
        return self.requesters.tree_records(run_id)

    def stats(self, run_id: str | None = None) -> SupervisorStats:
        """Counters for tests, tools and dashboards; with ``run_id``, what its subtree has
        spent as its budget ledger counts it."""
        return SupervisorStats(
            in_flight=self.slots.in_flight,
            peak=self.slots.peak,
            queued=self.slots.queue_length(),
            hosted=len(self.runs.hosted()),
            spent=self.policies.budgets.spent(run_id) if run_id is not None else None,
        )
