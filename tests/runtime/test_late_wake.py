"""A report someone waits on wakes the supervisor (a ``ReportsDue``), unless a wake-up told
before is still on its way: then that one takes it too (``LateReports.put``). A start of
many waiting runs (``spawn_many``) puts a report per run while the supervisor is busy with
the batch; each told a wake-up of its own, the supervisor handled one message per run that
found the line already taken. What must hold: every report is taken by a wake-up handled
after it was put, in the order put, whichever thread is where when."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, cast

import pytest

from subagents.actors.group_linger import NOTHING, GroupLinger, LateReports, ReportsDue
from subagents.actors.timer import TimerService
from subagents.messages import WaitingChanged
from subagents.store.sqlite import SQLiteStore

from .conftest import WAIT
from .test_group_linger import _hand, _Supervisor, _Told


def _waiting(run_id: str) -> WaitingChanged:
    return WaitingChanged(run_id=run_id, waiting=True)


class _Parts:
    """A real timer service and store, an actor keeping the ``ReportsDue`` it is told, and
    the line over them (groups linger: a wake-up's last report goes with ``more``)."""

    def __init__(self, tmp_path: Path) -> None:
        self.timer, self.due = TimerService(), threading.Event()
        self.ref = _Told.start(self.due)
        self.store = SQLiteStore(tmp_path / "runs.db")
        linger = GroupLinger(self.timer, self.ref, self.store)
        self.late = LateReports(self.timer, _Supervisor(self.ref, linger))

    def told(self) -> list[ReportsDue]:
        return cast("list[ReportsDue]", self.ref.ask("told", timeout=WAIT))

    def close(self) -> None:
        self.ref.stop()
        self.timer.stop()
        self.store.close()


@pytest.fixture
def parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr("subagents.actors.group_linger.LINGER_S", 3600.0)  # no timer here
    made = _Parts(tmp_path)
    yield made
    made.close()


def test_reports_put_while_a_wake_up_is_on_its_way_ride_on_it(parts: _Parts) -> None:
    """Two reports someone waits on, the second put before the first's wake-up was taken:
    one wake-up, which takes both, in order. A report put after it was taken is told a
    wake-up of its own. (Before: a wake-up per report, the second finding nothing.)"""
    late = parts.late
    first, second, third = _waiting("a"), _waiting("b"), _waiting("c")
    late.put(first, wake=parts.ref)
    late.put(second, wake=parts.ref)
    assert parts.due.wait(WAIT)
    (wake,) = parts.told()
    assert _hand(late, wake) == (NOTHING, [("one", first, True), ("one", second, True)])
    assert not late
    late.put(third, wake=parts.ref)
    told = parts.told()
    assert len(told) == 2 and told[1] is not wake
    assert _hand(late, told[1]) == (NOTHING, [("one", third, True)])


class _HeldList(list[int]):
    """A wake-up's ``later``: its first append waits, in the appending thread, until
    ``release`` (``reached`` says it got there): the thread held between finding the
    wake-up on its way and adding its report to it, as the GIL may hold it."""

    def __init__(self) -> None:
        super().__init__()
        self.reached, self.release = threading.Event(), threading.Event()

    def append(self, item: int) -> None:
        self.reached.set()
        assert self.release.wait(WAIT)
        super().append(item)


def test_a_report_added_to_a_wake_up_taken_meanwhile_is_told_its_own(parts: _Parts) -> None:
    """A put finds a wake-up on its way and is held before it adds its report to it; the
    supervisor takes that wake-up meanwhile (only what was put up to it); then the put adds
    its report, finds the wake-up taken, and tells one of its own, which takes the report.
    Without that look again, the report waited in line for the supervisor's next message
    (a quiet runtime: for ever)."""
    late = parts.late
    first, second = _waiting("a"), _waiting("b")
    late.put(first, wake=parts.ref)
    assert parts.due.wait(WAIT)
    (wake,) = parts.told()
    held = wake.later = _HeldList()
    putting = threading.Thread(target=late.put, args=(second,), kwargs={"wake": parts.ref})
    putting.start()
    try:
        assert held.reached.wait(WAIT)  # found the wake-up on its way, not added yet
        assert _hand(late, wake) == (NOTHING, [("one", first, True)])
    finally:
        held.release.set()
        putting.join(WAIT)
    assert not putting.is_alive()
    told = parts.told()
    assert len(told) == 2, "the report added to a wake-up already taken was never told"
    assert _hand(late, told[1]) == (NOTHING, [("one", second, True)])
    assert not late


class _HeldDict(dict[int, ReportsDue]):
    """The line's wake-up on its way: the first ``get`` made on the thread ``held_on`` reads
    it, then waits until ``release`` (``reached`` says it got there): that put held between
    finding none on its way and claiming one, as the GIL may hold it."""

    def __init__(self, held_on: threading.Thread) -> None:
        super().__init__()
        self.held_on = held_on
        self.reached, self.release = threading.Event(), threading.Event()

    def get(self, key: int, default: Any = None) -> Any:
        found = super().get(key, default)
        if threading.current_thread() is self.held_on and not self.reached.is_set():
            self.reached.set()
            assert self.release.wait(WAIT)
        return found


def test_two_puts_that_both_find_no_wake_up_on_its_way_tell_one(parts: _Parts) -> None:
    """A put finds no wake-up on its way and is held before it claims one; another put
    finds none either, claims one and tells it; the first, let go, finds it claimed and
    rides on it: one wake-up told for both, which takes both, in order. (With the claim
    a plain store after the look, both told one: a count of what is queued for a held
    supervisor, ``test_settle_line.py``'s, found one message more than it expected.)"""
    late = parts.late
    first, second = _waiting("a"), _waiting("b")
    putting = threading.Thread(target=late.put, args=(first,), kwargs={"wake": parts.ref})
    held = late._on_way = _HeldDict(putting)
    putting.start()
    try:
        assert held.reached.wait(WAIT)  # found none on its way, not claimed yet
        late.put(second, wake=parts.ref)
        assert parts.due.wait(WAIT)
    finally:
        held.release.set()
        putting.join(WAIT)
    assert not putting.is_alive()
    (wake,) = parts.told()
    assert _hand(late, wake) == (NOTHING, [("one", first, True), ("one", second, True)])
    assert not late and not held


class _ReadBeforeHeld(list[int]):
    """A wake-up's ``later``: the first time the supervisor's thread (``held_on``) asks how
    many it holds, it counts them, then waits until ``release`` (``reached`` says it got
    there) and answers the count it read before: the supervisor held between reading the
    reports added to the wake-up and going on, as the GIL may hold it."""

    def __init__(self, held_on: threading.Thread) -> None:
        super().__init__()
        self.held_on = held_on
        self.reached, self.release = threading.Event(), threading.Event()

    def __len__(self) -> int:
        read = super().__len__()
        if threading.current_thread() is self.held_on and not self.reached.is_set():
            self.reached.set()
            assert self.release.wait(WAIT)
        return read


def test_a_report_put_while_the_supervisor_reads_a_wake_up_is_taken(parts: _Parts) -> None:
    """The supervisor takes a wake-up and is held as it reads the reports added to it; a
    put meanwhile must not ride on that wake-up (its ``later`` is read already): ``hand``
    lets the wake-up go before it reads ``later``, so the put finds none on its way and
    tells one of its own, which takes the report. (Read first, let go after: the put rode
    on the wake-up, was never read, and waited in line for the supervisor's next message:
    in a quiet runtime, for ever.)"""
    late = parts.late
    first, second = _waiting("a"), _waiting("b")
    late.put(first, wake=parts.ref)
    assert parts.due.wait(WAIT)
    (wake,) = parts.told()
    handed: list[Any] = []
    supervisor = threading.Thread(target=lambda: handed.append(_hand(late, wake)))
    held = wake.later = _ReadBeforeHeld(supervisor)
    supervisor.start()
    try:
        assert held.reached.wait(WAIT)  # the supervisor reads the wake-up's later reports
        late.put(second, wake=parts.ref)
    finally:
        held.release.set()
        supervisor.join(WAIT)
    assert not supervisor.is_alive()
    assert handed == [(NOTHING, [("one", first, True)])]
    told = parts.told()
    assert len(told) == 2, "a report put while the supervisor read its wake-up was never told"
    assert _hand(late, told[1]) == (NOTHING, [("one", second, True)])
    assert not late
