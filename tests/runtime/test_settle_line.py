"""The reports that only settle their runs (a function agent's journal and that it waits) are
held by the supervisor while more messages are queued, and decided together
(``actors/settle_line.py``). What must not change: each is decided before any message that
came after it (an ask, the close's ``StopAll``, a report of another kind).

The queue is made certain, not waited for by chance: the supervisor's thread is held (a
subscriber blocking at the ``started`` event of the last run of a ``spawn_many``) until the
first reports of every run of it, and then the message under test, are in its inbox."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from polling import wait_until
from subagents.actors.settle_line import SETTLE_MOST, SettleLine
from subagents.behaviour.function import AgentContext, FunctionAgent
from subagents.messages import (
    Batch,
    Event,
    EventKind,
    Journal,
    JournalEntry,
    Parked,
    RunStatus,
    WaitingChanged,
)
from subagents.runtime import RunHandle, Runtime
from subagents.store.memory import MemoryStore
from subagents.store.sqlite import SQLiteStore
from subagents.supervision.limits import Limits

from .conftest import WAIT

pytestmark = pytest.mark.usefixtures("no_new_threads")

RUNS = 6


@pytest.fixture(autouse=True)
def _no_deadline_tick(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runs' deadlines go on the timer at once (their 300 s are before the tick): the
    deadline tick (``TICK_S`` after the ``spawn_many``'s first deadline) is not told to
    the held supervisor. Told, it was one message more in its inbox than ``queued``
    counts: when it came after the runs' reports were counted, the wait for the message
    under test never ended (the count went past it), as seen at load on main too."""
    monkeypatch.setattr("subagents.actors.deadlines.TICK_S", 3600.0)


class _HoldAt:
    """Holds the supervisor's thread at the ``started`` event of the run whose task is
    ``task`` until ``gate`` is set; records every event's (run id, kind) in order."""

    def __init__(self, task: str) -> None:
        self.task = task
        self.run_id: str | None = None
        self.held = threading.Event()
        self.gate = threading.Event()
        self.events: list[tuple[str, EventKind]] = []

    def __call__(self, event: Event) -> None:
        self.events.append((event.run_id, event.kind))
        if event.kind is EventKind.SPAWNED and event.data.get("task") == self.task:
            self.run_id = event.run_id  # (its ``started`` event does not carry the task)
        started = event.kind is EventKind.STARTED and event.run_id == self.run_id
        if started and not self.held.is_set():
            self.held.set()
            assert self.gate.wait(WAIT)

    def kinds(self, run_id: str) -> list[EventKind]:
        return [kind for rid, kind in self.events if rid == run_id]


async def _idle(ctx: AgentContext) -> str:
    mail = await ctx.receive(timeout=WAIT)
    return "mail" if mail is not None else "no mail"


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A store where the supervisor records the agents' mail (memory), and one where
    senders record theirs and the agents' reports go in line (``LateReports``)."""
    if request.param == "memory":
        yield MemoryStore()
        return
    db = SQLiteStore(tmp_path / "runs.db")
    yield db
    db.close()


def _runtime(store: Any) -> Runtime:
    """Every run of the ``spawn_many`` starts at once (none queued for a slot); no poll or
    sweep of its own tells the supervisor anything meanwhile."""
    limits = Limits(max_concurrency=2 * RUNS, per_agent=2 * RUNS)
    agents = [FunctionAgent.create("idle", _idle)]
    quiet = {"command_poll_s": 3600, "sweep_every_s": 3600}
    return Runtime(agents, store=store, limits=limits, **quiet)


def _held_first_reports(rt: Runtime, hold: _HoldAt) -> tuple[list[RunHandle], Any]:
    """``RUNS`` runs started by one ``spawn_many``, the supervisor held at the last one's
    start until each run's first report is queued for it; the handles and its inbox."""
    rt.subscribe(hold)
    handles: list[Any] = []
    spawner = threading.Thread(
        target=lambda: handles.extend(rt.spawn_many([("idle", f"t{i}") for i in range(RUNS)]))
    )
    spawner.start()
    assert hold.held.wait(WAIT)
    supervisor = rt._hosting.supervisor
    assert supervisor is not None
    inbox = supervisor._ref.actor_inbox
    late = supervisor._ref._actor_weakref().late

    def queued() -> int:
        """The messages queued for the supervisor: the reports in its late line, each as
        one, with the one wake-up told for them all counted as none (``LateReports.put``:
        the reports put while it is on its way ride on it; two puts that both find none on
        its way tell one), and what else is in its inbox (the message under test: no timer
        tells it anything meanwhile, ``_no_deadline_tick``)."""
        in_line = len(late._reports) - len(late._on_way)
        return int(inbox.qsize()) + in_line

    wait_until(lambda: queued() == RUNS, "every run's first report queued")
    return handles, (spawner, queued)


