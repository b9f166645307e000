"""The parts return what they decide (``Decided``: writes and effects, in order) instead of
appending to the message's shared collector: a part's decision is a value its caller orders,
and the core gathers it. The lifecycle, stops, recovery, admission, the mail room's receipts
and the run table's placements; consecutive read receipts still come to one write."""

from __future__ import annotations

import re
from pathlib import Path

from subagents.definitions.spec import AgentSpec
from subagents.messages import (
    ChildDone,
    EventKind,
    MailRead,
    MailState,
    Placed,
    RunRecord,
    RunStatus,
    SendMail,
    SpawnReply,
    SpawnRequest,
    StopRequest,
)
from subagents.store.snapshot import RestoreSnapshot, UnfinishedRun
from subagents.store.writes import (
    AppendEvent,
    ReleaseLease,
    SaveOutcome,
    SaveRun,
    SetMailsState,
)
from subagents.supervision.core import SupervisorCore
from subagents.supervision.effects import (
    Decided,
    DisarmDeadline,
    Effects,
    Publish,
    StartRun,
    StopAgent,
    Tell,
    TellOutside,
)
from subagents.supervision.limits import Limits
from subagents.supervision.outcomes import End
from subagents.supervision.transitions import Move


def _core() -> tuple[SupervisorCore, str, str]:
    specs = {n: AgentSpec(name=n, description="d") for n in ("lead", "worker")}
    core = SupervisorCore(lookup=specs.get, names=lambda: list(specs), now=lambda: 5.0)
    root = core.spawn(SpawnRequest(request_id="q1", agent="lead", task="t")).reply.run_id
    request = SpawnRequest(request_id="q2", agent="worker", task="t", parent_run_id=root)
    child = core.spawn(request).reply.run_id
    return core, root, child


def test_finish_returns_its_writes_and_effects_and_appends_none() -> None:
    core, root, child = _core()
    state = core.runs.get(child)
    assert state is not None
    core.effects.begin()
    decided = core.lifecycle.finish(state, End(Move.COMPLETED, result="r"))
    assert core.effects.writes == [] and core.effects.effects == []  # nothing shared
    assert state.record.status is RunStatus.COMPLETED
    kinds = [type(w) for w in decided.writes]
    # the outcome kept as delivered by its one write: it is handed on in this decision
    assert kinds == [SaveRun, SaveOutcome, AppendEvent]
    (saved,) = [w for w in decided.writes if isinstance(w, SaveOutcome)]
    assert saved.delivered and saved.outcome.run_id == child
    (event,) = [w.event for w in decided.writes if isinstance(w, AppendEvent)]
    assert event.kind is EventKind.COMPLETED and event.run_id == child
    # the outcome handed on before the timer is disarmed (the requester wakes first)
    assert [type(e) for e in decided.effects] == [Publish, Tell, DisarmDeadline]
    told = decided.effects[1]
    assert isinstance(told, Tell) and told.run_id == root
    assert isinstance(told.message, ChildDone) and told.message.outcome.result == "r"


def test_a_cancel_walk_returns_the_subtree_deepest_first() -> None:
    core, root, child = _core()
    top = core.runs.get(root)
    assert top is not None
    core.effects.begin()
    ids, decided = core.lifecycle.cancel(top, "stop")
    assert ids == [child, root]
    assert core.effects.writes == [] and core.effects.effects == []
    ended = [w.record.run_id for w in decided.writes if isinstance(w, SaveRun)]
    assert ended == [child, root]
    stopped = [e.run_id for e in decided.effects if isinstance(e, StopAgent)]
    assert stopped == [child, root]
    # the child's outcome goes nowhere: its parent is ending in the same walk
    assert not [e for e in decided.effects if isinstance(e, Tell)]


def test_start_returns_the_start_and_the_core_gathers_it_in_order() -> None:
    specs = {"lead": AgentSpec(name="lead", description="d")}
    core = SupervisorCore(lookup=specs.get, names=lambda: list(specs), now=lambda: 5.0)
    decision = core.spawn(SpawnRequest(request_id="q", agent="lead", task="t"))
    run_id = decision.reply.run_id
    kinds = [w.event.kind for w in decision.writes if isinstance(w, AppendEvent)]
    assert kinds == [EventKind.SPAWNED, EventKind.STARTED]  # admission's, then the start's
    starts = [e for e in decision.effects if isinstance(e, StartRun)]
    assert [s.record.run_id for s in starts] == [run_id]
    assert starts[0].record.status is RunStatus.RUNNING and starts[0].record.started_at == 5.0


