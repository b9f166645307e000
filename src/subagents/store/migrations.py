"""Schema migrations as code: a list of functions, the n-th takes a store from v(n) to v(n+1).

Why functions, not SQL files: a migration may need to read and rewrite documents (msgspec
JSON) and must run inside the caller's transaction, so that a store is either wholly at the
old version or wholly at the new one, even if the process dies half way.

``upgrade`` is the one entry point: it creates a new store (v1 plus every migration), upgrades
an old one, and refuses a file it does not understand (a foreign database, a newer schema)
without writing a byte to it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import msgspec

from subagents.logs import get_logger
from subagents.store import lease_fences
from subagents.store.base import StoreError
from subagents.store.errors import OLDER_PROCESS_STOP, SECOND_END
from subagents.store.schema import (
    APPLICATION,
    create_v1,
    read_meta,
    set_schema_version,
    user_tables,
)

log = get_logger("subagents.store")

Migration = Callable[[sqlite3.Connection], None]


def v1_to_v2(conn: sqlite3.Connection) -> None:
    """v2: the sweeper. Runs get ``archived_at`` (hidden from listings once set) and
    ``cleanup`` (keep/delete) as columns, with an index for the sweeper's query.

    ``cleanup`` is copied from each record document, so runs written by v1 keep the choice
    they were made with.
    """
    conn.execute("ALTER TABLE runs ADD COLUMN archived_at REAL")
    conn.execute("ALTER TABLE runs ADD COLUMN cleanup TEXT CHECK (cleanup IN ('keep', 'delete'))")
    conn.execute(
        "UPDATE runs SET cleanup = json_extract(record, '$.cleanup') "
        "WHERE json_valid(record) AND json_extract(record, '$.cleanup') IN ('keep', 'delete')"
    )
    conn.execute("CREATE INDEX runs_sweep ON runs (archived_at, ended_at)")


def v2_to_v3(conn: sqlite3.Connection) -> None:
    """v3: leases. Each hosting runtime keeps a row here, renewed every few seconds, so that
    any process can tell a live host's unfinished runs from orphans (``store.leases``).
    ``lease`` is the document; the other columns are what queries and people read."""
    conn.execute(
        """CREATE TABLE leases (
            owner TEXT PRIMARY KEY,
            host TEXT NOT NULL,
            pid INTEGER NOT NULL,
            renewed_at REAL NOT NULL,
            expires_at REAL NOT NULL,
            lease TEXT NOT NULL
        )"""
    )


def v3_to_v4(conn: sqlite3.Connection) -> None:
    """v4: function agents' journals. One row per report of a run's calls and results (a
    msgspec JSON list of ``JournalEntry``), read back in order when the run resumes, so a
    function agent replays what it did before a crash instead of doing it again."""
    conn.execute(
        """CREATE TABLE journal (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            run_id TEXT NOT NULL,
            entries TEXT NOT NULL
        )"""
    )
    conn.execute("CREATE INDEX journal_run ON journal (run_id, seq)")


def v4_to_v5(conn: sqlite3.Connection) -> None:
    """v5: checkpoint deltas. One small row per tool call's change to its run's checkpoint
    (started, ended, answered: ``CheckpointDelta``), applied when the checkpoint is loaded
    and deleted when the next one is saved, so that a turn of N tool calls writes N small
    rows instead of the whole conversation 2N times."""
    conn.execute(
        """CREATE TABLE checkpoint_deltas (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            run_id TEXT NOT NULL,
            delta TEXT NOT NULL
        )"""
    )
    conn.execute("CREATE INDEX checkpoint_deltas_run ON checkpoint_deltas (run_id, seq)")


def v5_to_v6(conn: sqlite3.Connection) -> None:
    """v6: durable approvals. One row per tool call waiting for a person's answer
    (``ApprovalRecord``, the document), answered from any process; the answer reaches the
    runtime hosting the run as a command of the new kind ``approval``. SQLite cannot change
    a CHECK, so ``commands`` is made again with the wider one, its rows and ids kept."""
    conn.execute(
        """CREATE TABLE approvals (
            approval_id TEXT PRIMARY KEY,
            run_id TEXT NOT NULL,
            root_run_id TEXT NOT NULL,
            status TEXT NOT NULL CHECK (status IN ('pending', 'allowed', 'denied')),
            asked_at REAL NOT NULL,
            approval TEXT NOT NULL
        )"""
    )
    conn.execute("CREATE INDEX approvals_pending ON approvals (asked_at) WHERE status = 'pending'")
    conn.execute("CREATE INDEX approvals_root ON approvals (root_run_id)")
    conn.execute("CREATE INDEX approvals_run ON approvals (run_id)")
    conn.execute(
        """CREATE TABLE commands_v6 (
            command_id INTEGER PRIMARY KEY AUTOINCREMENT,
            kind TEXT NOT NULL CHECK (kind IN ('stop', 'send', 'approval')),
            run_id TEXT NOT NULL,
            content TEXT,
            ts REAL NOT NULL,
            taken_at REAL
        )"""
    )
    conn.execute(
        "INSERT INTO commands_v6 (command_id, kind, run_id, content, ts, taken_at)"
        " SELECT command_id, kind, run_id, content, ts, taken_at FROM commands"
    )
    conn.execute("DROP TABLE commands")  # (its index with it)
    conn.execute("ALTER TABLE commands_v6 RENAME TO commands")
    conn.execute("CREATE INDEX commands_pending ON commands (command_id) WHERE taken_at IS NULL")


def v6_to_v7(conn: sqlite3.Connection) -> None:
    """v7: topic subscriptions. One row per run and topic it is subscribed to, in the order
    made (``seq``), so that a run taken up after a crash is still subscribed
    (``supervision/topics.py``); dropped when the run unsubscribes or ends."""
    conn.execute(
        """CREATE TABLE subscriptions (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            run_id TEXT NOT NULL,
            root_run_id TEXT NOT NULL,
            topic TEXT NOT NULL,
            UNIQUE (run_id, topic)
        )"""
    )


def v7_to_v8(conn: sqlite3.Connection) -> None:
    """v8: live previews. One row per run whose model is streaming the step under way
    (``Preview``: the end of what it has written so far), replaced a few times a second and
    deleted once the step is recorded or the run ends, so that ``subagents log -f`` and
    ``attach`` in another process show a model writing. Scratch, not history: nothing else
    reads it, and a run that streamed keeps the same history as one that did not."""
    conn.execute("CREATE TABLE previews (run_id TEXT PRIMARY KEY, preview TEXT NOT NULL)")


def v8_to_v9(conn: sqlite3.Connection) -> None:
    """v9: a sender's record of mail in one statement (``store.sqlite_mail``).

    Runs get ``restarts`` and ``retries`` as columns (copied from each record): the attempt
    fence (``store.writes.AttemptFence``) reads them alone in the record's transaction
    rather than decoding the whole record, whose size is the task's. Mail gets ``journal``,
    the sender's journal entries carried by its record (``supervision/unsaved_journal.py``),
    and ``journal_after``, the journal's last ``seq`` when it was committed: where those
    entries fall among the journal's rows (``ResumeRows.journal_of``)."""
    conn.execute("ALTER TABLE runs ADD COLUMN restarts INTEGER NOT NULL DEFAULT 0")
    conn.execute("ALTER TABLE runs ADD COLUMN retries INTEGER NOT NULL DEFAULT 0")
    conn.execute(
        "UPDATE runs SET restarts = coalesce(json_extract(record, '$.restarts'), 0),"
        " retries = coalesce(json_extract(record, '$.retries'), 0)"
        " WHERE json_valid(record)"
        " AND (json_extract(record, '$.restarts') OR json_extract(record, '$.retries'))"
    )
    conn.execute("ALTER TABLE mail ADD COLUMN journal TEXT")
    conn.execute("ALTER TABLE mail ADD COLUMN journal_after INTEGER")


