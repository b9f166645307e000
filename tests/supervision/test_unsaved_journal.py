"""UnsavedJournal and MailRoutes: which journal entries a sender's straight mail carries into
its own transaction, without threads (tests/durability/test_two_senders_crash for the crash)."""

from __future__ import annotations

from subagents.messages import Journal, JournalEntry, MailAck, Replay, SendMail
from subagents.store.writes import SaveJournal
from subagents.supervision import unsaved_journal
from subagents.supervision.mail_routes import MailRoutes
from subagents.supervision.resumption import recovered_messages
from subagents.supervision.unsaved_journal import UnsavedJournal


def _entry(position: int, kind: str = "send") -> JournalEntry:
    return JournalEntry(request_id=f"s:{position}", kind=kind)


def _journal(*positions: int) -> Journal:
    return Journal(run_id="s", entries=tuple(_entry(p) for p in positions))


def _received(position: int, mail_id: str = "m1") -> Journal:
    """A receive handed ``mail_id`` (its entry comes with the mail it read)."""
    entry = JournalEntry(request_id=f"s:{position}", kind="receive", observed=True, result=mail_id)
    return Journal(run_id="s", entries=(entry,), read_mail=(mail_id,))


def _carried(journal: Journal) -> SaveJournal:
    return SaveJournal("s", journal.entries, journal.read_mail)


def _mail(request_id: str) -> SendMail:
    return SendMail(request_id=request_id, sender="s", to="r", content="hi")


def _root_of(run_id: str) -> str | None:
    return "root" if run_id in ("s", "r") else None


def test_the_reports_told_are_carried_in_order_as_one_write_until_cleared() -> None:
    unsaved = UnsavedJournal()
    assert unsaved.carried() is None
    unsaved.add(_journal(0))
    assert unsaved.carried() is None  # nothing at risk: a lost call is made again
    unsaved.add(_received(1))
    unsaved.add(_journal(2, 3))
    unsaved.add(Journal(run_id="s"))  # nothing in it: nothing to carry
    received = _received(1).entries
    carried = SaveJournal("s", (_entry(0), *received, _entry(2), _entry(3)), ("m1",))
    assert unsaved.carried() == carried  # with the mail they read: marked read with them
    assert unsaved.told == 4
    unsaved.clear()  # carried by the run's own commit
    assert unsaved.carried() is None
    unsaved.add(_journal(4))
    assert unsaved.carried() is None  # the receive was carried: nothing at risk now


def test_a_mail_acknowledged_by_the_supervisor_commits_the_reports_told_before_it() -> None:
    routes = MailRoutes("s", "root", UnsavedJournal())
    assert routes.unsaved is not None
    routes.journal(_received(0))
    routes.by_supervisor(_mail("q1"), 1)  # after report 1
    routes.journal(_received(2, "m2"))
    routes.answered(MailAck(request_id="q1", error="too big"))  # a refusal proves nothing
    assert routes.unsaved.carried() == SaveJournal(
        "s", (*_received(0).entries, *_received(2, "m2").entries), ("m1", "m2")
    )
    routes.by_supervisor(_mail("q2"), 1)  # after report 2
    routes.journal(_journal(3))
    routes.answered(MailAck(request_id="q2", mail_id="m2", recipient="r"))
    assert routes.unsaved.carried() is None  # the receives are committed: nothing at risk
    routes.journal(_received(4, "m4"))
    carried = SaveJournal("s", (_entry(3), *_received(4, "m4").entries), ("m4",))
    assert routes.unsaved.carried() == carried


def test_a_receive_keeps_mail_straight_and_is_carried_with_it() -> None:
    """The receive is not an observation (its mail need not go by the supervisor): the
    straight mail's own transaction keeps it."""
    routes = MailRoutes("s", "root", UnsavedJournal())
    received = JournalEntry(request_id="s:0", kind="receive", observed=True, result="m1")
    routes.journal(Journal(run_id="s", entries=(received, _entry(1)), read_mail=("m1",)))
    assert routes.route(_mail("q1"), _root_of, 1) == "r"
    assert routes.unsaved is not None
    assert routes.unsaved.carried() == SaveJournal("s", (received, _entry(1)), ("m1",))


