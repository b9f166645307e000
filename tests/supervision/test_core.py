"""SupervisorCore without threads: admission, queueing, delivery, mail, stops, timeouts.

The core is fed messages directly, as the supervisor actor would; the writes of each decision
are carried out on a real MemoryStore (as the actor does), and the effects it returns are
what the actor would carry out after that.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import pytest

from subagents.definitions.spec import AgentSpec
from subagents.messages import (
    EXTERNAL_SENDER,
    Batch,
    ChildDone,
    DeliverMail,
    EventKind,
    Journal,
    JournalEntry,
    MailAck,
    MailRead,
    MailState,
    Park,
    Parked,
    Placed,
    Preview,
    RestoreReport,
    RunFinished,
    RunRecord,
    RunStatus,
    SendMail,
    SlotWanted,
    SpawnReply,
    SpawnRequest,
    StopReply,
    StopRequest,
    Streamed,
    StreamedPart,
    Unpark,
    WaitingChanged,
    new_id,
)
from subagents.store.memory import MemoryStore
from subagents.store.snapshot import read_snapshot
from subagents.store.writes import apply_writes
from subagents.supervision.admission import CLOSING
from subagents.supervision.core import Decision, SupervisorCore
from subagents.supervision.effects import (
    ArmDeadline,
    DisarmDeadline,
    Effect,
    Publish,
    ScheduleRestart,
    StartRun,
    StopAgent,
    Tell,
    TellOutside,
)
from subagents.supervision.limits import Limits

E = TypeVar("E")

TERMINAL_EVENTS = {
    EventKind.COMPLETED,
    EventKind.FAILED,
    EventKind.CANCELLED,
    EventKind.TIMED_OUT,
    EventKind.BUDGET_EXCEEDED,
}


class Clock:
    """A clock the test moves by hand (the core takes any ``() -> float``)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Driven:
    """The core as the supervisor actor drives it: each decision's writes carried out on the
    store, its reply and effects returned."""

    def __init__(self, core: SupervisorCore, store: MemoryStore) -> None:
        self.core = core
        self.store = store
        self.slots = core.slots
        self.runs = core.runs

    def _do(self, decision: Decision) -> Decision:
        with self.store.batch():
            apply_writes(self.store, decision.writes)
        return decision

    def spawn(self, req: SpawnRequest) -> tuple[SpawnReply, list[Effect]]:
        d = self._do(self.core.spawn(req))
        return d.reply, d.effects

    def stop(self, req: StopRequest) -> tuple[StopReply, list[Effect]]:
        d = self._do(self.core.stop(req))
        return d.reply, d.effects

    def send_mail(self, msg: SendMail) -> tuple[MailAck, list[Effect]]:
        d = self._do(self.core.send_mails((msg,)))
        return d.reply[0], d.effects

    def send_mails(self, msgs: Sequence[SendMail]) -> tuple[list[MailAck], list[Effect]]:
        d = self._do(self.core.send_mails(msgs))
        return d.reply, d.effects

    def mail_reads(self, msgs: Sequence[MailRead]) -> list[Effect]:
        return self._do(self.core.mail_reads(msgs)).effects

    def finished(self, msg: RunFinished) -> list[Effect]:
        return self._do(self.core.finished(msg)).effects

    def timeout(self, run_id: str) -> list[Effect]:
        return self._do(self.core.timeout(run_id)).effects

    def stop_all(self, reason: str) -> list[Effect]:
        return self._do(self.core.stop_all(reason)).effects

    def waiting_changed(self, msg: WaitingChanged) -> list[Effect]:
        return self._do(self.core.waiting_changed(msg)).effects

    def parked(self, msg: Parked) -> list[Effect]:
        return self._do(self.core.parked(msg)).effects

    def slot_wanted(self, msg: SlotWanted) -> list[Effect]:
        return self._do(self.core.slot_wanted(msg)).effects

    def host_lost(self, run_ids: Sequence[str], reason: str) -> list[Effect]:
        """As the actor does it: each run's mail and journal read for it."""
        reads = {r: (self.store.mail_for(r), self.store.journal_of(r)) for r in run_ids}
        return self._do(self.core.host_lost(run_ids, reason, reads)).effects

    def placed(self, msg: Placed) -> list[Effect]:
        return self._do(self.core.placed(msg)).effects

    def restart_due(self, run_id: str) -> list[Effect]:
        return self._do(self.core.restart_due(run_id)).effects

    def restore(self) -> tuple[RestoreReport, list[Effect]]:
        """A restore as the actor does it: the store read (nobody else alive), handed over."""
        d = self._do(self.core.restore(read_snapshot(self.store, frozenset())))
        return d.reply, d.effects


class Harness:
    def __init__(self, limits: Limits | None = None, *specs: AgentSpec) -> None:
        if not specs:
            specs = tuple(
                AgentSpec(name=n, description=f"the {n}") for n in ("lead", "worker", "critic")
            )
        self.specs = {s.name: s for s in specs}
        self.store = MemoryStore()
        self.clock = Clock()
        core = SupervisorCore(
            lookup=self.specs.get,
            names=lambda: list(self.specs),
            read_run=self.store.get_run,
            limits=limits or Limits(),
            clock=self.clock,
        )
        self.core = Driven(core, self.store)

    def spawn(self, agent: str, parent: str | None = None, **kw: Any) -> SpawnReply:
        reply, _ = self.spawn_effects(agent, parent, **kw)
        return reply

    def spawn_effects(
        self, agent: str, parent: str | None = None, **kw: Any
    ) -> tuple[SpawnReply, list[Effect]]:
        req = SpawnRequest(
            request_id=new_id("q"),
            agent=agent,
            task=f"task for {agent}",
            parent_run_id=parent,
            **kw,
        )
        return self.core.spawn(req)

    def run(self, agent: str, parent: str | None = None, **kw: Any) -> str:
        reply = self.spawn(agent, parent, **kw)
        assert reply.error is None, reply.error
        assert reply.run_id is not None
        return reply.run_id

    def mail(self, sender: str, to: str, content: str = "hi") -> MailAck:
        ack, _ = self.core.send_mail(
            SendMail(request_id=new_id("q"), sender=sender, to=to, content=content)
        )
        return ack

    def status(self, run_id: str) -> RunStatus:
        record = self.store.get_run(run_id)
        assert record is not None
        return record.status

    def unread(self, run_id: str) -> list[str]:
        state = self.core.runs.get(run_id)
        assert state is not None
        return list(state.inbox)

    def terminal_events(self, run_id: str) -> list[EventKind]:
        return [e.kind for e in self.store.events(run_id) if e.kind in TERMINAL_EVENTS]


def of(effects: list[Effect], kind: type[E]) -> list[E]:
    return [e for e in effects if isinstance(e, kind)]


def told(effects: list[Effect], run_id: str, kind: type[E]) -> list[E]:
    return [
        e.message for e in of(effects, Tell) if e.run_id == run_id and isinstance(e.message, kind)
    ]


