"""MailRoutes: when a sender may take its mail straight to the recipient, without threads."""

from __future__ import annotations

from subagents.messages import (
    DeliverMail,
    JournalEntry,
    Mail,
    MailAck,
    SendMail,
    SpawnReply,
    StopReply,
)
from subagents.supervision.mail_routes import ANSWERS, MailRoutes

LISTED = {"s": "root", "r": "root", "other-tree": "root2"}
"""The directory: run id -> its root (started, live runs only)."""


def _root_of(run_id: str) -> str | None:
    return LISTED.get(run_id)


def _mail(to: str, request_id: str = "q1") -> SendMail:
    return SendMail(request_id=request_id, sender="s", to=to, content="hi")


def _routes() -> MailRoutes:
    return MailRoutes("s", "root")


def test_a_listed_run_of_the_senders_tree_is_reached_straight() -> None:
    routes = _routes()
    assert routes.route(_mail("r"), _root_of, 1) == "r"


def test_a_run_not_listed_another_tree_or_the_sender_itself_go_by_the_supervisor() -> None:
    routes = _routes()
    assert routes.route(_mail("queued-or-ended"), _root_of, 1) is None
    assert routes.route(_mail("other-tree"), _root_of, 1) is None
    assert routes.route(_mail("s"), _root_of, 1) is None
    assert routes.route(_mail("writer"), _root_of, 1) is None  # a name never resolved here


def test_a_name_goes_straight_once_the_mail_room_resolved_it_in_the_same_generation() -> None:
    routes = _routes()
    first = _mail("writer", "q1")
    assert routes.route(first, _root_of, 7) is None
    routes.by_supervisor(first, 7)
    routes.answered(MailAck(request_id="q1", mail_id="m1", recipient="r"))
    assert routes.route(_mail("writer", "q2"), _root_of, 7) == "r"
    # a run added or ended since (the generation moved): the mail room resolves it again
    assert routes.route(_mail("writer", "q3"), _root_of, 8) is None


def test_a_name_resolved_to_a_run_no_longer_listed_goes_by_the_supervisor() -> None:
    routes = _routes()
    first = _mail("writer", "q1")
    routes.by_supervisor(first, 7)
    routes.answered(MailAck(request_id="q1", mail_id="m1", recipient="gone"))
    assert routes.route(_mail("writer", "q2"), _root_of, 7) is None


def test_a_refused_mail_teaches_no_route() -> None:
    routes = _routes()
    routes.by_supervisor(_mail("writer", "q1"), 7)
    routes.answered(MailAck(request_id="q1", error="ambiguous"))
    assert routes.route(_mail("writer", "q2"), _root_of, 7) is None
    assert routes.route(_mail("r", "q3"), _root_of, 7) == "r"  # nothing is on its way now


def test_nothing_overtakes_mail_still_on_its_way_through_the_supervisor() -> None:
    routes = _routes()
    routes.by_supervisor(_mail("writer", "q1"), 7)
    assert routes.route(_mail("r", "q2"), _root_of, 7) is None
    routes.answered(MailAck(request_id="other", mail_id="m0", recipient="r"))  # not ours
    assert routes.route(_mail("r", "q2"), _root_of, 7) is None
    routes.answered(MailAck(request_id="q1", mail_id="m1", recipient="r"))
    assert routes.route(_mail("r", "q2"), _root_of, 7) == "r"


def test_a_spawn_or_stop_waiting_for_its_reply_sends_mail_by_the_supervisor() -> None:
    routes = _routes()
    routes.asked("spawn-1")
    routes.asked("stop-1")
    assert routes.route(_mail("r"), _root_of, 7) is None
    routes.answered(SpawnReply(request_id="spawn-1", run_id="c"))
    assert routes.route(_mail("r"), _root_of, 7) is None
    routes.answered(StopReply(request_id="stop-1", stopped=("c",)))
    assert routes.route(_mail("r"), _root_of, 7) == "r"


def _told(routes: MailRoutes, message: object) -> None:
    """``message`` handed to the routes as a run's actor hands it (actors/agent.py ``_one``):
    only the kinds of ``ANSWERS``."""
    if type(message) in ANSWERS:
        routes.answered(message)


def test_the_agent_hands_the_routes_every_answer_they_read_and_no_delivered_mail() -> None:
    routes = _routes()
    routes.by_supervisor(_mail("writer", "q1"), 7)
    routes.asked("spawn-1")
    routes.asked("stop-1")
    _told(routes, MailAck(request_id="q1", mail_id="m1", recipient="r"))
    _told(routes, SpawnReply(request_id="spawn-1", run_id="c"))
    assert routes.route(_mail("r", "q2"), _root_of, 7) is None  # the stop still waits
    _told(routes, StopReply(request_id="stop-1", stopped=("c",)))
    assert routes.route(_mail("writer", "q2"), _root_of, 7) == "r"  # the name learnt too
    assert DeliverMail not in ANSWERS  # (one per durable mail: not handed to the routes)
    _told(routes, DeliverMail(mails=(Mail(mail_id="m2", sender="r", recipient="s", content="hi"),)))
    assert routes.route(_mail("r", "q3"), _root_of, 7) == "r"


def test_after_an_observation_mail_goes_by_the_supervisor_until_one_sent_after_it_is_acked() -> (
    None
):
    """What a call saw (a mailbox read, a timeout...) is committed by the supervisor's group;
    a mail taken straight would commit before it (tests/durability/test_observed_send_crash)."""
    routes = _routes()
    routes.observed((JournalEntry(request_id="s:0", kind="mailbox", observed=True, result=[]),))
    first = _mail("r", "q1")
    assert routes.route(first, _root_of, 1) is None
    routes.by_supervisor(first, 1)
    second = _mail("r", "q2")
    routes.answered(MailAck(request_id="q1", error="too big"))  # refused: proves nothing
    assert routes.route(second, _root_of, 1) is None
    routes.by_supervisor(second, 1)
    routes.observed((JournalEntry(request_id="s:3", observed=True, result=None),))  # a timeout
    third = _mail("r", "q3")
    routes.answered(MailAck(request_id="q2", mail_id="m2", recipient="r"))  # before s:3
    assert routes.route(third, _root_of, 1) is None
    routes.by_supervisor(third, 1)
    routes.answered(MailAck(request_id="q3", mail_id="m3", recipient="r"))
    assert routes.route(_mail("r", "q4"), _root_of, 1) == "r"


def test_an_unanswered_step_sends_mail_by_the_supervisor_until_one_sent_after_is_acked() -> None:
    """A model turn's step whose ask timed out is still on its way to the supervisor: the
    turn's mail goes behind it (tests/durability/test_llm_replier_crash.py)."""
    routes = _routes()
    routes.unsettled()
    first = _mail("r", "q1")
    assert routes.route(first, _root_of, 1) is None
    routes.by_supervisor(first, 1)
    assert routes.route(_mail("r", "q2"), _root_of, 1) is None  # (q1 on its way, too)
    routes.answered(MailAck(request_id="q1", mail_id="m1", recipient="r"))
    assert routes.route(_mail("r", "q2"), _root_of, 1) == "r"


def test_a_received_mail_or_a_call_entry_keeps_mail_straight() -> None:
    """A receive's mail is marked read with its entry: a lost entry leaves it unread."""
    routes = _routes()
    routes.observed(
        (
            JournalEntry(request_id="s:0", kind="receive", observed=True, result="m1"),
            JournalEntry(request_id="s:1", kind="send"),
        )
    )
    assert routes.route(_mail("r"), _root_of, 1) == "r"
