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

import msgspec

from subagents.messages import Usage
from subagents.supervision.limits import shown


class BudgetRefused(Exception):
    """A run has nothing left to hand down; the message says whose budget ran out."""


class Budget(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A limit in tokens and/or US dollars; ``None`` means unlimited. Held for every live run:
    out of the cyclic GC (``gc=False``: numbers only, never in a cycle)."""

    tokens: int | None = None
    cost_usd: float | None = None


_UNLIMITED = Budget()
"""The budget of most runs (none given, none above): one, shared (it is frozen)."""

_NOTHING_SPENT = Usage()
"""What a run just granted has spent: one, shared (``charge`` replaces it, never changes it)."""


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
    """Budgets per run and the usage of each run's whole subtree."""

    def __init__(self) -> None:
        self._budget: dict[str, Budget] = {}
        self._spent: dict[str, Usage] = {}
        self._parent: dict[str, str | None] = {}

    # ---- granting ----------------------------------------------------------------------------

    def available(self, run_id: str) -> Budget:
        """What ``run_id`` may still spend: the least left over it and its budgeted ancestors."""
        tokens: int | None = None
        cost: float | None = None
        current: str | None = run_id
        while current is not None and current in self._budget:
            budget, spent = self._budget[current], self._spent[current]
            if budget.tokens is not None:
                left = budget.tokens - spent.total_tokens
                tokens = left if tokens is None else min(tokens, left)
            if budget.cost_usd is not None:
                left_cost = budget.cost_usd - spent.cost_usd
                cost = left_cost if cost is None else min(cost, left_cost)
            current = self._parent.get(current)
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
        if parent_run_id is not None and parent_run_id in self._budget:
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
            budget = _UNLIMITED
        else:
            budget = Budget(tokens=want_tokens, cost_usd=want_cost)
        self._budget[run_id] = budget
        if run_id not in self._spent:
            self._spent[run_id] = _NOTHING_SPENT
        self._parent[run_id] = parent_run_id
        return budget

    def grant_root_unlimited(self, run_id: str) -> Budget:
        """``grant`` of a root that asks no budget anywhere (``tightest_*`` of nothing given
        and no parent to cap it: unlimited), registered as ``grant`` registers it."""
        self._budget[run_id] = _UNLIMITED
        if run_id not in self._spent:
            self._spent[run_id] = _NOTHING_SPENT
        self._parent[run_id] = None
        return _UNLIMITED

    # ---- spending ----------------------------------------------------------------------------

    def charge(self, run_id: str, usage: Usage) -> list[str]:
        """Add ``usage`` to ``run_id`` and every ancestor; the runs now over budget, deepest
        first."""
        over: list[str] = []
        current: str | None = run_id
        while current is not None and current in self._spent:
            self._spent[current] = self._spent[current] + usage
            if self.over(current):
                over.append(current)
            current = self._parent.get(current)
        return over

    def over(self, run_id: str) -> bool:
        budget = self._budget.get(run_id)
        if budget is None:
            return False
        spent = self._spent[run_id]
        if budget.tokens is not None and spent.total_tokens > budget.tokens:
            return True
        return budget.cost_usd is not None and spent.cost_usd > budget.cost_usd

    def budget(self, run_id: str) -> Budget:
        return self._budget.get(run_id, Budget())

    def spent(self, run_id: str) -> Usage:
        """What ``run_id``'s whole subtree has spent while it was known here."""
        return self._spent.get(run_id, Usage())

    def describe_over(self, run_id: str) -> str:
        """Why ``run_id`` is over budget, in words for its outcome."""
        budget, spent = self.budget(run_id), self.spent(run_id)
        if budget.tokens is not None and spent.total_tokens > budget.tokens:
            return f"used {spent.total_tokens} tokens of its {budget.tokens}-token budget"
        return f"used ${spent.cost_usd:.4f} of its ${budget.cost_usd or 0:.4f} cost budget"

    def known(self, run_id: str) -> bool:
        return run_id in self._budget

    def restore(self, run_id: str, parent_run_id: str | None, budget: Budget, spent: Usage) -> None:
        """Register a run with the budget and spending its records show (after a restore)."""
        self._budget[run_id] = budget
        self._spent[run_id] = spent
        self._parent[run_id] = parent_run_id

    def forget(self, run_ids: Iterable[str]) -> None:
        for run_id in run_ids:
            self._budget.pop(run_id, None)
            self._spent.pop(run_id, None)
            self._parent.pop(run_id, None)