# ---- admission ---------------------------------------------------------------------------------


def test_a_root_spawn_starts_now_records_and_arms_its_deadline() -> None:
    h = Harness(Limits(timeout_s=42.0))
    reply, effects = h.spawn_effects("lead")
    assert reply.error is None and not reply.queued
    assert reply.run_id is not None
    assert h.status(reply.run_id) is RunStatus.RUNNING
    (start,) = of(effects, StartRun)
    assert start.record.run_id == reply.run_id
    assert start.record.depth == 0 and start.record.root_run_id == reply.run_id
    assert of(effects, ArmDeadline) == [ArmDeadline(reply.run_id, h.clock.now + 42.0)]
    kinds = [p.event.kind for p in of(effects, Publish)]
    assert kinds == [EventKind.SPAWNED, EventKind.STARTED]
    assert [e.kind for e in h.store.events(reply.run_id)] == kinds


def test_nothing_is_admitted_once_the_runtime_closes() -> None:
    """A spawn that reaches the supervisor after the close's ``stop_all`` (told by a thread
    that passed the runtime's open check before the close) is refused, its refusal told to
    the outside: admitted, its run started after the close and stayed unfinished in the
    store (tests/runtime/test_spawn_told_close.py)."""
    h = Harness()
    root = h.run("lead")
    h.core.stop_all("runtime closed")
    reply, effects = h.spawn_effects("lead")
    assert reply.run_id is None and reply.error == CLOSING
    assert of(effects, TellOutside) == [TellOutside(reply)]
    assert of(effects, StartRun) == []
    decision = h.core._do(
        h.core.core.spawn_many([SpawnRequest(request_id="q", agent="lead", task="t")])
    )
    assert [r.error for r in decision.reply] == [CLOSING]
    assert [r.run_id for r in h.store.list_runs()] == [root]


def test_unknown_agent_is_refused_listing_the_known_agents() -> None:
    h = Harness()
    reply = h.spawn("nobody")
    assert reply.run_id is None
    assert reply.error == "unknown agent 'nobody'; known agents: critic, lead, worker"
    assert h.store.list_runs() == []


def test_admission_order_unknown_then_rules_then_depth_then_queue() -> None:
    limits = Limits(max_depth=1, max_children=1, max_concurrency=2, queue_bound=1)
    h = Harness(limits)
    root = h.run("lead")
    child = h.run("worker", root)  # depth 1 = the depth limit; root now at maxChildren
    assert h.spawn("lead").queued  # both slots taken: the queue (bound 1) is now full
    # child is at the depth limit and the queue is full: the unknown agent is named first
    assert "unknown agent 'ghost'" in (h.spawn("ghost", child).error or "")
    # a spawn rule before depth: no self-spawn without allowSelfSpawn
    error = h.spawn("worker", child).error or ""
    assert error.startswith("spawn rule: worker may not spawn itself"), error
    # depth before the queue bound
    error = h.spawn("critic", child).error or ""
    assert error.startswith("depth limit: a child of worker would be at depth 2, the limit is 1")
    # maxChildren does not refuse: it queues, so only the queue bound says no here
    error = h.spawn("critic", root).error or ""
    assert error.startswith("queue bound: the admission queue is full (1 runs waiting)")
    assert "raise Limits(queue_bound=...)" in error
    assert "unknown agent" in (h.spawn("ghost", root).error or "")


def test_definition_limits_tighten_the_runtime_limits() -> None:
    lead = AgentSpec(name="lead", description="d", max_children=1)
    worker = AgentSpec(name="worker", description="d", max_depth=0)
    h = Harness(Limits(max_depth=3, max_children=5), lead, worker)
    root = h.run("lead")
    child = h.run("worker", root)
    second = h.spawn("worker", root)  # the lead's maxChildren 1: queued, not refused
    assert second.error is None and second.queued
    # the worker's maxDepth 0: it may not spawn at all
    error = h.spawn("lead", child).error or ""
    assert error.startswith("depth limit: a child of worker would be at depth 2, the limit is 1")
    # the first child ends: the second takes its place under the lead
    effects = h.core.finished(RunFinished(run_id=child, result="ok"))
    assert [s.record.run_id for s in of(effects, StartRun)] == [second.run_id]


def test_a_refusal_is_told_to_the_requesting_run() -> None:
    h = Harness()
    root = h.run("lead")
    reply, effects = h.spawn_effects("ghost", root)
    assert told(effects, root, SpawnReply) == [reply]
    assert reply.error is not None


def test_queued_runs_start_in_fifo_order_when_slots_free() -> None:
    h = Harness(Limits(max_concurrency=1))
    first = h.run("lead")
    second_reply, effects = h.spawn_effects("worker")
    third = h.run("critic")
    assert second_reply.queued and second_reply.run_id is not None
    assert EventKind.QUEUED in [p.event.kind for p in of(effects, Publish)]
    assert of(effects, StartRun) == []
    assert h.status(second_reply.run_id) is RunStatus.QUEUED
    effects = h.core.finished(RunFinished(run_id=first, result="ok"))
    assert [s.record.run_id for s in of(effects, StartRun)] == [second_reply.run_id]
    assert h.status(third) is RunStatus.QUEUED
    effects = h.core.finished(RunFinished(run_id=second_reply.run_id, result="ok"))
    assert [s.record.run_id for s in of(effects, StartRun)] == [third]
    assert h.core.slots.peak == 1


# ---- exactly once ------------------------------------------------------------------------------


def test_a_root_outcome_is_delivered_once_and_late_reports_are_discarded() -> None:
    h = Harness()
    root = h.run("lead")
    effects = h.core.finished(RunFinished(run_id=root, result="done"))
    (deliver,) = of(effects, TellOutside)
    assert isinstance(deliver.message, ChildDone)
    outcome = deliver.message.outcome
    assert outcome.status is RunStatus.COMPLETED and outcome.result == "done"
    assert of(effects, DisarmDeadline) == [DisarmDeadline(root)]
    assert h.core.finished(RunFinished(run_id=root, error_kind="crash", error="late")) == []
    assert h.core.timeout(root) == []
    reply, effects = h.core.stop(StopRequest(request_id="s", run_id=root))
    assert reply.error is not None and "already ended" in reply.error
    assert of(effects, TellOutside) == []
    assert h.status(root) is RunStatus.COMPLETED
    assert h.terminal_events(root) == [EventKind.COMPLETED]
    assert h.store.undelivered_outcomes() == []


def test_a_foreground_child_outcome_goes_to_its_parent_once() -> None:
    h = Harness()
    root = h.run("lead")
    spawn = SpawnRequest(request_id="call-1", agent="worker", task="t", parent_run_id=root)
    reply, _ = h.core.spawn(spawn)
    assert reply.run_id is not None
    effects = h.core.finished(RunFinished(run_id=reply.run_id, error_kind="boom", error="bad"))
    (done,) = told(effects, root, ChildDone)
    assert done.request_id == "call-1"
    assert done.outcome.status is RunStatus.FAILED and done.outcome.error == "bad"
    assert of(effects, TellOutside) == []
    assert h.core.finished(RunFinished(run_id=reply.run_id, result="again")) == []
    assert h.terminal_events(reply.run_id) == [EventKind.FAILED]


