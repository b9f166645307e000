"""The reports that only record what happened (mail that went straight, journals, read
receipts), decided as one (``SupervisorCore.recorded``, ``supervision/recorded.py``), without
threads: the same writes, events and inboxes as each decided alone, in order; a report whose
handling fails is left out alone, with its error, and the others are kept."""

from __future__ import annotations

from typing import Any

import msgspec

from subagents.messages import (
    EventKind,
    Journal,
    JournalEntry,
    Mail,
    MailPosted,
    MailRead,
    MailState,
    RunFinished,
    new_id,
)
from subagents.store.writes import AppendEvent, SaveJournal, SaveMails, SetMailsState
from subagents.supervision.effects import Publish

from .test_core import Harness


def _mail(sender: str, recipient: str) -> Mail:
    return Mail(
        mail_id=new_id("m"),
        sender=sender,
        recipient=recipient,
        content="straight",
        sender_agent="worker",
        state=MailState.DELIVERED,
        request_id=new_id("q"),
    )


def _posted(h: Harness, mail: Mail, **changes: Any) -> MailPosted:
    state = h.core.runs.get(mail.recipient)
    assert state is not None
    fields: dict[str, Any] = {"delivered_to": (state.attempt,), "recorded": False}
    return MailPosted(run_id=mail.sender, mails=(mail,), attempt=1, **(fields | changes))


def _pingpong(h: Harness) -> tuple[str, str, list[Any]]:
    """Two runs' reports of two straight mails, each read by its recipient: what a durable
    ping-pong's line holds (the recipient's journal with its read receipt, then its reply),
    the mails recorded by their senders first."""
    root = h.run("lead")
    a, b = h.run("worker", root), h.run("critic", root)
    ping, pong = _mail(a, b), _mail(b, a)
    h.store.save_mails([ping, pong])  # as their senders record them
    reports = [
        _posted(h, ping, recorded=True),
        Journal(
            run_id=b,
            entries=(JournalEntry(request_id=f"{b}:1", kind="receive", observed=True),),
            read_mail=(ping.mail_id,),
        ),
        _posted(h, pong, recorded=True),
        MailRead(run_id=a, mail_ids=(pong.mail_id,)),
    ]
    return a, b, reports


def _seen(h: Harness, a: str, b: str) -> tuple[Any, ...]:
    """What the store and the inboxes say of ``a`` and ``b``'s mail."""
    return (
        sorted({m.mail_id: m.state for m in h.store.mail_for(a) + h.store.mail_for(b)}.values()),
        [[e.kind for e in h.store.events(r)] for r in (a, b)],
        [j.kind for j in h.store.journal_of(b)],
        h.unread(a),
        h.unread(b),
    )


def test_a_line_of_records_decided_as_one_comes_to_what_each_alone_does() -> None:
    alone, together = Harness(), Harness()
    a1, b1, reports = _pingpong(alone)
    for report in reports:
        alone.core._do(alone.core.core.recorded((report,)))
    a2, b2, reports = _pingpong(together)
    decision = together.core._do(together.core.core.recorded(reports))
    assert decision.reply.failed == ()
    seen = _seen(together, a2, b2)
    assert seen == _seen(alone, a1, b1)
    mails, events, journal, unread_a, unread_b = seen
    assert mails == [MailState.READ] * 2  # kept and read
    assert events[0][-2:] == [EventKind.MAIL_SENT, EventKind.MAIL_DELIVERED]
    assert journal == ["receive"] and unread_a == unread_b == []


def test_a_report_that_fails_is_left_out_alone_and_the_others_kept() -> None:
    h = Harness()
    a, b, reports = _pingpong(h)
    bad = _posted(h, _mail(a, b), delivered_to=())  # (its lengths differ: zip raises)
    decision = h.core._do(h.core.core.recorded([reports[0], bad, *reports[1:]]))
    ((failed, error),) = decision.reply.failed
    assert failed is bad and isinstance(error, ValueError)
    mails, _, journal, unread_a, unread_b = _seen(h, a, b)
    assert mails == [MailState.READ] * 2  # the others' all kept
    assert journal == ["receive"] and unread_a == unread_b == []
    assert bad.mails[0].mail_id not in [m.mail_id for m in h.store.mail_for(b)]


