"""``restored_spend.ended_spend``: what the ended runs of a restored tree spent, for the
budgets of the runs held again (the crash case: tests/adversary/test_budget_crash.py)."""

from __future__ import annotations

from subagents.definitions.spec import AgentSpec
from subagents.messages import RunRecord, RunStatus, StepTaken, Usage
from subagents.store.snapshot import RestoreSnapshot, UnfinishedRun
from subagents.supervision.core import SupervisorCore
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


def _tree(root: str, owner: str, worker_tokens: int) -> tuple[UnfinishedRun, ...]:
    """A lead (budget 1000, running, 10 spent) whose worker ended having spent
    ``worker_tokens``: the lead unfinished, with its tree's records as a snapshot reads them."""
    lead = RunRecord(
        run_id=root,
        agent="lead",
        task="t",
        root_run_id=root,
        status=RunStatus.RUNNING,
        started_at=1.0,
        owner=owner,
        usage=Usage(input_tokens=10),
        token_budget=1000,
    )
    worker = RunRecord(
        run_id=f"{root}-w",
        agent="lead",
        task="t",
        root_run_id=root,
        parent_run_id=root,
        depth=1,
        status=RunStatus.COMPLETED,
        usage=Usage(input_tokens=worker_tokens),
        token_budget=900,
    )
    return (UnfinishedRun(record=lead, tree=(lead, worker)),)


def test_a_second_restore_walks_only_the_trees_it_takes_and_keeps_the_held_budgets() -> None:
    """A runtime restores a budgeted tree, its lead charged once (its budget rebuilt: the
    ended worker's spend popped), then restores again (another crashed host's tree): the
    second restore adds only the new tree's ended spend. Before: the live lead's too, a dead
    entry kept until its tree was forgotten (never read: its budget was rebuilt already)."""
    specs = {"lead": AgentSpec(name="lead", description="d")}
    core = SupervisorCore(lookup=specs.get, names=lambda: list(specs), owner="me:1:x")
    core.recovery.restore(RestoreSnapshot(unfinished=_tree("a", "dead:1:n", 500)))
    assert core.runs.spent_before == {"a": Usage(input_tokens=500)}
    # its first step after the restore rebuilds its budget (from its record: the core
    # adds a step's usage to the record first; none here)
    assert core.policies.charge(StepTaken(run_id="a", step=2, usage=Usage())) == []
    assert core.runs.spent_before == {}
    assert core.policies.budgets.spent("a") == Usage(input_tokens=510)  # the worker's 500 + 10

    a_now = _tree("a", "me:1:x", 500)  # the lead, held here, as the store has it now
    again = RestoreSnapshot(unfinished=(*a_now, *_tree("b", "dead:2:n", 700)))
    core.recovery.restore(again)
    assert core.runs.spent_before == {"b": Usage(input_tokens=700)}  # not "a" again
    assert core.policies.budgets.spent("a") == Usage(input_tokens=510)  # counted once