def test_a_background_child_outcome_arrives_as_mail() -> None:
    h = Harness()
    root = h.run("lead")
    child = h.run("worker", root, background=True)
    effects = h.core.finished(RunFinished(run_id=child, result="bg done"))
    assert told(effects, root, ChildDone) == []
    (delivered,) = told(effects, root, DeliverMail)
    (mail,) = delivered.mails
    assert mail.sender == child
    assert mail.content.startswith("[background result]")
    assert '"result":"bg done"' in mail.content


def test_a_parent_that_ends_cancels_what_it_left_running() -> None:
    h = Harness()
    root = h.run("lead")
    child = h.run("worker", root)
    grandchild = h.run("critic", child)
    effects = h.core.finished(RunFinished(run_id=root, result="early"))
    assert h.status(root) is RunStatus.COMPLETED
    assert h.status(child) is RunStatus.CANCELLED
    assert h.status(grandchild) is RunStatus.CANCELLED
    assert [s.run_id for s in of(effects, StopAgent)] == [grandchild, child]
    assert len(of(effects, TellOutside)) == 1
    # the cancelled descendants' outcomes go to nobody: their requesters are ending too
    assert told(effects, root, ChildDone) == [] and told(effects, child, ChildDone) == []


# ---- mail --------------------------------------------------------------------------------------


def test_mail_by_id_is_recorded_and_delivered() -> None:
    h = Harness()
    root = h.run("lead")
    child = h.run("worker", root)
    ack, effects = h.core.send_mail(
        SendMail(request_id="m1", sender=child, to=root, content="hello", reply_to="x")
    )
    assert ack.error is None and ack.recipient == root and ack.mail_id is not None
    (delivered,) = told(effects, root, DeliverMail)
    (mail,) = delivered.mails
    assert mail.content == "hello"
    assert mail.sender_agent == "worker"
    assert mail.reply_to == "x"
    assert told(effects, child, MailAck) == [ack]  # the sender hears back
    (stored,) = [m for m in h.store.mail_for(root) if m.mail_id == ack.mail_id]
    assert stored.state is MailState.DELIVERED
    kinds = {p.event.kind for p in of(effects, Publish)}
    assert kinds == {EventKind.MAIL_SENT, EventKind.MAIL_DELIVERED}


def test_mail_by_agent_name_within_the_tree() -> None:
    h = Harness()
    root = h.run("lead")
    worker = h.run("worker", root)
    critic = h.run("critic", root)
    ack = h.mail(worker, "critic")
    assert ack.error is None and ack.recipient == critic
    ack = h.mail(critic, "lead")
    assert ack.recipient == root


def test_mail_to_an_ambiguous_name_lists_the_candidates() -> None:
    h = Harness()
    root = h.run("lead")
    w1 = h.run("worker", root)
    w2 = h.run("worker", root)
    ack = h.mail(root, "worker")
    assert ack.mail_id is None
    assert ack.error is not None
    assert "'worker' is ambiguous" in ack.error
    assert w1 in ack.error and w2 in ack.error


def test_mail_to_an_unknown_name_lists_the_candidates() -> None:
    h = Harness()
    root = h.run("lead")
    worker = h.run("worker", root)
    other_tree = h.run("critic")
    ack = h.mail(worker, "critic")
    assert ack.error is not None
    assert ack.error.startswith("no run named 'critic' in this tree; candidates:")
    assert f"lead ({root})" in ack.error
    assert other_tree not in ack.error  # names never reach into another tree


def test_mail_across_root_trees_is_refused() -> None:
    h = Harness()
    root_a = h.run("lead")
    root_b = h.run("lead")
    child_b = h.run("worker", root_b)
    ack = h.mail(root_a, child_b)
    assert ack.mail_id is None
    assert ack.error is not None and "belongs to another tree" in ack.error
    assert h.store.mail_for(child_b) == []


def test_mail_to_oneself_and_to_nobody_is_refused() -> None:
    h = Harness()
    root = h.run("lead")
    assert "cannot send mail to itself" in (h.mail(root, root).error or "")
    assert h.mail(root, "  ").error == "no recipient given"
    assert "no run with id 'rX'" in (h.mail(EXTERNAL_SENDER, "rX").error or "")


def test_mail_to_a_finished_run_is_a_dead_letter_the_sender_hears_about() -> None:
    h = Harness()
    root = h.run("lead")
    done = h.run("worker", root)
    h.core.finished(RunFinished(run_id=done, result="ok"))
    ack, effects = h.core.send_mail(
        SendMail(request_id="m", sender=root, to=done, content="too late")
    )
    assert ack.dead_letter
    assert ack.error is not None and "already ended (completed)" in ack.error
    assert told(effects, root, MailAck) == [ack]
    (mail,) = [m for m in h.store.mail_for(done) if m.mail_id == ack.mail_id]
    assert mail.state is MailState.DEAD
    assert [e.kind for e in h.store.events(root)].count(EventKind.DEAD_LETTER) == 1
    # by name: the finished worker is still found, and it is a dead letter too
    assert h.mail(root, "worker").dead_letter


def test_mail_to_a_queued_run_is_delivered_when_it_starts() -> None:
    h = Harness(Limits(max_concurrency=1))
    first = h.run("lead")
    queued = h.run("worker")
    ack = h.mail(EXTERNAL_SENDER, queued, "for later")
    assert ack.error is None
    effects = h.core.finished(RunFinished(run_id=first, result="ok"))
    (start,) = of(effects, StartRun)
    assert [m.content for m in start.pending_mail] == ["for later"]
    delivered = [p.event for p in of(effects, Publish) if p.event.kind is EventKind.MAIL_DELIVERED]
    assert [(e.run_id, e.data["mail_id"]) for e in delivered] == [(queued, ack.mail_id)]