def test_a_lines_read_receipts_are_one_write_after_the_writes_to_other_tables() -> None:
    """In a ping-pong every mail's receipt sits between the events of the next: joined, one
    ``UPDATE`` per line (``_Receipts``), made after the events and journals it came among."""
    h = Harness()
    _, _, reports = _pingpong(h)
    read = [r.read_mail for r in reports if type(r) is Journal]
    read += [r.mail_ids for r in reports if type(r) is MailRead]
    decision = h.core._do(h.core.core.recorded(reports))
    receipts = [w for w in decision.writes if type(w) is SetMailsState]
    assert receipts == [SetMailsState(read[0] + read[1], MailState.READ)]
    assert decision.writes[-1] is receipts[0]
    assert {type(w) for w in decision.writes[:-1]} == {AppendEvent, SaveJournal}


def test_a_receipt_is_written_before_a_later_write_to_the_mail_table() -> None:
    """A write to the mail table that changes a mail's state (here a dead letter: its
    recipient ended first, and the notice to its sender) waits for the receipts decided
    before it: each mail's row is written in the order decided. The new mail's own row
    (``SaveMails``, named by no receipt held) may go ahead of them."""
    h = Harness()
    a, b, reports = _pingpong(h)
    h.core.finished(RunFinished(run_id=b, result="done"))
    late = _posted(h, _mail(a, b), delivered_to=(1,))
    decision = h.core._do(h.core.core.recorded([reports[3], late]))
    kinds = [
        (type(w).__name__, getattr(w, "state", None))
        for w in decision.writes
        if type(w) in (SetMailsState, SaveMails)
    ]
    assert kinds[:3] == [
        ("SaveMails", None),
        ("SetMailsState", MailState.READ),
        ("SetMailsState", MailState.DEAD),
    ]
    states = {m.mail_id: m.state for m in h.store.mail_for(b)}
    assert states[late.mails[0].mail_id] is MailState.DEAD


def test_a_memory_lines_receipts_are_one_write_after_the_mails_kept() -> None:
    """Where the supervisor records mail (``MemoryStore``), each straight mail of a line is
    kept by its report (``SaveMails``): named by no receipt held, it goes ahead of them, so
    the line's receipts are still one write, the last; the store ends as each report alone
    leaves it."""
    h = Harness()
    _, _, reports = _pingpong(h)
    unrecorded = [
        msgspec.structs.replace(r, recorded=False) if type(r) is MailPosted else r for r in reports
    ]
    read = [r.read_mail for r in reports if type(r) is Journal]
    read += [r.mail_ids for r in reports if type(r) is MailRead]
    decision = h.core._do(h.core.core.recorded(unrecorded))
    receipts = [w for w in decision.writes if type(w) is SetMailsState]
    assert receipts == [SetMailsState(read[0] + read[1], MailState.READ)]
    assert decision.writes[-1] is receipts[0]
    assert sum(type(w) is SaveMails for w in decision.writes) == 2


def _unrecorded_pingpong(h: Harness) -> tuple[str, str, list[Any]]:
    """``_pingpong``'s line where the supervisor records mail (``MemoryStore``): the mails
    not kept before, each kept by its report."""
    root = h.run("lead")
    a, b = h.run("worker", root), h.run("critic", root)
    ping, pong = _mail(a, b), _mail(b, a)
    entry = JournalEntry(request_id=f"{b}:1", kind="receive", observed=True)
    reports = [
        _posted(h, ping),
        Journal(run_id=b, entries=(entry,), read_mail=(ping.mail_id,)),
        _posted(h, pong),
        MailRead(run_id=a, mail_ids=(pong.mail_id,)),
    ]
    return a, b, reports


