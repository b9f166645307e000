"""Run deadlines kept off the timer until the tick (actors/deadlines.py): a run that ends
before the tick puts nothing on the timer, one live at the tick is armed then, one due before
the tick is armed at once, and a run that overruns its timeout is still timed out."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pykka
import pytest

from subagents.actors.deadlines import DEADLINES_DUE, TICK_KEY, TICK_S, Deadlines
from subagents.actors.timer import TimerService
from subagents.behaviour.function import AgentContext
from subagents.messages import RunStatus, Timeout
from subagents.runtime import Runtime
from subagents.store.base import RunStore
from subagents.supervision.effects import ArmDeadline, DisarmDeadline

from .conftest import WAIT

FAR = 3600.0
"""A deadline no test reaches (seconds from now)."""


class _Notes:
    """What the timer told the stand-in supervisor, and events the test waits on."""

    def __init__(self) -> None:
        self.told: list[Any] = []
        self.ticked = threading.Event()
        self.timed_out = threading.Event()


class _Heard(pykka.ThreadingActor):
    """Stands for the supervisor: notes what the timer tells it."""

    def __init__(self, notes: _Notes) -> None:
        super().__init__()
        self.notes = notes

    def on_receive(self, message: Any) -> None:
        self.notes.told.append(message)
        if message is DEADLINES_DUE:
            self.notes.ticked.set()
        elif type(message) is Timeout:
            self.notes.timed_out.set()


Parts = tuple[TimerService, pykka.ActorRef[Any], _Notes]


@pytest.fixture
def parts() -> Iterator[Parts]:
    timer, notes = TimerService(), _Notes()
    ref = _Heard.start(notes)
    yield timer, ref, notes
    ref.stop()
    timer.stop()


def test_a_run_ended_before_the_tick_puts_no_deadline_on_the_timer(
    parts: tuple[TimerService, pykka.ActorRef[Any], _Notes],
) -> None:
    timer, ref, notes = parts
    deadlines = Deadlines(timer, ref)
    now = time.monotonic()
    for i in range(50):  # a stream of short runs: each started and ended before the tick
        deadlines.arm(ArmDeadline(f"r{i}", now + FAR))
        deadlines.disarm(DisarmDeadline(f"r{i}"))
    assert deadlines.kept == 0
    kinds = timer.scheduled_kinds
    assert kinds["deadline"] == 0
    assert kinds[TICK_KEY[0]] == 1  # one tick for all of them
    assert notes.ticked.wait(WAIT)  # the tick comes; nothing kept to hand over
    deadlines.due()
    assert timer.scheduled_kinds["deadline"] == 0


def test_a_run_live_at_the_tick_is_armed_then_and_cancelled_at_its_end(
    parts: tuple[TimerService, pykka.ActorRef[Any], _Notes],
) -> None:
    timer, ref, notes = parts
    deadlines = Deadlines(timer, ref)
    deadlines.arm(ArmDeadline("live", time.monotonic() + FAR))
    assert deadlines.kept == 1
    assert timer.scheduled_kinds["deadline"] == 0
    assert notes.ticked.wait(WAIT)
    deadlines.due()  # (the supervisor's handling of ``DEADLINES_DUE``)
    assert deadlines.kept == 0
    assert timer.scheduled_kinds["deadline"] == 1
    pending = timer.pending()
    deadlines.disarm(DisarmDeadline("live"))
    assert timer.pending() == pending - 1  # cancelled on the timer
    deadlines.arm(ArmDeadline("next", time.monotonic() + FAR))  # a new tick for the next
    assert timer.scheduled_kinds[TICK_KEY[0]] == 2


def test_a_deadline_due_before_the_tick_is_armed_at_once_and_fires(
    parts: tuple[TimerService, pykka.ActorRef[Any], _Notes],
) -> None:
    timer, ref, notes = parts
    deadlines = Deadlines(timer, ref)
    deadlines.arm(ArmDeadline("far", time.monotonic() + FAR))  # arms the tick
    deadlines.arm(ArmDeadline("past", time.monotonic() - 1.0))  # before it: at once
    assert deadlines.kept == 1
    assert timer.scheduled_kinds["deadline"] == 1
    assert notes.timed_out.wait(WAIT)
    assert Timeout(run_id="past") in notes.told


def test_a_run_that_overruns_a_timeout_longer_than_the_tick_is_timed_out(
    store: RunStore,
) -> None:
    """Its deadline is kept at its start and handed to the timer at the tick (the
    supervisor's ``DEADLINES_DUE``); the run then times out as any run does."""

    async def stuck(ctx: AgentContext) -> str:
        await ctx.receive(timeout=WAIT)  # (no mail comes: only the deadline ends it)
        return "unreachable"

    timeout = 5 * TICK_S  # (due well after the tick armed at its start)
    with Runtime([stuck], store=store) as rt:
        outcome = rt.run("stuck", "wait", timeout=timeout, wait=WAIT)
        assert outcome.status is RunStatus.TIMED_OUT
        assert outcome.error == f"stuck ran past its {timeout:g} s timeout"
        assert rt.timer.scheduled_kinds["deadline"] >= 1  # armed at the tick
