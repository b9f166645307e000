"""Budgets: how many tokens (and dollars) a run and everything under it may spend.

Why a ledger of subtree spending: a run's budget covers its own model calls and those of
every descendant, because a child's budget is carved out of what its parent has left. So
each model call's usage is added to the run that made it and to every ancestor, and each of
them is checked. A plain class, single-threaded, fed by SupervisorCore; unit tested alone.

Rules:
- the budget a run gets is the tightest of those given (spawn call, definition, runtime),
  capped by what its parent (and every budgeted ancestor) has left at spawn time;
- a run with nothing left to give cannot spawn (``BudgetRefused``);
- a run is over budget when its subtree has spent *more* than its budget; the supervisor
  stops it at once, so it overruns by at most the model calls already in flight (one per
  run: an agent waits for the supervisor to record a step before it takes the next).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence

from subagents.messages import Usage
from subagents.supervision.limits import shown
from subagents.supervision.run_entry import UNLIMITED, Budget, RunEntry

__all__ = ["Budget", "BudgetBook", "BudgetRefused", "tightest_cost", "tightest_tokens"]


class BudgetRefused(Exception):
    """A run has nothing left to hand down; the message says whose budget ran out."""


def tightest_tokens(*given: int | None) -> int | None:
    """The smallest positive budget given, or None when none was."""
    values = [g for g in given if g is not None]
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"a token budget must be a positive integer, got {shown(v)}")
    return min(values) if values else None


def tightest_cost(*given: float | None) -> float | None:
    values = [g for g in given if g is not None]
    for v in values:
        if (
            isinstance(v, bool)
            or not isinstance(v, int | float)
            # (NaN compares false: it would turn the limit off; an int past every float
            # raised OverflowError in math.isfinite)
            or not 0 < v <= sys.float_info.max
        ):
            raise ValueError(
                f"a cost budget must be a positive, finite number of USD, got {shown(v)}"
            )
    return float(min(values)) if values else None


class BudgetBook:
    """Budgets per run and the usage of each run's whole subtree.

    Kept in the runs' entries (``RunEntry``: its ``budget``, ``spent``, ``budget_parent``):
    ``entries``, the dict the policy book shares with the restart window (one record per
    run, one pop to forget it), or a dict of its own."""

    def __init__(self, entries: dict[str, RunEntry] | None = None) -> None:
        self._entries: dict[str, RunEntry] = {} if entries is None else entries

    def _known(self, run_id: str | None) -> RunEntry | None:
        """``run_id``'s entry if it is in this ledger."""
        entry = self._entries.get(run_id) if run_id is not None else None
        return entry if entry is not None and entry.budget is not None else None

    def _register(self, run_id: str, parent_run_id: str | None, budget: Budget) -> None:
        """``run_id`` in the ledger with ``budget`` (what it spent before is kept)."""
        entry = self._entries.get(run_id)
        if entry is None:
            self._entries[run_id] = RunEntry(budget=budget, budget_parent=parent_run_id)
        else:
            entry.budget = budget
            entry.budget_parent = parent_run_id

    # ---- granting ----------------------------------------------------------------------------

    def available(self, run_id: str) -> Budget:
        """What ``run_id`` may still spend: the least left over it and its budgeted ancestors."""
        tokens: int | None = None
        cost: float | None = None
        entry = self._known(run_id)
        while entry is not None:
            budget, spent = entry.budget, entry.spent
            assert budget is not None  # (``_known``)
            if budget.tokens is not None:
                left = budget.tokens - spent.total_tokens
                tokens = left if tokens is None else min(tokens, left)
            if budget.cost_usd is not None:
                left_cost = budget.cost_usd - spent.cost_usd
                cost = left_cost if cost is None else min(cost, left_cost)
            entry = self._known(entry.budget_parent)
        return Budget(tokens=tokens, cost_usd=cost)

    def grant(
        self,
        run_id: str,
        parent_run_id: str | None,
        *,
        tokens: Sequence[int | None] = (),
        cost_usd: Sequence[float | None] = (),
        parent_label: str = "",
    ) -> Budget:
        """Register ``run_id`` with the tightest budget asked, capped by its parent's."""
        want_tokens = tightest_tokens(*tokens)
        want_cost = tightest_cost(*cost_usd)
        if parent_run_id is not None and self._known(parent_run_id) is not None:
            left = self.available(parent_run_id)
            who = parent_label or parent_run_id
            if left.tokens is not None:
                if left.tokens <= 0:
                    raise BudgetRefused(
                        f"budget: {who} has no tokens left to give ({left.tokens} left)"
                    )
                want_tokens = left.tokens if want_tokens is None else min(want_tokens, left.tokens)
            if left.cost_usd is not None:
                if left.cost_usd <= 0:
                    raise BudgetRefused(f"budget: {who} has no cost budget (USD) left to give")
                want_cost = left.cost_usd if want_cost is None else min(want_cost, left.cost_usd)
        if want_tokens is None and want_cost is None:
            budget = UNLIMITED
        else:
            budget = Budget(tokens=want_tokens, cost_usd=want_cost)
        self._register(run_id, parent_run_id, budget)
        return budget

    def grant_unlimited(self, run_id: str, parent_run_id: str) -> Budget | None:
        """``grant`` of a child that asks no budget (nor do its definition or the limits),
        when no run above it in the ledger holds one: ``UNLIMITED``, registered; else None,
        nothing registered (``grant`` works it out). Why: most children, and ``grant`` came
        to the same after reading the tightest of six ``None`` and what the chain has left."""
        entry = self._known(parent_run_id)
        while entry is not None:
            if entry.budget is not UNLIMITED and entry.budget != UNLIMITED:
                return None
            entry = self._known(entry.budget_parent)
        self._register(run_id, parent_run_id, UNLIMITED)
        return UNLIMITED

    # ---- spending ----------------------------------------------------------------------------

    def charge(self, run_id: str, usage: Usage) -> list[str]:
        """Add ``usage`` to ``run_id`` and every ancestor; the runs now over budget, deepest
        first."""
        over: list[str] = []
        current: str | None = run_id
        entries = self._entries
        while current is not None:
            entry = entries.get(current)
            budget = entry.budget if entry is not None else None
            if entry is None or budget is None:
                break
            spent = entry.spent = entry.spent + usage
            if (budget.tokens is not None and spent.total_tokens > budget.tokens) or (
                budget.cost_usd is not None and spent.cost_usd > budget.cost_usd
            ):
                over.append(current)
            current = entry.budget_parent
        return over

    def over(self, run_id: str) -> bool:
        entry = self._known(run_id)
        if entry is None:
            return False
        budget, spent = entry.budget, entry.spent
        assert budget is not None  # (``_known``)
        if budget.tokens is not None and spent.total_tokens > budget.tokens:
            return True
        return budget.cost_usd is not None and spent.cost_usd > budget.cost_usd

    def budget(self, run_id: str) -> Budget:
        entry = self._known(run_id)
        return entry.budget if entry is not None and entry.budget is not None else Budget()

    def spent(self, run_id: str) -> Usage:
        """What ``run_id``'s whole subtree has spent while it was known here."""
        entry = self._known(run_id)
        return entry.spent if entry is not None else Usage()

    def describe_over(self, run_id: str) -> str:
        """Why ``run_id`` is over budget, in words for its outcome."""
        budget, spent = self.budget(run_id), self.spent(run_id)
        if budget.tokens is not None and spent.total_tokens > budget.tokens:
            return f"used {spent.total_tokens} tokens of its {budget.tokens}-token budget"
        return f"used ${spent.cost_usd:.4f} of its ${budget.cost_usd or 0:.4f} cost budget"

    def known(self, run_id: str) -> bool:
        return self._known(run_id) is not None

    def restore(self, run_id: str, parent_run_id: str | None, budget: Budget, spent: Usage) -> None:
        """Register a run with the budget and spending its records show (after a restore)."""
        self._register(run_id, parent_run_id, budget)
        self._entries[run_id].spent = spent

    def forget(self, run_ids: Iterable[str]) -> None:
        """Drop the runs' entries (the whole entry: in a shared dict, their policies and
        restart windows go with them)."""
        for run_id in run_ids:
            self._entries.pop(run_id, None)
