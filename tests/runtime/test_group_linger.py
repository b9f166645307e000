"""actors/group_linger.py: which of the supervisor's open groups may wait for more before
their commit, and the timer that ends the wait. Real parts: a SQLite file, the timer
service's thread, a pykka actor told when the group is due."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pykka
import pytest

from subagents.actors.group_linger import (
    COMMIT_DUE,
    LINGER_S,
    NOTHING,
    RECORDS_MOST,
    REPORTS_DUE,
    GroupLinger,
    LateReports,
    Records,
    ReportsDue,
    late_reports,
)
from subagents.actors.mail_desk import MailDesk
from subagents.actors.timer import TimerService
from subagents.messages import (
    Batch,
    Event,
    EventKind,
    Journal,
    MailRead,
    RunFinished,
    WaitingChanged,
)
from subagents.store.memory import MemoryStore
from subagents.store.sqlite import SQLiteStore
from subagents.supervision.effects import Publish, Tell
from subagents.supervision.limits import Limits

from .conftest import WAIT


class _Due(pykka.ThreadingActor):
    def __init__(self, due: threading.Event) -> None:
        super().__init__()
        self.due = due

    def on_receive(self, message: Any) -> None:
        if message is COMMIT_DUE:
            self.due.set()


@pytest.fixture
def parts() -> Iterator[tuple[TimerService, pykka.ActorRef[Any], threading.Event]]:
    timer, due = TimerService(), threading.Event()
    ref = _Due.start(due)
    yield timer, ref, due
    ref.stop()
    timer.stop()


def _event() -> Event:
    return Event(kind=EventKind.MAIL_SENT, run_id="r1", agent="a", root_run_id="r1", ts=1.0)


def test_a_group_of_publications_lingers_until_told_unless_it_holds_the_write_lock(
    tmp_path: Path, parts: tuple[TimerService, pykka.ActorRef[Any], threading.Event]
) -> None:
    timer, ref, due = parts
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        linger = GroupLinger(timer, ref, store)
        publish = [Publish(event=_event())]
        with store.batch():
            store.append_event(_event())  # held: the group has taken no lock
            assert linger.defer(publish)
            assert due.wait(WAIT), "the lingering group was never told to commit"
            assert not linger.defer([*publish, Tell(run_id="r1", message="x")])
            store.list_runs()  # a read: the group's transaction has begun, the lock held
            assert not linger.defer(publish), "a group holding the write lock lingered"
        assert linger.defer(publish)  # a new group, holding nothing yet
    finally:
        store.close()


def test_in_memory_nothing_lingers(
    parts: tuple[TimerService, pykka.ActorRef[Any], threading.Event],
) -> None:
    timer, ref, _ = parts
    assert not GroupLinger(timer, ref, MemoryStore()).defer([Publish(event=_event())])


class _Told(pykka.ThreadingActor):
    """Keeps the ``ReportsDue`` it is told; sets ``due`` at each."""

    def __init__(self, due: threading.Event) -> None:
        super().__init__()
        self.due = due
        self.told: list[ReportsDue] = []

    def on_receive(self, message: Any) -> list[ReportsDue]:
        if type(message) is ReportsDue:
            self.told.append(message)
            self.due.set()
        return list(self.told)


class _Supervisor:
    """What the line reads of its supervisor (``LateReports``): its ref and inbox, its open
    group and held effects, its ``GroupLinger`` (real: a timer service, a store)."""

    def __init__(self, ref: pykka.ActorRef[Any], linger: GroupLinger, desk: Any = None) -> None:
        self.actor_ref, self.actor_inbox = ref, ref.actor_inbox
        self.linger = linger
        self.effector = _Effector(desk)
        self._group: object | None = None
        self._held: list[Any] = []


class _Effector:
    def __init__(self, desk: MailDesk | None) -> None:
        self.mail = desk


def _hand(late: LateReports, now: Any) -> tuple[Any, list[tuple[str, Any, bool]]]:
    handed: list[tuple[str, Any, bool]] = []
    instead = late.hand(
        lambda messages, more: handed.append(("batch", messages, more)),
        lambda message, more: handed.append(("one", message, more)),
        now,
    )
    return instead, handed


class _Clock:
    """Stands for the ``time`` module in ``group_linger``: ``monotonic()`` reads ``now``."""

    def __init__(self, now: float) -> None:
        self.now = now

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def told(
    tmp_path: Path,
) -> Iterator[tuple[TimerService, pykka.ActorRef[Any], threading.Event, SQLiteStore]]:
    timer, due = TimerService(), threading.Event()
    ref = _Told.start(due)
    store = SQLiteStore(tmp_path / "runs.db")
    yield timer, ref, due, store
    ref.stop()
    timer.stop()
    store.close()


def test_late_reports_wake_the_supervisor_once_within_their_delay_and_hand_them_in_order(
    told: tuple[TimerService, pykka.ActorRef[Any], threading.Event, SQLiteStore],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``LateReports``: the agents' reports in one line. One that only records is put
    without waking the supervisor: the first put arms one ``REPORTS_DUE`` (the rest ride on
    it), a put after it fired arms another. The supervisor's handling gets them all, in
    order, into its open group (``more``); before any other message it hands that message
    back, to be handled after them."""
    timer, ref, due, store = told
    monkeypatch.setattr("subagents.actors.group_linger.LINGER_S", 0.001)
    # The line's clock, stepped by the test (the timer's own runs on, real): a thread held
    # more than the 1 ms delay between the two puts (a loaded machine) would see the first
    # deadline past and arm a second wake-up. The line's deadlines, far below the real
    # monotonic clock, are due at once on the timer's thread.
    clock = _Clock(100.0)
    monkeypatch.setattr("subagents.actors.group_linger.time", clock)
    late = LateReports(timer, _Supervisor(ref, GroupLinger(timer, ref, store)))
    assert not late
    first = Batch(messages=(MailRead(run_id="a", mail_ids=("m1",)),))
    second = MailRead(run_id="b", mail_ids=("m2",))
    late.put(first)
    late.put(second)  # (the line's clock has not moved: within the first's delay)
    assert late
    assert due.wait(WAIT), "the reports in line were never due"
    assert _hand(late, REPORTS_DUE) == (
        NOTHING,  # (no group open here: nothing to commit)
        [("batch", Records((*first.messages, second)), True)],  # (both only record)
    )
    assert not late
    assert ref.ask("told", timeout=WAIT) == [REPORTS_DUE]  # one wake-up for both
    due.clear()
    clock.now += 1.0  # past the first's deadline
    late.put(second)  # after it fired: armed again
    assert due.wait(WAIT)
    assert ref.ask("told", timeout=WAIT) == [REPORTS_DUE, REPORTS_DUE]
    ask = object()
    assert _hand(late, ask) == (ask, [("batch", Records((second,)), True)])


