"""Mail a run took straight to its recipients, heard of after (``MailRoom.posted``), without
threads: recorded and announced as any mail, delivered again to a restarted recipient, a dead
letter with its notice when the recipient ended first."""

from __future__ import annotations

from subagents.messages import (
    DeliverMail,
    EventKind,
    Mail,
    MailPosted,
    MailState,
    RunFinished,
    new_id,
)
from subagents.supervision.effects import Effect

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


def test_mail_its_sender_recorded_is_not_written_again() -> None:
    h = Harness()
    root = h.run("lead")
    a, b = h.run("worker", root), h.run("critic", root)
    mail, _ = _posted(h, a, b, _attempt(h, b), recorded=True)
    assert h.unread(b) == [mail.mail_id]
    assert h.store.mail_for(b) == []  # the sender's write is the only one


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
