"""coalesce: the effects of a group commit with the Tells to each run merged, order kept."""

from __future__ import annotations

import random
from typing import Any

from subagents.definitions.spec import AgentSpec
from subagents.messages import (
    Batch,
    ChildDone,
    DeliverMail,
    Event,
    EventKind,
    MailAck,
    Outcome,
    RunRecord,
    RunStatus,
)
from subagents.supervision.coalesce import _no_barrier, _walked, coalesce
from subagents.supervision.effects import (
    ArmDeadline,
    DisarmDeadline,
    Publish,
    StartRun,
    StopAgent,
    Tell,
    TellOutside,
)


def _event(run_id: str) -> Publish:
    return Publish(Event(kind=EventKind.MAIL_SENT, run_id=run_id, agent="a", root_run_id="r"))


def test_tells_to_one_run_become_one_batch_in_order() -> None:
    effects = [Tell("a", 1), Tell("b", "x"), Tell("a", 2), Tell("a", 3)]
    assert coalesce(list(effects)) == [Tell("a", Batch(messages=(1, 2, 3))), Tell("b", "x")]


def test_a_batch_told_to_a_run_is_merged_flat_never_nested() -> None:
    acks = Batch(messages=("ack1", "ack2"))
    effects = [Tell("a", 1), Tell("a", acks), Tell("a", 2)]
    assert coalesce(effects) == [Tell("a", Batch(messages=(1, "ack1", "ack2", 2)))]
    assert coalesce([Tell("a", acks)]) == [Tell("a", acks)]  # alone: as it is


def test_a_single_tell_stays_a_plain_message() -> None:
    assert coalesce([Tell("a", 1)]) == [Tell("a", 1)]
    assert coalesce([]) == []


def test_events_and_deadline_timers_pass_through_without_splitting_a_batch() -> None:
    sent, arm, disarm = _event("a"), ArmDeadline("c", 5.0), DisarmDeadline("d")
    effects = [Tell("a", 1), sent, arm, Tell("a", 2), disarm, Tell("a", 3)]
    assert coalesce(effects) == [sent, arm, disarm, Tell("a", Batch(messages=(1, 2, 3)))]


def test_other_effects_are_barriers_that_nothing_crosses() -> None:
    record = RunRecord(run_id="a", agent="a", task="t", root_run_id="a")
    start = StartRun(record=record, spec=AgentSpec(name="a", description="d"), deadline=9.0)
    stop = StopAgent("a")
    outcome = Outcome(run_id="r", status=RunStatus.COMPLETED)
    root = TellOutside(ChildDone(request_id="r", outcome=outcome))
    effects = [Tell("a", 1), Tell("a", 2), stop, Tell("a", 3), start, Tell("a", 4), root]
    assert coalesce(effects) == [
        Tell("a", Batch(messages=(1, 2))),
        stop,
        Tell("a", 3),
        start,
        Tell("a", 4),
        root,
    ]


def test_a_start_lets_go_only_the_batch_pending_for_its_own_run() -> None:
    """A fan-out's group: each child's end tells its parent and starts the next queued child.
    The parent's answers wait on behind the starts and go as one Batch; what was decided for
    the started run before its start still goes first, what after, after."""
    record = RunRecord(run_id="x", agent="w", task="t", root_run_id="p")
    start = StartRun(record=record, spec=AgentSpec(name="w", description="d"), deadline=9.0)
    effects = [Tell("p", 1), Tell("x", "old"), start, Tell("p", 2), Tell("x", "new")]
    assert coalesce(effects) == [
        Tell("x", "old"),
        start,
        Tell("p", Batch(messages=(1, 2))),
        Tell("x", "new"),
    ]
    stop = StopAgent("y")  # any other barrier still lets every batch go
    assert coalesce([Tell("p", 1), start, Tell("p", 2), stop, Tell("p", 3)]) == [
        start,
        Tell("p", Batch(messages=(1, 2))),
        stop,
        Tell("p", 3),
    ]


