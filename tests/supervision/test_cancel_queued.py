"""A cancel walk starts none of the runs of the tree it ends: neither one still queued nor a
parked one queued for its slot back (let go on, its code would run: a tool call, a mail sent)
is given a slot another run of the walk frees, only to be stopped later in the same walk. The
runs of other trees waiting for a slot get the slots the walk frees."""

from __future__ import annotations

from subagents.messages import (
    EXTERNAL_SENDER,
    EventKind,
    Parked,
    RunStatus,
    SlotWanted,
    StopRequest,
    Unpark,
    WaitingChanged,
)
from subagents.supervision.effects import Effect, StartRun, StopAgent, Tell
from subagents.supervision.limits import Limits

from .test_core import Harness, of, told
from .test_requesters import _stop_requested


def test_stopping_a_tree_starts_none_of_its_queued_runs() -> None:
    """Five workers under a limit of one: one runs, four are queued. Stopping the tree ended
    the running one first (the walk is deepest first, and siblings in order), which freed
    its slot, which started the next queued sibling (its agent started: a function agent
    ran its code) that the walk then stopped, and so on down the queue."""
    h = Harness(Limits(max_concurrency=8, per_agent=1))
    root = h.run("lead")
    workers = [h.run("worker", root) for _ in range(5)]
    assert [h.status(w) for w in workers] == [RunStatus.RUNNING] + [RunStatus.QUEUED] * 4
    _, effects = h.core.stop(StopRequest(request_id="s", run_id=root))
    assert of(effects, StartRun) == []  # no agent started by a cancel
    assert {e.run_id for e in of(effects, StopAgent)} == {root, *workers}
    assert [h.status(w) for w in workers] == [RunStatus.CANCELLED] * 5
    assert all(h.terminal_events(w) == [EventKind.CANCELLED] for w in workers)
    assert h.core.slots.in_flight == 0 and h.core.slots.queued() == []


def _parked_wanting(h: Harness) -> tuple[str, str]:
    """A root (the only slot) that lent its slot to its child, working, and, woken since
    (say, by mail), is queued for a slot back: (the root, the child)."""
    root = h.run("lead")
    child = h.run("worker", root)
    _lend(h, root, child)
    _want(h, root)
    return root, child


def _lend(h: Harness, root: str, child: str) -> None:
    """``root`` waits and parks for its queued ``child``, which starts in its slot."""
    h.core.waiting_changed(WaitingChanged(run_id=root, waiting=True))  # asked to park
    h.core.parked(Parked(run_id=root))
    assert h.status(child) is RunStatus.RUNNING and not h.core.slots.holds(root)


def _want(h: Harness, root: str) -> None:
    """Something woke the parked ``root``: it is queued for a slot back (none is free)."""
    assert h.core.slot_wanted(SlotWanted(run_id=root)) == []
    assert root in h.core.slots.queued()


def _resumed(effects: list[Effect], runs: set[str]) -> list[str]:
    """The runs of ``runs`` that ``effects`` start or let go on (their agents go on)."""
    started = [s.record.run_id for s in of(effects, StartRun)]
    unparked = [t.run_id for t in of(effects, Tell) if isinstance(t.message, Unpark)]
    return [r for r in started + unparked if r in runs]


def test_stopping_a_tree_resumes_none_of_its_parked_runs() -> None:
    """A parked root queued for its slot back, its child working: stopping the tree ended
    the child first (deepest first), whose freed slot the queue gave to the root (``Unpark``
    told: its agent went on with what woke it, a tool call or a mail sent) before the walk
    stopped it."""
    h = Harness(Limits(max_concurrency=1))
    root, child = _parked_wanting(h)
    _, effects = h.core.stop(StopRequest(request_id="s", run_id=root))
    assert _resumed(effects, {root, child}) == []
    assert EventKind.UNPARKED not in [e.kind for e in h.store.events(root)]
    assert {e.run_id for e in of(effects, StopAgent)} == {root, child}
    assert [h.status(r) for r in (root, child)] == [RunStatus.CANCELLED] * 2
    assert h.core.slots.in_flight == 0 and h.core.slots.queued() == []


