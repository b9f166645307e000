"""Run deadlines kept off the timer (actors/deadlines.py): a run that ends before the tick puts
nothing on the timer, one live at the tick goes into the line (one timer for the line's
earliest, none per run), one due before the tick is armed at once, a deadline in the line is
told at its time unless its run ended, and a run that overruns its timeout is timed out."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pykka
import pytest

from subagents.actors.deadlines import DEADLINES_DUE, LINE_KEY, TICK_KEY, TICK_S, Deadlines
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


def test_a_run_live_at_the_tick_goes_into_the_line_and_its_end_takes_it_out(
    parts: tuple[TimerService, pykka.ActorRef[Any], _Notes],
) -> None:
    timer, ref, notes = parts
    deadlines = Deadlines(timer, ref)
    for run_id in ("live", "other"):
        deadlines.arm(ArmDeadline(run_id, time.monotonic() + FAR))
    assert deadlines.kept == 2
    assert notes.ticked.wait(WAIT)
    deadlines.due()  # (the supervisor's handling of ``DEADLINES_DUE``)
    assert (deadlines.kept, deadlines.held) == (0, 2)
    kinds = timer.scheduled_kinds
    assert kinds["deadline"] == 0  # no timer per run: one for the line's earliest
    assert kinds[LINE_KEY[0]] == 1
    pending = timer.pending()
    deadlines.disarm(DisarmDeadline("live"))
    assert deadlines.held == 1
    assert timer.pending() == pending  # nothing cancelled on the timer: taken out here
    deadlines.arm(ArmDeadline("next", time.monotonic() + FAR))  # a new tick for the next
    assert timer.scheduled_kinds[TICK_KEY[0]] == 2


def test_a_deadline_in_the_line_is_told_at_its_time_unless_its_run_ended(
    parts: tuple[TimerService, pykka.ActorRef[Any], _Notes],
) -> None:
    timer, ref, notes = parts
    deadlines = Deadlines(timer, ref)
    soon = time.monotonic() + 3 * TICK_S  # (after the tick: it goes into the line)
    for run_id in ("ended", "overran", "later"):
        deadlines.arm(ArmDeadline(run_id, soon if run_id != "later" else soon + FAR))
    assert notes.ticked.wait(WAIT)
    notes.ticked.clear()
    deadlines.due()
    assert deadlines.held == 3
    deadlines.disarm(DisarmDeadline("ended"))
    while deadlines.held > 1:  # the line's timer at ``soon``, handled as the supervisor
        assert notes.ticked.wait(WAIT)  # does (a tick meanwhile changes nothing)
        notes.ticked.clear()
        deadlines.due()
    assert time.monotonic() >= soon
    assert notes.timed_out.wait(WAIT)
    told = [m for m in notes.told if type(m) is Timeout]
    assert told == [Timeout(run_id="overran")]
    assert deadlines.held == 1  # "later", its timer set again at its deadline
    assert timer.scheduled_kinds[LINE_KEY[0]] == 2


def test_a_restarted_run_that_ends_before_the_tick_leaves_nothing_in_the_line(
    parts: tuple[TimerService, pykka.ActorRef[Any], _Notes],
) -> None:
    """A restart's deadline is kept until the next tick while its earlier one is still held
    in the line: the run's end takes out both (no ``Timeout`` told for an ended run)."""
    timer, ref, notes = parts
    deadlines = Deadlines(timer, ref)
    soon = time.monotonic() + 3 * TICK_S  # (after the tick: it goes into the line)
    deadlines.arm(ArmDeadline("r", soon))
    assert notes.ticked.wait(WAIT)
    notes.ticked.clear()
    deadlines.due()
    assert (deadlines.kept, deadlines.held) == (0, 1)
    deadlines.arm(ArmDeadline("r", time.monotonic() + FAR))  # restarted: a later deadline
    assert (deadlines.kept, deadlines.held) == (1, 1)
    deadlines.disarm(DisarmDeadline("r"))
    assert (deadlines.kept, deadlines.held) == (0, 0)
    while time.monotonic() < soon or timer.pending():  # the tick and the line's timer
        assert notes.ticked.wait(WAIT)
        notes.ticked.clear()
        deadlines.due()
    assert not [m for m in notes.told if type(m) is Timeout]


def test_the_line_drops_the_entries_of_ended_runs_as_it_grows(
    parts: tuple[TimerService, pykka.ActorRef[Any], _Notes],
) -> None:
    """A run that ends in the line leaves its heap entry behind (its end is a ``dict.pop``):
    the heap is rebuilt at a tick once it holds more than twice the live ones."""
    timer, ref, notes = parts
    deadlines = Deadlines(timer, ref)
    deadlines.arm(ArmDeadline("first", time.monotonic() + FAR))  # the earliest, live
    for i in range(200):  # later ones (not at the heap's top: not skipped there)
        deadlines.arm(ArmDeadline(f"r{i}", time.monotonic() + FAR + 1.0))
    assert notes.ticked.wait(WAIT)
    notes.ticked.clear()
    deadlines.due()
    for i in range(200):
        deadlines.disarm(DisarmDeadline(f"r{i}"))
    assert (deadlines.held, deadlines.line_entries) == (1, 201)
    deadlines.arm(ArmDeadline("next", time.monotonic() + FAR))
    assert notes.ticked.wait(WAIT)
    deadlines.due()
    assert (deadlines.held, deadlines.line_entries) == (2, 2)


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
    """Its deadline is kept at its start and put in the line at the tick (the supervisor's
    ``DEADLINES_DUE``), told when the line's timer goes off; the run then times out as any
    run does."""

    async def stuck(ctx: AgentContext) -> str:
        await ctx.receive(timeout=WAIT)  # (no mail comes: only the deadline ends it)
        return "unreachable"

    timeout = 5 * TICK_S  # (due well after the tick armed at its start)
    with Runtime([stuck], store=store) as rt:
        outcome = rt.run("stuck", "wait", timeout=timeout, wait=WAIT)
        assert outcome.status is RunStatus.TIMED_OUT
        assert outcome.error == f"stuck ran past its {timeout:g} s timeout"
        assert rt.timer.scheduled_kinds[LINE_KEY[0]] >= 1  # the line's timer, set at the tick
