"""``reports_of``: what an agent's held reports of one handling become when they are sent.
Most handlings hold neither a read receipt nor a journal (a run's end): those go as made,
without the per-report conversion; a mix still converts each in its place."""

from __future__ import annotations

from subagents.actors.held_reports import JournalReport, reports_of
from subagents.messages import Journal, JournalEntry, MailRead, RunFinished, WaitingChanged


def test_reports_without_receipt_or_journal_go_as_made() -> None:
    waiting = WaitingChanged(run_id="r", waiting=True, attempt=2)
    end = RunFinished(run_id="r", result="x", attempt=2)
    assert reports_of([waiting, end], "r", 2) == (waiting, end)


def test_a_receipt_and_a_journal_are_made_in_their_places() -> None:
    journal = JournalReport()
    journal.read_mail.append("m2")
    end = RunFinished(run_id="r", result="x", attempt=3)
    made = reports_of([["m1"], journal, end], "r", 3)
    assert made == (
        MailRead(run_id="r", mail_ids=("m1",), attempt=3),
        Journal(run_id="r", entries=(), read_mail=("m2",), attempt=3),
        end,
    )
    # one of them alone, last, is made too
    assert reports_of([end, ["m9"]], "r", 3)[1] == MailRead(run_id="r", mail_ids=("m9",), attempt=3)


def test_a_journal_without_a_receipt_is_made_in_its_place() -> None:
    """A function agent's handling: its one journal report among other reports."""
    journal = JournalReport()
    entry = JournalEntry(request_id="r:0", kind="send")
    journal.entries.append(entry)
    journal.read_mail.append("m1")
    waiting = WaitingChanged(run_id="r", waiting=True, attempt=1)
    end = RunFinished(run_id="r", result="x", attempt=1)
    assert reports_of([waiting, journal, end], "r", 1) == (
        waiting,
        Journal(run_id="r", entries=(entry,), read_mail=("m1",), attempt=1),
        end,
    )
