"""Answers their run never acted on, found and named (docs/runtime.md, "Durable approvals").

An answer is accepted while the store holds its run as live. A stop decided at that moment
ends the run before the answer reaches it: the runtime hosting the run commits the run's end
a moment after deciding it, and takes the answer (an ``approval`` command) after that, when
nothing waits for it (``supervision/approvals.answered``). The record still says ``allowed``
(or ``denied``) for a call that never ran. What tells the two apart is the run's own
history: an answer its run took is announced there (``approval_answered``), reported by the
run as it acts on it (``ApprovalTaken``; dropped once the run has ended); an answered
approval whose run has ended with no such event was never acted on, and is shown ``void``.
(Exact for a journaled call, whose journal entry the host grants after the event; a call of
a tool not journaled, read-only or idempotent, may start as the stop lands: docs/runtime.md.)

A function of the store's rows alone, as ``superseded_approvals`` (``subagents approvals``
lists approvals without loading the runtime), so it holds for every store and for a store an
older subagents wrote.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from subagents.messages import ApprovalRecord, EventKind, RunRecord
from subagents.store.base import DamagedRow, RunStore

VOID = "void"
"""How an answered approval whose run ended before acting on it is shown."""


def told_ids(store: RunStore, run_id: str) -> set[str]:
    """The approvals whose answer ``run_id`` took (its ``approval_answered`` events)."""
    return {
        str(e.data.get("approval_id"))
        for e in store.events(run_id)
        if e.kind is EventKind.APPROVAL_ANSWERED
    }


def unacted(approval: ApprovalRecord, run: RunRecord | None, told: Iterable[str]) -> bool:
    """``approval`` was answered, its run has ended, and the run never took the answer."""
    return (
        not approval.pending
        and run is not None
        and run.status.terminal
        and approval.approval_id not in told
    )


def void_ids(
    store: RunStore,
    listed: Sequence[ApprovalRecord],
    read_run: Callable[[str], RunRecord | None] | None = None,
    damaged: list[DamagedRow] | None = None,
) -> set[str]:
    """The approvals of ``listed`` answered but never acted on (``unacted``): one read of
    the events of each ended run with an answered approval listed. ``read_run``: how a run's
    record is read (the CLI's names a damaged one instead of failing); the store's by
    default. ``damaged``: where a run whose events do not read is named (its approvals then
    shown as stored), instead of the whole listing failing on it."""
    read = store.get_run if read_run is None else read_run
    void: set[str] = set()
    told: dict[str, set[str] | None] = {}
    for approval in listed:
        if approval.pending:
            continue
        run = read(approval.run_id)
        if run is None or not run.status.terminal:
            continue
        if approval.run_id not in told:
            try:
                told[approval.run_id] = told_ids(store, approval.run_id)
            except DamagedRow as exc:
                if damaged is None:
                    raise
                if all(seen.row != exc.row for seen in damaged):
                    damaged.append(exc)
                told[approval.run_id] = None  # (unknown: none of its shown void)
        its = told[approval.run_id]
        if its is not None and unacted(approval, run, its):
            void.add(approval.approval_id)
    return void
