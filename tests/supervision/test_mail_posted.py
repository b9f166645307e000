"""Mail a run took straight to its recipients, heard of after (``MailRoom.posted``), without
threads: recorded and announced as any mail, delivered again to a restarted recipient, a dead
letter with its notice when the recipient ended first; and mail whose sender's record lost its
answer, sent by the supervisor under the record's mail id: kept and delivered once."""

from __future__ import annotations

from subagents.messages import (
    DeliverMail,
    EventKind,
    Mail,
    MailPosted,
    MailRead,
    MailState,
    RunFinished,
    SendMail,
    new_id,
)
from subagents.store.writes import AppendEvent
from subagents.supervision.effects import Effect, Publish

from .test_core import Harness, told


def _posted(
    h: Harness, sender: str, recipient: str, attempt: int, *, recorded: bool
) -> tuple[Mail, list[Effect]]:
    """``sender`` reports ``mail`` it took straight to the start ``attempt`` of ``recipient``:
    the mail, and what the core's decision comes to."""
    mail = Mail(
        mail_id=new_id("m"),
        sender=sender,
        recipient=recipient,
        content="straight",
        sender_agent="worker",
        state=MailState.DELIVERED,
        request_id=new_id("q"),
    )
    msg = MailPosted(
        run_id=sender, mails=(mail,), delivered_to=(attempt,), recorded=recorded, attempt=1
    )
    return mail, list(h.core._do(h.core.core.mails_posted(msg)).effects)


def _attempt(h: Harness, run_id: str) -> int:
    state = h.core.runs.get(run_id)
    assert state is not None
    return state.attempt


def test_mail_that_went_straight_is_in_the_inbox_the_record_and_the_events() -> None:
    h = Harness()
    root = h.run("lead")
    a, b = h.run("worker", root), h.run("critic", root)
    mail, effects = _posted(h, a, b, _attempt(h, b), recorded=False)
    assert h.unread(b) == [mail.mail_id]
    (kept,) = [m for m in h.store.mail_for(b) if m.mail_id == mail.mail_id]
    assert kept.state is MailState.DELIVERED  # not recorded by its sender: written here
    assert [e.kind for e in h.store.events(a)][-1] is EventKind.MAIL_SENT
    assert [e.kind for e in h.store.events(b)][-1] is EventKind.MAIL_DELIVERED
    assert told(effects, b, DeliverMail) == []  # it has it already


def _mail_events(h: Harness, since: int) -> list[tuple[EventKind, str, dict[str, object]]]:
    """The mail events appended after event ``since``, in order: kind, run and data."""
    mail_kinds = (EventKind.MAIL_SENT, EventKind.MAIL_DELIVERED)
    return [
        (s.event.kind, s.event.run_id, s.event.data)
        for s in h.store.events_after(since)
        if s.event.kind in mail_kinds
    ]


def test_a_post_of_one_mail_is_announced_as_one_of_several_mails_is() -> None:
    """A post of one mail (a ping-pong's every mail: announced without grouping pairs,
    ``mailing.announce_one``) makes the events a post of several makes for each of its
    (sender, recipient) pairs (``mailing.announce``): ``mail_sent`` on the sender, then
    ``mail_delivered`` on the recipient, one mail's shape."""
    h = Harness()
    root = h.run("lead")
    a, b, c = h.run("worker", root), h.run("critic", root), h.run("critic", root)
    since = h.store.last_event_seq()
    one, _ = _posted(h, a, b, _attempt(h, b), recorded=False)
    alone = _mail_events(h, since)
    assert alone == [
        (EventKind.MAIL_SENT, a, {"mail_id": one.mail_id, "recipient": b}),
        (EventKind.MAIL_DELIVERED, b, {"mail_id": one.mail_id, "sender": a}),
    ]
    since = h.store.last_event_seq()
    to_b, to_c = (
        Mail(
            mail_id=new_id("m"),
            sender=a,
            recipient=r,
            content="straight",
            state=MailState.DELIVERED,
            request_id=new_id("q"),
        )
        for r in (b, c)
    )
    msg = MailPosted(
        run_id=a,
        mails=(to_b, to_c),
        delivered_to=(_attempt(h, b), _attempt(h, c)),
        recorded=False,
        attempt=1,
    )
    h.core._do(h.core.core.mails_posted(msg))
    assert _mail_events(h, since) == [
        (EventKind.MAIL_SENT, a, {"mail_id": to_b.mail_id, "recipient": b}),
        (EventKind.MAIL_DELIVERED, b, {"mail_id": to_b.mail_id, "sender": a}),
        (EventKind.MAIL_SENT, a, {"mail_id": to_c.mail_id, "recipient": c}),
        (EventKind.MAIL_DELIVERED, c, {"mail_id": to_c.mail_id, "sender": a}),
    ]
    assert h.unread(b) == [one.mail_id, to_b.mail_id] and h.unread(c) == [to_c.mail_id]