def v9_to_v10(conn: sqlite3.Connection) -> None:
    """v10: a lease's epoch in a column of its own (``leases.epoch``), copied from each
    lease's document. Every write fenced by a lease compares its epoch (``store.fencing``):
    the sender's record of each durable mail among them (``store.sqlite_record``), where
    reading it with ``json_extract`` parsed the lease's document each time (~8% of that
    statement's instructions). Filled in Python, so a document that is not JSON keeps NULL
    rather than failing the upgrade; a document without an epoch (none was given) keeps
    NULL, as ``json_extract`` read it. Then ``_EPOCH_OF_DOCUMENT``: the column kept equal to
    the document when a runtime of before v10 writes a lease."""
    conn.execute("ALTER TABLE leases ADD COLUMN epoch INTEGER")
    rows = conn.execute("SELECT owner, lease FROM leases").fetchall()
    for owner, document in rows:
        try:
            fields = msgspec.json.decode(document)
        except msgspec.DecodeError:  # not a lease's document: read as no epoch
            continue
        epoch = fields.get("epoch") if isinstance(fields, dict) else None
        if isinstance(epoch, int) and not isinstance(epoch, bool):
            conn.execute("UPDATE leases SET epoch = ? WHERE owner = ?", (epoch, owner))
    for event in ("INSERT", "UPDATE OF lease"):  # (after the fill: it sets no document)
        conn.execute(_EPOCH_OF_DOCUMENT.format(event=event, name=event.split()[0].lower()))