def test_a_mail_acknowledgement_goes_after_every_delivery_decided_before_it() -> None:
    """The sender that has it may take its next mail straight to the recipient
    (supervision/mail_routes.py): the mail acknowledged must be in that mailbox first."""
    ack = MailAck(request_id="q", mail_id="m1", recipient="r")
    delivery = DeliverMail(mails=())
    effects = [Tell("s", "earlier"), Tell("r", delivery), Tell("s", ack), Tell("r", "later")]
    assert coalesce(effects) == [
        Tell("s", "earlier"),
        Tell("r", delivery),
        Tell("s", ack),
        Tell("r", "later"),
    ]
    acks = Batch(messages=(ack, ack))
    assert coalesce([Tell("s", 1), Tell("r", 2), Tell("s", acks)]) == [
        Tell("s", 1),
        Tell("r", 2),
        Tell("s", acks),
    ]


def test_effects_without_tells_come_out_as_they_went_in() -> None:
    """The common case (a run's end: its event, its answer to the caller, its deadline
    disarmed) takes the path where nothing is pending: every effect, in order, barriers
    (a stop, an answer outside) included."""
    outcome = Outcome(run_id="a", status=RunStatus.COMPLETED)
    effects = [
        _event("a"),
        TellOutside(ChildDone(request_id="q", outcome=outcome)),
        DisarmDeadline("a"),
        StopAgent("b"),
        ArmDeadline("c", 5.0),
    ]
    assert coalesce(list(effects)) == effects


def test_a_lone_tell_keeps_its_place() -> None:
    """Nothing to merge with one Tell: the effects come out as they went in, the Tell not
    moved behind the events and timers decided after it (a run's end told to its parent
    goes as soon as it was decided)."""
    sent, disarm = _event("a"), DisarmDeadline("a")
    effects = [Tell("p", 1), sent, disarm]
    assert coalesce(list(effects)) == effects


def _fan_out_group(rng: random.Random, length: int) -> list[Any]:
    """A random group's effects: Tells (plain, merged batches, acknowledgements) to a few
    runs, starts of those runs or of fresh ones, events and timers, now and then another
    barrier."""
    ack = MailAck(request_id="q", mail_id="m1", recipient="r")
    spec = AgentSpec(name="w", description="d")

    def one() -> Any:
        run_id = rng.choice(("p", "q", "x", "y"))
        roll = rng.random()
        if roll < 0.35:
            message: Any = rng.choice((1, 2, "x", Batch(messages=(3, 4)), ack, Batch((ack,))))
            return Tell(run_id, message if rng.random() < 0.9 else rng.randrange(9))
        if roll < 0.5:
            fresh = rng.random() < 0.7
            started = f"new{rng.randrange(999)}" if fresh else run_id
            record = RunRecord(run_id=started, agent="w", task="t", root_run_id="p")
            return StartRun(record=record, spec=spec, deadline=9.0)
        if roll < 0.95:
            return rng.choice((_event(run_id), ArmDeadline(run_id, 5.0), DisarmDeadline(run_id)))
        return StopAgent(run_id)

    return [one() for _ in range(length)]


def test_a_group_without_barriers_comes_to_what_the_walk_makes() -> None:
    """``coalesce``'s short way (no barrier but starts of runs told nothing: filtered in C)
    gives the very list the effect-by-effect walk gives, on every group, taken or not; and it
    is taken for a fan-out's group (children's ends telling the parent, the next starts)."""
    rng = random.Random(26)
    taken = 0
    for _ in range(3000):
        effects = _fan_out_group(rng, rng.randrange(2, 14))
        kinds = list(map(type, effects))
        if kinds.count(Tell) < 2:  # (nothing to merge: as they are, ``test_a_lone_tell...``)
            continue
        assert coalesce(list(effects)) == _walked(list(effects)), effects
        taken += _no_barrier(effects, kinds) is not None
    assert taken > 300
    child = RunRecord(run_id="c2", agent="w", task="t", root_run_id="p")
    start = StartRun(record=child, spec=AgentSpec(name="w", description="d"), deadline=9.0)
    group = [_event("c1"), Tell("p", 1), DisarmDeadline("c1"), start, ArmDeadline("c2", 9.0)]
    group += [_event("c3"), Tell("p", 2), DisarmDeadline("c3")]
    kinds = list(map(type, group))
    expected = [*group[:1], *group[2:6], group[7], Tell("p", Batch(messages=(1, 2)))]
    assert _no_barrier(group, kinds) == expected == coalesce(group)