def test_mail_its_sender_recorded_is_not_written_again() -> None:
    h = Harness()
    root = h.run("lead")
    a, b = h.run("worker", root), h.run("critic", root)
    mail, _ = _posted(h, a, b, _attempt(h, b), recorded=True)
    assert h.unread(b) == [mail.mail_id]
    assert h.store.mail_for(b) == []  # the sender's write is the only one


def test_a_straight_mails_events_are_trusted_only_when_its_sender_recorded_it() -> None:
    """``AppendEvent.checked`` (the SQLite store holds the events unchecked) only for a mail
    its sender recorded (its ids checked to encode and read back there), whether or not the
    events are published; a mail written here is not trusted. Seen failing with the events
    trusted whatever ``recorded`` said."""
    for published in (False, True):
        for recorded in (False, True):
            h = Harness()
            h.core.core.recorded_parts.published = lambda kind, wanted=published: wanted  # type: ignore[misc]
            root = h.run("lead")
            a, b = h.run("worker", root), h.run("critic", root)
            mail = Mail(
                mail_id=new_id("m"),
                sender=a,
                recipient=b,
                content="straight",
                state=MailState.DELIVERED,
            )
            msg = MailPosted(
                run_id=a, mails=(mail,), delivered_to=(_attempt(h, b),), recorded=recorded
            )
            decision = h.core.core.mails_posted(msg)
            events = [w for w in decision.writes if isinstance(w, AppendEvent)]
            kinds = [w.event.kind for w in events]
            assert kinds == [EventKind.MAIL_SENT, EventKind.MAIL_DELIVERED], (published, kinds)
            assert [w.checked for w in events] == [recorded, recorded], (published, recorded)
            published_events = [e.event for e in decision.effects if isinstance(e, Publish)]
            assert published_events == ([w.event for w in events] if published else [])


def test_mail_handed_to_a_start_since_left_is_delivered_to_the_current_one() -> None:
    h = Harness()
    root = h.run("lead")
    a, b = h.run("worker", root), h.run("critic", root)
    mail, effects = _posted(h, a, b, _attempt(h, b) - 1, recorded=False)
    (again,) = told(effects, b, DeliverMail)
    assert again.mails == (mail,)
    assert h.unread(b) == [mail.mail_id]


def test_mail_to_a_run_that_ended_before_the_report_is_a_dead_letter_its_sender_hears_of() -> None:
    h = Harness()
    root = h.run("lead")
    a, b = h.run("worker", root), h.run("critic", root)
    attempt = _attempt(h, b)
    h.core.finished(RunFinished(run_id=b, result="done"))
    mail, effects = _posted(h, a, b, attempt, recorded=False)
    (kept,) = [m for m in h.store.mail_for(b) if m.mail_id == mail.mail_id]
    assert kept.state is MailState.DEAD
    assert EventKind.DEAD_LETTER in [e.kind for e in h.store.events(b)]
    (notice,) = told(effects, a, DeliverMail)
    assert notice.mails[0].content == (
        f"[dead letter] your mail {mail.mail_id} to critic ({b}) was not read before it ended"
        " (completed)"
    )
    assert h.unread(a) == [notice.mails[0].mail_id]


