"""A run started with runs of its slot key queued behind it parks at its first wait by itself.

Under a limit, every run started from the queue has runs of its key behind it: its start says
so (``StartRun.park_at_wait``), and its agent parks at the end of the handling in which it
first says it waits, saying so with that report (``WaitingChanged.parked``). The supervisor
gives its slot to the queue in the same decision (``Parking.parked_at_wait``): no ``Park``
asked, no ``Parked`` answer. The core driven by hand, without threads (the agent's half:
tests/runtime/test_park_at_wait.py)."""

from __future__ import annotations

from subagents.messages import (
    EventKind,
    Park,
    Parked,
    RunFinished,
    RunStatus,
    SlotWanted,
    StopRequest,
    Unpark,
    WaitingChanged,
)
from subagents.supervision.effects import Publish, StartRun
from subagents.supervision.limits import Limits

from .test_core import Harness, of, told


def _started(effects: list[object]) -> dict[str, bool]:
    """The runs these effects start, with whether each is told to park at its wait."""
    return {s.record.run_id: s.park_at_wait for s in of(effects, StartRun)}  # type: ignore[arg-type]


def _parked_at_wait(h: Harness, run_id: str) -> list[object]:
    report = WaitingChanged(run_id=run_id, waiting=True, attempt=1, parked=True)
    return h.core.waiting_changed(report)


def test_a_run_started_from_the_queue_parks_at_its_wait_and_the_next_starts_unasked() -> None:
    h = Harness(Limits(per_agent=1))
    first_reply, first_effects = h.spawn_effects("worker")
    first = first_reply.run_id
    assert first is not None
    assert _started(first_effects) == {first: False}  # nobody queued behind it when it started
    second, third = h.run("worker"), h.run("worker")  # queued behind it
    # the first is asked, as before: it started before anyone queued
    effects = h.core.waiting_changed(WaitingChanged(run_id=first, waiting=True, attempt=1))
    assert told(effects, first, Park) == [Park()]
    effects = h.core.parked(Parked(run_id=first, attempt=1))
    assert _started(effects) == {second: True}  # the third is queued behind it
    # the second says it waits and has parked: its slot goes to the third in that decision
    effects = _parked_at_wait(h, second)
    assert told(effects, second, Park) == []
    assert _started(effects) == {third: False}  # nobody left behind it
    parked = [p.event for p in of(effects, Publish) if p.event.kind is EventKind.PARKED]
    assert [(e.run_id, e.data) for e in parked] == [(second, {"at_wait": True})]
    assert h.status(second) is RunStatus.WAITING
    assert not h.core.slots.holds(second) and h.core.slots.holds(third)
    assert not h.core.slots.has_idle(second)  # lent: no holder left to ask
    # it gets its slot back as any parked run: ahead of new admissions, when one frees
    assert h.core.slot_wanted(SlotWanted(run_id=second, attempt=1)) == []
    late = h.run("worker")
    effects = h.core.finished(RunFinished(run_id=third, result="ok", attempt=1))
    assert told(effects, second, Unpark) == [Unpark()] and of(effects, StartRun) == []
    assert h.status(late) is RunStatus.QUEUED and h.core.slots.in_flight == 1


def test_a_run_that_parks_at_its_wait_with_nobody_queued_any_more_gets_a_slot_back_at_once() -> (
    None
):
    """The queue emptied between its start and its wait (the run behind it was stopped): the
    slot it lent is simply free, and it takes it again as soon as it asks."""
    h = Harness(Limits(per_agent=1))
    first = h.run("worker")
    second, third = h.run("worker"), h.run("worker")
    h.core.waiting_changed(WaitingChanged(run_id=first, waiting=True, attempt=1))
    assert _started(h.core.parked(Parked(run_id=first, attempt=1))) == {second: True}
    h.core.stop(StopRequest(request_id="s", run_id=third))
    effects = _parked_at_wait(h, second)
    assert of(effects, StartRun) == [] and h.core.slots.in_flight == 0
    effects = h.core.slot_wanted(SlotWanted(run_id=second, attempt=1))
    assert told(effects, second, Unpark) == [Unpark()]
    assert h.core.slots.holds(second) and h.core.slots.in_flight == 1


def test_a_run_told_to_park_at_its_wait_that_does_not_is_asked_as_before() -> None:
    """The start's word is a hint: an agent that reports a plain wait (one that does not
    know it, on a node of another version) holds its slot, and is asked to park as any
    waiting run is, so no queued run waits for ever behind it."""
    h = Harness(Limits(per_agent=1))
    first = h.run("worker")
    second, _third = h.run("worker"), h.run("worker")
    h.core.waiting_changed(WaitingChanged(run_id=first, waiting=True, attempt=1))
    assert _started(h.core.parked(Parked(run_id=first, attempt=1))) == {second: True}
    effects = h.core.waiting_changed(WaitingChanged(run_id=second, waiting=True, attempt=1))
    assert told(effects, second, Park) == [Park()]


def test_a_park_at_wait_from_an_earlier_start_is_ignored() -> None:
    h = Harness(Limits(per_agent=1))
    first = h.run("worker")
    second, _third = h.run("worker"), h.run("worker")
    h.core.waiting_changed(WaitingChanged(run_id=first, waiting=True, attempt=1))
    h.core.parked(Parked(run_id=first, attempt=1))
    report = WaitingChanged(run_id=second, waiting=True, attempt=7, parked=True)
    assert h.core.waiting_changed(report) == []
    assert h.core.slots.holds(second) and h.status(second) is RunStatus.RUNNING
