"""A cancel walk ends the runs of its tree still queued first: none of them is started into a
slot another run of the walk frees, only to be stopped later in the same walk."""

from __future__ import annotations

from subagents.messages import EventKind, RunStatus, StopRequest
from subagents.supervision.effects import StartRun, StopAgent
from subagents.supervision.limits import Limits

from .test_core import Harness, of


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
