"""The runs' deadlines watched by one timer (actors/deadline_watch.py): a run's start and end
arm and disarm no timer of their own, and every run still times out at its deadline, the
earliest first, whatever was armed before it."""

from __future__ import annotations

import queue
import random
from typing import Any

from subagents.actors.deadline_watch import DEADLINES_DUE, DeadlineWatch
from subagents.actors.timer import TimerService
from subagents.behaviour.function import AgentContext
from subagents.messages import RunStatus
from subagents.runtime import Runtime

from .conftest import WAIT


class _Told:
    """Where the timer tells what is due (the supervisor's ref, in a runtime)."""

    def __init__(self) -> None:
        self.messages: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def tell(self, message: Any) -> None:
        self.messages.put(message)


def test_the_watch_sets_its_one_timer_for_the_earliest_deadline_left() -> None:
    timer, told = TimerService(), _Told()
    try:
        watch = DeadlineWatch(timer, told)  # type: ignore[arg-type]
        watch.arm("late", 1e9)
        watch.arm("later", 2e9)  # after the one armed: no timer put in
        assert timer.scheduled_kinds["deadline watch"] == 1
        watch.arm("ended", 10.0)
        watch.arm("again", 20.0)
        watch.arm("soon", 30.0)
        watch.arm("again", 40.0)  # armed again: its latest deadline counts
        watch.disarm("ended")
        assert watch.due(now=35.0) == ["soon"]  # the ended and the re-armed are not due
        assert watch.due(now=45.0) == ["again"]
        assert watch.pending() == 2
        assert told.messages.empty()  # (the timer's deadlines are far off)
        # the one it sets after ``due`` is the earliest left
        watch.arm("now", 0.0)
        assert told.messages.get(timeout=WAIT) is DEADLINES_DUE
        assert watch.due() == ["now"]
        assert watch.due(now=1.5e9) == ["late"]
    finally:
        timer.stop()


def test_ended_runs_leave_the_watch_no_bigger_than_the_live_ones() -> None:
    timer = TimerService()
    try:
        watch = DeadlineWatch(timer, _Told())  # type: ignore[arg-type]
        watch.arm("live", 5e9)
        for i in range(1000):
            watch.arm(f"r{i}", 1e9 + i)
            watch.disarm(f"r{i}")
        assert len(watch._heap) <= 65
        assert watch.due(now=6e9) == ["live"]
    finally:
        timer.stop()


def test_runs_start_and_end_without_a_timer_of_their_own() -> None:
    def trivial(ctx: AgentContext) -> str:
        return ctx.task

    with Runtime([trivial]) as rt:
        for i in range(50):
            assert rt.run("trivial", str(i), wait=WAIT).result == str(i)
        # every later run's deadline comes after the first's: that one timer serves them all
        assert rt.timer.scheduled_kinds["deadline watch"] == 1
        assert rt.timer.scheduled_kinds["deadline"] == 0


def test_a_run_with_an_earlier_deadline_than_those_armed_times_out_at_its_own() -> None:
    """A run with a long timeout is watched first; one started after it with a short one
    times out while the first still waits (the watch's timer is set earlier for it)."""

    async def waits(ctx: AgentContext) -> str:
        await ctx.receive(timeout=WAIT * 4)
        return "woke"

    with Runtime([waits]) as rt:
        long = rt.spawn("waits", "long", timeout=WAIT * 5)
        short = rt.spawn("waits", "short", timeout=0.2)
        outcome = short.result(WAIT)
        assert outcome.status is RunStatus.TIMED_OUT, outcome
        assert not long.done
        rt.send(long.run_id, "go")
        assert long.result(WAIT).result == "woke"


def test_every_run_is_due_once_at_its_latest_deadline_and_the_timer_never_late() -> None:
    """Runs armed, re-armed (a restart's new deadline, a moved run's same one), ended and
    found due in a random order, against the plain account of what each run's deadline is:
    ``due`` returns exactly the live runs past theirs, each once, and the one timer is
    always set at or before the earliest live deadline (none fires late); an end leaves
    the heap no bigger than twice the live runs."""
    timer = TimerService()
    try:
        watch = DeadlineWatch(timer, _Told())  # type: ignore[arg-type]
        rng = random.Random(7)
        live: dict[str, float] = {}
        seen: list[str] = []
        now = 1e9
        for step in range(20_000):
            op = rng.random()
            run = f"r{rng.randrange(300)}"
            if op < 0.45:
                deadline = now + rng.choice([0.5, 1.0, 5.0, 50.0, 500.0])
                if run in live and rng.random() < 0.3:
                    deadline = live[run]  # moved: armed again with the deadline it had
                watch.arm(run, deadline)
                live[run] = deadline
            elif op < 0.8:
                watch.disarm(run)
                live.pop(run, None)
                assert len(watch._heap) <= max(64, 2 * len(live)), step  # (rebuilt)
            else:
                now += rng.choice([0.1, 1.0, 10.0])
                due = watch.due(now=now)
                expected = {r for r, d in live.items() if d <= now}
                assert sorted(due) == sorted(expected), step
                assert len(due) == len(set(due)), step
                seen += due
                for r in due:
                    del live[r]
            assert watch.pending() == len(live)
            if live:
                armed = timer._entries.get(watch._key)
                assert armed is not None and armed[1] <= min(live.values()), step
        assert seen
    finally:
        timer.stop()