_EPOCH_OF_DOCUMENT = """CREATE TRIGGER leases_epoch_on_{name} AFTER {event} ON leases
    WHEN NEW.epoch IS NOT json_extract(NEW.lease, '$.epoch')
    BEGIN UPDATE leases SET epoch = json_extract(NEW.lease, '$.epoch')
          WHERE owner = NEW.owner; END"""
"""Keeps ``leases.epoch`` equal to the document's epoch when a runtime of before v10 writes
a lease (it sets the document only): such a runtime, opened before the upgrade, goes on
writing. Without it, its taking of an owner's lease again (a fixed ``owner``) moved the
document's epoch and left the column at the older taking's, whose stalled writer then
passed the fence. A v10 write sets both alike, so the condition is false and nothing runs;
lease writes are rare (a taking, a renewal every third of a lease), never per mail."""


def v10_to_v11(conn: sqlite3.Connection) -> None:
    """v11: read receipts in the ``state`` column alone, and on the reader's own write.

    A read receipt no longer rewrites the mail's document (``json_set`` parsed and wrote
    it again: ~40% of a receipt's cost); the document keeps the state it had before it was
    read, and ``state`` says ``read`` (``MailRows.mail_for`` gives the column's state).
    ``mail.receipt``: the id of a mail the row's sender had read and marks read with its own
    record (``store.sqlite_record``: one statement, the reply of a ping-pong carrying the
    receipt of the mail it answers), by ``_RECEIPT``. Nothing to copy: v10 kept the column
    equal to the document."""
    conn.execute("ALTER TABLE mail ADD COLUMN receipt TEXT")
    conn.execute(_RECEIPT)


_RECEIPT = """CREATE TRIGGER mail_receipt AFTER INSERT ON mail WHEN NEW.receipt IS NOT NULL
    BEGIN UPDATE mail SET state = 'read'
          WHERE mail_id = NEW.receipt AND recipient = NEW.sender; END"""
"""A mail inserted with a ``receipt`` marks that mail read, in the same statement (so in
its transaction): only mail sent to the inserting row's sender (its reader). A row without
one (every write of the supervisor's, and of a runtime of before v11 still open on the
store) runs nothing."""