def test_reports_held_behind_a_busy_supervisor_are_decided_before_the_close(
    store: Any,
) -> None:
    """Each run's report that it waits is decided before the close's ``StopAll`` that came
    after it: every run is waiting, then cancelled. Decided after (held past the ask), the
    runs had ended first and their waiting reports were dropped as stale."""
    hold = _HoldAt(f"t{RUNS - 1}")
    rt = _runtime(store)
    closer = threading.Thread(target=rt.close)
    try:
        handles, (spawner, queued) = _held_first_reports(rt, hold)
        closer.start()
        wait_until(lambda: queued() == RUNS + 1, "the close's StopAll queued behind them")
        hold.gate.set()
        spawner.join(WAIT)
        closer.join(WAIT)
        assert not closer.is_alive()
        assert len(handles) == RUNS
        for handle in handles:
            kinds = [e.kind for e in store.events(handle.run_id)]  # (as recorded, in order)
            assert EventKind.WAITING in kinds, kinds
            assert kinds.index(EventKind.WAITING) < kinds.index(EventKind.CANCELLED), kinds
            record = store.get_run(handle.run_id)
            assert record is not None and record.status is RunStatus.CANCELLED
    finally:
        hold.gate.set()
        rt.close()
        if closer.is_alive():
            closer.join(WAIT)


def test_reports_held_behind_a_busy_supervisor_are_decided_before_an_ask(store: Any) -> None:
    """A run's status asked after its report that it waits says it waits (the report was
    decided first, not held past the ask), and the held reports change nothing else: mail
    sent after wakes each run, which ends with it."""
    hold = _HoldAt(f"t{RUNS - 1}")
    rt = _runtime(store)
    try:
        handles, (spawner, queued) = _held_first_reports(rt, hold)
        spawned = [rid for rid, kind in hold.events if kind is EventKind.SPAWNED]
        assert len(spawned) == RUNS
        answers: dict[str, Any] = {}
        asker = threading.Thread(target=lambda: answers.update(s=rt.status(spawned[-1])))
        asker.start()
        wait_until(lambda: queued() == RUNS + 1, "the ask queued behind them")
        hold.gate.set()
        spawner.join(WAIT)
        asker.join(WAIT)
        assert answers["s"].status is RunStatus.WAITING
        assert [h.run_id for h in handles] == spawned
        for handle in handles:
            handle.send("go")
        for handle in handles:
            outcome = handle.result(WAIT)
            assert outcome.status is RunStatus.COMPLETED and outcome.result == "mail"
            assert EventKind.WAITING in hold.kinds(handle.run_id)
    finally:
        hold.gate.set()
        rt.close()


def test_reports_held_behind_a_busy_supervisor_are_decided_before_a_later_spawn(
    store: Any,
) -> None:
    """A root spawn told after the runs' reports that they wait (a report of another kind)
    is decided after them: in the store's one order of events, every run's ``waiting``
    comes before the later run's ``spawned``."""
    hold = _HoldAt(f"t{RUNS - 1}")
    rt = _runtime(store)
    try:
        handles, (spawner, queued) = _held_first_reports(rt, hold)
        later = rt.spawn("idle", "later")  # told: it returns without waiting for it
        wait_until(lambda: queued() == RUNS + 1, "the later spawn queued behind them")
        hold.gate.set()
        spawner.join(WAIT)
        wait_until(lambda: EventKind.WAITING in hold.kinds(later.run_id), "the later waits")
        order = [(s.event.run_id, s.event.kind) for s in store.events_after(0, limit=10_000)]
        spawned_later = order.index((later.run_id, EventKind.SPAWNED))
        assert len(handles) == RUNS
        for handle in handles:
            assert order.index((handle.run_id, EventKind.WAITING)) < spawned_later, order
    finally:
        hold.gate.set()
        rt.close()


def test_a_held_report_whose_handling_fails_loses_no_other_runs_report(store: Any) -> None:
    """A bug in one held report (a journal whose ``read_mail`` is not a sequence of ids:
    ``MailRoom.read`` raises) leaves that report alone out, as a ``Batch`` that failed on
    its own did before reports were held together: every other run held with it still has
    its report that it waits recorded (its ``waiting`` event and status in the store).
    Decided as one decision that failed as a whole, all of theirs were lost (the core had
    marked them waiting in memory, the store still said running)."""
    hold = _HoldAt(f"t{RUNS - 1}")
    rt = _runtime(store)
    try:
        handles, (spawner, queued) = _held_first_reports(rt, hold)
        spawned = [rid for rid, kind in hold.events if kind is EventKind.SPAWNED]
        supervisor = rt._hosting.supervisor
        assert supervisor is not None and len(spawned) == RUNS
        bad = Journal(run_id=spawned[0], read_mail=5, attempt=1)  # type: ignore[arg-type]
        supervisor._ref.tell(Batch(messages=(bad,)))
        wait_until(lambda: queued() == RUNS + 1, "the bad report queued behind them")
        hold.gate.set()
        spawner.join(WAIT)
        assert len(handles) == RUNS
        for handle in handles:  # (an ask: decided after every report queued before it)
            assert rt.status(handle.run_id).status is RunStatus.WAITING
        for handle in handles:
            kinds = [e.kind for e in store.events(handle.run_id)]
            assert EventKind.WAITING in kinds, (handle.run_id, kinds)
            wait_until(
                lambda h=handle: store.get_run(h.run_id).status is RunStatus.WAITING,
                "the run's waiting committed",
            )
        for handle in handles:  # and they go on as before
            handle.send("go")
        for handle in handles:
            assert handle.result(WAIT).status is RunStatus.COMPLETED
    finally:
        hold.gate.set()
        rt.close()


