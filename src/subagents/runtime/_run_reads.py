"""``RunReads``: what a runtime shows of its runs (the store's records with the supervisor's
fresher ones laid over them), apart from what it does with them (``Runtime``): read-only
calls a program, the CLI and the console make, each one ``RunViews`` call."""

from __future__ import annotations

from collections.abc import Iterable

from subagents.messages import RunRecord, RunStatus, TreeNode, TreeUsage
from subagents.runtime._run_views import RunViews
from subagents.supervision.totals import Totals


class RunReads:
    """The runs as they are now: listed, one by one, as a tree, as totals and as usage."""

    _views: RunViews

    def runs(
        self,
        *,
        status: RunStatus | Iterable[RunStatus] | None = None,
        root_run_id: str | None = None,
        agent: str | None = None,
        requester: str | None = None,
    ) -> list[RunRecord]:
        """Runs in creation order, filtered by status(es), tree, agent and ``requester``:
        a run id (the runs it spawned, its children) or ``EXTERNAL_SENDER`` "external" (the
        root runs). ``LookupError`` for a requester that is not a known run."""
        return self._views.runs(status, root_run_id, agent, requester)

    def get(self, run_id: str) -> RunRecord | None:
        return self._views.get(run_id)

    def tree(self, run_id: str) -> TreeNode:
        """The execution tree under ``run_id``: status, steps and usage per node."""
        return self._views.tree(run_id)

    def totals(self, run_id: str) -> Totals:
        """Tokens, cost, steps, runs, restarts and statuses of ``run_id``'s whole subtree."""
        return self._views.totals(run_id)

    def usage(self, run_id: str) -> TreeUsage:
        """What ``run_id`` and every run under it have used so far, live or ended: tokens,
        cost, model calls, steps and tool calls, for the subtree and per run (``per_run``),
        and how many of its runs are still live. The supervisor's records (the freshest)
        are laid over the store's, so a live tree is seen as it is now."""
        return self._views.usage(run_id)
