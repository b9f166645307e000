"""The PostgreSQL store's schema, its versions and its migrations: the one place a table is
added.

Layout, as in SQLite (``store.schema``): every record is one msgspec JSON document (text,
kept byte for byte: ``jsonb`` would refuse a ``\\u0000`` in a prompt) beside the columns
that queries filter and sort on. Everything lives in a schema of its own (``SCHEMA``,
``subagents``), so the store may share a database with other applications' tables; a
``subagents`` schema without our ``meta`` table is refused untouched.

Versions: ``MIGRATIONS`` is a list of steps, the n-th taking a database from v(n-1) to
v(n) (step 1 creates the store). A new database takes every step, an old one the steps it
lacks, all in one transaction (PostgreSQL's DDL is transactional), under an advisory lock
so that several processes opening a new database at once create it once. PostgreSQL's
versions count on their own: v1 here is SQLite's v5 (runs, events, checkpoints and their
deltas, mail, outcomes, commands, leases, journals), in PostgreSQL's types.

**Adding a table** (a colleague's SQLite migration, mirrored here): append one step to
``MIGRATIONS`` with its ``CREATE TABLE`` and indexes, and, if its rows belong to a run and
must go when the sweeper deletes the run, name the table in ``RUN_TABLES`` (or
``HISTORY_TABLES`` if they go when the run is cleaned). Never edit a step that has shipped.
"""

from __future__ import annotations

from typing import Any

from subagents.store.base import StoreError
from subagents.store.errors import OLDER_PROCESS_STOP

APPLICATION = "subagents"
SCHEMA = "subagents"
"""The PostgreSQL schema (namespace) holding the store's tables."""

MIGRATION_LOCK = 0x5A6E_7401
"""The advisory lock key held while a database's schema is created or upgraded."""

V1: tuple[str, ...] = (
    """CREATE TABLE meta (
        key text PRIMARY KEY,
        value text NOT NULL
    )""",
    """CREATE TABLE runs (
        run_id text PRIMARY KEY,
        agent text NOT NULL,
        status text NOT NULL,
        root_run_id text NOT NULL,
        parent_run_id text,
        depth integer NOT NULL,
        created_at double precision NOT NULL,
        ended_at double precision,
        archived_at double precision,
        cleanup text CHECK (cleanup IN ('keep', 'delete')),
        record text NOT NULL
    )""",
    "CREATE INDEX runs_status ON runs (status)",
    "CREATE INDEX runs_root ON runs (root_run_id)",
    "CREATE INDEX runs_parent ON runs (parent_run_id)",
    "CREATE INDEX runs_agent ON runs (agent)",
    "CREATE INDEX runs_created ON runs (created_at, run_id)",
    "CREATE INDEX runs_sweep ON runs (archived_at, ended_at)",
    """CREATE TABLE events (
        seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        run_id text NOT NULL,
        kind text NOT NULL,
        ts double precision NOT NULL,
        event text NOT NULL
    )""",
    "CREATE INDEX events_run ON events (run_id, seq)",
    """CREATE TABLE checkpoints (
        run_id text PRIMARY KEY,
        step integer NOT NULL,
        ts double precision NOT NULL,
        checkpoint text NOT NULL
    )""",
    """CREATE TABLE checkpoint_deltas (
        seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        run_id text NOT NULL,
        delta text NOT NULL
    )""",
    "CREATE INDEX checkpoint_deltas_run ON checkpoint_deltas (run_id, seq)",
    """CREATE TABLE mail (
        seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        mail_id text NOT NULL UNIQUE,
        sender text NOT NULL,
        recipient text NOT NULL,
        state text NOT NULL,
        sent_at double precision NOT NULL,
        mail text NOT NULL
    )""",
    "CREATE INDEX mail_recipient ON mail (recipient, seq)",
    "CREATE INDEX mail_sender ON mail (sender, seq)",
    """CREATE TABLE outcomes (
        seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        run_id text NOT NULL UNIQUE,
        status text NOT NULL,
        delivered boolean NOT NULL DEFAULT false,
        outcome text NOT NULL
    )""",
    "CREATE INDEX outcomes_undelivered ON outcomes (seq) WHERE NOT delivered",
    """CREATE TABLE commands (
        command_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        kind text NOT NULL CHECK (kind IN ('stop', 'send')),
        run_id text NOT NULL,
        content text,
        ts double precision NOT NULL,
        taken_at double precision
    )""",
    "CREATE INDEX commands_pending ON commands (command_id) WHERE taken_at IS NULL",
    "CREATE INDEX commands_run ON commands (run_id)",
    """CREATE TABLE leases (
        owner text PRIMARY KEY,
        epoch bigint NOT NULL,
        host text NOT NULL,
        pid integer NOT NULL,
        renewed_at double precision NOT NULL,
        expires_at double precision NOT NULL,
        lease text NOT NULL
    )""",
    "CREATE SEQUENCE lease_epochs",
    """CREATE TABLE journal (
        seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        run_id text NOT NULL,
        entries text NOT NULL
    )""",
    "CREATE INDEX journal_run ON journal (run_id, seq)",
)
"""v1: the store as SQLite's v5 has it. ``commands.content`` holds the command's text as a
JSON string (PostgreSQL's text cannot hold NUL, a mail's text may); ``leases.epoch`` is a
column (SQLite reads it from the document); epochs come from the sequence ``lease_epochs``,
which never gives a number twice."""

