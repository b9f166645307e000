"""The thread pool under agent actors: threads reused, parked ones ended, nothing leaks."""

from __future__ import annotations

import contextvars
import functools
import queue
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest

from polling import wait_until
from subagents.actors.inbox import FastInboxActor
from subagents.actors.threads import PoolClosed, ThreadPool
from subagents.behaviour.function import AgentContext
from subagents.messages import RunStatus
from subagents.runtime import Runtime

from .conftest import WAIT


def _run_and_wait(pool: ThreadPool) -> threading.Thread:
    """Run one job on the pool; the thread it ran on."""
    ran: queue.SimpleQueue[threading.Thread] = queue.SimpleQueue()
    pool.run(lambda: ran.put(threading.current_thread()))
    return ran.get(timeout=WAIT)


def _wait_parked(pool: ThreadPool, n: int) -> None:
    """Wait until ``n`` threads are parked (a thread parks just after its job returned)."""
    assert pool.wait_until(lambda c: c.parked >= n, WAIT)


def test_a_parked_thread_runs_the_next_job() -> None:
    pool = ThreadPool(name="t-pool")
    first = _run_and_wait(pool)
    _wait_parked(pool, 1)
    second = _run_and_wait(pool)
    assert second is first
    assert first.name.startswith("t-pool-")
    assert pool.threads == 1
    assert pool.close(WAIT) == []
    assert not first.is_alive()


def test_a_busy_thread_is_not_given_a_second_job() -> None:
    pool = ThreadPool()
    release = threading.Event()
    started = threading.Event()
    ran_on: list[threading.Thread] = []

    def blocker() -> None:
        ran_on.append(threading.current_thread())
        started.set()
        release.wait(WAIT)

    pool.run(blocker)
    assert started.wait(WAIT)
    other = _run_and_wait(pool)  # the first thread is busy: a second one runs this
    assert other is not ran_on[0]
    release.set()
    assert pool.close(WAIT) == []


def test_parked_threads_end_after_the_idle_time() -> None:
    pool = ThreadPool(idle_s=0.05)
    thread = _run_and_wait(pool)
    thread.join(WAIT)  # parked, then ended by itself
    assert not thread.is_alive()
    assert pool.parked == 0 and pool.threads == 0
    assert _run_and_wait(pool) is not thread  # a new thread for the next job
    pool.close(WAIT)


def test_no_more_than_max_idle_threads_stay_parked() -> None:
    pool = ThreadPool(max_idle=1)
    release = threading.Event()
    started = [threading.Event() for _ in range(3)]

    def hold(event: threading.Event) -> None:
        event.set()
        release.wait(WAIT)

    for event in started:
        pool.run(functools.partial(hold, event))
    for event in started:
        assert event.wait(WAIT)
    assert pool.threads == 3
    release.set()
    # one parks, the other two end instead of parking
    assert pool.wait_until(lambda c: c.threads == 1 and c.parked == 1, WAIT)
    assert pool.threads == 1 and pool.parked == 1
    pool.close(WAIT)


def test_each_job_starts_with_a_fresh_context() -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    pool = ThreadPool()
    seen: queue.SimpleQueue[str] = queue.SimpleQueue()

    def job() -> None:
        seen.put(var.get())
        var.set("set by an earlier run")

    pool.run(job)
    assert seen.get(timeout=WAIT) == "unset"
    _wait_parked(pool, 1)
    pool.run(job)  # same thread, but what the first job set is gone
    assert seen.get(timeout=WAIT) == "unset"
    pool.close(WAIT)


def test_a_failing_job_does_not_kill_its_thread() -> None:
    pool = ThreadPool()
    failed_on: queue.SimpleQueue[threading.Thread] = queue.SimpleQueue()

    def boom() -> None:
        failed_on.put(threading.current_thread())
        raise RuntimeError("boom")

    pool.run(boom)
    thread = failed_on.get(timeout=WAIT)
    _wait_parked(pool, 1)
    assert _run_and_wait(pool) is thread
    pool.close(WAIT)


def test_a_closed_pool_runs_nothing_and_reports_busy_threads() -> None:
    pool = ThreadPool()
    release = threading.Event()
    started = threading.Event()

    def hold() -> None:
        started.set()
        release.wait(WAIT)

    pool.run(hold)
    assert started.wait(WAIT)
    busy = pool.close(0.05)
    assert len(busy) == 1 and busy[0].is_alive()
    with pytest.raises(PoolClosed, match="closed"):
        pool.run(lambda: None)
    release.set()
    busy[0].join(WAIT)
    assert not busy[0].is_alive()


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="idle_s"):
        ThreadPool(idle_s=0)
    with pytest.raises(ValueError, match="max_idle"):
        ThreadPool(max_idle=-1)


