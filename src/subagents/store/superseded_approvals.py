"""Pending approvals an older subagents left behind, found and named (docs/runtime.md,
"Durable approvals").

A run asked under an id made before the turn was part of it (``approval_id_for``'s ``step``),
resumed by a newer runtime, asks again under its new id; nothing waits for the old one. Here,
not in ``runtime/``, because ``subagents ps``, ``info`` and ``approvals`` list approvals without
loading the runtime (``tests/cli/test_cli_inspect.py``): the rule is a function of the store's
rows alone.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

from subagents.messages import ApprovalRecord
from subagents.store.base import DamagedRow, RunStore


def superseded_by(
    approval: ApprovalRecord, of_its_run: Iterable[ApprovalRecord]
) -> ApprovalRecord | None:
    """The ask that replaced pending ``approval``, an id an older subagents made: one of
    the same run for the same call (its ``tool_use_id``, in the same retry generation) under
    another id; None if none did. (An ask of a retried run's earlier attempt is refused as
    such by the store.)

    How one is left: ids made before the turn was part of them (``approval_id_for``'s
    ``step``, session 21) differ from the ids the same call gets now, so a run resumed by a
    newer runtime asks again under a new id and nothing waits for the old one, which stayed
    pending (listed, and an answer to it reached no one, unsaid). A run of one version never
    leaves one: its next turn, the only place a call's id may come again, begins only once
    every ask of the turn before is answered. So only an id of that older scheme
    (``_older_ids``) is ever superseded: an ask under this version's id is the one its call
    waits for, whatever another ask of the same call id (a later turn's, under a model that
    repeats ids) says, and whatever the clocks of the hosts that asked them read."""
    if not older_pending(approval):
        return None
    older = _older_ids(approval)
    for other in of_its_run:
        if (
            other.run_id == approval.run_id
            and other.tool_use_id == approval.tool_use_id
            and other.approval_id not in older  # (this version's: one that waits now)
            and approval.retries in (None, other.retries)  # (a retry's: ``store.approvals``)
        ):
            return other
    return None


def _older_ids(approval: ApprovalRecord) -> tuple[str, str]:
    """The ids ``approval_id_for`` gave ``approval``'s call before the turn was part of
    them: with its retry generation (c6a266f..feebafa), and before that without."""
    run, use = approval.run_id, approval.tool_use_id
    return _digest(f"{run}\0{approval.retries or 0}\0{use}"), _digest(f"{run}\0{use}")


def _digest(said: str) -> str:
    return "ap" + hashlib.sha256(said.encode()).hexdigest()[:14]


def live(
    store: RunStore,
    listed: Sequence[ApprovalRecord],
    damaged: list[DamagedRow] | None = None,
) -> list[ApprovalRecord]:
    """``listed`` less the pending approvals a later ask replaced (``superseded_by``): one
    read of the store per tree listed with one pending under an older id (none for a store
    this version wrote). ``damaged``: the listing's (``RunStore.list_approvals``), a
    damaged row these reads meet named there once."""
    older = [a for a in listed if older_pending(a)]
    if not older:
        return list(listed)
    trees = {a.root_run_id for a in older}
    met: list[DamagedRow] | None = None if damaged is None else []
    asks = {
        root: store.list_approvals(pending=False, root_run_id=root, damaged=met) for root in trees
    }
    if damaged is not None and met:
        damaged.extend(d for d in met if all(seen.row != d.row for seen in damaged))
    return [a for a in listed if superseded_by(a, asks.get(a.root_run_id, ())) is None]


def older_pending(approval: ApprovalRecord) -> bool:
    """A pending ask under an id an older subagents made (``_older_ids``)."""
    return approval.pending and approval.approval_id in _older_ids(approval)


def superseded_refusal(approval: ApprovalRecord, later: ApprovalRecord) -> str:
    """Why ``approval`` cannot be answered: ``later`` replaced it."""
    now = "answer that one" if later.pending else f"that one was answered: {later.status}"
    return (
        f"approval {approval.approval_id} cannot be answered: its run {approval.run_id}"
        f" ({approval.agent}) asked for the same call again under {later.approval_id} (an"
        f" id of a newer subagents, which puts the turn in it), so nothing waits for"
        f" {approval.approval_id}; {now}"
    )