V2_APPROVALS: tuple[str, ...] = (
    """CREATE TABLE approvals (
        approval_id text PRIMARY KEY,
        run_id text NOT NULL,
        root_run_id text NOT NULL,
        status text NOT NULL CHECK (status IN ('pending', 'allowed', 'denied')),
        asked_at double precision NOT NULL,
        approval text NOT NULL
    )""",
    "CREATE INDEX approvals_pending ON approvals (asked_at) WHERE status = 'pending'",
    "CREATE INDEX approvals_root ON approvals (root_run_id)",
    "CREATE INDEX approvals_run ON approvals (run_id)",
    "ALTER TABLE commands DROP CONSTRAINT commands_kind_check",
    """ALTER TABLE commands ADD CONSTRAINT commands_kind_check
        CHECK (kind IN ('stop', 'send', 'approval'))""",
)
"""v2 (SQLite's v6): durable approvals, one row per tool call waiting for a person's answer
(``ApprovalRecord``, the document); the answer reaches the runtime hosting the run as a
command of the new kind ``approval`` (PostgreSQL changes a CHECK in place: SQLite made the
table again)."""

V3_TOPICS: tuple[str, ...] = (
    """CREATE TABLE subscriptions (
        seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        run_id text NOT NULL,
        root_run_id text NOT NULL,
        topic text NOT NULL,
        UNIQUE (run_id, topic)
    )""",
)
"""v3 (SQLite's v7): topic subscriptions, one row per run and topic, in the order made."""

V4_PREVIEWS: tuple[str, ...] = (
    "CREATE TABLE previews (run_id text PRIMARY KEY, preview text NOT NULL)",
)
"""v4 (SQLite's v8): live previews, one row per run whose model is streaming the step under
way; scratch for viewers in other processes, not history."""

SECOND_END = "SA001"
"""The SQLSTATE of an end written over another (``V5_ONE_END``): ``AlreadyEnded``."""


def _literal_part(text: str) -> str:
    """``text`` inside a single-quoted literal of ``RAISE``'s format (a quote doubled; a
    ``%`` would be a placeholder)."""
    assert "%" not in text, text
    return text.replace("'", "''")


_ENDS = ", ".join(
    f"'{s}'" for s in ("completed", "failed", "cancelled", "timed_out", "budget_exceeded")
)

V5_ONE_END: tuple[str, ...] = (
    f"""CREATE FUNCTION refuse_second_end() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION 'run % ended already (%): a second end (%) is refused, and nothing'
            ' of its transaction is kept{_literal_part(OLDER_PROCESS_STOP)}', OLD.run_id,
            OLD.status, NEW.status
            USING ERRCODE = '{SECOND_END}', DETAIL = OLD.run_id;
    END $$""",
    f"""CREATE TRIGGER runs_one_end BEFORE UPDATE ON runs FOR EACH ROW
    WHEN (OLD.status IN ({_ENDS}) AND NEW.status IN ({_ENDS})
          AND (NEW.status <> OLD.status OR NEW.ended_at IS DISTINCT FROM OLD.ended_at))
    EXECUTE FUNCTION refuse_second_end()""",
)
"""v5: a run's end is written once (``AlreadyEnded``). Checked by the server, in the writing
transaction, whoever the writer: an end's ``COMMIT`` may reach the server after its client
took it for lost (``UnsureWrite``) and a recovery recorded the run failed, with nobody left
to check anything (docs/store.md, "One end per run")."""