def test_a_parked_parent_ending_is_not_resumed_by_its_childrens_cancel() -> None:
    """The same through ``finish`` (a timeout): its children are cancelled before it ends,
    and the slot they free must not resume it first."""
    h = Harness(Limits(max_concurrency=1, timeout_s=5.0))
    root, child = _parked_wanting(h)
    h.clock.now += 10
    effects = h.core.timeout(root)
    assert _resumed(effects, {root, child}) == []
    assert h.status(root) is RunStatus.TIMED_OUT and h.status(child) is RunStatus.CANCELLED
    assert h.core.slots.in_flight == 0 and h.core.slots.queued() == []


def test_a_moved_parked_run_waiting_for_a_slot_is_not_started_by_its_trees_cancel() -> None:
    """A parked run whose host was lost waits for a slot to start again (``Lifecycle.moved``):
    stopping its tree must not start it into the slot its child frees."""
    h = Harness(Limits(max_concurrency=1))
    root = h.run("lead")
    child = h.run("worker", root)
    h.core.waiting_changed(WaitingChanged(run_id=root, waiting=True))
    h.core.parked(Parked(run_id=root))
    assert of(h.core.host_lost((root,), "its host died"), StartRun) == []
    assert h.core.slots.queued() == [root]
    _, effects = h.core.stop(StopRequest(request_id="s", run_id=root))
    assert _resumed(effects, {root, child}) == []
    assert h.core.slots.in_flight == 0 and h.core.slots.queued() == []


def test_the_slots_a_cancel_frees_go_to_the_runs_of_other_trees() -> None:
    """Two trees, each a parked root queued for its slot back (A first) and a working
    child, and a third root queued: stopping A gives its child's slot to B's root (not to
    A's, which ends); stopping B then gives its child's slot to the third root."""
    h = Harness(Limits(max_concurrency=2))
    a, b = h.run("lead"), h.run("lead")
    a_child, b_child = h.run("worker", a), h.run("worker", b)  # queued
    _lend(h, a, a_child)
    _lend(h, b, b_child)
    _want(h, a)
    _want(h, b)
    assert h.core.slots.queued() == [a, b]
    third = h.run("critic")
    assert h.status(third) is RunStatus.QUEUED
    _, effects = h.core.stop(StopRequest(request_id="s", run_id=a))
    assert told(effects, b, Unpark) == [Unpark()] and told(effects, a, Unpark) == []
    assert of(effects, StartRun) == []  # one slot freed (A's root held none): B's root has it
    assert h.core.slots.holders() == [b_child, b] and h.core.slots.queued() == [third]
    _, effects = h.core.stop(StopRequest(request_id="s2", run_id=b))
    assert [s.record.run_id for s in of(effects, StartRun)] == [third]
    assert _resumed(effects, {b, b_child}) == []
    assert h.core.slots.holders() == [third] and h.core.slots.queued() == []


def test_stopping_what_a_requester_requested_resumes_none_of_the_parked_tops() -> None:
    """Every root the outside requested stopped in one decision (``stop_all``), each a
    parked root queued for its slot back: the slot the first tree's child frees must not
    let the second tree's root go on, which is stopped next in the same decision."""
    h = Harness(Limits(max_concurrency=2))
    a, b = h.run("lead"), h.run("lead")
    a_child, b_child = h.run("worker", a), h.run("worker", b)
    _lend(h, a, a_child)
    _lend(h, b, b_child)
    _want(h, a)
    _want(h, b)
    reply, effects = _stop_requested(h, EXTERNAL_SENDER)
    assert set(reply.stopped) == {a, b, a_child, b_child}
    assert _resumed(effects, {a, b, a_child, b_child}) == []
    assert h.core.slots.in_flight == 0 and h.core.slots.queued() == []