class _HeldArm(TimerService):
    """A real timer service whose first arm waits, in the arming thread, until ``release``
    (``reached`` says it got there): a thread held between setting a deadline and arming
    its timer, as the GIL may hold it."""

    def __init__(self) -> None:
        super().__init__()
        self.reached, self.release = threading.Event(), threading.Event()
        self._held = False

    def tell_at(self, key: Any, deadline: float, ref: Any, message: Any) -> None:
        if not self._held:
            self._held = True
            self.reached.set()
            assert self.release.wait(WAIT)
        super().tell_at(key, deadline, ref, message)


def test_two_puts_arming_in_the_other_order_leave_the_later_deadline_armed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two threads see no timer on its way; the first sets its (earlier) deadline and is
    held before it arms; the second, once that deadline is past, sets a later one and arms
    it; then the first arms. With one timer key the earlier arm replaced the later one,
    which ``_due`` kept: once the earlier fired, every report put before the later
    deadline waited for the supervisor's next message (a quiet runtime: for ever). Now the
    later deadline's timer is still armed after the earlier one fired."""
    monkeypatch.setattr("subagents.actors.group_linger.LINGER_S", 0.0)
    timer, due, store = _HeldArm(), threading.Event(), SQLiteStore(tmp_path / "runs.db")
    ref = _Told.start(due)
    try:
        late = LateReports(timer, _Supervisor(ref, GroupLinger(timer, ref, store)))
        first = threading.Thread(target=late.put, args=(MailRead(run_id="a", mail_ids=("1",)),))
        first.start()
        assert timer.reached.wait(WAIT)  # its deadline (now + 0) set, not armed yet
        late.delay = 3600.0  # (the second's deadline: far, never due in this test)
        late.put(MailRead(run_id="b", mail_ids=("2",)))  # sees the first's past: arms its own
        timer.release.set()
        first.join(WAIT)
        assert not first.is_alive()
        assert due.wait(WAIT)  # the first's timer fired
        assert ref.ask("told", timeout=WAIT) == [REPORTS_DUE]
        assert timer.pending() == 1  # the later deadline's timer, still on its way
    finally:
        ref.stop()
        timer.stop()
        store.close()


