"""Subscribers that take only some kinds of event: the runtime's own ``Endings`` is
subscribed for a run's end only (it reads nothing else), so the two other events of a
trivial run no longer call it; every other subscriber still sees every event, in order."""

from __future__ import annotations

import pytest

from subagents.behaviour.function import AgentContext
from subagents.messages import Event, EventKind, RunStatus
from subagents.runtime import Runtime
from subagents.runtime._run_endings import END_KINDS
from subagents.runtime._services import Subscribers
from subagents.store.memory import MemoryStore

from .conftest import WAIT, Events

pytestmark = pytest.mark.usefixtures("no_new_threads")


def _event(kind: EventKind, run_id: str = "r") -> Event:
    return Event(kind=kind, run_id=run_id, agent="a", root_run_id=run_id)


def test_a_subscriber_of_some_kinds_is_called_for_those_only_and_others_for_all() -> None:
    subscribers = Subscribers()
    every: list[EventKind] = []
    ends: list[EventKind] = []
    subscribers.subscribe(lambda e: every.append(e.kind))
    unsubscribe = subscribers.subscribe(lambda e: ends.append(e.kind), END_KINDS)
    kinds = [EventKind.SPAWNED, EventKind.STARTED, EventKind.FAILED, EventKind.COMPLETED]
    for kind in kinds:
        subscribers.publish(_event(kind))
    assert every == kinds
    assert ends == [EventKind.FAILED, EventKind.COMPLETED]
    unsubscribe()
    subscribers.publish(_event(EventKind.CANCELLED))
    assert ends == [EventKind.FAILED, EventKind.COMPLETED]
    assert every[-1] is EventKind.CANCELLED


def test_a_trivial_runs_three_events_reach_a_subscriber_and_its_end_wakes_a_waiter() -> None:
    """With real actors: a subscriber sees spawned, started, completed in order; a caller
    waiting on the run (``wait_all``: ``Endings``, subscribed to ends only) is woken by its
    end."""

    def trivial(ctx: AgentContext) -> str:
        return ctx.task

    rt = Runtime([trivial], store=MemoryStore())
    try:
        seen = Events()
        rt.subscribe(seen)
        handle = rt.spawn("trivial", "hello")
        [outcome] = rt.wait_all([handle], timeout=WAIT)
        assert outcome.status is RunStatus.COMPLETED and outcome.result == "hello"
        seen.wait_count(EventKind.COMPLETED, "trivial", 1)
        mine = [e.kind for e in seen.snapshot() if e.run_id == outcome.run_id]
        assert mine == [EventKind.SPAWNED, EventKind.STARTED, EventKind.COMPLETED]
    finally:
        rt.close()


def test_kinds_that_are_not_a_set_of_event_kinds_are_refused_naming_what_was_wrong() -> None:
    """One kind given alone is a str (``EventKind`` is a ``StrEnum``): ``in`` would test a
    substring, and a subscriber of ``restarted`` would be called for ``started`` too. It,
    and a name that is no kind of event, are refused when subscribing, not filtered wrong
    for ever after; a set of kinds is copied (a later change to it changes nothing)."""
    subscribers = Subscribers()
    with pytest.raises(TypeError, match="a set of EventKind"):
        subscribers.subscribe(lambda e: None, EventKind.RESTARTED)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="a set of EventKind"):
        subscribers.subscribe(lambda e: None, "completed")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'finished': no such EventKind"):
        subscribers.subscribe(lambda e: None, {EventKind.COMPLETED, "finished"})  # type: ignore[arg-type]
    got: list[EventKind] = []
    kinds = {EventKind.RESTARTED}
    subscribers.subscribe(lambda e: got.append(e.kind), kinds)
    kinds.add(EventKind.STARTED)
    subscribers.publish(_event(EventKind.STARTED))
    subscribers.publish(_event(EventKind.RESTARTED))
    assert got == [EventKind.RESTARTED]
