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

import msgspec

from subagents.console.actions import ActionError, checked_reason
from subagents.console.limits import clipped, named_damage
from subagents.logs import get_logger
from subagents.messages import ApprovalRecord
from subagents.runtime import answer_approval, pending_approvals
from subagents.store.approvals import ApprovalRefused

log = get_logger("subagents.console")

if TYPE_CHECKING:
    from subagents.cli.state import InspectedStore
    from subagents.store.base import DamagedRow


SHAPES = ("1", "2")
"""``/api/approvals?v=``: 1 (the default, as before) a list of the approvals waiting; 2 an
object, ``approvals`` (that list) and ``damaged`` (each damaged row's key, an approval's id
or its run's, -> what is wrong; every row an entry, its key clipped: ``limits.named_damage``),
as ``/api/runs`` names its damaged rows. A script written for the list reads the same list;
the page asks for 2."""


class Pending(msgspec.Struct, frozen=True):
    """``/api/approvals?v=2``: the approvals waiting, and the rows left out (damaged)."""

    approvals: list[ApprovalRecord]
    damaged: dict[str, str]


def listed(
    store: InspectedStore, run_id: str | None = None, shape: str | None = None
) -> list[ApprovalRecord] | Pending:
    """``/api/approvals`` in the ``shape`` asked (``SHAPES``; ``ActionError`` 400 naming any
    other)."""
    if shape is not None and shape not in SHAPES:
        raise ActionError(f"no version {clipped(shape)!r} of the approvals: 1 or 2", 400)
    damaged: list[DamagedRow] = []
    found = pending(store, run_id, damaged)
    if shape != "2":
        return found
    return Pending(found, named_damage((row.key, str(row)) for row in damaged))


def pending(
    store: InspectedStore, run_id: str | None = None, damaged: list[DamagedRow] | None = None
) -> list[ApprovalRecord]:
    """The approvals waiting for an answer, oldest first (of ``run_id``'s tree when given).
    A damaged approvals row (hand-edited) is left out, logged naming it and added to
    ``damaged``: it made the whole list fail, so that no approval could be answered from
    the page."""
    met: list[DamagedRow] = []
    try:
        found = pending_approvals(store, run_id, damaged=met)
    except LookupError as exc:  # its message quotes the run id whole: clipped here
        raise ActionError(f"no run {clipped(run_id or '')!r} in the store", 404) from exc
    for key, what in named_damage((row.key, str(row)) for row in met).items():
        log.warning("console damaged approval", approval_id=key, error=what)  # (clipped)
    if damaged is not None:
        damaged.extend(met)
    return found


def answer(store: InspectedStore, approval_id: str, allow: bool, reason: object) -> ApprovalRecord:
    """Allow or deny ``approval_id`` with ``reason`` (told to the model); the approval as
    answered. ``ActionError`` naming why it cannot be (unknown, answered already, its run
    ended)."""
    try:
        return answer_approval(store, approval_id, allow, checked_reason(reason))
    except ApprovalRefused as exc:
        raise ActionError(str(exc), 409) from exc