def test_a_wake_up_takes_what_was_put_up_to_it_and_its_group_commits_by_the_usual_rule(
    told: tuple[TimerService, pykka.ActorRef[Any], threading.Event, SQLiteStore],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A report someone waits on wakes the supervisor at once (a ``ReportsDue`` for it);
    that wake-up takes the reports put up to it, and those put after it wait (as they would
    have in the open group): their own wake-up, the timer, or the next message. Its group
    then commits as one whose last report came in: at once when it holds more than event
    publications, else it lingers (a ``COMMIT_DUE`` on its way: the record of straight mail
    stays uncommitted that long, tests/durability/test_two_senders_crash.py needs it so)."""
    timer, ref, due, store = told
    monkeypatch.setattr("subagents.actors.group_linger.LINGER_S", 3600.0)  # no timer here
    supervisor = _Supervisor(ref, GroupLinger(timer, ref, store))
    late = LateReports(timer, supervisor)
    assert late.delay == 3600.0
    record = MailRead(run_id="a", mail_ids=("m1",))
    waited_on = Batch(messages=(MailRead(run_id="b", mail_ids=("m2",)), _waiting("b")))
    after = MailRead(run_id="c", mail_ids=("m3",))
    late.put(record)
    late.put(waited_on, wake=ref)
    late.put(after)
    assert due.wait(WAIT)
    (wake,) = ref.ask("told", timeout=WAIT)
    supervisor._group = object()
    supervisor._held = [Tell(run_id="r1", message="x")]  # someone waits on it: committed
    assert _hand(late, wake) == (
        COMMIT_DUE,
        [("batch", Records((record,)), True), ("batch", waited_on.messages, True)],
    )
    assert late  # ``after`` waits
    supervisor._held = [Publish(event=_event())]  # only publications: it lingers
    assert _hand(late, wake) == (NOTHING, [])
    ask = object()
    assert _hand(late, ask) == (ask, [("batch", Records((after,)), True)])


def _waiting(run_id: str) -> WaitingChanged:
    return WaitingChanged(run_id=run_id, waiting=True)


def test_consecutive_reports_that_only_record_are_handed_as_one_run_in_order(
    told: tuple[TimerService, pykka.ActorRef[Any], threading.Event, SQLiteStore],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The messages of consecutive reports that only record what happened (mail that went
    straight, journals, read receipts) go to the supervisor as one ``Records`` (one
    decision), in the order put, at most about ``RECORDS_MOST`` at a time; any other
    report ends such a run and is handed after it, as before (so nothing overtakes)."""
    timer, ref, _, store = told
    monkeypatch.setattr("subagents.actors.group_linger.LINGER_S", 3600.0)  # no timer here
    late = LateReports(timer, _Supervisor(ref, GroupLinger(timer, ref, store)))
    reads = [MailRead(run_id=f"r{i}", mail_ids=(f"m{i}",)) for i in range(8)]
    journal = Journal(run_id="j", entries=())
    other = _waiting("w")
    mixed = Batch(messages=(reads[5], other))
    for report in (Batch(messages=(reads[0], journal)), reads[1], reads[2], other, reads[3]):
        late.put(report)
    late.put(Batch(messages=(reads[4],)))
    late.put(mixed)
    late.put(reads[6])
    late.put(reads[7])
    ask = object()
    instead, handed = _hand(late, ask)
    assert instead is ask
    assert [(kind, type(m), m, more) for kind, m, more in handed] == [
        ("batch", Records, (reads[0], journal, reads[1], reads[2]), True),
        ("one", WaitingChanged, other, True),
        ("batch", Records, (reads[3], reads[4]), True),
        ("batch", tuple, mixed.messages, True),
        ("batch", Records, (reads[6], reads[7]), True),
    ]
    assert not late
    many = [MailRead(run_id="r", mail_ids=(f"m{i}",)) for i in range(RECORDS_MOST + 3)]
    for read in many:
        late.put(read)
    _, handed = _hand(late, object())
    assert [m for _, m, _ in handed] == [tuple(many[:RECORDS_MOST]), tuple(many[RECORDS_MOST:])]


def test_agents_put_their_reports_late_where_senders_record_mail_or_the_supervisor_after(
    told: tuple[TimerService, pykka.ActorRef[Any], threading.Event, SQLiteStore],
) -> None:
    """The line where senders record their mail and groups linger (SQLite), and where the
    supervisor records straight mail after it (MemoryStore: its groups commit at once, but
    a report that only records waits in line up to ``LINGER_S``); not where a store's
    senders do not record what the supervisor expects them to."""
    timer, ref, _, store = told

    def desk(recorded: bool) -> MailDesk:
        record = (lambda mails, journal: None) if recorded else None
        return MailDesk(limits=Limits(), generation=lambda: 0, record=record)

    lingers = GroupLinger(timer, ref, store)
    recording = desk(True)
    assert late_reports(_Supervisor(ref, lingers, recording), timer) is recording.late
    assert recording.late is not None
    by_supervisor = desk(False)  # SQLite's senders record: a desk that does not hears at once
    late_reports(_Supervisor(ref, lingers, by_supervisor), timer)
    assert by_supervisor.late is None
    in_memory = GroupLinger(timer, ref, MemoryStore())
    assert in_memory.delay == 0.0  # its groups do not linger
    after = desk(False)  # the supervisor records the mail after: its reports in line too
    late = late_reports(_Supervisor(ref, in_memory, after), timer)
    assert after.late is late
    assert late.delay == LINGER_S
    late_reports(_Supervisor(ref, lingers, None), timer)  # runs hosted elsewhere: no desk


def test_a_wake_ups_last_report_with_nothing_behind_it_is_handed_as_if_told_alone(
    told: tuple[TimerService, pykka.ActorRef[Any], threading.Event, SQLiteStore],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In memory (groups that do not linger), the last report a wake-up takes, with
    nothing behind it in line, goes with ``more=False``, as the report told alone did
    before the line: so a run's end that comes alone is decided straight
    (``actors/alone.py``), not through a group opened and committed around it. Through
    the line every trivial run's end went through a group (counted: ~16 of the
    supervisor's calls per run more, ``benchmarks/spawn.py``). One with a report behind
    it, or taken before another message, still has more to come; with SQLite (groups that
    linger) the line hands it as it did since it came."""
    timer, ref, _, store = told
    monkeypatch.setattr("subagents.actors.group_linger.LINGER_S", 3600.0)  # no timer here
    late = LateReports(timer, _Supervisor(ref, GroupLinger(timer, ref, MemoryStore())))
    record = MailRead(run_id="a", mail_ids=("m1",))
    end = RunFinished(run_id="b", result="done")
    late.put(record)
    late.put(end, wake=ref)
    (wake,) = ref.ask("told", timeout=WAIT)  # (told after the wake-up: in its inbox after)
    assert _hand(late, wake) == (
        NOTHING,  # (no group open here: nothing to commit)
        [("batch", Records((record,)), True), ("one", end, False)],
    )
    ended = Batch(messages=(_waiting("c"), RunFinished(run_id="c", result="done")))
    late.put(ended, wake=ref)
    late.put(record)  # behind it: the wake-up has more to come
    wake = ref.ask("told", timeout=WAIT)[-1]
    assert _hand(late, wake) == (NOTHING, [("batch", ended.messages, True)])
    late.put(end, wake=ref)  # taken first by another message: that message comes after it
    ask = object()
    assert _hand(late, ask) == (ask, [("batch", Records((record,)), True), ("one", end, True)])
    durable = LateReports(timer, _Supervisor(ref, GroupLinger(timer, ref, store)))
    durable.put(end, wake=ref)
    wake = ref.ask("told", timeout=WAIT)[-1]
    assert _hand(durable, wake) == (NOTHING, [("one", end, True)])
