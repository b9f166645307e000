"""The run lifecycle table: exactly the moves the supervisor makes, nothing else; every
(status, move) pair fired through the run table either moves the run as the table says or is
raised with nothing written; and docs/architecture.md shows the table the code has."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from subagents.definitions.spec import AgentSpec
from subagents.messages import TERMINAL_STATUSES, RunFinished, RunRecord, RunStatus, SpawnRequest
from subagents.store.writes import SaveRun
from subagents.supervision.core import SupervisorCore
from subagents.supervision.runs import RunState, RunTable
from subagents.supervision.transitions import (
    LIFECYCLE,
    IllegalTransition,
    Move,
    allowed,
    lifecycle_markdown,
)

Q, R, W = RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.WAITING
C, F, X = RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED
T, B = RunStatus.TIMED_OUT, RunStatus.BUDGET_EXCEEDED
ENDS = sorted(TERMINAL_STATUSES)
ROOT = Path(__file__).resolve().parents[2]

EXPECTED = {
    (Q, Move.STARTED): R,  # a slot frees
    (Q, Move.FAILED): F,  # restored with its agent gone, or no room in the queue
    (Q, Move.CANCELLED): X,  # stopped while queued
    (R, Move.STARTED_AGAIN): R,  # a restart's backoff is over, a restore, a move
    (W, Move.STARTED_AGAIN): R,
    (R, Move.WAITS): W,
    (W, Move.WORKS): R,
    **{(s, Move.COMPLETED): C for s in (R, W)},
    **{(s, Move.FAILED): F for s in (R, W)},
    **{(s, Move.CANCELLED): X for s in (R, W)},
    **{(s, Move.TIMED_OUT): T for s in (R, W)},
    **{(s, Move.OVER_BUDGET): B for s in (R, W)},
}


def test_the_table_holds_exactly_the_lifecycle_moves() -> None:
    assert dict(LIFECYCLE) == EXPECTED


def test_the_status_pairs_the_table_connects() -> None:
    pairs = {(Q, R), (Q, X), (Q, F), (R, R), (R, W), (W, R)}
    pairs |= {(s, end) for s in (R, W) for end in ENDS}
    every = set(itertools.product(RunStatus, RunStatus))
    assert {pair for pair in every if allowed(*pair)} == pairs


def _table_with(status: RunStatus) -> tuple[RunTable, RunState]:
    """A run table (it holds no collector: a change's write is returned) with one run."""
    runs = RunTable()
    record = RunRecord(run_id="r1", agent="a", task="t", root_run_id="r1", status=status)
    state = RunState(record=record, spec=AgentSpec(name="a", description="d"), request_id=None)
    runs.add(state)
    return runs, state


@pytest.mark.parametrize("status", list(RunStatus), ids=str)
@pytest.mark.parametrize("move", list(Move), ids=str)
def test_fire_moves_as_the_table_says_or_raises_with_nothing_written(
    status: RunStatus, move: Move
) -> None:
    runs, state = _table_with(status)
    new = EXPECTED.get((status, move))
    if new is None:
        with pytest.raises(IllegalTransition, match=f"run r1: {move} from {status}"):
            runs.fire(state, move, steps=7)
        assert state.record.status is status and state.record.steps == 0
        assert (runs.live("r1") is None) is status.terminal
        return
    write = runs.fire(state, move, steps=7)
    assert state.record.status is new and state.record.steps == 7
    assert write == SaveRun(state.record)  # one write, status and changes, for the caller
    assert ("r1" in runs.hosted()) is not new.terminal


def test_a_terminal_status_has_no_move() -> None:
    for end in ENDS:
        assert not [move for (s, move) in LIFECYCLE if s is end]
        assert not any(allowed(end, other) for other in RunStatus)


def test_every_move_is_made_by_the_supervisor() -> None:
    # a move no part of the core fires is a dead row of the table (and of the docs)
    source = "\n".join(
        p.read_text(encoding="utf-8")
        for p in (ROOT / "src" / "subagents" / "supervision").glob("*.py")
        if p.name != "transitions.py"
    )
    made = set(re.findall(r"Move\.([A-Z_]+)", source))
    assert made == {move.name for move in Move}


def test_a_status_is_never_set_by_update() -> None:
    runs, state = _table_with(R)
    with pytest.raises(ValueError, match="only by a move of the lifecycle table"):
        runs.update(state, status=C)
    assert state.record.status is R


def test_the_core_refuses_an_illegal_move_before_anything_is_written() -> None:
    specs = {n: AgentSpec(name=n, description="d") for n in ("lead", "worker")}
    core = SupervisorCore(lookup=specs.get, names=lambda: list(specs))
    root = core.spawn(SpawnRequest(request_id="q1", agent="lead", task="t")).reply.run_id
    child_request = SpawnRequest(request_id="q2", agent="worker", task="t", parent_run_id=root)
    child = core.spawn(child_request).reply.run_id
    core.finished(RunFinished(run_id=child, result="done"))
    state = core.runs.get(child)  # held while its root lives
    assert state is not None and state.record.status is RunStatus.COMPLETED
    core.effects.begin()
    with pytest.raises(IllegalTransition, match="started_again from completed"):
        core.runs.fire(state, Move.STARTED_AGAIN)
    assert core.effects.writes == []  # the record was neither changed nor written
    assert state.record.status is RunStatus.COMPLETED


def test_a_late_report_after_the_end_is_discarded_not_an_illegal_transition() -> None:
    specs = {"lead": AgentSpec(name="lead", description="d")}
    core = SupervisorCore(lookup=specs.get, names=lambda: list(specs))
    run_id = core.spawn(SpawnRequest(request_id="q", agent="lead", task="t")).reply.run_id
    core.finished(RunFinished(run_id=run_id, result="done"))
    late = core.finished(RunFinished(run_id=run_id, error_kind="crash", error="late"))
    assert late.writes == [] and late.effects == []


def test_the_architecture_doc_shows_the_code_table() -> None:
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = doc.split("### The run lifecycle", 1)[1].split("\n#", 1)[0]
    table = "\n".join(line for line in section.splitlines() if line.startswith("|"))
    assert table == lifecycle_markdown(), (
        "docs/architecture.md's run lifecycle table differs from the code's; paste"
        " `python -c 'from subagents.supervision.transitions import lifecycle_markdown as m;"
        " print(m())'` into it"
    )
