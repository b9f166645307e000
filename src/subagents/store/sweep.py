"""The sweeper's decisions: which finished runs to archive, clean or delete, as pure logic.

Why apart from the store: the rules (ages, cleanup modes, the retention bound, never dropping
an outcome nobody has been told) are policy, and policy is tested without a database. The
SQLite store feeds this the candidate rows and applies the plan in one transaction.

The rules, for finished runs only (a run that has not reached a terminal status is never
touched):

- archive: a run that ended ``archive_after_minutes`` ago or more is archived (hidden from
  listings; ``get_run`` still finds it). If its cleanup is ``delete`` its transcript (the
  checkpoint) and its events are removed at the same time; ``keep`` preserves them.
- retention: a run archived ``retention_days`` ago or more is deleted whole (record, events,
  checkpoint, outcome, its mail). ``None`` keeps archived runs forever.
- a run whose outcome has not been delivered to its requester is never deleted: it is
  ``held`` and reported, since deleting it would lose a result silently.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from subagents.messages import CLEANUPS, Cleanup, RunStatus

SECONDS_PER_MINUTE = 60.0
SECONDS_PER_DAY = 86400.0


class SweepCandidate(msgspec.Struct, frozen=True, kw_only=True):
    """What the sweeper needs to know about one run."""

    run_id: str
    status: RunStatus
    created_at: float
    ended_at: float | None = None
    archived_at: float | None = None
    cleanup: Cleanup | None = None
    """None: the run recorded no choice, and the sweep's ``cleanup_default`` applies."""
    outcome_undelivered: bool = False


class SweepPlan(msgspec.Struct, frozen=True, kw_only=True):
    """What one sweep will do, run ids in the order the candidates came."""

    archive: tuple[str, ...] = ()
    clean: tuple[str, ...] = ()
    delete: tuple[str, ...] = ()
    held: tuple[str, ...] = ()


class SweepReport(msgspec.Struct, frozen=True, kw_only=True):
    """What one sweep did: run ids archived, cleaned (transcript and events removed),
    deleted whole, held (due for deletion but their outcome is undelivered), and how many
    taken commands were purged."""

    archived: tuple[str, ...] = ()
    cleaned: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    held: tuple[str, ...] = ()
    commands_purged: int = 0


class SweepBounds(msgspec.Struct, frozen=True, kw_only=True):
    """The two instants a sweep compares against: runs that ended at or before
    ``archive_before`` are archived; runs archived at or before ``delete_before`` (None:
    never) are deleted."""

    archive_before: float
    delete_before: float | None


def sweep_bounds(
    *, now: float, archive_after_minutes: float, retention_days: float | None
) -> SweepBounds:
    """Validate the sweep's settings and turn them into instants. An infinite setting
    (``math.inf``; on the command line ``inf`` or a number past the float range, ``1e999``)
    means never: its instant is ``-inf``, which no run's time is at or before (as one so
    large that ``now`` minus it overflows to it)."""
    if not archive_after_minutes >= 0:
        raise ValueError(
            f"archive_after_minutes must be a number >= 0, got {archive_after_minutes!r}"
        )
    if retention_days is not None and not retention_days >= 0:
        raise ValueError(f"retention_days must be a number >= 0 or None, got {retention_days!r}")
    return SweepBounds(
        archive_before=now - archive_after_minutes * SECONDS_PER_MINUTE,
        delete_before=None if retention_days is None else now - retention_days * SECONDS_PER_DAY,
    )


def plan_sweep(
    candidates: Iterable[SweepCandidate],
    *,
    now: float,
    archive_after_minutes: float = 60,
    cleanup_default: Cleanup = "keep",
    retention_days: float | None = None,
) -> SweepPlan:
    """Decide what a sweep at ``now`` does to ``candidates`` (see the module docstring)."""
    if cleanup_default not in CLEANUPS:
        raise ValueError(f"cleanup_default must be 'keep' or 'delete', got {cleanup_default!r}")
    bounds = sweep_bounds(
        now=now, archive_after_minutes=archive_after_minutes, retention_days=retention_days
    )
    archive: list[str] = []
    clean: list[str] = []
    delete: list[str] = []
    held: list[str] = []
    for run in candidates:
        if not run.status.terminal:
            continue
        if run.archived_at is None:
            ended = run.ended_at if run.ended_at is not None else run.created_at
            if ended <= bounds.archive_before:
                archive.append(run.run_id)
                if (run.cleanup or cleanup_default) == "delete":
                    clean.append(run.run_id)
        elif bounds.delete_before is not None and run.archived_at <= bounds.delete_before:
            (held if run.outcome_undelivered else delete).append(run.run_id)
    return SweepPlan(
        archive=tuple(archive), clean=tuple(clean), delete=tuple(delete), held=tuple(held)
    )
