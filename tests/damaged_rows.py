"""A real SQLite store with rows damaged by hand: what every damaged-row test starts from
(the CLI's listings and views, the console), written once here.

A row is damaged by SQLite itself (``UPDATE ... SET record = 'not json'``), as a person
editing the file or a tool that knows nothing of its schema would: the store then reads it
as ``store.base.DamagedRow``, that row at fault and not the store.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path

from subagents.messages import ApprovalRecord, RunRecord, RunStatus
from subagents.store.sqlite import SQLiteStore


def run(
    run_id: str,
    at: float,
    *,
    parent: RunRecord | None = None,
    agent: str = "quick",
    status: RunStatus = RunStatus.WAITING,
) -> RunRecord:
    """A run of a host that is gone (``owner``), a root or ``parent``'s child."""
    return RunRecord(
        run_id=run_id, agent=agent, task="t", status=status, created_at=at, owner="gone:1:a",
        root_run_id=parent.root_run_id if parent else run_id,
        parent_run_id=parent.run_id if parent else None,
        depth=parent.depth + 1 if parent else 0,
    )  # fmt: skip


def ask(record: RunRecord, n: int, at: float, approval_id: str | None = None) -> ApprovalRecord:
    """A pending approval of ``record`` (``ap-`` and its id's last 4 characters unless
    given)."""
    return ApprovalRecord(
        approval_id=approval_id or f"ap-{record.run_id[-4:]}", run_id=record.run_id,
        root_run_id=record.root_run_id, agent=record.agent, tool="Bash",
        input={"command": "ls"}, reason="asked", requester="external", tool_use_id=f"t-{n}",
        asked_at=at,
    )  # fmt: skip


def saved(path: Path, runs: Iterable[RunRecord], asks: Iterable[ApprovalRecord] = ()) -> None:
    """``runs`` and ``asks`` in the SQLite store at ``path`` (made with its folder)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with SQLiteStore(path) as store:
        for record in runs:
            store.save_run(record)
        for approval in asks:
            store.save_approval(approval)


def damage_run(path: Path, run_id: str) -> None:
    """``run_id``'s runs row no longer reads as its record."""
    with sqlite3.connect(path) as db:
        db.execute("UPDATE runs SET record = 'not json' WHERE run_id = ?", (run_id,))


def damage_asks(path: Path, run_id: str) -> None:
    """``run_id``'s approvals rows no longer read as approvals."""
    with sqlite3.connect(path) as db:
        db.execute("UPDATE approvals SET approval = 'not json' WHERE run_id = ?", (run_id,))
