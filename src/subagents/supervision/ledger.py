"""TableLedger: the admission checks' read-only view of the supervisor's own state.

Why apart from ``RunTable``: the checks (``admission_checks``) read through the ``Ledger``
protocol so that the same functions decide over the supervisor's tables (here, in its
thread) and over the frozen ``Standing`` a run is started with (its offer, in the agent's
thread). This class only reads; admission changes the table after the checks pass.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from subagents.supervision.admission_checks import Requester
from subagents.supervision.limits import Limits
from subagents.supervision.runs import RunTable
from subagents.supervision.spawn_rules import DepthBound, SpawnRules


class TableLedger:
    """The ``Ledger`` over a ``RunTable``, the runtime's rules and its agents' names."""

    def __init__(self, runs: RunTable, rules: SpawnRules, names: Callable[[], list[str]]) -> None:
        self.runs = runs
        self.rules = rules
        self._names = names

    @property
    def limits(self) -> Limits:
        return self.rules.limits

    def agent_names(self) -> list[str]:
        return self._names()

    def ancestors(self, run: Requester) -> Sequence[DepthBound]:
        state = self.runs.get(run.record.run_id)
        return self.runs.ancestors(state) if state is not None else ()

    def tree_runs(self, root_run_id: str) -> int:
        return self.runs.tree_runs(root_run_id)

    def in_use(self, run_id: str) -> bool:
        return run_id in self.runs
