"""The sweep of a SQLite store: archive, clean and delete finished runs in one transaction.

The rules are ``store.sweep`` (pure, tested without a database); this applies their plan to
the store's tables.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from subagents.logs import get_logger
from subagents.messages import TERMINAL_STATUSES, Cleanup, RunStatus
from subagents.store.paths import host_log
from subagents.store.sqlite_resume import fold_journal
from subagents.store.sqlite_tx import Transactions
from subagents.store.sweep import (
    SweepBounds,
    SweepCandidate,
    SweepPlan,
    SweepReport,
    plan_sweep,
    sweep_bounds,
)

log = get_logger("subagents.store")

_TERMINAL = tuple(sorted(s.value for s in TERMINAL_STATUSES))
_DOING = "sweeping"  # what a failed statement was part of, in its error


_RECEIPTS_KEPT = """UPDATE mail SET state = 'read' WHERE mail_id IN (SELECT receipt FROM mail
        WHERE recipient = ?1 AND receipt IS NOT NULL)
    AND state <> 'read' AND EXISTS (SELECT 1 FROM mail AS r WHERE r.sender = mail.recipient
        AND r.receipt = mail.mail_id AND r.recipient = ?1)"""
"""Before a deleted run's mail goes: the mail whose read receipt rides on a row sent to it
(schema v15: a reader's row carries the receipt, ``MailRows.mail_for``) marked read in its
column, so a reader and a sender that stay keep it read."""


def _marks(n: int) -> str:
    return ", ".join("?" * n)


def sweep_runs(
    tx: Transactions,
    path: Path,
    *,
    now: float,
    archive_after_minutes: float = 60,
    cleanup_default: Cleanup = "keep",
    retention_days: float | None = None,
    dry_run: bool = False,
) -> SweepReport:
    """Archive, clean and delete finished runs (rules in ``store.sweep``), in one batch.

    Also purges commands taken before the archive bound. ``dry_run``: what the sweep would
    do, decided in the same transaction, and nothing written (`subagents prune --dry-run`).
    """
    bounds = sweep_bounds(
        now=now, archive_after_minutes=archive_after_minutes, retention_days=retention_days
    )
    with tx.writing() as conn:
        candidates = _candidates(tx, conn, bounds)
        plan = plan_sweep(
            candidates,
            now=now,
            archive_after_minutes=archive_after_minutes,
            cleanup_default=cleanup_default,
            retention_days=retention_days,
        )
        if dry_run:
            return _report(plan, _taken_commands(tx, conn, bounds))
        _apply_plan(tx, conn, plan, now)
        purged = tx.write_sql(
            conn,
            "DELETE FROM commands WHERE taken_at IS NOT NULL AND taken_at <= ?",
            (bounds.archive_before,),
            _DOING,
        ).rowcount
    # a detached tree's host log goes with the transcript it printed (after the commit:
    # a rolled back sweep deletes nothing)
    for run_id in dict.fromkeys((*plan.clean, *plan.delete)):
        with contextlib.suppress(OSError):
            host_log(path, run_id).unlink()
    report = _report(plan, purged)
    if plan.archive or plan.delete or plan.held or purged:
        log.info(
            "store.swept",
            path=str(path),
            archived=len(plan.archive),
            cleaned=len(plan.clean),
            deleted=len(plan.delete),
            held=len(plan.held),
            commands_purged=report.commands_purged,
        )
    return report


def _report(plan: SweepPlan, purged: int) -> SweepReport:
    return SweepReport(
        archived=plan.archive,
        cleaned=plan.clean,
        deleted=plan.delete,
        held=plan.held,
        commands_purged=max(0, purged),
    )


def _taken_commands(tx: Transactions, conn: sqlite3.Connection, bounds: SweepBounds) -> int:
    """How many taken commands a sweep with ``bounds`` would purge."""
    row = tx.write_sql(
        conn,
        "SELECT COUNT(*) FROM commands WHERE taken_at IS NOT NULL AND taken_at <= ?",
        (bounds.archive_before,),
        _DOING,
    ).fetchone()
    return int(row[0])


def _candidates(
    tx: Transactions, conn: sqlite3.Connection, bounds: SweepBounds
) -> list[SweepCandidate]:
    """The finished runs due to be archived (ended before the archive bound) or deleted
    (archived before the retention bound), oldest first, with what the rules weigh."""
    terminal = _marks(len(_TERMINAL))
    rows = tx.write_sql(
        conn,
        f"""SELECT r.run_id, r.status, r.created_at, r.ended_at, r.archived_at,
                r.cleanup, COALESCE(o.delivered = 0, 0)
            FROM runs r LEFT JOIN outcomes o ON o.run_id = r.run_id
            WHERE r.status IN ({terminal}) AND (
                (r.archived_at IS NULL AND COALESCE(r.ended_at, r.created_at) <= ?)
                OR (r.archived_at IS NOT NULL AND r.archived_at <= ?))
            ORDER BY r.created_at, r.run_id""",
        (
            *_TERMINAL,
            bounds.archive_before,
            bounds.delete_before if bounds.delete_before is not None else float("-inf"),
        ),
        _DOING,
    ).fetchall()
    return [
        SweepCandidate(
            run_id=run_id,
            status=RunStatus(status),
            created_at=created_at,
            ended_at=ended_at,
            archived_at=archived_at,
            cleanup=cleanup,
            outcome_undelivered=bool(undelivered),
        )
        for run_id, status, created_at, ended_at, archived_at, cleanup, undelivered in rows
    ]


def _apply_plan(tx: Transactions, conn: sqlite3.Connection, plan: SweepPlan, now: float) -> None:
    """The plan's rows written: archived runs stamped, cleaned runs' history dropped, deleted
    runs gone with every row that names them (their mail both ways included)."""
    for run_id in plan.archive:
        tx.write_sql(
            conn, "UPDATE runs SET archived_at = ? WHERE run_id = ?", (now, run_id), _DOING
        )
    for run_id in plan.clean:
        for table in (
            "events",
            "checkpoints",
            "checkpoint_deltas",
            "journal",
            "approvals",
            "previews",
        ):
            tx.write_sql(conn, f"DELETE FROM {table} WHERE run_id = ?", (run_id,), _DOING)
        tx.write_sql(  # the journal entries its straight mail carried (``sqlite_record``)
            conn,
            "UPDATE mail SET journal = NULL, journal_after = NULL"
            " WHERE sender = ? AND journal IS NOT NULL",
            (run_id,),
            _DOING,
        )
    deleted = set(plan.delete)
    for run_id in plan.delete:
        # the journal entries its senders' records carried in mail to it are theirs: kept
        # (``sqlite_resume.fold_journal``) before that mail goes with it
        senders = tx.write_sql(
            conn,
            "SELECT DISTINCT sender FROM mail WHERE recipient = ? AND journal IS NOT NULL",
            (run_id,),
            _DOING,
        ).fetchall()
        for (sender,) in senders:
            if sender not in deleted:
                fold_journal(tx, conn, sender, _DOING)
        for table in (
            "events", "checkpoints", "checkpoint_deltas", "journal", "approvals", "outcomes",
            "commands", "subscriptions", "previews", "runs",
        ):  # fmt: skip
            tx.write_sql(conn, f"DELETE FROM {table} WHERE run_id = ?", (run_id,), _DOING)
        tx.write_sql(conn, _RECEIPTS_KEPT, (run_id,), _DOING)
        tx.write_sql(
            conn,
            "DELETE FROM mail WHERE sender = ? OR recipient = ?",
            (run_id, run_id),
            _DOING,
        )