def test_a_memory_line_with_its_mails_ahead_of_its_receipts_ends_as_each_report_alone() -> None:
    """The mails a memory line keeps go ahead of the receipts held (``_Receipts``): the
    store, the events and the inboxes end as when each report is decided alone, in order,
    every mail kept and read."""
    alone, together = Harness(), Harness()
    a1, b1, reports = _unrecorded_pingpong(alone)
    for report in reports:
        alone.core._do(alone.core.core.recorded((report,)))
    a2, b2, reports = _unrecorded_pingpong(together)
    decision = together.core._do(together.core.core.recorded(reports))
    assert [type(w) for w in decision.writes].index(SaveMails) < len(decision.writes) - 1
    seen = _seen(together, a2, b2)
    assert seen == _seen(alone, a1, b1)
    mails, _, journal, unread_a, unread_b = seen
    assert mails == [MailState.READ] * 2
    assert journal == ["receive"] and unread_a == unread_b == []


def test_a_mail_kept_that_a_held_receipt_names_waits_for_the_receipt() -> None:
    """A ``SaveMails`` of a mail a receipt held names (its record lands after its receipt)
    does not go ahead of the receipt: the mail's row is written in the order decided, as
    each report alone writes it (the store keeps a mail id once, so which of the two comes
    first decides whether a mail not kept yet ends read; here the mail is kept already)."""
    h = Harness()
    _, _, reports = _pingpong(h)
    pong = reports[2].mails[0]
    again = msgspec.structs.replace(reports[2], recorded=False)
    decision = h.core._do(h.core.core.recorded([reports[3], again]))
    kinds = [type(w).__name__ for w in decision.writes if type(w) in (SetMailsState, SaveMails)]
    assert kinds == ["SetMailsState", "SaveMails"]
    assert decision.writes[0] == SetMailsState((pong.mail_id,), MailState.READ)


def _published(decision: Any) -> list[tuple[EventKind, str]]:
    return [(e.event.kind, e.event.run_id) for e in decision.effects if type(e) is Publish]


def test_a_lines_mail_events_nobody_is_handed_are_kept_and_not_published() -> None:
    """A straight mail's two events are kept whoever listens; published only when someone
    is handed one of their kinds (``Recorded.published``: the runtime's subscribers or
    its debug log), then both, in the order kept. The store ends the same either way."""
    published, unheard, one_kind = Harness(), Harness(), Harness()
    unheard.core.core.recorded_parts.published = lambda _kind: False
    one_kind.core.core.recorded_parts.published = lambda kind: kind is EventKind.MAIL_DELIVERED
    seen, out = [], []
    for h in (published, unheard, one_kind):
        a, b, reports = _unrecorded_pingpong(h)
        decision = h.core._do(h.core.core.recorded(reports))
        seen.append(_seen(h, a, b))
        kept = [(w.event.kind, w.event.run_id) for w in decision.writes if type(w) is AppendEvent]
        out.append((kept, _published(decision)))
    assert seen[0] == seen[1] == seen[2]
    (kept, sent), (kept_unheard, sent_unheard), (kept_one, sent_one) = out
    kinds = [kind for kind, _ in kept]
    assert kinds == [EventKind.MAIL_SENT, EventKind.MAIL_DELIVERED] * 2  # two mails' events
    assert kinds == [k for k, _ in kept_unheard] == [k for k, _ in kept_one]
    assert sent == kept and sent_one == kept_one  # both kinds, in the order kept
    assert sent_unheard == []


def test_a_journal_its_sender_recorded_leaves_no_receipt_to_write() -> None:
    """A journal carried by its run's straight mail (``recorded``) had its entries and the
    receipts of the mail they read committed with that mail (``SaveJournal.read_mail``): the
    supervisor takes the mail out of the run's inbox and writes neither again."""
    h = Harness()
    a, b, reports = _pingpong(h)
    carried = [
        msgspec.structs.replace(r, recorded=True) if type(r) is Journal else r for r in reports
    ]
    decision = h.core._do(h.core.core.recorded(carried))
    assert decision.reply.failed == ()
    receipts = [w for w in decision.writes if type(w) is SetMailsState]
    assert receipts == [SetMailsState(reports[3].mail_ids, MailState.READ)]  # the MailRead's
    assert not [w for w in decision.writes if type(w) is SaveJournal]
    assert h.unread(a) == h.unread(b) == []