def test_send_mails_answers_each_mail_and_delivers_once_per_recipient() -> None:
    h = Harness(Limits(max_concurrency=3))
    root = h.run("lead")
    worker = h.run("worker", root)
    ended = h.run("critic", root)
    h.core.finished(RunFinished(run_id=ended, result="ok"))
    critic = h.run("critic", root)
    queued = h.run("worker", root)
    assert h.status(queued) is RunStatus.QUEUED
    sends = [
        (worker, "a"),
        ("nobody", "lost"),
        (ended, "too late"),
        (queued, "for later"),
        (critic, "b"),
        (worker, "c"),
        ("critic", "d"),  # by name: the one live critic
    ]
    msgs = [
        SendMail(request_id=f"q{i}", sender=root, to=to, content=content)
        for i, (to, content) in enumerate(sends)
    ]
    acks, effects = h.core.send_mails(msgs)

    assert [a.request_id for a in acks] == [m.request_id for m in msgs]  # in order
    assert [a.recipient for a in acks] == [worker, None, ended, queued, critic, worker, critic]
    assert acks[1].error is not None and "no run named 'nobody'" in acks[1].error
    assert acks[2].dead_letter and "already ended" in (acks[2].error or "")
    assert [a.error for i, a in enumerate(acks) if i not in (1, 2)] == [None] * 5
    # the sender hears once, every answer in order
    (answers,) = told(effects, root, Batch)
    assert list(answers.messages) == acks
    # one delivery per live recipient, its mails in order; none to the queued run
    (to_worker,) = told(effects, worker, DeliverMail)
    (to_critic,) = told(effects, critic, DeliverMail)
    assert [m.content for m in to_worker.mails] == ["a", "c"]
    assert [m.content for m in to_critic.mails] == ["b", "d"]
    assert {m.state for m in (*to_worker.mails, *to_critic.mails)} == {MailState.DELIVERED}
    assert [t for t in of(effects, Tell) if t.run_id in (queued, ended)] == []
    # events: one mail_sent per recipient, one mail_delivered per live recipient, a
    # dead letter per dead mail; one mail keeps the per-mail shape
    events = [p.event for p in of(effects, Publish)]
    sent = [e for e in events if e.kind is EventKind.MAIL_SENT]
    assert [(e.run_id, e.data["recipient"]) for e in sent] == [
        (root, worker),
        (root, queued),
        (root, critic),
    ]
    assert sent[0].data == {
        "mail_id": acks[0].mail_id,
        "mail_ids": [acks[0].mail_id, acks[5].mail_id],
        "count": 2,
        "recipient": worker,
    }
    assert sent[1].data == {"mail_id": acks[3].mail_id, "recipient": queued}
    delivered = [e for e in events if e.kind is EventKind.MAIL_DELIVERED]
    assert [(e.run_id, e.data["sender"], e.data["mail_ids"]) for e in delivered] == [
        (worker, root, [acks[0].mail_id, acks[5].mail_id]),
        (critic, root, [acks[4].mail_id, acks[6].mail_id]),
    ]
    (dead,) = [e for e in events if e.kind is EventKind.DEAD_LETTER]
    assert dead.run_id == root and dead.data == {"mail_id": acks[2].mail_id, "recipient": ended}
    # recorded: the dead letter as dead, the queued run's mail waiting for its start
    stored = {m.mail_id: m.state for m in h.store.mail_for(root)}
    assert stored == {
        acks[0].mail_id: MailState.DELIVERED,
        acks[2].mail_id: MailState.DEAD,
        acks[3].mail_id: MailState.ACCEPTED,
        acks[4].mail_id: MailState.DELIVERED,
        acks[5].mail_id: MailState.DELIVERED,
        acks[6].mail_id: MailState.DELIVERED,
    }
    # ... and the queued run gets it when it starts
    effects = h.core.finished(RunFinished(run_id=worker, result="ok"))
    (start,) = of(effects, StartRun)
    assert start.record.run_id == queued
    assert [m.content for m in start.pending_mail] == ["for later"]


def test_send_mails_from_a_run_that_is_not_running_fails_each_mail() -> None:
    h = Harness()
    root = h.run("lead")
    worker = h.run("worker", root)
    h.core.finished(RunFinished(run_id=worker, result="ok"))
    msgs = [SendMail(request_id=f"q{i}", sender=worker, to=root, content="x") for i in range(3)]
    acks, effects = h.core.send_mails(msgs)
    assert [a.error for a in acks] == [f"run {worker} is not running"] * 3
    assert of(effects, Publish) == []
    assert [m for m in h.store.mail_for(root) if m.sender == worker] == []


def test_send_mails_fails_a_mail_with_a_wrong_field_type_alone() -> None:
    h = Harness()
    root = h.run("lead")
    worker = h.run("worker", root)
    bad = SendMail(request_id="q1", sender=root, to=worker, content=42)
    good = SendMail(request_id="q2", sender=root, to=worker, content="fine")
    acks, effects = h.core.send_mails([bad, good])
    assert acks[0].error == "to and content must be strings, got str and int"
    assert acks[1].error is None
    (delivered,) = told(effects, worker, DeliverMail)
    assert [m.content for m in delivered.mails] == ["fine"]


def test_mail_reads_mark_every_mail_read_in_one_call() -> None:
    h = Harness()
    root = h.run("lead")
    worker = h.run("worker", root)
    acks, _ = h.core.send_mails(
        [SendMail(request_id=f"q{i}", sender=root, to=worker, content=str(i)) for i in range(3)]
    )
    ids = tuple(str(a.mail_id) for a in acks)
    assert set(h.unread(worker)) == set(ids)
    h.core.mail_reads(
        [
            MailRead(run_id=worker, mail_ids=ids[:2]),
            MailRead(run_id=worker, mail_ids=ids[2:]),
        ]
    )
    assert h.unread(worker) == []
    assert {m.state for m in h.store.mail_for(worker)} == {MailState.READ}


def test_unread_mail_at_the_end_becomes_a_dead_letter_notice_to_its_sender() -> None:
    h = Harness()
    root = h.run("lead")
    worker = h.run("worker", root)
    critic = h.run("critic", root)
    ack = h.mail(worker, critic, "please read")
    effects = h.core.finished(RunFinished(run_id=critic, result="ignored it"))
    (notice,) = told(effects, worker, DeliverMail)
    (mail,) = notice.mails
    assert mail.content.startswith("[dead letter]")
    assert str(ack.mail_id) in mail.content
    (mail,) = [m for m in h.store.mail_for(critic) if m.mail_id == ack.mail_id]
    assert mail.state is MailState.DEAD


# ---- stops -------------------------------------------------------------------------------------


def _stop(h: Harness, run_id: str, requester: str | None) -> tuple[StopReply, list[Effect]]:
    return h.core.stop(StopRequest(request_id=new_id("x"), run_id=run_id, requester=requester))


def test_a_run_may_stop_only_its_own_descendants() -> None:
    h = Harness()
    root = h.run("lead")
    a = h.run("worker", root)
    b = h.run("critic", root)
    a1 = h.run("critic", a)
    for target, requester in ((b, a), (root, a), (a, a), (a1, b)):
        reply, effects = _stop(h, target, requester)
        assert reply.error is not None and "only stop its own descendants" in reply.error
        assert told(effects, requester, StopReply) == [reply]
        assert h.status(target) is RunStatus.RUNNING
    reply, _ = _stop(h, a1, root)  # a grandchild is a descendant
    assert reply.error is None and reply.stopped == (a1,)
    assert h.status(a1) is RunStatus.CANCELLED


