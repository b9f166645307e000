"""The pending approvals on the page: read through one function, answered through another.

Why a module of its own: the asks a run keeps in the store for a person (durable approvals,
``Runtime(approve="store")``, every `subagents run --detach`) are the runtime's
(``subagents.runtime.pending_approvals`` and ``answer_approval``, functions of a store, for
any process that can open it); the console only shows them and passes the person's answer
on, as `subagents approvals`/`approve`/`deny` do. The process hosting the run takes the
answer within a second, unless the run ends first (then shown ``void``:
``store/unacted_approvals.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from subagents.console.actions import ActionError, checked_reason
from subagents.console.limits import clipped
from subagents.logs import get_logger
from subagents.runtime import answer_approval, pending_approvals
from subagents.store.approvals import ApprovalRefused

log = get_logger("subagents.console")

if TYPE_CHECKING:
    from subagents.cli.state import InspectedStore
    from subagents.messages import ApprovalRecord
    from subagents.store.base import DamagedRow


def pending(store: InspectedStore, run_id: str | None = None) -> list[ApprovalRecord]:
    """The approvals waiting for an answer, oldest first (of ``run_id``'s tree when given).
    A damaged approvals row (hand-edited) is left out and logged naming it: it made the
    whole list fail, so that no approval could be answered from the page."""
    damaged: list[DamagedRow] = []
    try:
        found = pending_approvals(store, run_id, damaged=damaged)
    except LookupError as exc:  # its message quotes the run id whole: clipped here
        raise ActionError(f"no run {clipped(run_id or '')!r} in the store", 404) from exc
    for row in damaged:
        log.warning("console damaged approval", approval_id=row.key, error=str(row))
    return found


def answer(store: InspectedStore, approval_id: str, allow: bool, reason: object) -> ApprovalRecord:
    """Allow or deny ``approval_id`` with ``reason`` (told to the model); the approval as
    answered. ``ActionError`` naming why it cannot be (unknown, answered already, its run
    ended)."""
    try:
        return answer_approval(store, approval_id, allow, checked_reason(reason))
    except ApprovalRefused as exc:
        raise ActionError(str(exc), 409) from exc
