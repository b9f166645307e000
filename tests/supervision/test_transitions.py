"""The run lifecycle table: exactly the transitions the supervisor makes, nothing else; and an
illegal one is raised, not written."""

from __future__ import annotations

import itertools

import pytest

from subagents.definitions.spec import AgentSpec
from subagents.messages import TERMINAL_STATUSES, RunFinished, RunStatus, SpawnRequest
from subagents.supervision.core import SupervisorCore
from subagents.supervision.transitions import (
    TRANSITIONS,
    IllegalTransition,
    allowed,
    check_transition,
)

Q, R, W = RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.WAITING
ENDS = sorted(TERMINAL_STATUSES)

EXPECTED = {
    (Q, R),  # a slot frees
    (Q, RunStatus.CANCELLED),  # stopped while queued
    (Q, RunStatus.FAILED),  # restored with its agent gone, or no room in the queue
    (R, R),  # started again after a restart's backoff
    (R, W),
    (W, R),
    *((R, end) for end in ENDS),
    *((W, end) for end in ENDS),
}


def test_the_table_holds_exactly_the_lifecycle_transitions() -> None:
    every = set(itertools.product(RunStatus, RunStatus))
    assert {pair for pair in every if allowed(*pair)} == EXPECTED
    assert set(TRANSITIONS) == set(RunStatus)


@pytest.mark.parametrize("old", list(RunStatus), ids=str)
@pytest.mark.parametrize("new", list(RunStatus), ids=str)
def test_check_transition_raises_exactly_for_pairs_outside_the_table(
    old: RunStatus, new: RunStatus
) -> None:
    if (old, new) in EXPECTED:
        check_transition("r1", old, new)
        return
    with pytest.raises(IllegalTransition, match=f"run r1: {old} -> {new}"):
        check_transition("r1", old, new)


def test_a_terminal_status_is_final() -> None:
    for end in ENDS:
        assert TRANSITIONS[end] == frozenset()
        assert not any(allowed(end, other) for other in RunStatus)


def test_the_core_refuses_an_illegal_change_before_anything_is_written() -> None:
    specs = {n: AgentSpec(name=n, description="d") for n in ("lead", "worker")}
    core = SupervisorCore(lookup=specs.get, names=lambda: list(specs))
    root = core.spawn(SpawnRequest(request_id="q1", agent="lead", task="t")).reply.run_id
    child_request = SpawnRequest(request_id="q2", agent="worker", task="t", parent_run_id=root)
    child = core.spawn(child_request).reply.run_id
    core.finished(RunFinished(run_id=child, result="done"))
    state = core.runs.get(child)  # held while its root lives
    assert state is not None and state.record.status is RunStatus.COMPLETED
    core.effects.begin()
    with pytest.raises(IllegalTransition, match="completed -> running"):
        core.runs.update(state, status=RunStatus.RUNNING)
    assert core.effects.writes == []  # the record was neither changed nor written
    assert state.record.status is RunStatus.COMPLETED


def test_a_late_report_after_the_end_is_discarded_not_an_illegal_transition() -> None:
    specs = {"lead": AgentSpec(name="lead", description="d")}
    core = SupervisorCore(lookup=specs.get, names=lambda: list(specs))
    run_id = core.spawn(SpawnRequest(request_id="q", agent="lead", task="t")).reply.run_id
    core.finished(RunFinished(run_id=run_id, result="done"))
    late = core.finished(RunFinished(run_id=run_id, error_kind="crash", error="late"))
    assert late.writes == [] and late.effects == []