V6_END_KEPT: tuple[str, ...] = (
    f"""CREATE OR REPLACE FUNCTION refuse_second_end() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF NEW.status IN ({_ENDS}) THEN
            RAISE EXCEPTION 'run % ended already (%): a second end (%) is refused, and'
                ' nothing of its transaction is kept{_literal_part(OLDER_PROCESS_STOP)}',
                OLD.run_id, OLD.status, NEW.status
                USING ERRCODE = '{SECOND_END}', DETAIL = OLD.run_id;
        END IF;
        RAISE EXCEPTION 'run % ended already (%): a save of it as % (its end undone) is'
            ' refused, and nothing of its transaction is kept'
            '{_literal_part(OLDER_PROCESS_STOP)}', OLD.run_id, OLD.status, NEW.status
            USING ERRCODE = '{SECOND_END}', DETAIL = OLD.run_id;
    END $$""",
    "DROP TRIGGER runs_one_end ON runs",
    f"""CREATE TRIGGER runs_one_end BEFORE UPDATE ON runs FOR EACH ROW
    WHEN (OLD.status IN ({_ENDS})
          AND (NEW.status <> OLD.status OR NEW.ended_at IS DISTINCT FROM OLD.ended_at))
    EXECUTE FUNCTION refuse_second_end()""",
)
"""v6: a run's end is not undone either: a record saved over a run kept ended is refused
unless it keeps that end (its status and end time), a live one too (v5 refused only an end
over an end: a runtime saving a step or a wait of a run another writer had ended wrote it
back to live, erasing that end). The same SQLSTATE: ``AlreadyEnded``. SQLite's is the
migration ``end_kept``."""

MIGRATIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("create the store", V1),
    ("durable approvals", V2_APPROVALS),
    ("topic subscriptions", V3_TOPICS),
    ("live previews", V4_PREVIEWS),
    ("one end per run", V5_ONE_END),
    ("an end kept", V6_END_KEPT),
)
"""(what it does, its statements), in order; step n brings a database to version n."""

SCHEMA_VERSION = len(MIGRATIONS)

HISTORY_TABLES: tuple[str, ...] = (
    "events",
    "checkpoints",
    "checkpoint_deltas",
    "journal",
    "approvals",
    "previews",
)
"""Tables of a run's history (``run_id`` column): emptied of a run the sweeper cleans."""

RUN_TABLES: tuple[str, ...] = (*HISTORY_TABLES, "outcomes", "commands", "subscriptions", "runs")
"""Every table with a ``run_id`` column: emptied of a run the sweeper deletes (its mail,
sent or received, goes too)."""


def found_version(cursor: Any, where: str) -> int | None:
    """The schema version of the database, None if it has no store yet. StoreError for a
    ``subagents`` schema that is not ours, or a version newer than this code's."""
    (tables,) = cursor.execute(
        "SELECT count(*) FROM pg_tables WHERE schemaname = %s", (SCHEMA,)
    ).fetchone()
    if not tables:
        return None
    has_meta = cursor.execute(
        "SELECT 1 FROM pg_tables WHERE schemaname = %s AND tablename = 'meta'", (SCHEMA,)
    ).fetchone()
    meta = (
        dict(cursor.execute(f"SELECT key, value FROM {SCHEMA}.meta").fetchall()) if has_meta else {}
    )
    if meta.get("application") != APPLICATION:
        raise StoreError(
            f"{where}: not a subagents store: the database has a schema {SCHEMA!r} with"
            f" {tables} table(s) and no subagents meta table; refusing to write to it"
        )
    raw = meta.get("schema_version", "")
    if not raw.isdigit() or int(raw) < 1:
        raise StoreError(f"{where}: corrupt store: meta schema_version is {raw!r}")
    version = int(raw)
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{where}: the store has schema version {version}, newer than this code's"
            f" {SCHEMA_VERSION}: it was written by a newer subagents; upgrade subagents to"
            " open it"
        )
    return version


def upgrade(conn: Any, where: str, create: bool = True) -> tuple[int | None, int]:
    """Create or upgrade the store in one transaction; (found, now) versions. ``conn``: a
    psycopg connection in autocommit mode. The version is read again under the migration
    lock, so several processes opening a new database create it once. ``create=False``: a
    database without a store is refused, untouched."""
    with conn.cursor() as cur:
        found = found_version(cur, where)
        if found == SCHEMA_VERSION:
            return SCHEMA_VERSION, SCHEMA_VERSION
        if found is None and not create:
            raise StoreError(
                f"{where}: no run store in this database yet (check the URL; only `run` and"
                " `demo` create one)"
            )
        with conn.transaction():
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            found = found_version(cur, where)
            version = found or 0
            if found is None:
                cur.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
            cur.execute(f"SET LOCAL search_path TO {SCHEMA}")
            for _what, statements in MIGRATIONS[version:]:
                for statement in statements:
                    cur.execute(statement)
                version += 1
            if found is None:
                cur.execute(
                    "INSERT INTO meta (key, value) VALUES ('application', %s),"
                    " ('schema_version', %s)",
                    (APPLICATION, str(version)),
                )
            else:
                cur.execute(
                    "UPDATE meta SET value = %s WHERE key = 'schema_version'", (str(version),)
                )
    return found, version
