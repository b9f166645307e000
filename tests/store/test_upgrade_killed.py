"""A process killed with SIGKILL in the middle of the v11 -> v12 upgrade (the mail table made
again: a copy of every mail) leaves the file whole at v11, or whole at the new version once the
upgrade committed: never half of each. ``PRAGMA integrity_check`` is ok either way, and the next
open upgrades it with every mail. The kill comes at a point the test chooses inside the
upgrade's one transaction: the subprocess hands ``upgrade`` a connection (as ``SQLiteStore``
does, WAL) whose trace callback sees each statement begin and whose progress handler runs
every 1,000 SQLite instructions; at the chosen statement (after the chosen number of
handler calls: rows already copied) it kills itself."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import msgspec
import pytest
from storekit import mail, rows

from subagents.store.migrations import MIGRATIONS, SCHEMA_VERSION
from subagents.store.schema import create_v1, set_schema_version
from subagents.store.sqlite import SQLiteStore

MAILS = 20_000
WAIT = 120.0

_KILLER = textwrap.dedent(
    """
    import os, signal, sqlite3, sys
    from pathlib import Path
    from subagents.store.migrations import upgrade

    path, at, after = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    now = {"sql": "", "ticks": 0}

    def kill(where):
        print("killed", where, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)

    def begun(sql):
        now["sql"], now["ticks"] = sql, 0
        if at in sql and after == 0 and at != "upgraded":  # (not SQL: v14's text says it)
            kill(f"at {at!r}")

    def progress():
        if at in now["sql"] and after > 0:
            now["ticks"] += 1
            if now["ticks"] >= after:
                kill(f"in {at!r} after {after}")
        return 0

    conn.set_trace_callback(begun)
    conn.set_progress_handler(progress, 1000)
    print("upgraded", upgrade(conn, path), flush=True)
    if at == "upgraded":
        kill("after the commit")
    """
)


def _v11_file(path: Path) -> None:
    """A v11 store (v1 and the first ten migrations) with ``MAILS`` mails, a few read."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("BEGIN")
    create_v1(conn)
    for migration in MIGRATIONS[:10]:  # v1 -> v11
        migration(conn)
    set_schema_version(conn, 11)
    conn.executemany(
        "INSERT INTO mail (mail_id, sender, recipient, state, sent_at, mail) VALUES"
        " (?, ?, ?, ?, ?, ?)",
        (
            (
                f"m{i}",
                "o",
                f"r{i % 7}",
                "read" if i % 5 == 0 else "delivered",
                float(i),
                msgspec.json.encode(mail(f"m{i}", "o", f"r{i % 7}")).decode(),
            )
            for i in range(MAILS)
        ),
    )
    conn.execute("COMMIT")
    conn.close()


def _version(path: Path) -> int:
    [(value,)] = rows(path, "SELECT value FROM meta WHERE key = 'schema_version'")
    return int(str(value))


@pytest.mark.parametrize(
    ("at", "after", "left_at"),
    [
        ("INSERT INTO mail_v12", 1, 11),  # the copy just begun
        ("INSERT INTO mail_v12", 150, 11),  # rows copied (the copy takes ~680 calls here)
        ("INSERT INTO mail_v12", 450, 11),
        ("DROP TABLE mail", 0, 11),  # every row copied, the old table still there
        ("ALTER TABLE mail_v12 RENAME", 0, 11),  # the old table dropped
        ("CREATE INDEX mail_recipient", 100, 11),  # renamed, its index half made
        ("CREATE TRIGGER mail_receipt", 0, 11),  # renamed, indexes made again
        ("DROP TRIGGER IF EXISTS mail_receipt", 0, 11),  # v15: the trigger about to go
        ("mail (sender, receipt)", 0, 11),  # v15: the trigger and v14's index gone
        ("leases_fence_on_epoch", 0, 11),  # v17: its first guard made, not its second
        ("COMMIT", 0, 11),  # every migration done, not committed
        ("upgraded", 0, SCHEMA_VERSION),  # committed, the log not yet checkpointed
    ],
)
def test_a_kill_during_the_v12_upgrade_leaves_the_file_whole_at_one_version(
    tmp_path: Path, at: str, after: int, left_at: int
) -> None:
    path = tmp_path / "runs.sqlite3"
    _v11_file(path)
    before = rows(path, "SELECT mail_id, sender, recipient, state, sent_at, mail FROM mail")
    killed = subprocess.run(
        [sys.executable, "-c", _KILLER, str(path), at, str(after)],
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert killed.returncode == -signal.SIGKILL, (killed.stdout, killed.stderr)
    assert "killed" in killed.stdout  # (at the point chosen, not before it: it was reached)

    assert rows(path, "PRAGMA integrity_check") == [("ok",)]
    assert _version(path) == left_at
    tables = {name for (name,) in rows(path, "SELECT name FROM sqlite_master")}
    assert "mail_v12" not in tables
    sequenced = {name for (name,) in rows(path, "SELECT name FROM sqlite_sequence")}
    assert ("mail" in sequenced) is (left_at == 11)  # v11's AUTOINCREMENT, whole or gone
    kept = "SELECT mail_id, sender, recipient, state, sent_at, mail FROM mail ORDER BY seq"
    assert rows(path, kept) == before

    with SQLiteStore(path) as store:  # the next open upgrades what the kill left
        assert (store.found_version, store.schema_version) == (left_at, SCHEMA_VERSION)
        assert len(store.mail_for("r3")) == len([1 for i in range(MAILS) if i % 7 == 3])
    assert rows(path, "PRAGMA integrity_check") == [("ok",)]
    assert rows(path, kept) == before
    guards = "SELECT name FROM sqlite_master WHERE name LIKE 'leases_fence_on_%' ORDER BY name"
    assert rows(path, guards) == [("leases_fence_on_delete",), ("leases_fence_on_epoch",)]
    assert "mail" not in {name for (name,) in rows(path, "SELECT name FROM sqlite_sequence")}