def test_a_stop_returns_what_it_decides_and_the_core_gathers_it() -> None:
    core, root, child = _core()
    core.effects.begin()
    reply, decided = core.stops.one(StopRequest(request_id="s", run_id=root, reason="enough"))
    assert reply.stopped == (child, root)
    assert core.effects.writes == [] and core.effects.effects == []
    assert [e.run_id for e in decided.effects if isinstance(e, StopAgent)] == [child, root]
    refused, nothing = core.stops.one(StopRequest(request_id="t", run_id="nobody", reason="x"))
    assert refused.error is not None and not nothing.writes and not nothing.effects


def test_a_restore_returns_what_it_decides() -> None:
    specs = {"lead": AgentSpec(name="lead", description="d")}
    core = SupervisorCore(lookup=specs.get, names=lambda: list(specs), owner="me")
    left = RunRecord(
        run_id="r1",
        agent="lead",
        task="t",
        root_run_id="r1",
        status=RunStatus.RUNNING,
        started_at=1.0,
        owner="gone",
    )
    gone = RunRecord(
        run_id="r2",
        agent="missing",
        task="t",
        root_run_id="r2",
        status=RunStatus.QUEUED,
        owner="gone",
    )
    snapshot = RestoreSnapshot(unfinished=(UnfinishedRun(record=left), UnfinishedRun(record=gone)))
    core.effects.begin()
    report, decided = core.recovery.restore(snapshot)
    assert core.effects.writes == [] and core.effects.effects == []
    assert report.resumed == ["r1"] and report.failed == ["r2"]
    saved = [(w.record.run_id, w.record.status) for w in decided.writes if isinstance(w, SaveRun)]
    # in the snapshot's order: each adopted (kept as this runtime's), r1 started again (a
    # slot is free), r2 failed (its agent is gone)
    assert saved == [
        ("r1", RunStatus.RUNNING),
        ("r1", RunStatus.RUNNING),
        ("r2", RunStatus.QUEUED),
        ("r2", RunStatus.FAILED),
    ]
    assert [e.record.run_id for e in decided.effects if isinstance(e, StartRun)] == ["r1"]
    assert ReleaseLease("gone") in decided.writes


def _kinds(decided: Decided) -> tuple[list[object], list[str]]:
    """The writes (an event as its kind) and the effects' types of ``decided``, in order."""
    writes = [w.event.kind if isinstance(w, AppendEvent) else type(w) for w in decided.writes]
    return writes, [type(e).__name__ for e in decided.effects]


def test_admission_returns_the_record_events_start_and_reply_and_appends_none() -> None:
    core, root, _ = _core()
    core.effects.begin()
    request = SpawnRequest(request_id="q3", agent="worker", task="t", parent_run_id=root)
    reply, decided = core.admission.spawn(request)
    assert core.effects.writes == [] and core.effects.effects == []  # nothing shared
    assert reply.error is None and not reply.queued
    # spawned; then the start's (lifecycle.start), whose record write is the run's only
    # one (a queued run's record is written at its admission); the reply last
    assert _kinds(decided) == (
        [EventKind.SPAWNED, SaveRun, EventKind.STARTED],
        ["Publish", "StartRun", "ArmDeadline", "Publish", "Tell"],  # armed after the start
    )
    started = decided.effects[1]
    assert isinstance(started, StartRun) and started.record.run_id == reply.run_id
    assert decided.effects[-1] == Tell(root, reply)


def test_a_queued_admission_and_refusals_return_what_they_decide() -> None:
    specs = {"lead": AgentSpec(name="lead", description="d")}
    limits = Limits(max_concurrency=1)
    core = SupervisorCore(lookup=specs.get, names=lambda: list(specs), limits=limits)
    core.effects.begin()
    first, second, unknown = (
        SpawnRequest(request_id=q, agent=agent, task="t")
        for q, agent in (("q1", "lead"), ("q2", "lead"), ("q3", "nobody"))
    )
    replies, decided = core.admission.spawn_all([first, second, unknown])
    assert core.effects.writes == [] and core.effects.effects == []
    started_queued_refused = [(False, True), (True, True), (False, False)]
    assert [(r.queued, r.error is None) for r in replies] == started_queued_refused
    # each admitted run's record written once: the started one by its start, the queued one
    # at its admission
    saved = [(w.record.request_id, w.record.status) for w in decided.writes if type(w) is SaveRun]
    assert saved == [("q1", RunStatus.RUNNING), ("q2", RunStatus.QUEUED)]
    queued = [w.event for w in decided.writes if isinstance(w, AppendEvent)][-1]
    assert queued.kind is EventKind.QUEUED and queued.data == {"position": 1}
    # a root refused hears of it outside, and its refusal writes nothing
    assert decided.effects[-1] == TellOutside(replies[2])
    refused, told = core.admission.spawn(SpawnRequest(request_id="q4", agent="x", task="t"))
    assert told.writes == [] and told.effects == [TellOutside(refused)]
    assert isinstance(refused, SpawnReply) and refused.error is not None