def test_runs_reuse_threads_and_closing_leaves_none() -> None:
    before = set(threading.enumerate())
    threads: set[threading.Thread] = set()

    def where(ctx: AgentContext) -> str:
        threads.add(threading.current_thread())
        return ctx.task

    with Runtime({"where": where}) as rt:
        for i in range(20):  # one after another: a parked thread takes each next run
            assert rt.run("where", str(i), wait=WAIT).result == str(i)
    assert len(threads) < 20
    left = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    assert left == [], [t.name for t in left]


def test_fast_inbox_actor_keeps_order_and_answers_asks() -> None:
    class Echo(FastInboxActor):
        def __init__(self) -> None:
            super().__init__()
            self.seen: list[int] = []

        def on_receive(self, message: object) -> object:
            if message == "seen":
                return list(self.seen)
            assert isinstance(message, int)
            self.seen.append(message)
            return None

    ref = Echo.start()
    try:
        for i in range(1000):
            ref.tell(i)
        assert ref.ask("seen", timeout=WAIT) == list(range(1000))
    finally:
        ref.stop()
    assert not ref.is_alive()


def test_runs_finish_after_their_thread_was_reused() -> None:
    # A run whose loop ends returns its thread; the next run on it is a new actor with its own
    # inbox: nothing of the first one's mailbox reaches it.
    async def twice(ctx: AgentContext) -> str:
        child = await ctx.spawn("leaf", ctx.task)
        return f"{ctx.task}:{child.result}"

    def leaf(ctx: AgentContext) -> str:
        return ctx.task.upper()

    with Runtime({"twice": twice, "leaf": leaf}) as rt:
        outcomes = [rt.run("twice", f"t{i}", wait=WAIT) for i in range(10)]
    assert [o.status for o in outcomes] == [RunStatus.COMPLETED] * 10
    assert [o.result for o in outcomes] == [f"t{i}:T{i}" for i in range(10)]


def _start_paused(at_start: threading.Event, go: threading.Event) -> Callable[..., Any]:
    """A trace function for one thread: its call of ``Thread.start`` waits for ``go`` (after
    setting ``at_start``), holding the pool's thread made and not started yet."""
    start_code = threading.Thread.start.__code__

    def trace(frame: FrameType, event: str, _arg: object) -> None:
        if event == "call" and frame.f_code is start_code:
            at_start.set()
            go.wait(WAIT)

    return trace


def _closed(pool: ThreadPool) -> bool:
    try:
        pool.try_run(lambda: None)
    except PoolClosed:
        return True
    return False


@pytest.mark.parametrize("how", ["run", "add_spare"])
def test_a_close_sees_the_thread_a_concurrent_start_made(how: str) -> None:
    """``close`` runs while a ``run`` (or ``add_spare``) has made its thread and not started
    it yet (held at ``Thread.start`` by a trace function). The thread must be joined, or
    named among those still alive: before, ``join`` of a thread not started raised (and was
    ignored), so close returned with none named, and the thread started after it and ran
    its job (here: held alive) past the close."""
    pool = ThreadPool(name="t-race")
    at_start, go, hold = threading.Event(), threading.Event(), threading.Event()
    ran: queue.SimpleQueue[threading.Thread] = queue.SimpleQueue()

    def job() -> None:
        ran.put(threading.current_thread())
        hold.wait(WAIT)

    def starter() -> None:
        sys.settrace(_start_paused(at_start, go))
        try:
            pool.run(job) if how == "run" else pool.add_spare()
        finally:
            sys.settrace(None)

    returned: queue.SimpleQueue[list[threading.Thread]] = queue.SimpleQueue()
    threading.Thread(target=starter, daemon=True).start()
    assert at_start.wait(WAIT)
    closer = threading.Thread(target=lambda: returned.put(pool.close(timeout=2.0)), daemon=True)
    closer.start()
    wait_until(lambda: _closed(pool), "the pool closed")
    go.set()  # the start goes on (with the fix, the close waited for it)
    alive = returned.get(timeout=WAIT)
    try:
        if how == "run":
            made = ran.get(timeout=WAIT)  # its job runs: it was taken before the close
            assert made in alive, (made, alive)  # held by its job: named, not missed
        else:  # a spare parks at once: a closed pool ends it, joined by the close
            assert alive == []
            assert pool.threads == 0
    finally:
        hold.set()
