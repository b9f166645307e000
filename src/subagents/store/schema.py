"""The store's first schema (v1) and the meta table that says which schema a file has.

Why v1 is kept verbatim: migrations are code, and the only honest test of them is to build a
database exactly as the first released code did and upgrade it. A new store is made the same
way (v1, then every migration), so the upgrade path is the path every store takes and cannot
rot unnoticed. Never edit these statements; add a migration instead.

Layout: every record is one msgspec JSON document (``record``, ``event``...) next to the few
columns that queries filter or sort on. The documents are the truth; the columns are indexes
into them, written in the same statement.

Ordering: tables whose readers need insertion order (events, mail, outcomes, commands) have an
AUTOINCREMENT key, so order survives deletes and VACUUM (a plain rowid may be reused or
renumbered), and an upsert keeps a row's place, as the in-memory store's dicts do. Mail's key
is a plain ``INTEGER PRIMARY KEY`` since v12 (``migrations.v11_to_v12``: the page its
``sqlite_sequence`` row cost each sender's record); a new row's is still above every row kept.
"""

from __future__ import annotations

import sqlite3

APPLICATION = "subagents"
"""The meta table's ``application`` value: tells our stores from other SQLite files."""

V1_STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    )""",
    """CREATE TABLE runs (
        run_id TEXT PRIMARY KEY,
        agent TEXT NOT NULL,
        status TEXT NOT NULL,
        root_run_id TEXT NOT NULL,
        parent_run_id TEXT,
        depth INTEGER NOT NULL,
        created_at REAL NOT NULL,
        ended_at REAL,
        record TEXT NOT NULL
    )""",
    "CREATE INDEX runs_status ON runs (status)",
    "CREATE INDEX runs_root ON runs (root_run_id)",
    "CREATE INDEX runs_parent ON runs (parent_run_id)",
    "CREATE INDEX runs_agent ON runs (agent)",
    "CREATE INDEX runs_created ON runs (created_at, run_id)",
    """CREATE TABLE events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        ts REAL NOT NULL,
        event TEXT NOT NULL
    )""",
    "CREATE INDEX events_run ON events (run_id, seq)",
    """CREATE TABLE checkpoints (
        run_id TEXT PRIMARY KEY,
        step INTEGER NOT NULL,
        ts REAL NOT NULL,
        checkpoint TEXT NOT NULL
    )""",
    """CREATE TABLE mail (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        mail_id TEXT NOT NULL UNIQUE,
        sender TEXT NOT NULL,
        recipient TEXT NOT NULL,
        state TEXT NOT NULL,
        sent_at REAL NOT NULL,
        mail TEXT NOT NULL
    )""",
    "CREATE INDEX mail_recipient ON mail (recipient, seq)",
    "CREATE INDEX mail_sender ON mail (sender, seq)",
    """CREATE TABLE outcomes (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL UNIQUE,
        status TEXT NOT NULL,
        delivered INTEGER NOT NULL DEFAULT 0 CHECK (delivered IN (0, 1)),
        outcome TEXT NOT NULL
    )""",
    "CREATE INDEX outcomes_undelivered ON outcomes (seq) WHERE delivered = 0",
    """CREATE TABLE commands (
        command_id INTEGER PRIMARY KEY AUTOINCREMENT,
        kind TEXT NOT NULL CHECK (kind IN ('stop', 'send')),
        run_id TEXT NOT NULL,
        content TEXT,
        ts REAL NOT NULL,
        taken_at REAL
    )""",
    "CREATE INDEX commands_pending ON commands (command_id) WHERE taken_at IS NULL",
)


def create_v1(conn: sqlite3.Connection) -> None:
    """Create the v1 tables and stamp the file as a v1 subagents store.

    The caller owns the transaction (all of this commits together or not at all).
    """
    for statement in V1_STATEMENTS:
        conn.execute(statement)
    conn.execute("INSERT INTO meta (key, value) VALUES ('application', ?)", (APPLICATION,))
    conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', '1')")


def user_tables(conn: sqlite3.Connection) -> list[str]:
    """Names of the tables in the file, SQLite's own ``sqlite_*`` tables left out."""
    rows = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "ORDER BY name"
    ).fetchall()
    return [str(name) for (name,) in rows]


def read_meta(conn: sqlite3.Connection) -> dict[str, str]:
    """The meta table as a dict (empty if the table is missing)."""
    if "meta" not in user_tables(conn):
        return {}
    return {str(k): str(v) for k, v in conn.execute("SELECT key, value FROM meta")}


def set_schema_version(conn: sqlite3.Connection, version: int) -> None:
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(version),))