def test_a_read_receipt_returns_its_write_and_consecutive_ones_are_one() -> None:
    core, root, child = _core()
    sender = core.runs.get(root)
    assert sender is not None
    sent = [SendMail(request_id=q, sender=root, to=child, content=q) for q in ("a", "b", "c")]
    acks = core.send_mails(sent).reply
    a, b, c = (ack.mail_id for ack in acks)
    core.effects.begin()
    decided = core.mail.read(child, (a,))
    assert core.effects.writes == [] and core.effects.effects == []
    assert decided.writes == [SetMailsState((a,), MailState.READ)] and decided.effects == []
    state = core.runs.get(child)
    assert state is not None and list(state.inbox) == [b, c]  # read: out of the inbox
    assert not core.mail.read(child, ()).writes  # no receipt, no write
    # two receipts of one message: one write, as they were before the parts returned them
    receipts = (MailRead(run_id=child, mail_ids=(b,)), MailRead(run_id=child, mail_ids=(c,)))
    assert core.mail_reads(receipts).writes == [SetMailsState((b, c), MailState.READ)]


def test_receipts_join_only_a_receipt_before_them() -> None:
    read_a, read_b = (SetMailsState((m,), MailState.READ) for m in ("a", "b"))
    dead = SetMailsState(("d",), MailState.DEAD)
    first, then = Decided(), Decided()
    first.writes += [dead, read_a]
    then.writes += [read_b, dead, read_a]
    assert first.add(then).writes == [
        dead,
        SetMailsState(("a", "b"), MailState.READ),
        dead,
        read_a,
    ]
    after_dead = Decided()
    after_dead.writes.append(dead)
    assert after_dead.add(then).writes == [dead, read_b, dead, read_a]


def test_each_message_decides_into_lists_of_its_own_when_a_parts_are_taken_whole() -> None:
    """``Effects.take`` takes a message's first part's lists as they are, not copied: the
    next message's writes and effects never land in an earlier decision's, and a second
    part's receipts still join the first's."""
    core, root, _child = _core()
    asked = (SpawnRequest(request_id=q, agent="worker", task="t", parent_run_id=root) for q in "xy")
    first = core.spawn(next(asked))
    writes, effects = list(first.writes), list(first.effects)
    second = core.spawn(next(asked))
    assert first.writes == writes and first.effects == effects  # untouched by the second
    assert second.writes and second.writes is not first.writes
    assert second.effects is not first.effects
    collector = Effects(now=lambda: 1.0)
    collector.begin()
    one, two = Decided(), Decided()
    one.writes.append(SetMailsState(("a",), MailState.READ))
    two.writes.append(SetMailsState(("b",), MailState.READ))
    collector.take(one)
    collector.take(two)
    assert collector.decision().writes == [SetMailsState(("a", "b"), MailState.READ)]


def test_a_placement_returns_its_record_write_and_event() -> None:
    core, _, child = _core()
    state = core.runs.get(child)
    assert state is not None
    core.effects.begin()
    here = Placed(run_id=child, attempt=state.attempt, node="n1", address="10.0.0.1")
    decided = core.runs.placed(here, lambda: 7.0)
    assert core.effects.writes == [] and core.effects.effects == []
    assert state.record.node == "n1"
    saved, appended = decided.writes
    assert saved == SaveRun(state.record)
    assert isinstance(appended, AppendEvent) and appended.event.kind is EventKind.PLACED
    assert appended.event.ts == 7.0 and appended.event.data["address"] == "10.0.0.1"
    assert decided.effects == [Publish(appended.event)]
    again = core.runs.placed(here, lambda: 8.0)  # the same node: only the event
    assert [type(w) for w in again.writes] == [AppendEvent] and len(again.effects) == 1
    stale = Placed(run_id=child, attempt=state.attempt + 1, node="n2")
    dropped = core.runs.placed(stale, lambda: 9.0)
    assert dropped.writes == [] and dropped.effects == [] and state.record.node == "n1"


def test_only_the_core_holds_the_collector() -> None:
    # a part given the message's Effects could append to it again: none is, none imports it
    supervision = Path(__file__).resolve().parents[2] / "src" / "subagents" / "supervision"
    holders = sorted(
        p.name
        for p in supervision.glob("*.py")
        if re.search(r"\bEffects\b", p.read_text(encoding="utf-8"))
    )
    assert holders == ["core.py", "effects.py"]
