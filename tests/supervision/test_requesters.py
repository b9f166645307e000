"""Runs by requester, without threads: stopping everything a requester requested in one
decision (``SupervisorCore.stop_requested``), the records of a live tree, tool calls counted,
end events that carry usage and steps, and ``tree_usage`` over records."""

from __future__ import annotations

import pytest

from subagents.messages import (
    EXTERNAL_SENDER,
    EventKind,
    RunRecord,
    RunStatus,
    StepTaken,
    StopReply,
    StopRequested,
    ToolCalled,
    Usage,
    new_id,
)
from subagents.supervision.effects import Effect, StartRun, StopAgent
from subagents.supervision.limits import Limits
from subagents.supervision.usage import tree_usage

from .test_core import Harness, of, told


def _stop_requested(
    h: Harness, by: str, requester: str | None = None, reason: str = "enough"
) -> tuple[StopReply, list[Effect]]:
    msg = StopRequested(request_id=new_id("x"), requested_by=by, requester=requester, reason=reason)
    decision = h.core._do(h.core.core.stop_requested(msg))
    return decision.reply, list(decision.effects)


def test_stop_requested_cancels_a_runs_children_and_their_subtrees_not_the_run() -> None:
    h = Harness()
    root = h.run("lead")
    a = h.run("worker", root)
    b = h.run("critic", root)
    a1 = h.run("critic", a)
    other = h.run("lead")
    reply, effects = _stop_requested(h, root, reason="the boss has enough")
    assert reply.error is None
    assert set(reply.stopped) == {a, b, a1}
    assert reply.stopped.index(a1) < reply.stopped.index(a)  # deepest first
    for run in (a, b, a1):
        assert h.status(run) is RunStatus.CANCELLED
        record = h.store.get_run(run)
        assert record is not None and record.outcome is not None
    for run in (a, b):
        record = h.store.get_run(run)
        assert record is not None and record.outcome is not None
        assert record.outcome.error == "the boss has enough"
    assert {s.run_id for s in of(effects, StopAgent)} == {a, b, a1}
    assert h.status(root) is RunStatus.RUNNING
    assert h.status(other) is RunStatus.RUNNING
    again, _ = _stop_requested(h, root)
    assert again == StopReply(request_id=again.request_id)  # nothing left: no error


def test_stop_requested_by_the_outside_cancels_queued_roots_before_running_ones() -> None:
    h = Harness(Limits(max_concurrency=1))
    first = h.run("lead")
    queued = [h.run("worker") for _ in range(2)]
    assert [h.status(r) for r in queued] == [RunStatus.QUEUED] * 2
    reply, effects = _stop_requested(h, EXTERNAL_SENDER)
    assert reply.stopped == (*queued, first)
    assert not of(effects, StartRun)  # the slot ``first`` freed went to nobody
    assert all(h.status(r) is RunStatus.CANCELLED for r in (first, *queued))


def test_queued_runs_below_the_stopped_children_are_not_started_by_the_stop() -> None:
    h = Harness(Limits(max_concurrency=3))
    root = h.run("lead")
    a = h.run("worker", root)
    b = h.run("worker", root)
    below_b = h.run("critic", b)  # over the limit: queued under b
    assert h.status(below_b) is RunStatus.QUEUED
    reply, effects = _stop_requested(h, root)
    assert set(reply.stopped) == {a, b, below_b}
    assert reply.stopped.index(below_b) < reply.stopped.index(b)  # deepest first
    assert not of(effects, StartRun)  # the slot ``a`` freed was not handed to ``below_b``


def test_a_run_may_stop_only_what_it_or_its_descendants_requested() -> None:
    h = Harness()
    root = h.run("lead")
    a = h.run("worker", root)
    b = h.run("critic", root)
    a1 = h.run("critic", a)
    reply, effects = _stop_requested(h, root, requester=a)  # its parent's children
    assert reply.error is not None and "only stop its own descendants" in reply.error
    assert told(effects, a, StopReply) == [reply]
    assert h.status(b) is RunStatus.RUNNING
    reply, effects = _stop_requested(h, a, requester=root)  # a grandchild's children: yes
    assert reply.stopped == (a1,)
    assert told(effects, root, StopReply) == [reply]
    reply, _ = _stop_requested(h, a1, requester="r-gone")
    assert reply.error == "run r-gone is not running"


def test_stop_requested_by_an_unknown_or_ended_run() -> None:
    h = Harness()
    reply, _ = _stop_requested(h, "r-missing")
    assert reply.error == "no run with id 'r-missing'"
    root = h.run("lead")
    h.core.stop_all("close")  # the tree ends and is forgotten
    assert root not in h.core.runs
    reply, _ = _stop_requested(h, root)
    assert reply.error is None and reply.stopped == ()


def test_tool_calls_are_counted_and_the_end_event_carries_usage_and_steps() -> None:
    h = Harness()
    root = h.run("lead")
    used = Usage(input_tokens=30, output_tokens=4, cost_usd=0.25, model_calls=1)
    h.core._do(h.core.core.step_taken(StepTaken(run_id=root, step=1, usage=used)))
    for tool in ("Read", "Grep"):
        h.core._do(h.core.core.tool_called(ToolCalled(run_id=root, tool=tool, input={})))
    held = h.core.core.tree_records(root)
    assert [(r.run_id, r.tool_calls, r.steps) for r in held] == [(root, 2, 1)]
    assert h.core.core.tree_records("r-missing") == ()
    h.core.stop_all("done")
    (end,) = [e for e in h.store.events(root) if e.kind is EventKind.CANCELLED]
    assert end.data["steps"] == 1 and end.data["tool_calls"] == 2
    assert end.data["usage"] == {
        "input_tokens": 30,
        "output_tokens": 4,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "cost_usd": 0.25,
        "model_calls": 1,
    }


def _record(run_id: str, parent: str | None, status: RunStatus, tokens: int) -> RunRecord:
    return RunRecord(
        run_id=run_id,
        agent=f"agent-{run_id}",
        task="t",
        root_run_id="r0",
        parent_run_id=parent,
        status=status,
        created_at=float(run_id[1:]),
        steps=1,
        tool_calls=2,
        usage=Usage(input_tokens=tokens, model_calls=1),
    )


def test_tree_usage_totals_a_subtree_parents_before_children() -> None:
    records = [
        _record("r3", "r1", RunStatus.RUNNING, 8),
        _record("r0", None, RunStatus.WAITING, 1),
        _record("r1", "r0", RunStatus.WAITING, 2),
        _record("r2", "r0", RunStatus.COMPLETED, 4),
    ]
    whole = tree_usage("r0", records)
    assert [u.run_id for u in whole.per_run] == ["r0", "r1", "r2", "r3"]
    assert (whole.runs, whole.live, whole.steps, whole.tool_calls) == (4, 3, 4, 8)
    assert whole.usage.input_tokens == 15 and whole.model_calls == 4
    assert whole.status is RunStatus.WAITING
    below = tree_usage("r1", records)
    assert [u.run_id for u in below.per_run] == ["r1", "r3"]
    assert below.tokens == 10
    with pytest.raises(LookupError, match="no run with id 'r9'"):
        tree_usage("r9", records)
