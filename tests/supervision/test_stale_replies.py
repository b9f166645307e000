"""Replies are told to the start that asked, never to a later start of its run.

A restart keeps a run's call keys (``run_id:N``) and replies are addressed by run id: the
refusal of what a start that is over asked for (it is refused: ``RunTable.reporting``) would
settle the call with the same key of the run's new start. So once a later start has begun,
the supervisor tells nothing in answer to an earlier one (``RunTable.answers``): not a spawn's
reply, a mail's acknowledgement, a stop's reply, nor the refusal the actor makes when it
could not handle a tell (``actors.told_answers``). Before the next start (a restart's backoff)
the core tells the run as before (its old actor, stopped with the restart, reads none of it).
Without threads: the core fed directly.
(tests/runtime/test_stale_replies.py: the same with real actors.)"""

from __future__ import annotations

from typing import Any

from subagents.actors.told_answers import answer_told
from subagents.messages import (
    Batch,
    MailAck,
    RunFinished,
    SendMail,
    SpawnReply,
    SpawnRequest,
    StopReply,
    StopRequest,
    StopRequested,
    new_id,
)
from subagents.supervision.effects import StartRun, Tell

from .test_core import Harness, of, told


def _restarted() -> tuple[Harness, str, str]:
    """A lead whose ``fail_parent`` worker failed, started again (its second start)."""
    h = Harness()
    lead = h.run("lead", on_failure="retry", max_retries=1)
    worker = h.run("worker", lead, on_failure="fail_parent")
    h.core.finished(RunFinished(run_id=worker, error_kind="crash", error="x", attempt=1))
    (start,) = of(h.core.restart_due(lead), StartRun)
    assert start.attempt == 2
    return h, lead, worker


def _spawn(lead: str, attempt: int) -> SpawnRequest:
    return SpawnRequest(
        request_id=f"{lead}:2", agent="critic", task="t", parent_run_id=lead, attempt=attempt
    )


def _mail(lead: str, to: str, attempt: int, n: int = 2) -> SendMail:
    return SendMail(request_id=f"{lead}:{n}", sender=lead, to=to, content="c", attempt=attempt)


def test_a_spawn_refused_to_an_earlier_start_is_not_told_to_the_run() -> None:
    h, lead, _ = _restarted()
    reply, effects = h.core.spawn(_spawn(lead, attempt=1))
    assert reply.error == f"requesting run {lead} is not running"
    assert told(effects, lead, SpawnReply) == []
    reply, effects = h.core.spawn(_spawn(lead, attempt=2))  # the current start's: told
    assert reply.error is None
    assert told(effects, lead, SpawnReply) == [reply]


def test_a_mail_refused_to_an_earlier_start_is_not_acknowledged_to_the_run() -> None:
    h, lead, _ = _restarted()
    critic = h.run("critic", lead, attempt=2)
    ack, effects = h.core.send_mail(_mail(lead, critic, attempt=1))
    assert ack.error == f"run {lead} is not running"
    assert told(effects, lead, MailAck) == []
    # one post with the old start's mail and two of the new start's (one to nobody): the
    # new start's two acknowledgements told, its refusal too; the old start's not
    msgs = [_mail(lead, critic, 1), _mail(lead, critic, 2, n=3), _mail(lead, "nobody", 2, n=4)]
    acks, effects = h.core.send_mails(msgs)
    assert [a.error is None for a in acks] == [False, True, False]
    assert [t.message for t in of(effects, Tell) if t.run_id == lead] == [
        Batch(messages=(acks[1], acks[2]))
    ]


def test_a_stop_refused_to_an_earlier_start_is_not_told_to_the_run() -> None:
    h, lead, worker = _restarted()
    stale = StopRequest(request_id=f"{lead}:2", run_id=worker, requester=lead, attempt=1)
    reply, effects = h.core.stop(stale)
    assert reply.error == f"run {lead} is not running"
    assert told(effects, lead, StopReply) == []
    requested = StopRequested(request_id=f"{lead}:3", requested_by=lead, requester=lead, attempt=1)
    decision = h.core.core.stop_requested(requested)
    assert decision.reply.error == f"run {lead} is not running"
    assert told(decision.effects, lead, StopReply) == []


def test_before_the_next_start_a_refusal_is_still_told_to_the_run() -> None:
    """``answers`` is about a LATER start: before it begins the refusal is told to the run
    as ever (in a runtime nobody receives it: the old start's actor was stopped with the
    restart's decision, ``StopAgent``)."""
    h = Harness()
    lead = h.run("lead", on_failure="retry", max_retries=1)
    worker = h.run("worker", lead, on_failure="fail_parent")
    h.core.finished(RunFinished(run_id=worker, error_kind="crash", error="x", attempt=1))
    reply, effects = h.core.spawn(_spawn(lead, attempt=1))
    assert reply.error == f"requesting run {lead} is not running"
    assert told(effects, lead, SpawnReply) == [reply]


def test_the_actors_own_refusal_of_a_tell_skips_a_start_that_is_over() -> None:
    """``answer_told`` (a tell the supervisor could not handle) asks ``answers`` first."""
    h, lead, _ = _restarted()
    sent: list[tuple[str, Any]] = []
    outside: list[Any] = []
    answers = h.core.runs.answers
    for attempt in (1, 2):
        answer_told(
            _spawn(lead, attempt), "why", lambda r, m: sent.append((r, m)), outside.append, answers
        )
    assert [(r, m.request_id, m.error) for r, m in sent] == [(lead, f"{lead}:2", "why")]
    assert outside == []
    assert answers(lead, 2) and not answers(lead, 1)
    assert answers(lead, 0)  # not from a start: told
    assert answers(new_id("r"), 1)  # a run not held: told (nothing live to reach)