def test_stop_cancels_the_subtree_deepest_first_each_reported_once() -> None:
    h = Harness()
    root = h.run("lead")
    a = h.run("worker", root)
    a1 = h.run("critic", a)
    a2 = h.run("critic", a)
    a1x = h.run("worker", a1)
    reply, effects = _stop(h, a, None)  # from the outside
    assert reply.error is None
    order = [s.run_id for s in of(effects, StopAgent)]
    assert set(order) == {a, a1, a2, a1x}
    assert order.index(a1x) < order.index(a1) < order.index(a)
    assert order.index(a2) < order.index(a)
    for run in (a, a1, a2, a1x):
        assert h.status(run) is RunStatus.CANCELLED
        assert h.terminal_events(run) == [EventKind.CANCELLED]
    # a's outcome goes to the root (its requester); a1, a2 and a1x end with a and a1: their
    # outcomes are not handed to agents that are stopping
    assert [d.outcome.run_id for d in told(effects, root, ChildDone)] == [a]
    for ending in (a, a1, a2, a1x):
        assert told(effects, ending, ChildDone) == []
    assert h.status(root) is RunStatus.RUNNING
    again, _ = _stop(h, a, None)
    assert again.error is not None and "already ended (cancelled)" in again.error


def test_stopping_an_unknown_run_names_it() -> None:
    h = Harness()
    reply, _ = _stop(h, "r-missing", None)
    assert reply.error == "no run with id 'r-missing'"


# ---- timeouts ----------------------------------------------------------------------------------


def test_a_timeout_before_the_deadline_re_arms() -> None:
    h = Harness(Limits(timeout_s=10.0))
    root = h.run("lead")
    h.clock.now += 5
    effects = h.core.timeout(root)
    assert of(effects, ArmDeadline) == [ArmDeadline(root, 1010.0)]
    assert h.status(root) is RunStatus.RUNNING


def test_a_timeout_times_out_the_run_and_cancels_its_subtree() -> None:
    h = Harness(Limits(timeout_s=10.0))
    root = h.run("lead")
    child = h.run("worker", root, timeout=5.0)
    grandchild = h.run("critic", child)
    sibling_tree = h.run("lead")
    h.clock.now += 6
    effects = h.core.timeout(child)
    assert h.status(child) is RunStatus.TIMED_OUT
    assert h.status(grandchild) is RunStatus.CANCELLED
    assert h.status(root) is RunStatus.RUNNING
    assert h.status(sibling_tree) is RunStatus.RUNNING
    (done,) = told(effects, root, ChildDone)
    assert done.outcome.status is RunStatus.TIMED_OUT
    assert told(effects, child, ChildDone) == []  # the grandchild's: child is ending
    assert done.outcome.error_kind == "timeout"
    assert [s.run_id for s in of(effects, StopAgent)] == [grandchild, child]
    assert h.terminal_events(child) == [EventKind.TIMED_OUT]
    assert h.terminal_events(grandchild) == [EventKind.CANCELLED]
    assert h.core.timeout(child) == []


def test_a_timeout_asked_above_the_maximum_is_refused_a_definitions_is_capped() -> None:
    patient = AgentSpec(name="patient", description="d", timeout=600.0)
    h = Harness(Limits(timeout_s=30.0, max_timeout_s=60.0), patient)
    reply = h.spawn("patient", timeout=10_000.0)
    assert reply.run_id is None
    assert reply.error == "timeout 10000 s is above the maximum of 60 s (Limits.max_timeout_s)"
    root = h.run("patient")  # the definition asks for 600 s: the runtime's maximum applies
    record = h.store.get_run(root)
    assert record is not None and record.deadline_s == 60.0


@pytest.mark.parametrize("reason", ["runtime closed", "shutdown"])
def test_stop_all_cancels_every_live_run_once(reason: str) -> None:
    h = Harness(Limits(max_concurrency=2))
    root = h.run("lead")
    child = h.run("worker", root)
    queued = h.run("critic")
    effects = h.core.stop_all(reason)
    for run in (root, child, queued):
        assert h.status(run) is RunStatus.CANCELLED
        assert h.terminal_events(run) == [EventKind.CANCELLED]
    done = [d.message for d in of(effects, TellOutside)]
    assert {d.outcome.run_id for d in done if isinstance(d, ChildDone)} == {root, queued}
    assert of(effects, StartRun) == []  # nothing queued starts while everything stops


def test_once_the_store_works_again_each_run_held_ends_failed_as_told() -> None:
    h = Harness(Limits(max_concurrency=2))
    root = h.run("lead")
    child = h.run("worker", root)
    queued = h.run("critic")
    # a run the store still has unfinished under this runtime, whose end (in the transaction
    # that failed) the core forgot
    unheld = RunRecord(
        run_id="r-unheld", agent="worker", task="t", root_run_id="r-unheld",
        status=RunStatus.RUNNING, owner="me",
    )  # fmt: skip
    reason = "the run store failed: disk full"
    decision = h.core.core.store_recovered(reason, [unheld])
    h.core._do(decision)
    assert decision.reply == (queued, child, root, "r-unheld")
    for run in (root, child, queued, "r-unheld"):
        assert h.status(run) is RunStatus.FAILED
        assert h.terminal_events(run) == [EventKind.FAILED]
        record = h.store.get_run(run)
        assert record is not None and record.outcome is not None
        assert (record.outcome.error_kind, record.outcome.error) == ("store", reason)
    assert of(decision.effects, StartRun) == []
    # the runtime goes on: no deadline stays armed to fire into nothing later
    assert {e.run_id for e in of(decision.effects, DisarmDeadline)} == {root, child, queued}
    assert h.core.core.hosted() == set()  # nothing held: new work is admitted
    assert h.run("lead") is not None


@pytest.mark.parametrize("how", ["the runtime closes", "the store works again"])
def test_a_run_ended_in_the_middle_of_a_step_leaves_no_preview(how: str) -> None:
    """As a cancel does (``Lifecycle.finish``), ending every run at once drops the preview
    of a step under way (and an unheld run's, which the store may keep)."""
    h = Harness()
    root = h.run("lead")
    child = h.run("worker", root)
    part = StreamedPart(kind="text", text="half a sent")
    for run in (root, child):
        h.core._do(
            h.core.core.progress.streamed(
                Streamed(run_id=run, turn=1, seq=1, attempt=0, parts=(part,))
            )
        )
    unheld = RunRecord(run_id="r-unheld", agent="worker", task="t", root_run_id="r-unheld",
                       status=RunStatus.RUNNING, owner="me")  # fmt: skip
    h.store.save_preview(Preview(run_id="r-unheld", turn=1, text="x", chars=1, seq=1, ts=1.0))
    assert set(h.store.previews([root, child, "r-unheld"])) == {root, child, "r-unheld"}
    if how == "the runtime closes":
        effects = h.core.stop_all("runtime closed")
        assert of(effects, DisarmDeadline) == []  # (the timer service stops with it)
    else:
        h.core._do(h.core.core.store_recovered("disk full", [unheld]))
    kept = h.store.previews([root, child, "r-unheld"])
    assert set(kept) == ({"r-unheld"} if how == "the runtime closes" else set())


