"""A ``RunHandle`` shown (``repr``, a log line) never waits: it says what the handle knows
now, the agent, the id, and whether the spawn is still being decided, was refused, was
admitted or has ended. A handle logged right after ``spawn`` waited for the decision (up to
30 s against a stalled store), giving the pipelining up; and what the handle knows of an
ended run is answered from it, not from a store that may be gone.

The supervisor is held (a subscriber blocking at the first run's ``spawned`` event) so the
spawns behind it are certainly undecided while the handle is shown."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from types import FrameType

import pytest

from polling import wait_until
from subagents.behaviour.function import AgentContext, FunctionAgent
from subagents.messages import Event, EventKind, RunStatus
from subagents.runtime import AdmissionError, Runtime
from subagents.runtime._spawn_window import SpawnWindow
from subagents.supervision.limits import Limits

from .conftest import WAIT

pytestmark = pytest.mark.usefixtures("no_new_threads")


def held(ctx: AgentContext) -> str:
    return ctx.task


def test_a_handle_is_shown_without_waiting_for_its_spawns_decision() -> None:
    gate, holding = threading.Event(), threading.Event()

    def hold_first(event: Event) -> None:
        if event.kind is EventKind.SPAWNED and not holding.is_set():
            holding.set()
            assert gate.wait(WAIT)

    with Runtime([FunctionAgent.create("held", held)]) as rt:
        rt.subscribe(hold_first)
        try:
            first = rt.spawn("held", "first")
            assert holding.wait(WAIT)  # the supervisor is held: what follows is undecided
            undecided = rt.spawn("held", "second")
            window = rt._roots.window
            shown: list[str] = []
            showing = threading.Thread(target=lambda: shown.append(repr(undecided)))
            showing.start()
            # either it was shown, or it waits for the decision (what it must not do)
            wait_until(lambda: shown or window.settling, "the handle shown, or waiting")
            assert shown == [f"RunHandle({undecided.run_id!r}, agent='held', deciding)"]
            assert window.settling == 0
            assert not undecided.done and undecided.refused is None
        finally:
            gate.set()
        showing.join(WAIT)
        assert undecided.result(WAIT).result == "second"
        assert first.result(WAIT).result == "first"
    assert repr(undecided) == f"RunHandle({undecided.run_id!r}, agent='held', status=completed)"


def test_a_refused_and_an_admitted_handle_say_so_without_reading_the_store() -> None:
    release = threading.Event()

    def waits(ctx: AgentContext) -> str:
        assert release.wait(WAIT)
        return "done"

    agents = [FunctionAgent.create("waits", waits)]
    with Runtime(agents, limits=Limits(max_concurrency=1, queue_bound=1)) as rt:
        try:
            admitted = rt.spawn("waits", "a")
            queued = rt.spawn("waits", "b")
            refused = rt.spawn("waits", "c")  # no room: the queue is full
            assert admitted.wait_admitted() is RunStatus.RUNNING
            assert queued.wait_admitted() is RunStatus.QUEUED
            with pytest.raises(AdmissionError, match="queue bound"):
                refused.wait_admitted()
            for handle in (admitted, queued):
                assert repr(handle) == f"RunHandle({handle.run_id!r}, agent='waits', admitted)"
            assert repr(refused) == (
                f"RunHandle({refused.run_id!r}, agent='waits', refused: {refused.refused})"
            )
        finally:
            release.set()
        assert admitted.result(WAIT).result == "done"
        assert queued.result(WAIT).result == "done"


def test_an_ended_runs_handle_answers_from_its_outcome_after_the_runtime_closed(
    tmp_path: Path,
) -> None:
    """The runtime closed its store: what the handle knows of its ended run is still
    answered (its status, its repr), not an error of the closed store."""

    async def waits(ctx: AgentContext) -> str:
        if ctx.task == "wait":
            await ctx.receive(timeout=WAIT)  # until the close cancels it
        return "done"

    rt = Runtime([FunctionAgent.create("waits", waits)], store=tmp_path / "runs.db")  # its own
    try:
        done = rt.spawn("waits", "a")
        assert done.result(WAIT).result == "done"
        cancelled = rt.spawn("waits", "wait")
        assert cancelled.wait_admitted() is RunStatus.RUNNING
    finally:
        rt.close()
    assert done.status is RunStatus.COMPLETED and done.wait_admitted() is RunStatus.COMPLETED
    assert cancelled.status is RunStatus.CANCELLED
    assert repr(cancelled) == f"RunHandle({cancelled.run_id!r}, agent='waits', status=cancelled)"


def test_a_handle_shown_while_its_refusal_lands_is_not_shown_admitted() -> None:
    """``repr`` from another thread races the supervisor refusing the spawn: the refusal
    lands (``Waiter.refuse``), then the spawn leaves the window (``SpawnWindow.decided``).
    Read the other way round (the waiter, then the window), a repr that looked at the
    waiter before the refusal and at the window after it showed the refused run as
    ``admitted``. The repr's thread is paused (a trace hook, nothing replaced) at the
    moment it consults the window, and goes on once the refusal has fully landed."""
    gate, holding = threading.Event(), threading.Event()
    at_window, go = threading.Event(), threading.Event()

    def hold_first(event: Event) -> None:
        if event.kind is EventKind.SPAWNED and not holding.is_set():
            holding.set()
            assert gate.wait(WAIT)

    def pause_at_the_window(frame: FrameType, what: str, arg: object) -> None:
        if what == "call" and frame.f_code is SpawnWindow.__contains__.__code__:
            at_window.set()
            assert go.wait(WAIT)

    release = threading.Event()

    def waits(ctx: AgentContext) -> str:
        assert release.wait(WAIT)
        return "done"

    agents = [FunctionAgent.create("waits", waits)]
    with Runtime(agents, limits=Limits(max_concurrency=1, queue_bound=1)) as rt:
        rt.subscribe(hold_first)
        shown: list[str] = []
        try:
            admitted = rt.spawn("waits", "a")
            assert holding.wait(WAIT)  # the supervisor is held: what follows is undecided
            queued = rt.spawn("waits", "b")
            refused = rt.spawn("waits", "c")  # no room once b is queued: refused

            def show() -> None:
                sys.settrace(pause_at_the_window)
                try:
                    shown.append(repr(refused))
                finally:
                    sys.settrace(None)

            showing = threading.Thread(target=show)
            showing.start()
            wait_until(lambda: at_window.is_set() or shown, "the repr at the window, or done")
            gate.set()  # the group is decided: b queued, c refused
            window = rt._roots.window
            wait_until(lambda: refused.done and len(window) == 0, "the refusal landed")
            go.set()
            showing.join(WAIT)
            assert refused.refused is not None and "queue bound" in refused.refused
            assert shown == [
                f"RunHandle({refused.run_id!r}, agent='waits', refused: {refused.refused})"
            ]
        finally:
            gate.set()
            go.set()
            release.set()
        assert admitted.result(WAIT).result == "done"
        assert queued.result(WAIT).result == "done"
