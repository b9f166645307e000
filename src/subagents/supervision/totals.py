"""Totals of a run's whole subtree: tokens, cost, steps, runs, restarts, statuses.

Why from records: every run's record carries its own usage and steps, durably, so totals
of any run (live or long finished, in this process or read back from the store) are a walk
over the records of its tree. Pure: takes records, returns a Struct.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from subagents.messages import RunRecord, Usage


class Totals(msgspec.Struct, frozen=True, kw_only=True):
    """What a run and every run under it consumed."""

    run_id: str
    runs: int = 0
    steps: int = 0
    restarts: int = 0
    retries: int = 0
    usage: Usage = Usage()
    by_status: dict[str, int] = msgspec.field(default_factory=dict)

    @property
    def tokens(self) -> int:
        """Every token billed: input (with cache reads and writes) plus output."""
        return self.usage.total_tokens

    @property
    def cost_usd(self) -> float:
        return self.usage.cost_usd


def subtree_totals(run_id: str, records: Iterable[RunRecord]) -> Totals:
    """Totals of ``run_id`` and its descendants among ``records`` (a tree's records)."""
    by_id = {r.run_id: r for r in records}
    if run_id not in by_id:
        raise LookupError(f"no run with id {run_id!r}")
    children: dict[str, list[str]] = {}
    for record in by_id.values():
        if record.parent_run_id is not None:
            children.setdefault(record.parent_run_id, []).append(record.run_id)
    usage = Usage()
    runs = steps = restarts = retries = 0
    by_status: dict[str, int] = {}
    todo = [run_id]
    while todo:
        record = by_id[todo.pop()]
        todo.extend(children.get(record.run_id, ()))
        runs += 1
        steps += record.steps
        restarts += record.restarts
        retries += record.retries
        usage = usage + record.usage
        by_status[str(record.status)] = by_status.get(str(record.status), 0) + 1
    return Totals(
        run_id=run_id,
        runs=runs,
        steps=steps,
        restarts=restarts,
        retries=retries,
        usage=usage,
        by_status=by_status,
    )
