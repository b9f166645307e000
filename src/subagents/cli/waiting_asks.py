"""Which runs wait for an answer kept in the store, for the views that list runs.

Why a module of its own: a run whose tool call waits for a durable approval is only
``waiting`` in its record, the same status as a run waiting for its children; `ps`, `info`,
`tree` and `attach` say which it is, and what answers it (`subagents approve ID`). Each
listing reads the pending approvals once (one query of the store for the tree or the store),
never one query per run it shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from subagents.messages import ApprovalRecord
from subagents.store.base import DamagedRow, RunStore

HINT = (
    "approval: the run waits for an answer kept in the store;"
    " `subagents approvals` lists them, `subagents approve ID` or `subagents deny ID`"
    " answers one"
)


class WaitingAsks:
    """The pending approvals of a listing, by the run that asked."""

    def __init__(self, approvals: Sequence[ApprovalRecord] = ()) -> None:
        self._by_run: dict[str, list[ApprovalRecord]] = {}
        for approval in approvals:
            if approval.pending:
                self._by_run.setdefault(approval.run_id, []).append(approval)

    @classmethod
    def read(
        cls,
        store: RunStore,
        root_run_id: str | None = None,
        damaged: list[DamagedRow] | None = None,
    ) -> WaitingAsks:
        """The pending approvals of runs that have not ended (of one tree, given its root):
        one read of the store. ``damaged``: an approvals row that does not read is left out
        and named there (``RunStore.list_approvals``), so the view still shows its runs."""
        from subagents.store.superseded_approvals import live

        listed = store.list_approvals(pending=True, root_run_id=root_run_id, damaged=damaged)
        return cls(live(store, listed, damaged))

    def of(self, run_id: str) -> tuple[ApprovalRecord, ...]:
        """The run's pending approvals, in the order asked."""
        return tuple(self._by_run.get(run_id, ()))

    def ids(self, run_id: str) -> tuple[str, ...]:
        return tuple(a.approval_id for a in self._by_run.get(run_id, ()))

    def __bool__(self) -> bool:
        return bool(self._by_run)


def marker(approval_ids: Sequence[str]) -> str:
    """How a view names what a run waits for: ``approval ap3f0c1d2e4b5a69`` (``+N`` more)."""
    if not approval_ids:
        return ""
    more = f" +{len(approval_ids) - 1}" if len(approval_ids) > 1 else ""
    return f"approval {approval_ids[0]}{more}"


def with_approvals(print_table: Any, approvals: Sequence[Sequence[str]]) -> Any:
    """``print_table`` with an APPROVAL column after STATUS when any run listed waits for an
    approval kept in the store (its id, ``+N`` when it waits for more than one)."""
    if not any(approvals):
        return print_table

    def printed(headers: Sequence[str], rows: Sequence[Sequence[str]], **kw: Any) -> None:
        at = list(headers).index("STATUS") + 1
        cells = [_cell(ids) for ids in approvals]
        print_table(
            [*headers[:at], "APPROVAL", *headers[at:]],
            [[*row[:at], cell, *row[at:]] for row, cell in zip(rows, cells, strict=True)],
            **kw,
        )

    return printed


def _cell(approval_ids: Sequence[str]) -> str:
    if not approval_ids:
        return "-"
    return approval_ids[0] + (f"+{len(approval_ids) - 1}" if len(approval_ids) > 1 else "")