@pytest.mark.parametrize("timeout", [0.0, -1.0, float("nan"), float("inf")])
def test_a_spawn_with_a_bad_timeout_is_refused_naming_it(timeout: float) -> None:
    h = Harness()
    reply = h.spawn("lead", timeout=timeout)
    assert reply.run_id is None
    assert reply.error == f"timeout must be a positive number of seconds, got {timeout!r}"
    assert h.store.list_runs() == []


def test_model_resolution_override_then_definition_then_inherit_then_default() -> None:
    specs = (
        AgentSpec(name="lead", description="d", model="opus"),
        AgentSpec(name="pinned", description="d", model="haiku"),
        AgentSpec(name="inheritor", description="d", model="inherit"),
        AgentSpec(name="silent", description="d"),
    )
    h = Harness(None, *specs)
    root = h.run("lead")

    def model_of(run_id: str) -> str | None:
        record = h.store.get_run(run_id)
        assert record is not None
        return record.model

    assert model_of(root) == "opus"
    assert model_of(h.run("pinned", root)) == "haiku"
    assert model_of(h.run("pinned", root, model="fable")) == "fable"
    assert model_of(h.run("inheritor", root)) == "opus"
    assert model_of(h.run("silent", root)) == "opus"
    assert model_of(h.run("silent")) == "sonnet"  # a root with nothing said: the default
    assert model_of(h.run("inheritor")) == "sonnet"


def test_mail_to_a_name_of_several_finished_runs_says_so() -> None:
    h = Harness()
    root = h.run("lead")
    w1 = h.run("worker", root)
    w2 = h.run("worker", root)
    for run in (w1, w2):
        h.core.finished(RunFinished(run_id=run, result="ok"))
    ack = h.mail(root, "worker")
    assert ack.mail_id is None and ack.error is not None
    assert ack.error.startswith("'worker' is ambiguous: no live run, several that ended:")
    assert w1 in ack.error and w2 in ack.error
    # one live among finished ones: the live one is meant
    w3 = h.run("worker", root)
    assert h.mail(root, "worker").recipient == w3


# ---- parking: a waiting run lends its slot to a queued run --------------------------------------


def waiting(h: Harness, run_id: str) -> list[Effect]:
    return h.core.waiting_changed(WaitingChanged(run_id=run_id, waiting=True))


def test_a_batchs_journal_and_waiting_are_one_decision_that_does_what_the_two_did() -> None:
    """``settled``: a function agent's handling that ends in a ``receive`` reports its
    journal, then that it waits, in one ``Batch``; the actor decides them together. The one
    decision writes and does what the two did, in their order."""
    kinds = []
    for together in (True, False):
        h = Harness()
        run = h.run("lead")
        entry = JournalEntry(request_id=f"{run}:0", kind="receive", call="receive()")
        reports = (
            Journal(run_id=run, entries=(entry,), attempt=1),
            WaitingChanged(run_id=run, waiting=True, attempt=1),
        )
        if together:
            decisions = [h.core._do(h.core.core.settled(reports))]
        else:
            decisions = [
                h.core._do(h.core.core.journal(reports[0])),
                h.core._do(h.core.core.waiting_changed(reports[1])),
            ]
        writes = [type(w).__name__ for d in decisions for w in d.writes]
        effects = [type(e).__name__ for d in decisions for e in d.effects]
        assert h.store.journal_of(run) == [entry]
        assert h.status(run) is RunStatus.WAITING
        assert [e.kind for e in h.store.events(run)][-1] is EventKind.WAITING
        kinds.append((writes, effects))
    assert kinds[0] == kinds[1] == (["SaveJournal", "SaveRun", "AppendEvent"], ["Publish"])


def test_settled_leaves_a_failing_report_out_alone_and_keeps_the_others() -> None:
    """Many runs' journals and waiting reports decided together (``actors/settle_line.py``):
    one whose handling fails (a bug: a journal whose ``read_mail`` is no sequence) is the
    reply, with its error, and every other run's report is decided and written as alone."""
    h = Harness()
    a, b = h.run("lead"), h.run("worker")
    bad = Journal(run_id=a, read_mail=5, attempt=1)  # type: ignore[arg-type]
    reports = (
        WaitingChanged(run_id=a, waiting=True, attempt=1),
        bad,
        WaitingChanged(run_id=b, waiting=True, attempt=1),
    )
    decision = h.core._do(h.core.core.settled(reports))
    ((failed, error),) = decision.reply
    assert failed is bad and isinstance(error, TypeError)
    for run in (a, b):
        assert h.status(run) is RunStatus.WAITING
        assert [e.kind for e in h.store.events(run)][-1] is EventKind.WAITING


def test_a_waiting_parent_is_asked_to_park_for_its_queued_child_and_gets_a_slot_back() -> None:
    h = Harness(Limits(max_concurrency=1))
    root = h.run("lead")
    reply = h.spawn("worker", root)
    assert reply.queued and reply.run_id is not None
    child = reply.run_id
    assert told(waiting(h, root), root, Park) == [Park()]  # the child needs its slot
    assert told(waiting(h, root), root, Park) == []  # asked once
    effects = h.core.parked(Parked(run_id=root))
    assert [s.record.run_id for s in of(effects, StartRun)] == [child]
    assert [p.event.kind for p in of(effects, Publish)][:1] == [EventKind.PARKED]
    assert not h.core.slots.holds(root) and h.core.slots.in_flight == 1
    # the child ends: its outcome goes to the parked root, which asks for its slot back
    effects = h.core.finished(RunFinished(run_id=child, result="ok"))
    assert len(told(effects, root, ChildDone)) == 1
    effects = h.core.slot_wanted(SlotWanted(run_id=root))
    assert told(effects, root, Unpark) == [Unpark()]
    assert EventKind.UNPARKED in [p.event.kind for p in of(effects, Publish)]
    assert h.core.slots.holds(root)
    h.core.finished(RunFinished(run_id=root, result="done"))
    assert h.status(root) is RunStatus.COMPLETED and h.core.slots.in_flight == 0


def test_a_parked_run_wanting_its_slot_goes_ahead_of_new_admissions() -> None:
    h = Harness(Limits(max_concurrency=1))
    root = h.run("lead")
    child = h.run("worker", root)
    waiting(h, root)
    h.core.parked(Parked(run_id=root))  # the child starts
    assert h.core.slot_wanted(SlotWanted(run_id=root)) == []  # queued: the child works
    assert h.core.slots.queued() == [root]
    late = h.run("critic")  # a new root: behind the parked run
    effects = h.core.finished(RunFinished(run_id=child, result="ok"))
    assert told(effects, root, Unpark) == [Unpark()]
    assert of(effects, StartRun) == []
    assert h.status(late) is RunStatus.QUEUED


def test_a_working_run_is_never_asked_to_park() -> None:
    h = Harness(Limits(max_concurrency=1))
    root = h.run("lead")
    _, effects = h.spawn_effects("worker", root)  # queued; the root has not said it waits
    assert told(effects, root, Park) == []
    effects = h.core.waiting_changed(WaitingChanged(run_id=root, waiting=False))
    assert told(effects, root, Park) == []


