"""What every store decides alike about durable approvals (``messages.approvals``): whether
an answer may be given, the record it makes, and the command that takes it to the runtime
hosting the run. Pure; the stores keep the rows."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Protocol, TypeVar

import msgspec

from subagents.messages import ApprovalAnswered, ApprovalRecord, RunRecord
from subagents.store.base import DamagedRow


class ApprovalRefused(ValueError):
    """An answer that cannot be given: an unknown approval, one already answered, one whose
    run has ended. The message names which and why."""


def refusal(approval_id: str, approval: ApprovalRecord | None, run: RunRecord | None) -> str | None:
    """Why ``approval`` (kept under ``approval_id``, of ``run``) cannot be answered now, or
    None when it can."""
    if approval is None:
        return f"no approval {approval_id!r} in the store (subagents approvals lists them)"
    if not approval.pending:
        answered = approval.answered_at
        when = (
            ""
            if answered is None
            else time.strftime(" at %Y-%m-%d %H:%M:%S UTC", time.gmtime(answered))
        )
        return f"approval {approval_id} was already answered: {approval.status}{when}"
    if run is not None and run.status.terminal:
        return (
            f"approval {approval_id} cannot be answered: its run {approval.run_id}"
            f" ({approval.agent}) has ended ({run.status.value}), so nothing waits for it"
        )
    if run is not None and approval.retries is not None and approval.retries != run.retries:
        return (
            f"approval {approval_id} cannot be answered: its run {approval.run_id}"
            f" ({approval.agent}) was retried from scratch since it asked (retry"
            f" {run.retries}), so nothing waits for it; a call the retry makes is asked anew"
        )
    return None


def answered(
    approval: ApprovalRecord, allow: bool, answer: str | None, remember: str | None, now: float
) -> ApprovalRecord:
    """``approval`` as answered."""
    return msgspec.structs.replace(
        approval,
        status="allowed" if allow else "denied",
        answer=answer,
        answered_at=now,
        remember=remember if allow else None,
    )


def answer_command(approval: ApprovalRecord) -> str:
    """The content of the ``approval`` command that takes an answer to the runtime hosting
    the run: its ``ApprovalAnswered``, as JSON."""
    told = ApprovalAnswered(
        approval_id=approval.approval_id,
        allow=approval.status == "allowed",
        answer=approval.answer,
    )
    return msgspec.json.encode(told).decode()


T = TypeVar("T")


class Decoding(Protocol):
    """What a store's transactions offer to read a row's JSON document, naming the row in
    its error (``sqlite_tx.Transactions.decode``, ``postgres_tx.PgTransactions.decode``)."""

    def decode(self, decoder: msgspec.json.Decoder[T], raw: str, table: str, key: object) -> T: ...


_APPROVAL = msgspec.json.Decoder(ApprovalRecord)
_RUN = msgspec.json.Decoder(RunRecord)


def listing_of(
    tx: Decoding,
    rows: Iterable[tuple[str, str, str | None, object]],
    *,
    pending: bool,
    damaged: list[DamagedRow] | None = None,
) -> list[ApprovalRecord]:
    """The approvals of a listing's rows (approval id, its document, its run's record or
    None, its run's id as its column says), in their order; ``pending``: only those that
    can still be answered (``refusal``: not of an ended run, nor of a retried run's earlier
    attempt). One rule for every store
    that lists approvals with SQL (SQLite, PostgreSQL). A run record that does not read
    (``DamagedRow``) is taken as unknown, not as the listing's error: its approval is
    listed as one of a run not in the store is (answering it reads the run again and is
    refused naming the damage), and the other approvals are listed (``ps``,
    ``approvals``: the listing then names the damaged run, ``cli/damaged.py``). An
    approvals row that does not read raises ``DamagedRow``; with ``damaged`` given (a
    listing) it is left out and named there instead, placed under its run (the ``run_id``
    column), as ``sqlite_tx.spare_damaged`` does for runs: one such row emptied
    ``approvals``, ``ps`` and the console's approvals."""
    found: list[ApprovalRecord] = []
    for key, raw, run_raw, run_id in rows:
        try:
            approval = tx.decode(_APPROVAL, raw, "approvals", key)
        except DamagedRow as exc:
            if damaged is None:
                raise
            damaged.append(exc.at(run_id))
            continue
        if pending:
            try:
                run = tx.decode(_RUN, run_raw, "runs", approval.run_id) if run_raw else None
            except DamagedRow:
                run = None
            if refusal(key, approval, run) is not None:
                continue
        found.append(approval)
    return found
