"""SpawnWindow without a lock on its usual path (``runtime/_spawn_window.py``): many callers
entering while a decider makes room; nothing lost, never more than ``size`` let in, no
wake-up lost. Real threads, a thread switch every microsecond."""

from __future__ import annotations

import queue
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest

from polling import wait_until
from subagents.runtime._spawn_window import SpawnWindow
from subagents.runtime._supervisor_asks import RuntimeClosed

WAIT = 60.0


@pytest.fixture(autouse=True)
def switch_often() -> Iterator[None]:
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(switch)


@pytest.mark.parametrize("size", [1, 3, 16])
def test_many_callers_and_a_decider_lose_nothing_and_never_overfill(size: int) -> None:
    """Six callers enter 400 ids each; a decider decides what was let in, in batches of up
    to five. Every id is let in and decided once; the ids let in and not yet decided (counted
    by the test, after each ``enter`` returns and before each ``decided``) never exceed
    ``size``; no caller is left waiting (the window's wait is 60 s: a lost wake-up would end
    in TimeoutError, recorded as a failure)."""
    window = SpawnWindow(size=size, wait_s=WAIT)
    callers, each = 6, 400
    let_in: queue.SimpleQueue[str] = queue.SimpleQueue()
    counting = threading.Lock()  # (the test's own count, not the window's)
    outstanding = [0]
    most = [0]
    failed: list[BaseException] = []
    go = threading.Barrier(callers + 1)

    def call(me: int) -> None:
        go.wait(WAIT)
        try:
            for i in range(each):
                run_id = f"c{me}-{i}"
                window.enter(run_id)
                with counting:
                    outstanding[0] += 1
                    most[0] = max(most[0], outstanding[0])
                let_in.put(run_id)
        except BaseException as exc:
            failed.append(exc)

    decided: list[str] = []

    def decide() -> None:
        go.wait(WAIT)
        try:
            while len(decided) < callers * each:
                batch = [let_in.get(timeout=WAIT)]
                while len(batch) < 5:
                    try:
                        batch.append(let_in.get_nowait())
                    except queue.Empty:
                        break
                with counting:
                    outstanding[0] -= len(batch)
                decided.extend(batch)
                window.decided(batch)
        except BaseException as exc:
            failed.append(exc)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(callers)]
    threads.append(threading.Thread(target=decide))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT * 2)
    assert not any(t.is_alive() for t in threads)
    assert failed == []
    assert most[0] <= size
    assert sorted(decided) == sorted(f"c{m}-{i}" for m in range(callers) for i in range(each))
    assert len(window) == 0
    assert window.blocked == 0


class _BothAdding(set[str]):
    """A window's ids whose first two adds each wait until both are adding: two callers
    are then both past any look they took before adding, the interleaving a lock-free
    path must survive (made certain here, where thread switches make it only likely)."""

    def __init__(self) -> None:
        super().__init__()
        self.both = threading.Barrier(2)
        self.adds = 0

    def add(self, item: str) -> None:
        self.adds += 1
        if self.adds <= 2:
            self.both.wait(WAIT)
        super().add(item)


def test_two_callers_adding_at_once_into_the_last_room_let_one_in() -> None:
    """One room, two callers adding at the same time: one is let in, the other waits for
    room (not both in: a look before the add would have let both in), and gets in once a
    decision makes room."""
    window = SpawnWindow(size=1, wait_s=WAIT)
    window._undecided = _BothAdding()
    entered: list[str] = []

    def call(run_id: str) -> None:
        window.enter(run_id)
        entered.append(run_id)

    threads = [threading.Thread(target=call, args=(r,)) for r in ("a", "b")]
    for thread in threads:
        thread.start()
    wait_until(lambda: len(entered) == 1 and window.blocked == 1, "one in, one waiting")
    assert len(window) == 1
    assert set(window._undecided) == set(entered)
    window.decided(entered[:1])
    for thread in threads:
        thread.join(WAIT)
    assert sorted(entered) == ["a", "b"]
    assert len(window) == 1


def test_a_close_wakes_the_callers_waiting_for_room_and_refuses_later_ones() -> None:
    window = SpawnWindow(size=2, wait_s=WAIT)
    window.enter("a")
    window.enter("b")
    outcomes: list[BaseException] = []

    def call(run_id: str) -> None:
        try:
            window.enter(run_id)
        except BaseException as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=call, args=(f"w{i}",)) for i in range(3)]
    for thread in threads:
        thread.start()
    wait_until(lambda: window.blocked == 3, "three callers waiting for room")
    window.close()
    for thread in threads:
        thread.join(WAIT)
    assert [type(e) for e in outcomes] == [RuntimeClosed] * 3
    with pytest.raises(RuntimeClosed):
        window.enter("late")
    assert len(window) == 0


class _WaitsBeforeRemoving(set[str]):
    """A window's ids whose removal (``decided``) first runs ``before``: a caller gets all
    the way into its wait while the decision is under way, with its ids still in."""

    before: Callable[[], None] | None = None

    def difference_update(self, *others: Iterable[Any]) -> None:
        before, self.before = self.before, None
        if before is not None:
            before()
        super().difference_update(*others)


class _Woken(threading.Condition):
    """The window's condition, recording whether each wait on it was notified (True) or
    ran out its timeout (False: the window's waits look again then, so a lost wake-up
    costs a whole ``wait_s`` and fails nothing else)."""

    def __init__(self) -> None:
        super().__init__(threading.Lock())
        self.woken: list[bool] = []

    def wait(self, timeout: float | None = None) -> bool:
        notified = super().wait(timeout)
        self.woken.append(notified)
        return notified


@pytest.mark.parametrize("waits_for", ["room", "decision"])
def test_a_caller_that_waits_while_a_decision_is_removing_its_ids_is_woken(
    waits_for: str,
) -> None:
    """The window is full ("a"); a decision of "a" is under way when a caller starts to wait
    (for room, ``enter``; for "a"'s decision, ``settle``) and is waiting before the ids
    leave. The decision must wake it (a notify): it looks whether anybody waits after the
    ids left. A decision that looked before (and saw nobody) would leave it waiting its
    whole ``wait_s`` (the wait then returns False, and the caller goes on late)."""
    window = SpawnWindow(size=1, wait_s=20.0)
    window._changed = changed = _Woken()
    ids = _WaitsBeforeRemoving()
    window._undecided = ids
    window.enter("a")
    outcome: list[object] = []

    def call() -> None:
        try:
            if waits_for == "room":
                window.enter("b")
            else:
                window.settle("a")
            outcome.append("done")
        except BaseException as exc:
            outcome.append(exc)

    caller = threading.Thread(target=call)

    def caller_waiting() -> None:
        caller.start()
        wait_until(lambda: bool(changed._waiters), "the caller waiting")  # type: ignore[attr-defined]

    ids.before = caller_waiting
    window.decided(["a"])
    caller.join(WAIT)
    assert outcome == ["done"]
    assert changed.woken == [True]
    assert set(window._undecided) == ({"b"} if waits_for == "room" else set())
