"""What the ended runs of a restored tree spent: a budget taken up by a restore counts it.

A run's budget covers its whole subtree (``budgets``). After a crash, a restored run's
budget is rebuilt from the records of the runs held again (``PolicyBook`` when it first
charges one): the runs of its tree that had ended before the crash are not held again, so
their spend was lost with the process, and a lead whose worker had spent most of its
budget had it whole again (tests/adversary/test_budget_crash.py). The restore reads its
resumed runs' tree records anyway (``UnfinishedRun.tree``); they give that spend back."""

from __future__ import annotations

from collections.abc import Container, Sequence

from subagents.messages import RunRecord, Usage


def ended_spend(tree: Sequence[RunRecord], held: Container[str]) -> dict[str, Usage]:
    """For each run of ``tree`` (one root's records) that is ``held`` and has a budget: the
    usage of its descendants in ``tree`` that are not held (ended before the restore).
    Nothing is walked for a tree with no budget held (most trees)."""
    budgeted = [
        r
        for r in tree
        if (r.token_budget is not None or r.cost_budget_usd is not None) and r.run_id in held
    ]
    if not budgeted:
        return {}
    children: dict[str, list[RunRecord]] = {}
    for record in tree:
        if record.parent_run_id is not None:
            children.setdefault(record.parent_run_id, []).append(record)
    spent: dict[str, Usage] = {}
    for run in budgeted:
        usage, todo, lost = Usage(), list(children.get(run.run_id, ())), False
        while todo:
            record = todo.pop()
            todo.extend(children.get(record.run_id, ()))
            if record.run_id not in held:
                usage, lost = usage + record.usage, True
        if lost:
            spent[run.run_id] = usage
    return spent
