"""A run's upsert on SQLite (``store.sqlite._SAVE_RUN``): twice per run on the supervisor's
thread, so it must not build a temporary b-tree each time it runs, and a run saved again
keeps its archive mark only while its status is terminal."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from storekit import run

from subagents.messages import TERMINAL_STATUSES, RunStatus
from subagents.store.base import AlreadyEnded
from subagents.store.sqlite import SQLiteStore


def rows(path: Path, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(path)
    try:
        with conn:
            return conn.execute(sql).fetchall()
    finally:
        conn.close()


def test_the_upsert_builds_no_temporary_table(sqlite_store: SQLiteStore) -> None:
    """An ``IN (...)`` list of the terminal statuses opened an ephemeral b-tree (filled with
    the list) each time the statement ran; an ``OR`` of equalities reads the same."""
    statements: list[str] = []
    sqlite_store._tx.connection().set_trace_callback(statements.append)
    sqlite_store.save_run(run("s", status=RunStatus.RUNNING))
    sqlite_store._tx.connection().set_trace_callback(None)
    upserts = [s for s in statements if s.startswith("INSERT INTO runs")]
    assert len(upserts) == 1
    opcodes = {str(row[1]) for row in rows(sqlite_store.path, f"EXPLAIN {upserts[0]}")}
    assert "Insert" in opcodes and "OpenEphemeral" not in opcodes


@pytest.mark.parametrize("status", sorted(TERMINAL_STATUSES, key=lambda s: s.value))
def test_an_archived_run_saved_again_stays_archived_only_while_it_has_ended(
    sqlite_store: SQLiteStore, status: RunStatus
) -> None:
    sqlite_store.save_run(run("s", status=status))
    rows(sqlite_store.path, "UPDATE runs SET archived_at = 7.0 WHERE run_id = 's'")
    sqlite_store.save_run(run("s", status=status))  # ended still: still archived
    assert rows(sqlite_store.path, "SELECT archived_at FROM runs") == [(7.0,)]
    with pytest.raises(AlreadyEnded):  # an end is not undone: nothing leaves the archive
        sqlite_store.save_run(run("s", status=RunStatus.RUNNING))
    assert rows(sqlite_store.path, "SELECT archived_at FROM runs") == [(7.0,)]
