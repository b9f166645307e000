"""RunViews: the read-only views a Runtime gives of its runs (lists, trees, totals, usage).

Why apart from the Runtime: these only read (the store, and for ``usage`` the supervisor's
fresher records of a live tree) and compute with the pure views of ``supervision.tree``,
``totals`` and ``usage``; none of them starts, stops or mails anything. The Runtime keeps the
public methods (their signatures and documentation) and hands the work here. Each first
waits for the decision of the root spawns it may concern (``settle``: ``Runtime.spawn``
returns before its admission; read now, the store would not know the run yet).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from subagents.messages import (
    EXTERNAL_SENDER,
    ApprovalRecord,
    RunRecord,
    RunStatus,
    TreeNode,
    TreeUsage,
)
from subagents.runtime._approvals import pending_approvals
from subagents.runtime._supervisor_asks import RuntimeClosed
from subagents.store.base import RunStore, StoreError
from subagents.supervision.requests import encoding_problem, refuse_unkeepable_id
from subagents.supervision.totals import Totals, subtree_totals
from subagents.supervision.tree import tree_view
from subagents.supervision.usage import tree_usage


class RunViews:
    """Views of the runs of ``store``; ``held(run_id)``: the supervisor's records of the live
    tree under ``run_id`` (laid over the store's, which may lag behind a group commit);
    ``settle(run_id)``: returns once the spawn of ``run_id`` (None: every spawn told) is
    decided (``SpawnWindow.settle``)."""

    def __init__(
        self,
        store: RunStore,
        held: Callable[[str], tuple[RunRecord, ...]],
        settle: Callable[[str | None], None],
        owns_store: bool = False,
    ) -> None:
        """``owns_store``: the runtime opened ``store`` itself, and closes it with itself."""
        self.store = store
        self.owns_store = owns_store
        self.held = held
        self.settle = settle

    def get(self, run_id: str) -> RunRecord | None:
        """``Runtime.get``: the run's record, once its spawn is decided (None: unknown)."""
        refuse_unkeepable_id(run_id)
        self.settle(run_id)
        return self.store.get_run(run_id)

    def approvals(self, run_id: str | None) -> list[ApprovalRecord]:
        """``Runtime.approvals``: the pending approvals (of ``run_id``'s tree)."""
        refuse_unkeepable_id(run_id)
        self.settle(run_id)
        return pending_approvals(self.store, run_id)

    def record(self, run_id: str) -> RunRecord:
        """The run's record; ``LookupError`` for an unknown run."""
        record = self.get(run_id)
        if record is None:
            raise LookupError(f"no run with id {run_id!r}")
        return record

    def runs(
        self,
        status: RunStatus | Iterable[RunStatus] | None,
        root_run_id: str | None,
        agent: str | None,
        requester: str | None,
    ) -> list[RunRecord]:
        """``Runtime.runs``: the filtered runs, in creation order."""
        statuses = _statuses(status)
        refuse_unkeepable_id(root_run_id)
        refuse_unkeepable_id(requester)
        problem = encoding_problem("the agent", agent) if isinstance(agent, str) else None
        if problem is not None:
            raise ValueError(f"no agent {agent!r}: {problem}")
        self.settle(None)
        if requester is None:
            return self.store.list_runs(statuses=statuses, root_run_id=root_run_id, agent=agent)
        if requester == EXTERNAL_SENDER:
            parent = None
        else:
            asking = self.record(requester)
            if root_run_id is not None and root_run_id != asking.root_run_id:
                return []
            root_run_id, parent = asking.root_run_id, requester
        found = self.store.list_runs(statuses=statuses, root_run_id=root_run_id, agent=agent)
        return [r for r in found if r.parent_run_id == parent]

    def tree(self, run_id: str) -> TreeNode:
        """``Runtime.tree``: the execution tree under ``run_id``."""
        record = self.record(run_id)
        return tree_view(record, self.store.list_runs(root_run_id=record.root_run_id))

    def totals(self, run_id: str) -> Totals:
        """``Runtime.totals``: what ``run_id``'s whole subtree counts up to."""
        record = self.record(run_id)
        return subtree_totals(run_id, self.store.list_runs(root_run_id=record.root_run_id))

    def usage(self, run_id: str) -> TreeUsage:
        """``Runtime.usage``: the supervisor's records laid over the store's; once the
        runtime is closed, the store's alone (its close recorded every run's end), as
        ``status`` and ``result`` answer then. A store the runtime opened itself (a path)
        is closed with it: ``RuntimeClosed`` says so and how to read it."""
        try:
            held = self.held(run_id)  # asked: behind the spawn, decided first
        except RuntimeClosed:
            try:
                return self._usage(run_id, ())
            except StoreError as exc:
                if not self.owns_store:  # the caller's own store: its error is theirs
                    raise
                raise RuntimeClosed(
                    f"the runtime is closed, and so is the store it opened ({exc}): read"
                    " the usage from a store opened on it (SQLiteStore(path), or"
                    " subagents.store.opening.open_location(path or URL)), or pass the"
                    " runtime a store of your own to read after its close"
                ) from exc
        return self._usage(run_id, held)

    def _usage(self, run_id: str, held: tuple[RunRecord, ...]) -> TreeUsage:
        record = self.get(run_id)
        if record is None and not held:
            raise LookupError(f"no run with id {run_id!r}")
        root = record.root_run_id if record is not None else held[0].root_run_id
        records = {r.run_id: r for r in self.store.list_runs(root_run_id=root)}
        records.update((r.run_id, r) for r in held)
        return tree_usage(run_id, records.values())


def _statuses(status: RunStatus | Iterable[RunStatus] | None) -> list[RunStatus] | None:
    """``runs(status=...)`` as a list of statuses; ``"completed"`` (a plain string) is one
    status (it was iterated as letters, matching nothing); anything else that is not a
    status is a ``ValueError`` naming it and the statuses there are."""
    if status is None:
        return None
    given = [status] if isinstance(status, str) else status
    if not isinstance(given, Iterable):
        raise TypeError(f"status must be a RunStatus or several, got {given!r}")
    try:
        return [RunStatus(s) for s in given]
    except ValueError:
        known = ", ".join(s.value for s in RunStatus)
        raise ValueError(f"status must be among {known}; got {status!r}") from None
