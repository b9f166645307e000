"""The timer service: one thread, due callbacks in order, cancellation, a heap that stays small."""

from __future__ import annotations

import math
import threading
import time
import weakref

import pytest

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
    timer.cancel("x")
    timer.cancel("x")  # (twice: nothing more)
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
    pending: list[int] = []
    stopped = threading.Event()

    def last() -> None:
        steps.append("last")
        timer.stop()  # from its own thread: not joined
        stopped.set()

    def first() -> None:
        steps.append("first")
        timer.cancel("never")
        timer.schedule("last", time.monotonic(), last)
        pending.append(timer.pending())  # (read on its own thread: takes in, never waits)

    timer.schedule("never", time.monotonic() + 3600, lambda: steps.append("never"))
    timer.schedule("first", time.monotonic(), first)
    assert stopped.wait(WAIT)
    assert steps == ["first", "last"]
    assert pending == [1]
    assert timer.pending() == 0
    timer.stop()
    assert not timer.alive


def test_an_arm_earlier_than_the_one_the_thread_sleeps_until_wakes_it() -> None:
    """The thread sleeps until the earliest deadline it knows: an arm before it rings."""
    timer = TimerService()
    fired = threading.Event()
    timer.schedule("far", time.monotonic() + 3600, lambda: None)
    assert timer.pending() == 1  # taken in: the thread sleeps until the far one now
    timer.schedule("near", time.monotonic(), fired.set)
    assert fired.wait(WAIT)
    assert timer.pending() == 1
    timer.stop()


