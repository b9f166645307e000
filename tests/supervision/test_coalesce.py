"""coalesce: the effects of a group commit with the Tells to each run merged, order kept."""

from __future__ import annotations

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
from subagents.supervision.coalesce import coalesce
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
