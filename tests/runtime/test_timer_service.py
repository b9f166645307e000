"""The timer service: one thread, due callbacks in order, cancellation, a heap that stays small."""

from __future__ import annotations

import threading
import time

from subagents.actors.timer import TimerService

WAIT = 60.0
"""A hang guard: a passing wait returns at once."""


def test_callbacks_fire_in_deadline_order_and_cancelled_ones_never() -> None:
    timer = TimerService()
    fired: list[str] = []
    done, hold = threading.Event(), threading.Event()
    now = time.monotonic()
    # the first due callback holds the timer's one thread until every timer is set up and
    # "x" cancelled: otherwise a test thread held up 15 ms (a loaded machine) sees "x" fire
    timer.schedule("hold", now, lambda: hold.wait(WAIT))
    timer.schedule("b", now + 0.02, lambda: fired.append("b"))
    timer.schedule("a", now + 0.01, lambda: fired.append("a"))
    timer.schedule("x", now + 0.015, lambda: fired.append("x"))
    timer.schedule("c", now + 0.03, done.set)
    assert timer.cancel("x")
    assert not timer.cancel("x")
    hold.set()
    assert done.wait(WAIT)
    assert fired == ["a", "b"]
    timer.stop()
    assert not timer.alive


def test_cancelled_deadlines_do_not_pile_up_in_the_heap() -> None:
    timer = TimerService()
    far = time.monotonic() + 3600
    for i in range(10_000):  # a deadline per run, cancelled when the run ends
        timer.schedule(("deadline", i), far, lambda: None)
        timer.cancel(("deadline", i))
    assert timer.pending() == 0
    assert timer.heap_size() <= 130
    timer.stop()


def test_a_callback_may_schedule_cancel_and_stop_on_the_timers_own_thread() -> None:
    """Callbacks run on the timer's thread outside its lock (a plain ``Lock`` since the
    close's per-run costs were cut, not re-entrant): one that schedules a timer, cancels
    another and at last stops the service does each at once, none waits on the lock its
    own thread holds."""
    timer = TimerService()
    steps: list[str] = []
    stopped = threading.Event()

    def last() -> None:
        steps.append("last")
        timer.stop()  # from its own thread: not joined
        stopped.set()

    def first() -> None:
        steps.append("first")
        assert timer.cancel("never")
        timer.schedule("last", time.monotonic(), last)

    timer.schedule("never", time.monotonic() + 3600, lambda: steps.append("never"))
    timer.schedule("first", time.monotonic(), first)
    assert stopped.wait(WAIT)
    assert steps == ["first", "last"]
    assert timer.pending() == 0
    timer.stop()
    assert not timer.alive