def v11_to_v12(conn: sqlite3.Connection) -> None:
    """v12: the mail table's ``seq`` a plain ``INTEGER PRIMARY KEY``, not ``AUTOINCREMENT``.

    An ``AUTOINCREMENT`` key costs every insert a read and a write of its table's row in
    ``sqlite_sequence``: one page more in the log of each commit, and that commit is, for
    mail, the sender's record of each durable mail (``store.sqlite_record``, the only commit
    on a mail's way): 6.2 pages per record, 1.0 of them ``sqlite_sequence``'s, and ~12,700
    of its ~124,000 instructions (a replay of a ping-pong's records, callgrind). What
    ``AUTOINCREMENT`` adds over a plain key is only that a deleted newest row's ``seq`` is
    never given again; a new row still gets a ``seq`` above every row kept (``max + 1``),
    and ``VACUUM`` keeps an ``INTEGER PRIMARY KEY``. Mail's ``seq`` orders a run's mail and
    its carried journal entries among the rows kept (``mail_for``, ``journal_of``); nothing
    keeps a mail's ``seq`` as a cursor (events, commands and outcomes keep theirs).

    SQLite cannot drop ``AUTOINCREMENT`` in place: the table is made again, its rows copied
    with their ``seq``, its indexes and the ``mail_receipt`` trigger made again (a copy of
    every mail, once: ~1.5 s per 100,000 mails here, at load 14). A runtime of v11 still
    open on the store goes on writing once this commits: its statements name their columns,
    which are the same, and SQLite prepares them again for the new table. Meanwhile its
    writes wait for the write lock this holds, and fail past their busy timeout
    (docs/store.md: stop older runtimes before upgrading a store of many mails)."""
    conn.execute(_MAIL_V12)
    columns = ", ".join(_MAIL_COLUMNS)
    conn.execute(f"INSERT INTO mail_v12 ({columns}) SELECT {columns} FROM mail ORDER BY seq")
    conn.execute("DROP TABLE mail")  # (its indexes, its trigger, its sqlite_sequence row)
    conn.execute("ALTER TABLE mail_v12 RENAME TO mail")
    conn.execute("CREATE INDEX mail_recipient ON mail (recipient, seq)")
    conn.execute("CREATE INDEX mail_sender ON mail (sender, seq)")
    conn.execute(_RECEIPT)


_MAIL_COLUMNS = (
    "seq",
    "mail_id",
    "sender",
    "recipient",
    "state",
    "sent_at",
    "mail",
    "journal",
    "journal_after",
    "receipt",
)

_MAIL_V12 = """CREATE TABLE mail_v12 (
        seq INTEGER PRIMARY KEY,
        mail_id TEXT NOT NULL UNIQUE,
        sender TEXT NOT NULL,
        recipient TEXT NOT NULL,
        state TEXT NOT NULL,
        sent_at REAL NOT NULL,
        mail TEXT NOT NULL,
        journal TEXT,
        journal_after INTEGER,
        receipt TEXT
    )"""
"""v11's mail table (v1's, with v9's and v11's columns), its key without ``AUTOINCREMENT``."""


def v12_to_v13(conn: sqlite3.Connection) -> None:
    """v13: a batch's events of one run may be one row of ``events`` (``kind`` ``events``:
    ``store.sqlite_event_groups``), holding each event with its number. No table changes:
    the version says that a process of before v13, which would read such a row as damaged,
    must not open the file."""
    del conn


_ENDS = ("completed", "failed", "cancelled", "timed_out", "budget_exceeded")


def _ended(row: str) -> str:
    """SQL: ``row``'s status is an end (an ``OR`` of equalities: an ``IN`` list builds a
    temporary table each time the trigger's condition is read)."""
    return "(" + " OR ".join(f"{row}.status = '{s}'" for s in _ENDS) + ")"


def v13_to_v14(conn: sqlite3.Connection) -> None:
    """v14: a run's end is written once (``AlreadyEnded``): a record whose end (its
    terminal status, its end time) differs from the one kept is refused by a trigger, in
    the writing transaction, whoever the writer (the cluster's head applying a call its
    caller took for lost, a `subagents stop` in another process), and its transaction with
    it (its events too). The same end saved again is kept. Its message names itself to a
    process that does not know it (``OLDER_PROCESS_STOP``); this one knows it by its start."""
    _one_end(conn)