def _named_send(sender: str, recipient: str, mail_id: str) -> SendMail:
    """A mail its sender's record named (``SendMail.mail_id``): the record's answer was lost
    (a node's, timed out), so it goes by the supervisor."""
    return SendMail(
        request_id=new_id("q"), sender=sender, to=recipient, content="hi", mail_id=mail_id
    )


def test_mail_named_by_a_record_whose_answer_was_lost_is_kept_and_delivered_once() -> None:
    """The sender's record was written after all (before the supervisor's, or after it and
    after the recipient read the mail): one mail, under the record's id, delivered once, and
    a read mail stays read."""
    h = Harness()
    root = h.run("lead")
    a, b = h.run("worker", root), h.run("critic", root)
    for late in (False, True):
        mail_id = new_id("m")
        record = Mail(
            mail_id=mail_id,
            sender=a,
            recipient=b,
            content="hi",
            sender_agent="worker",
            state=MailState.DELIVERED,
        )
        if not late:  # the record landed before the supervisor had the mail
            h.store.save_mails([record])
        ack, effects = h.core.send_mail(_named_send(a, b, mail_id))
        assert ack.error is None and ack.mail_id == mail_id
        (delivered,) = told(effects, b, DeliverMail)
        assert [m.mail_id for m in delivered.mails] == [mail_id]
        h.core.mail_reads([MailRead(run_id=b, mail_ids=(mail_id,))])
        if late:  # the record landed after the recipient had read the mail
            h.store.save_mails([record])
        kept = [m for m in h.store.mail_for(b) if m.mail_id == mail_id]
        assert [m.state for m in kept] == [MailState.READ]
        assert h.unread(b) == []


def test_mail_named_by_a_record_to_a_run_that_ended_since_is_kept_as_a_dead_letter() -> None:
    """The record (written after all) kept it as delivered; the recipient ended before the
    supervisor had it: the supervisor's state, a dead letter, is what is kept."""
    h = Harness()
    root = h.run("lead")
    a, b = h.run("worker", root), h.run("critic", root)
    h.core.finished(RunFinished(run_id=b, result="done"))
    mail_id = new_id("m")
    record = Mail(mail_id=mail_id, sender=a, recipient=b, content="hi", state=MailState.DELIVERED)
    h.store.save_mails([record])
    ack, effects = h.core.send_mail(_named_send(a, b, mail_id))
    assert ack.dead_letter and ack.mail_id == mail_id
    assert told(effects, b, DeliverMail) == []
    assert [(m.mail_id, m.state) for m in h.store.mail_for(b)] == [(mail_id, MailState.DEAD)]


def test_mail_named_by_a_record_from_a_sender_that_ended_since_is_never_left_delivered() -> None:
    """The sender's record (its answer lost: a node's, timed out) may have been written; the
    sender ended before the supervisor had the mail, so the supervisor refuses it and nobody
    hands it to the recipient. Whichever came first, the record or the refusal, the store
    keeps it as a dead letter, not as delivered and unread: a recipient restored from the
    store would be handed a mail that was refused (and that the sender's next start sends
    again). Before, the early record stayed DELIVERED, and a late one was kept as DELIVERED."""
    h = Harness()
    root = h.run("lead")
    b = h.run("critic", root)
    for late in (False, True):
        a = h.run("worker", root)
        mail_id = new_id("m")
        record = Mail(
            mail_id=mail_id, sender=a, recipient=b, content="hi", state=MailState.DELIVERED
        )
        if not late:
            h.store.save_mails([record])
        h.core.finished(RunFinished(run_id=a, result="done"))
        ack, effects = h.core.send_mail(_named_send(a, b, mail_id))
        assert ack.error is not None and "not running" in ack.error
        assert told(effects, b, DeliverMail) == []
        if late:
            h.store.save_mails([record])
        kept = [(m.mail_id, m.state) for m in h.store.mail_for(b) if m.mail_id == mail_id]
        assert kept == [(mail_id, MailState.DEAD)], (late, kept)
        assert mail_id not in h.unread(b)