def test_a_park_answer_from_an_earlier_start_is_ignored() -> None:
    h = Harness(Limits(max_concurrency=1))
    root = h.run("lead")
    h.spawn("worker", root)
    waiting(h, root)
    assert h.core.parked(Parked(run_id=root, attempt=7)) == []
    assert h.core.slots.holds(root)


def test_a_parked_run_that_is_cancelled_leaves_no_slot_or_queue_entry() -> None:
    h = Harness(Limits(max_concurrency=1))
    root = h.run("lead")
    child = h.run("worker", root)
    waiting(h, root)
    h.core.parked(Parked(run_id=root))
    h.core.slot_wanted(SlotWanted(run_id=root))
    h.core.stop(StopRequest(request_id=new_id("q"), run_id=root))
    assert h.status(root) is RunStatus.CANCELLED and h.status(child) is RunStatus.CANCELLED
    assert h.core.slots.in_flight == 0 and h.core.slots.queued() == []


def test_restore_starts_the_running_runs_only_as_far_as_the_limits_allow() -> None:
    h = Harness(Limits(max_concurrency=5))
    root = h.run("lead")
    children = [h.run("worker", root) for _ in range(3)]
    waiting(h, root)
    # the same store taken up again (same owner: as after a crash) with a tighter limit:
    # 4 runs were live, 2 may work
    again = Driven(
        SupervisorCore(
            lookup=h.specs.get,
            names=lambda: list(h.specs),
            read_run=h.store.get_run,
            limits=Limits(max_concurrency=2),
            owner=h.core.core.owner,
        ),
        h.store,
    )
    report, effects = again.restore()
    assert sorted(report.resumed) == sorted([root, *children])
    started = [s.record.run_id for s in of(effects, StartRun)]
    assert started == [root, children[0]]  # parents first, then within the limit
    assert again.slots.queued() == children[1:]
    assert again.slots.in_flight == 2


def test_a_parked_run_restarted_while_queued_for_its_slot_is_queued_once() -> None:
    lead = AgentSpec(name="lead", description="d", restart="transient")
    worker = AgentSpec(name="worker", description="d")
    critic = AgentSpec(name="critic", description="d")
    h = Harness(Limits(max_concurrency=2, per_agent=1), lead, worker, critic)
    root = h.run("lead")
    child = h.run("worker", root, on_failure="fail_parent")
    other = h.spawn("lead")  # a second lead: blocked by lead's agent limit, and the global one
    assert other.queued and other.run_id is not None
    waiting(h, root)  # the root is asked to park for it
    h.core.parked(Parked(run_id=root))
    assert h.status(other.run_id) is RunStatus.RUNNING
    h.core.slot_wanted(SlotWanted(run_id=root))  # queued for a slot back (lead is full)
    # the child fails: its fail_parent restarts the root, which is still queued for its slot
    effects = h.core.finished(RunFinished(run_id=child, error_kind="crash", error="x"))
    assert of(effects, ScheduleRestart) != []
    assert of(h.core.restart_due(root), StartRun) == []  # no slot yet: it waits for one
    effects = h.core.finished(RunFinished(run_id=other.run_id, result="ok"))
    assert [s.record.run_id for s in of(effects, StartRun)] == [root]  # started once
    h.core.finished(RunFinished(run_id=root, result="done"))
    assert h.core.slots.in_flight == 0 and h.core.slots.queued() == []
    # nothing of the root is left in the queue: a new run starts at once
    assert not h.spawn("critic").queued


def test_what_a_retried_runs_ended_start_reports_during_its_backoff_is_discarded() -> None:
    """A parent retried because its ``fail_parent`` child failed: its first start's thread
    may still work (it did not fail itself). Until the retry starts it again, what that
    start reports is from a start that is over (``RunState.over``): its mail is refused,
    its end does not end the run; the retry's start reports as any."""
    h = Harness()
    parent = h.run("lead", on_failure="retry", max_retries=1)
    child = h.run("worker", parent, on_failure="fail_parent")
    effects = h.core.finished(RunFinished(run_id=child, error_kind="crash", error="x", attempt=1))
    assert of(effects, ScheduleRestart) != []
    late = SendMail(request_id=new_id("q"), sender=parent, to=child, content="late", attempt=1)
    ack, _ = h.core.send_mail(late)
    assert ack.error == f"run {parent} is not running"
    assert h.core.finished(RunFinished(run_id=parent, result="late", attempt=1)) == []
    assert h.status(parent) is RunStatus.RUNNING
    (start,) = of(h.core.restart_due(parent), StartRun)
    assert start.attempt == 2
    h.core.finished(RunFinished(run_id=parent, result="again", attempt=2))
    assert h.status(parent) is RunStatus.COMPLETED


# ---- a host lost (a cluster node's) ------------------------------------------------------------


def test_runs_whose_host_was_lost_start_again_as_a_new_attempt_and_end_once() -> None:
    h = Harness(Limits(timeout_s=10.0))
    root = h.run("lead")
    child = h.run("worker", root)
    h.core.finished(RunFinished(run_id=child, result="done", attempt=1))  # ended before the loss
    other = h.run("worker", root)
    h.clock.now += 4
    effects = h.core.host_lost((root, other, child, "no-such-run"), "its host died")
    starts = of(effects, StartRun)
    assert [(s.record.run_id, s.attempt) for s in starts] == [(root, 2), (other, 2)]
    # the timeouts keep running from the first start: a move does not lengthen them
    assert {a.run_id: a.deadline for a in of(effects, ArmDeadline)} == {root: 1010.0, other: 1010.0}
    assert all(s.record.status is RunStatus.RUNNING for s in starts)
    moved = [e for e in h.store.events(other) if e.kind is EventKind.RESTARTED]
    assert [e.data["mode"] for e in moved] == ["moved"]
    record = h.store.get_run(other)
    assert record is not None and record.restarts == 0  # not the run's doing: no restart counted
    # the lost start's late report is discarded; the new start's is taken, once
    assert h.core.finished(RunFinished(run_id=other, result="from the lost host", attempt=1)) == []
    effects = h.core.finished(RunFinished(run_id=other, result="again", attempt=2))
    (done,) = told(effects, root, ChildDone)
    assert done.outcome.result == "again"
    assert h.core.finished(RunFinished(run_id=other, result="again", attempt=2)) == []
    assert h.terminal_events(other) == [EventKind.COMPLETED]
    assert h.terminal_events(child) == [EventKind.COMPLETED]