def _one_end(conn: sqlite3.Connection) -> None:
    """The ``runs_one_end`` trigger, with the message of today's code."""
    conn.execute(
        f"""CREATE TRIGGER runs_one_end BEFORE UPDATE ON runs
        WHEN {_ended("old")} AND {_ended("new")}
            AND (new.status IS NOT old.status OR new.ended_at IS NOT old.ended_at)
        BEGIN SELECT RAISE(ABORT, {_literal(SECOND_END + OLDER_PROCESS_STOP)}); END"""
    )


def v14_to_v15(conn: sqlite3.Connection) -> None:
    """v15: a read receipt carried by its reader's row is read from that row, not written
    into the read mail's (``store.sqlite_record``; ``MailRows.mail_for``).

    The ``mail_receipt`` trigger's ``UPDATE`` of the read mail's row was ~15.7k of the
    sender's statement's ~129k instructions, per durable mail. Now a mail is read when its
    ``state`` says so (several receipts at once, the supervisor's: an ``UPDATE`` as before)
    or a row of its recipient carries its id in ``receipt``. The ``mail_sender`` index is
    ``(sender, receipt)`` instead of ``(sender, seq)``, so that question is one probe of an
    index every insert writes already: an index of its own on ``receipt`` cost each record
    a page more in the log (6.39 frames against 5.29, counted), this one no more than
    before (5.20). Its readers by sender (a replay's ``journal_of``, the sweep, a run's
    mail) order by ``seq`` themselves. Nothing to copy: the rows the trigger marked say
    ``read`` in their column. A runtime of v14 still open on the store goes on writing its
    receipts in ``receipt`` (read by this code as receipts) and reads the column alone:
    it takes such a mail for unread (shown, a dead letter, a restored run's inbox:
    docs/store.md, stop older runtimes before upgrading).

    It also makes ``runs_one_end`` again: a v14 file upgraded by session 26's code kept the
    trigger's shorter message, which does not tell an older process still running to stop;
    this upgrade is when one may be running."""
    conn.execute("DROP TRIGGER runs_one_end")
    _one_end(conn)
    conn.execute("DROP TRIGGER IF EXISTS mail_receipt")
    conn.execute("DROP INDEX mail_sender")
    conn.execute("CREATE INDEX mail_sender ON mail (sender, receipt)")


END_KEPT_SAYS = (
    SECOND_END + ", and so is its end undone (the run saved again not ended)" + OLDER_PROCESS_STOP
)
"""The message of ``runs_one_end`` since ``end_kept`` (its start, ``SECOND_END``, is what
this code, and one of v14 or v15, knows it by: ``AlreadyEnded``)."""


def end_kept(conn: sqlite3.Connection) -> None:
    """v16 (the lease fences, ``lease_fences_held``, are v17 after it): a run's end
    is not undone either. ``runs_one_end`` refused only an end over an end (v14); a record
    saved over a run kept ended with a live status (a runtime saving a step, or a wait, of a
    run another writer had ended: a stranger, a late ``COMMIT``) was taken, and the run was
    live again in the store, that end erased. Now any record saved over a run kept ended is
    refused unless it keeps that end (its status and end time): the same trigger, its
    ``WHEN`` without the new status's end. No row changes; nothing in this code saves an
    ended run live (``transitions.LIFECYCLE``: no move out of an end; `subagents continue`
    is a new run). A runtime of v14 or v15 still running on the store meets the refusal as
    an end refused (``SECOND_END``) where it saves such a run live, and goes through its
    store outage after writing again without its ends: stop it before upgrading
    (docs/store.md)."""
    conn.execute("DROP TRIGGER runs_one_end")
    conn.execute(
        f"""CREATE TRIGGER runs_one_end BEFORE UPDATE ON runs
        WHEN {_ended("old")}
            AND (new.status IS NOT old.status OR new.ended_at IS NOT old.ended_at)
        BEGIN SELECT RAISE(ABORT, {_literal(END_KEPT_SAYS)}); END"""
    )