def test_a_journal_of_the_late_line_is_decided_after_the_reports_held_before_it(
    tmp_path: Path,
) -> None:
    """Where reports go in line (SQLite: ``LateReports``), a run's report held by the settle
    line (a journal and that it waits) and its next journal, put in line after it as a
    report that only records (``Records``), are kept in that order: the supervisor held
    the first (more wake-ups were queued) when it took the second, and decides what it
    holds before a ``Records`` (the lead's merge of e-durable4). Decided after, the store
    had the run's journal out of order (a replay after a crash would meet its calls in
    the wrong order)."""
    store = SQLiteStore(tmp_path / "runs.db")
    hold = _HoldAt(f"t{RUNS - 1}")
    rt = _runtime(store)
    try:
        handles, (spawner, queued) = _held_first_reports(rt, hold)
        spawned = [rid for rid, kind in hold.events if kind is EventKind.SPAWNED]
        supervisor = rt._hosting.supervisor
        assert supervisor is not None and len(spawned) == RUNS
        actor, ref, run = supervisor._ref._actor_weakref(), supervisor._ref, spawned[0]
        late = actor.late
        first, second = (
            JournalEntry(request_id=f"{run}:{n}", kind="receive", call="receive()")
            for n in (90, 91)
        )
        late.put(  # held by the settle line: it settles its run only
            Batch(
                messages=(
                    Journal(run_id=run, entries=(first,), attempt=1),
                    WaitingChanged(run_id=run, waiting=False, attempt=1),
                )
            ),
            wake=ref,
        )
        late.put(Journal(run_id=run, entries=(second,), attempt=1))  # records only: no wake
        late.put(Batch(messages=(Parked(run_id=run, attempt=9),)), wake=ref)  # (stale: void)
        wait_until(lambda: queued() >= RUNS + 2, "the wake-ups queued behind them")  # (+ a timer's)
        hold.gate.set()
        spawner.join(WAIT)
        assert len(handles) == RUNS
        assert rt.status(run).status is RunStatus.RUNNING  # (an ask: after all of them)
        wait_until(lambda: second in store.journal_of(run), "the second journal committed")
        journal = store.journal_of(run)
        assert journal.index(first) < journal.index(second), journal
    finally:
        hold.gate.set()
        rt.close()
        store.close()


def test_a_report_told_alone_while_others_are_held_is_decided_after_them(store: Any) -> None:
    """A run's report of one message (told alone, not in a ``Batch``: a handling that only
    says whether it waits) that comes while the first reports of every run are held joins
    them (one core call, ``SupervisorActor.on_receive``) and is decided after them, in the
    order it came: run 0's own earlier report says it waits, this later one that it does
    not, and an ask after both finds it running. Decided ahead of what was held, the run
    would be left waiting."""
    hold = _HoldAt(f"t{RUNS - 1}")
    rt = _runtime(store)
    try:
        handles, (spawner, queued) = _held_first_reports(rt, hold)
        spawned = [rid for rid, kind in hold.events if kind is EventKind.SPAWNED]
        supervisor = rt._hosting.supervisor
        assert supervisor is not None and len(spawned) == RUNS
        run = spawned[0]
        supervisor._ref.tell(WaitingChanged(run_id=run, waiting=False, attempt=1))
        wait_until(lambda: queued() >= RUNS + 1, "the lone report queued behind them")
        hold.gate.set()
        spawner.join(WAIT)
        assert len(handles) == RUNS
        assert rt.status(run).status is RunStatus.RUNNING  # (an ask: after all of them)
        for other in spawned[1:]:  # (their own reports, held with it, decided too)
            assert rt.status(other).status is RunStatus.WAITING
    finally:
        hold.gate.set()
        rt.close()


def test_the_settle_line_never_decides_more_than_its_most_at_once() -> None:
    """A report of two messages (a journal, that it waits) held after ``SETTLE_MOST - 1``
    single ones is not added to them: what is held is decided first, so no decision (and
    no group: ``GROUP_MAX``) takes more than ``SETTLE_MOST`` messages. Before, 101 went in
    one decision."""
    decided: list[tuple[Any, ...]] = []
    line = SettleLine(lambda: decided.append(line.take()), idle=lambda: False)
    waits = [WaitingChanged(run_id=f"r{i}", waiting=True) for i in range(SETTLE_MOST + 1)]
    for report in waits[: SETTLE_MOST - 1]:
        assert line.hold((report,), more=False)
    pair = (Journal(run_id="r"), waits[-1])
    assert line.hold(pair, more=False)
    assert decided == [tuple(waits[: SETTLE_MOST - 1])]
    assert line.held == list(pair)