def test_runs_that_had_lent_their_slot_when_their_host_was_lost_wait_for_one() -> None:
    """Moved runs go through admission as restarts do: of four workers under a limit of two,
    the two that held slots when their host was lost start again at once; the two that had
    parked (lent their slots) wait for one, ahead of new admissions, and start as slots
    free. The limit holds throughout and ``stats().peak`` counts every start. (Started at
    once, the parked ones worked beside the others: four at once under a limit of two.)"""
    h = Harness(Limits(max_concurrency=2, timeout_s=50.0))
    root = h.run("lead")  # on another host: not lost
    workers = [h.run("worker", root) for _ in range(4)]  # one starts, three queue
    waiting(h, root)
    h.core.parked(Parked(run_id=root))  # the root lends its slot: the second worker starts
    for run_id in workers[:2]:  # each waits and lends its slot to the next one queued
        waiting(h, run_id)
        h.core.parked(Parked(run_id=run_id))
    for run_id in workers[2:]:
        waiting(h, run_id)  # nobody is queued: they keep their slots
    assert h.core.slots.holders() == workers[2:] and h.core.slots.queued() == []
    h.clock.now += 4
    effects = h.core.host_lost(workers, "its host died")
    assert [(s.record.run_id, s.attempt) for s in of(effects, StartRun)] == [
        (workers[2], 2),
        (workers[3], 2),
    ]
    stats = h.core.core.stats()
    assert (stats.in_flight, stats.peak, stats.queued) == (2, 2, 2)
    assert h.core.slots.queued() == workers[:2]
    moved = [e for w in workers for e in h.store.events(w) if e.kind is EventKind.RESTARTED]
    assert [e.data["mode"] for e in moved] == ["moved"] * 4
    # what the lost start of a waiting one still reports is discarded: it has no agent yet
    assert h.core.finished(RunFinished(run_id=workers[0], result="lost", attempt=1)) == []
    assert h.mail(root, workers[0], "meanwhile").error is None  # kept for its start
    late = h.run("critic")  # a new admission: behind the moved runs
    # a slot frees: the first moved run waiting takes it, under its first deadline
    effects = h.core.finished(RunFinished(run_id=workers[2], result="ok", attempt=2))
    (start,) = of(effects, StartRun)
    assert (start.record.run_id, start.attempt) == (workers[0], 2)
    assert [m.content for m in start.pending_mail] == ["meanwhile"]
    assert [a.deadline for a in of(effects, ArmDeadline)] == [1050.0]
    effects = h.core.finished(RunFinished(run_id=workers[3], result="ok", attempt=2))
    assert [s.record.run_id for s in of(effects, StartRun)] == [workers[1]]
    assert h.status(late) is RunStatus.QUEUED
    assert h.core.core.stats().peak == 2
    for run_id in workers[:2]:
        h.core.finished(RunFinished(run_id=run_id, result="ok", attempt=2))
        assert h.terminal_events(run_id) == [EventKind.COMPLETED]
    assert h.core.core.stats().peak == 2


def test_a_run_lost_while_asked_to_park_starts_again_in_the_slot_it_still_held() -> None:
    """Asked to park, its agent lost before it answered: the slot was still its own, so it
    starts again in it at once; the queued run keeps waiting (nothing was lent), and the run
    may be asked to park again once its new agent waits."""
    h = Harness(Limits(max_concurrency=1))
    root = h.run("lead")
    child = h.spawn("worker", root).run_id
    assert child is not None
    assert told(waiting(h, root), root, Park) == [Park()]
    effects = h.core.host_lost((root,), "its host died")
    assert [(s.record.run_id, s.attempt) for s in of(effects, StartRun)] == [(root, 2)]
    assert h.core.slots.holders() == [root] and h.core.slots.queued() == [child]
    assert h.core.parked(Parked(run_id=root, attempt=1)) == []  # the lost agent's answer
    effects = h.core.waiting_changed(WaitingChanged(run_id=root, waiting=True, attempt=2))
    assert told(effects, root, Park) == [Park()]
    effects = h.core.parked(Parked(run_id=root, attempt=2))
    assert [s.record.run_id for s in of(effects, StartRun)] == [child]
    assert h.core.core.stats().peak == 1


def test_a_run_that_failed_just_before_its_host_was_lost_is_started_once_by_its_restart() -> None:
    """The host's last frames reach the supervisor before its loss does, but the list of
    its runs is made before they are handled: a run whose failure was in them is between
    its failure and its restart when it is moved. Its restart starts it, once."""
    lead = AgentSpec(name="lead", description="d", restart="transient")
    h = Harness(Limits(), lead)
    root = h.run("lead")
    effects = h.core.finished(RunFinished(run_id=root, error_kind="crash", error="x", attempt=1))
    assert of(effects, ScheduleRestart) != []
    assert of(h.core.host_lost((root,), "its host died"), StartRun) == []
    assert [s.attempt for s in of(h.core.restart_due(root), StartRun)] == [2]


def test_where_a_start_was_placed_is_kept_on_its_record_and_told_as_an_event() -> None:
    """A cluster's effector tells where it placed each start (``Placed``): the record says
    the node of the latest start, an event each placement; word about an earlier start or
    an ended run changes nothing."""
    h = Harness()
    root = h.run("lead")
    effects = h.core.placed(Placed(run_id=root, attempt=1, node="n1", address="10.0.0.5"))
    record = h.store.get_run(root)
    assert record is not None and record.node == "n1"
    (event,) = [p.event for p in of(effects, Publish)]
    assert (event.kind, event.data) == (
        EventKind.PLACED,
        {"node": "n1", "address": "10.0.0.5", "attempt": 1},
    )
    h.core.host_lost((root,), "its host died")  # started again: attempt 2
    assert h.core.placed(Placed(run_id=root, attempt=1, node="n1")) == []  # the lost start's
    h.core.placed(Placed(run_id=root, attempt=2, node="n2", address="10.0.0.6"))
    record = h.store.get_run(root)
    assert record is not None and record.node == "n2"
    placed = [e.data["node"] for e in h.store.events(root) if e.kind is EventKind.PLACED]
    assert placed == ["n1", "n2"]
    h.core.finished(RunFinished(run_id=root, result="done", attempt=2))
    assert h.core.placed(Placed(run_id=root, attempt=2, node="n3")) == []


def test_hosted_follows_every_status_change() -> None:
    """The hosted runs (whose commands the actor claims) are kept as statuses change, not
    rebuilt: queued, running, waiting and ended runs, a subtree cancelled, a tree forgotten."""
    h = Harness(Limits(max_concurrency=2))
    core = h.core.core
    root = h.run("lead")
    child = h.run("worker", root)
    queued = h.run("critic")
    assert set(core.hosted()) == {root, child, queued}
    h.core.waiting_changed(WaitingChanged(run_id=child, waiting=True))
    assert set(core.hosted()) == {root, child, queued}
    h.core.stop(StopRequest(request_id=new_id("q"), run_id=root))
    assert set(core.hosted()) == {queued}  # the queued run took the freed slot
    assert h.status(queued) is RunStatus.RUNNING
    h.core.finished(RunFinished(run_id=queued, result="ok"))
    assert set(core.hosted()) == set()
    assert core.stats().hosted == 0