def test_an_observation_keeps_mail_straight_and_is_carried_with_it() -> None:
    """What a call saw that the store cannot tell again (a mailbox read, a timeout, a status,
    a ``wait_any``'s first, an error) is carried as a receive is: the mail it decided goes
    straight, its transaction keeping the entry. Where the supervisor records the mail, the
    observation sends mail by the supervisor instead (``MailRoutes.observed``)."""
    looked = JournalEntry(request_id="s:0", kind="mailbox", observed=True, result=[])
    timed_out = JournalEntry(request_id="s:1", kind="receive", observed=True, result=None)
    for entry in (looked, timed_out):
        routes = MailRoutes("s", "root", UnsavedJournal())
        routes.journal(Journal(run_id="s", entries=(_entry(9), entry)))
        assert routes.route(_mail("q1"), _root_of, 1) == "r"
        assert routes.unsaved is not None
        assert routes.unsaved.carried() == SaveJournal("s", (_entry(9), entry))
        elsewhere = MailRoutes("s", "root")
        elsewhere.journal(Journal(run_id="s", entries=(entry,)))
        assert elsewhere.route(_mail("q1"), _root_of, 1) is None


def test_too_many_unsaved_entries_are_forgotten_and_mail_waits_for_an_acknowledgement() -> None:
    routes = MailRoutes("s", "root", UnsavedJournal())
    assert routes.unsaved is not None
    for position in range(unsaved_journal.ENTRIES_MAX + 1):
        routes.journal(_journal(position))
    routes.bounded()  # before the next report is sent
    assert routes.unsaved.carried() is None
    first = _mail("q1")
    assert routes.route(first, _root_of, 1) is None  # what was forgotten may be uncommitted
    routes.by_supervisor(first, 1)
    routes.journal(_received(9999))
    routes.answered(MailAck(request_id="q1", mail_id="m1", recipient="r"))
    assert routes.route(_mail("q2"), _root_of, 1) == "r"
    assert routes.unsaved.carried() == _carried(_received(9999))  # told after q1


def test_a_receipt_told_without_entries_is_carried_and_counted() -> None:
    """A journal report that read mail holds it even with no entry: its receipt goes with
    the carried record (whose ``recorded`` mark leaves the supervisor none to write), and
    counts toward the bound."""
    unsaved = UnsavedJournal()
    unsaved.add(Journal(run_id="s", read_mail=("m7", "m8")))
    assert unsaved.carried() == SaveJournal("s", (), ("m7", "m8"))
    for _ in range(unsaved_journal.ENTRIES_MAX - 2):
        unsaved.add(Journal(run_id="s", read_mail=("m9",)))
    assert not unsaved.overflowing()
    unsaved.add(Journal(run_id="s", read_mail=("m9",)))
    assert unsaved.overflowing()


def test_without_a_sender_record_nothing_is_held() -> None:
    """Where the supervisor records the mail (in memory), it records it after the entries."""
    routes = MailRoutes("s", "root")
    routes.journal(_journal(0))
    routes.bounded()
    assert routes.unsaved is None
    assert routes.route(_mail("q1"), _root_of, 1) == "r"


def test_a_replay_reads_an_entry_written_twice_once() -> None:
    """Told to the supervisor and carried by a later straight mail before its commit was
    known: the journal holds it twice."""
    waiting = JournalEntry(request_id="s:0", kind="receive")
    received = JournalEntry(request_id="s:0", kind="receive", observed=True, result="m1")
    journal = [waiting, received, _entry(1), waiting, _entry(2)]
    (replay,) = recovered_messages("s", (), (), journal)
    assert isinstance(replay, Replay)
    assert replay.entries == (waiting, received, _entry(1), _entry(2))


def test_exactly_entries_max_unsaved_entries_are_all_carried_one_more_are_forgotten() -> None:
    """The boundary: ``ENTRIES_MAX`` entries held (a receive among them) are carried whole,
    with the receive and every entry before it (a replay needs the prefix); one more and
    they are forgotten, and mail waits for the supervisor's acknowledgement."""
    routes = MailRoutes("s", "root", UnsavedJournal())
    assert routes.unsaved is not None
    routes.journal(_received(0))
    for position in range(1, unsaved_journal.ENTRIES_MAX):
        routes.journal(_journal(position))
    routes.bounded()
    assert routes.route(_mail("q1"), _root_of, 1) == "r"
    carried = routes.unsaved.carried()
    assert carried is not None
    assert [e.request_id for e in carried.entries] == [
        f"s:{p}" for p in range(unsaved_journal.ENTRIES_MAX)
    ]
    routes.journal(_journal(unsaved_journal.ENTRIES_MAX))
    routes.bounded()
    assert routes.unsaved.carried() is None
    assert routes.route(_mail("q2"), _root_of, 1) is None
