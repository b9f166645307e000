"""``restored_spend.ended_spend``: what the ended runs of a restored tree spent, for the
budgets of the runs held again (the crash case: tests/adversary/test_budget_crash.py)."""

from __future__ import annotations

from subagents.messages import RunRecord, RunStatus, Usage
from subagents.supervision.restored_spend import ended_spend


def _run(run_id: str, parent: str | None, tokens: int, budget: int | None = None) -> RunRecord:
    ended = RunStatus.COMPLETED if run_id.startswith("e") else RunStatus.RUNNING
    return RunRecord(
        run_id=run_id,
        agent="a",
        task="t",
        root_run_id="root",
        parent_run_id=parent,
        status=ended,
        usage=Usage(input_tokens=tokens),
        token_budget=budget,
    )


def test_a_held_budgeted_run_gets_what_its_ended_descendants_spent_at_any_depth() -> None:
    tree = [
        _run("root", None, 1, budget=1000),
        _run("e1", "root", 10),
        _run("e2", "e1", 100),  # below an ended child: counted too
        _run("mid", "root", 5, budget=500),  # held: its own usage is counted by the ledger
        _run("e3", "mid", 1000),
    ]
    held = {"root", "mid"}
    spent = ended_spend(tree, held)
    assert spent == {"root": Usage(input_tokens=1110), "mid": Usage(input_tokens=1000)}


def test_held_runs_are_not_counted_and_trees_without_a_held_budget_give_nothing() -> None:
    tree = [_run("root", None, 1, budget=10), _run("live", "root", 7), _run("e1", "live", 3)]
    assert ended_spend(tree, {"root", "live"}) == {"root": Usage(input_tokens=3)}
    assert ended_spend(tree, {"root", "live", "e1"}) == {}  # nothing ended out of the table
    unbudgeted = [_run("root", None, 1), _run("e1", "root", 3)]
    assert ended_spend(unbudgeted, {"root"}) == {}
    # a budgeted run not held (ended itself) is no one's to rebuild
    assert ended_spend([_run("eroot", None, 1, budget=5), _run("e1", "eroot", 3)], set()) == {}
