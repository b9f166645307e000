"""A subscriber whose failure cannot even be shown (its ``repr`` raises, or its error's
``str`` does): the runtime logs what it can, the subscribers after it still get every
event, and the supervisor goes on serving. Before, the log line of the failure raised in
``Subscribers.publish``'s own handler: the event was lost to every later subscriber (the
effect failed), and a ``SystemExit`` there stopped every actor of the runtime."""

from __future__ import annotations

import threading

import pytest

from subagents.behaviour.function import AgentContext
from subagents.messages import Event, EventKind, RunStatus
from subagents.runtime import RunHandle, Runtime
from subagents.store.memory import MemoryStore

from .conftest import WAIT, Events

pytestmark = pytest.mark.usefixtures("no_new_threads")


class _Unshowable(Exception):
    def __str__(self) -> str:
        raise SystemExit("an error that quits when shown")


class _Hostile:
    """A callback that fails at every event, and raises ``shown`` when it is ``repr``'d."""

    def __init__(self, shown: BaseException | None, raised: BaseException) -> None:
        self.shown = shown
        self.raised = raised

    def __call__(self, event: Event) -> None:
        raise self.raised

    def __repr__(self) -> str:
        if self.shown is None:
            return "_Hostile()"
        raise self.shown


def trivial(ctx: AgentContext) -> str:
    return ctx.task


def _hostile(how: str) -> _Hostile:
    """Made in the test, not a parameter: pytest shows a failing test's parameters."""
    if how == "repr-raises":
        return _Hostile(ValueError("no repr"), RuntimeError("failed"))
    if how == "repr-exits":
        return _Hostile(SystemExit("a repr that quits"), RuntimeError("failed"))
    return _Hostile(None, _Unshowable())


@pytest.mark.parametrize("how", ["repr-raises", "repr-exits", "error-str-exits"])
def test_a_subscriber_whose_failure_cannot_be_shown_harms_no_other(how: str) -> None:
    seen = Events()
    with Runtime([trivial], store=MemoryStore()) as rt:
        rt.subscribe(_hostile(how))
        rt.subscribe(seen)
        first = rt.run("trivial", "one", wait=WAIT)
        second = rt.run("trivial", "two", wait=WAIT)
        assert (first.status, second.status) == (RunStatus.COMPLETED, RunStatus.COMPLETED)
        for outcome in (first, second):
            kinds = [e.kind for e in seen.snapshot() if e.run_id == outcome.run_id]
            assert kinds == [EventKind.SPAWNED, EventKind.STARTED, EventKind.COMPLETED]


def test_a_subscriber_closing_the_runtime_is_refused_and_the_runtime_closes_after() -> None:
    """``rt.close()`` from a subscriber waited on the supervisor's own thread: the run's
    caller heard ``TimeoutError``, and the runtime, marked closed, kept every thread (a
    later ``close`` returned at once, leaving them: ``no_new_threads`` names them)."""
    said: list[str] = []
    seen = Events()

    def closes(event: Event) -> None:
        if event.kind is EventKind.COMPLETED and not said:
            try:
                rt.close()
            except RuntimeError as exc:
                said.append(str(exc))

    with Runtime([trivial], store=MemoryStore()) as rt:
        rt.subscribe(closes)
        rt.subscribe(seen)
        outcome = rt.run("trivial", "one", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED
        seen.wait_count(EventKind.COMPLETED, "trivial", 1)  # (after ``closes`` was called)
        assert len(said) == 1 and "event subscriber" in said[0], said
        assert rt.run("trivial", "two", wait=WAIT).status is RunStatus.COMPLETED


def test_a_subscriber_waiting_on_a_runs_handle_is_refused() -> None:
    """``handle.result()`` from a subscriber waited for an end the supervisor's own thread
    had to decide: the whole runtime stood still to the wait's timeout (for ever, with
    none). It is refused as ``rt.wait_all`` is."""
    said: list[str] = []
    seen = Events()
    handles: list[RunHandle] = []
    spawned = threading.Event()  # ``spawn`` returns before its admission: the run may start first

    def waits(event: Event) -> None:
        if event.kind is EventKind.STARTED and spawned.wait(WAIT):
            live = handles[0]
            if event.run_id == live.run_id:
                try:
                    live.result(timeout=WAIT)
                except RuntimeError as exc:
                    said.append(str(exc))

    with Runtime([trivial], store=MemoryStore()) as rt:
        rt.subscribe(waits)
        rt.subscribe(seen)
        live = rt.spawn("trivial", "live")
        handles.append(live)
        spawned.set()
        assert live.result(timeout=WAIT).result == "live"
        seen.wait_count(EventKind.COMPLETED, "trivial", 1)
    assert len(said) == 1 and "event subscriber" in said[0], said
