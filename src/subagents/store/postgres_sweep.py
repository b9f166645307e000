"""The sweep of a PostgreSQL store: archive, clean and delete finished runs in one
transaction (the rules are ``store.sweep``'s, as for SQLite, ``store.sqlite_sweep``).

Several runtimes may share the database, each with its sweeper: a transaction-level
advisory lock makes them sweep one at a time (the second finds the work done). The tables a
cleaned or deleted run is removed from are ``store.postgres_schema``'s ``HISTORY_TABLES``
and ``RUN_TABLES``: a table added there is swept with no change here.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from subagents.logs import get_logger
from subagents.messages import TERMINAL_STATUSES, Cleanup, RunStatus
from subagents.store.paths import host_log
from subagents.store.postgres_schema import HISTORY_TABLES, RUN_TABLES
from subagents.store.postgres_tx import PgTransactions
from subagents.store.sweep import (
    SweepBounds,
    SweepCandidate,
    SweepPlan,
    SweepReport,
    plan_sweep,
    sweep_bounds,
)

log = get_logger("subagents.store")

_TERMINAL = sorted(s.value for s in TERMINAL_STATUSES)
_DOING = "sweeping"
SWEEP_LOCK = 0x5A6E_7403
"""The advisory lock key of a sweep (sweepers of several runtimes one at a time)."""


def sweep_runs(
    tx: PgTransactions,
    path: Path,
    *,
    now: float,
    archive_after_minutes: float = 60,
    cleanup_default: Cleanup = "keep",
    retention_days: float | None = None,
    dry_run: bool = False,
) -> SweepReport:
    """Archive, clean and delete finished runs, in one transaction; purge the commands
    taken before the archive bound. ``path``: the store's name on this machine, beside
    which detached hosts' logs are (``store.paths.host_log``): a cleaned or deleted run's
    goes with it, once committed. ``dry_run``: what the sweep would do, decided in the same
    transaction (under the same lock), and nothing written (`subagents prune --dry-run`)."""
    bounds = sweep_bounds(
        now=now, archive_after_minutes=archive_after_minutes, retention_days=retention_days
    )
    with tx.writing():
        tx.write("SELECT pg_advisory_xact_lock(%s)", (SWEEP_LOCK,), _DOING)
        plan = plan_sweep(
            _candidates(tx, bounds),
            now=now,
            archive_after_minutes=archive_after_minutes,
            cleanup_default=cleanup_default,
            retention_days=retention_days,
        )
        if dry_run:
            counted, _ = tx.write(
                "SELECT count(*) FROM commands WHERE taken_at IS NOT NULL AND taken_at <= %s",
                (bounds.archive_before,),
                _DOING,
            )
            return _report(plan, int(counted[0][0]))
        _apply_plan(tx, plan, now)
        _, purged = tx.write(
            "DELETE FROM commands WHERE taken_at IS NOT NULL AND taken_at <= %s",
            (bounds.archive_before,),
            _DOING,
        )
    for run_id in dict.fromkeys((*plan.clean, *plan.delete)):
        with contextlib.suppress(OSError):
            host_log(path, run_id).unlink()
    report = _report(plan, purged)
    if plan.archive or plan.delete or plan.held or purged:
        log.info(
            "store.swept",
            url=tx.where,
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


def _candidates(tx: PgTransactions, bounds: SweepBounds) -> list[SweepCandidate]:
    """The finished runs due to be archived or deleted, oldest first."""
    rows, _ = tx.write(
        """SELECT r.run_id, r.status, r.created_at, r.ended_at, r.archived_at,
               r.cleanup, COALESCE(NOT o.delivered, false)
           FROM runs r LEFT JOIN outcomes o ON o.run_id = r.run_id
           WHERE r.status = ANY(%s) AND (
               (r.archived_at IS NULL AND COALESCE(r.ended_at, r.created_at) <= %s)
               OR (r.archived_at IS NOT NULL AND r.archived_at <= %s))
           ORDER BY r.created_at, r.run_id""",
        (
            _TERMINAL,
            bounds.archive_before,
            bounds.delete_before if bounds.delete_before is not None else float("-inf"),
        ),
        _DOING,
    )
    return [
        SweepCandidate(
            run_id=run_id,
            status=RunStatus(status),
            created_at=created,
            ended_at=ended,
            archived_at=archived,
            cleanup=cleanup,
            outcome_undelivered=bool(undelivered),
        )
        for run_id, status, created, ended, archived, cleanup, undelivered in rows
    ]


def _apply_plan(tx: PgTransactions, plan: SweepPlan, now: float) -> None:
    """Archived runs stamped, cleaned runs' history dropped, deleted runs gone with every
    row that names them (their mail both ways included)."""
    if plan.archive:
        tx.write(
            "UPDATE runs SET archived_at = %s WHERE run_id = ANY(%s)",
            (now, list(plan.archive)),
            _DOING,
        )
    for tables, ids in ((HISTORY_TABLES, plan.clean), (RUN_TABLES, plan.delete)):
        if ids:
            for table in tables:
                tx.write(f"DELETE FROM {table} WHERE run_id = ANY(%s)", (list(ids),), _DOING)
    if plan.delete:
        tx.write(
            "DELETE FROM mail WHERE sender = ANY(%(ids)s) OR recipient = ANY(%(ids)s)",
            {"ids": list(plan.delete)},
            _DOING,
        )