def test_timers_armed_and_cancelled_from_many_threads_fire_exactly_once() -> None:
    """Arms and cancels from eight threads at once (no lock): every timer not cancelled
    fires once, no cancelled one fires, and a key armed twice fires once (the later). The
    timer's thread is held in a callback meanwhile, so every deadline has passed when it
    takes them in: what it fires is decided by the line alone, not by a loaded machine."""
    timer = TimerService()
    fired: list[str] = []
    done, holding, hold = threading.Event(), threading.Event(), threading.Event()
    expected = 8 * 200
    now = time.monotonic()

    def held() -> None:
        holding.set()
        hold.wait(WAIT)

    timer.schedule("hold", now, held)
    assert holding.wait(WAIT)

    def fire(name: str) -> None:
        fired.append(name)
        if len(fired) == expected:
            done.set()

    def arm(t: int) -> None:
        for i in range(400):
            key = f"{t}-{i}"
            timer.schedule(key, now, lambda key=key: fire(key + " first"))
            if i % 2:
                timer.cancel(key)
            else:
                timer.schedule(key, now + i * 1e-5, lambda key=key: fire(key))

    threads = [threading.Thread(target=arm, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    hold.set()
    assert done.wait(WAIT)
    assert sorted(fired) == sorted(f"{t}-{i}" for t in range(8) for i in range(0, 400, 2))
    assert timer.pending() == 0
    timer.stop()


def test_a_finalizer_run_by_an_arm_may_cancel_a_timer() -> None:
    """Arming takes no lock, so code that runs in the middle of an arm (a finalizer, a GC
    callback, a signal handler) may arm or cancel a timer too. Here re-arming a key drops
    its old callback, whose object's ``__del__`` cancels another timer. With a lock around
    the arm (before), that cancel waited for ever on the lock its own thread held."""
    timer = TimerService()
    far = time.monotonic() + 3600
    collected = threading.Event()

    class Owner:
        def __del__(self) -> None:
            timer.cancel("owner's")
            collected.set()

    def rearm() -> None:
        owner = Owner()
        timer.schedule("owner's", far, print)
        timer.schedule("k", far, lambda owner=owner: print(owner))  # the last ref to it
        del owner
        timer.schedule("k", far, print)  # replaces the lambda: Owner dies with it

    worker = threading.Thread(target=rearm, daemon=True)
    worker.start()
    worker.join(WAIT)
    assert not worker.is_alive(), "a cancel inside an arm deadlocked"
    assert timer.pending() == 1  # "k": the cancel from the finalizer was applied
    assert collected.is_set()
    timer.stop()


def test_a_stopped_service_fires_nothing_and_answers_its_readers() -> None:
    """A timer due when the service stops never fires. It is made due while the timer's
    thread is held in a callback (not armed 50 ms ahead and stopped right after: a test
    thread held longer than that on a loaded machine saw it fire)."""
    timer = TimerService()
    fired: list[str] = []
    holding, release = threading.Event(), threading.Event()

    def held() -> None:
        holding.set()
        release.wait(WAIT)

    timer.schedule("hold", time.monotonic(), held)
    assert holding.wait(WAIT)
    timer.schedule("soon", time.monotonic(), lambda: fired.append("soon"))  # due now
    timer.stop(timeout=0)  # (held: not waited for)
    release.set()
    timer.stop()
    assert not timer.alive
    timer.schedule("after", time.monotonic(), lambda: fired.append("after"))
    timer.cancel("soon")
    assert timer.pending() == 0
    assert timer.heap_size() == 0
    assert fired == []


def test_a_bad_key_or_deadline_is_the_callers_error_and_the_timer_goes_on() -> None:
    """Arms are taken in on the timer's thread: one it could not take (a key it cannot
    hash, a deadline it cannot compare) would end that thread for every timer. Refused at
    the call instead, with the error naming what was wrong."""
    timer = TimerService()
    fired = threading.Event()
    with pytest.raises(TypeError, match="unhashable"):
        timer.schedule(["a", "list"], time.monotonic(), print)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="unhashable"):
        timer.cancel({"a": "dict"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="float"):
        timer.schedule("no deadline", None, print)  # type: ignore[arg-type]
    timer.schedule("int deadline", int(time.monotonic()), fired.set)  # an int is a number
    assert fired.wait(WAIT)
    assert timer.alive
    assert timer.pending() == 0
    timer.stop()


def test_a_nan_deadline_is_refused_at_the_arm_and_the_timer_goes_on() -> None:
    """A NaN deadline compares false with everything: on the timer's thread it sat at the
    top of the heap, never due, and the wait for it (``SimpleQueue.get(timeout=nan)``)
    raised ValueError there, ending the thread: no timer of the process fired again (run
    deadlines, receive timeouts). Refused at the call instead, like a bad key."""
    timer = TimerService()
    fired = threading.Event()
    with pytest.raises(ValueError, match="NaN"):
        timer.schedule("nan", math.nan, print)
    with pytest.raises(ValueError, match="NaN"):
        timer.schedule_in("nan in", math.nan, print)
    timer.schedule("after", time.monotonic(), fired.set)
    assert fired.wait(WAIT)
    assert timer.alive
    assert timer.pending() == 0
    timer.stop()


def test_an_empty_tuple_is_a_key_like_any_other() -> None:
    """A tuple key is counted by its first item (``scheduled_kinds``), taken in on the
    timer's thread: ``()`` has none, and its IndexError there ended the thread (every
    timer after it never fired)."""
    timer = TimerService()
    fired = threading.Event()
    timer.schedule((), time.monotonic(), fired.set)
    assert fired.wait(WAIT)
    again = threading.Event()
    timer.schedule(("kind", 1), time.monotonic(), again.set)
    assert again.wait(WAIT)
    assert timer.alive
    assert timer.scheduled == 2
    assert timer.scheduled_kinds == {"kind": 1}
    timer.stop()


def test_a_cancel_after_the_stop_keeps_nothing() -> None:
    """Once the thread has stopped nobody takes the line in: a cancel put there then (the
    runs' actors stopping after the runtime's timer, on close) stayed, with its key, for
    as long as the service lived."""
    timer = TimerService()
    timer.stop()

    class Key:
        pass

    key = Key()
    gone = weakref.ref(key)
    timer.cancel(key)
    del key
    assert gone() is None