def lease_fences_held(conn: sqlite3.Connection) -> None:
    """v17 (after v16's ``end_kept``): a lease's fence held in the schema
    (``store.lease_fences``): the taking of a lease at epoch N makes the view
    ``lease_fence_N``, its end drops it, and the sender's one statement of each durable
    mail names the view instead of reading ``leases`` (its probe and two parameters: 4.5k
    of the statement's 115.5k instructions). The guards refuse a lease's end that leaves
    its view (a runtime of before v17 still open on the store: its release or takeover of a
    v17 lease, its taking again of one): the view would let the stalled taking write on. No
    view is made for a lease held now: its holder is of before v17, fenced by the table as
    before (a v17 runtime holding a lease without a view records by the statements, which
    read it)."""
    for guard in lease_fences.GUARDS:
        conn.execute(guard)


def _literal(text: str) -> str:
    """``text`` as an SQL string literal (single quotes, a quote doubled): a double-quoted
    one is an identifier, which SQLite 3.47+ reads as an expression in ``RAISE`` and a build
    without double-quoted strings (``SQLITE_DQS=0``) refuses."""
    return "'" + text.replace("'", "''") + "'"


MIGRATIONS: tuple[Migration, ...] = (
    v1_to_v2,
    v2_to_v3,
    v3_to_v4,
    v4_to_v5,
    v5_to_v6,
    v6_to_v7,
    v7_to_v8,
    v8_to_v9,
    v9_to_v10,
    v10_to_v11,
    v11_to_v12,
    v12_to_v13,
    v13_to_v14,
    v14_to_v15,
    end_kept,
    lease_fences_held,
)

SCHEMA_VERSION = 1 + len(MIGRATIONS)
"""The schema this code writes and reads."""


def inspect_version(conn: sqlite3.Connection, path: Path) -> int | None:
    """The schema version of the open file, None for a file with no tables (a new store).

    Reads only. Raises StoreError for a foreign database (tables but none of our meta) or a
    schema newer than this code.
    """
    tables = user_tables(conn)
    if not tables:
        return None
    meta = read_meta(conn)
    if meta.get("application") != APPLICATION:
        shown = ", ".join(tables[:8]) + (", ..." if len(tables) > 8 else "")
        raise StoreError(
            f"{path}: not a subagents store: a SQLite database with tables {shown} and no "
            f"subagents meta table; refusing to write to it"
        )
    raw = meta.get("schema_version", "")
    try:
        version = int(raw)
    except ValueError:
        raise StoreError(f"{path}: corrupt store: meta schema_version is {raw!r}") from None
    if version < 1:
        raise StoreError(f"{path}: corrupt store: meta schema_version is {version}")
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{path}: the store has schema version {version}, newer than this code's "
            f"{SCHEMA_VERSION}: it was written by a newer subagents; upgrade subagents to "
            f"open it"
        )
    return version


def upgrade(conn: sqlite3.Connection, path: Path) -> tuple[int | None, int]:
    """Bring the store to SCHEMA_VERSION in one transaction; return (found, now) versions.

    ``conn`` must be in autocommit mode (isolation_level None). The version is read again
    inside the write transaction, so two processes opening a new store at once create it
    once.
    """
    if inspect_version(conn, path) == SCHEMA_VERSION:
        return SCHEMA_VERSION, SCHEMA_VERSION
    conn.execute("BEGIN IMMEDIATE")
    try:
        found = inspect_version(conn, path)
        version = found
        if version is None:
            create_v1(conn)
            version = 1
        for migration in MIGRATIONS[version - 1 :]:
            migration(conn)
            version += 1
            log.info("store.migrated", path=str(path), to_version=version, step=migration.__name__)
        set_schema_version(conn, version)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    if found is None:
        log.info("store.created", path=str(path), schema_version=version)
    return found, version
