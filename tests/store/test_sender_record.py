"""A sender's record of its straight mail in a SQLite store (``store.sqlite_record``): one
statement for one mail, its checks reading the lease and the run's counts alone, its journal
entries in the mail's row; and what schema v9 brings to a store made before it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import msgspec
import pytest
from storekit import LEASE, fenced, mail, rows, run, store_of_version, traced

from subagents.messages import TERMINAL_STATUSES, JournalEntry, Lease, RunStatus
from subagents.store.base import Fenced, StoreError
from subagents.store.fencing import AttemptOver, Fence, FencedStore
from subagents.store.sqlite import SQLiteStore
from subagents.store.writes import AttemptFence, SaveJournal

SENT = JournalEntry(request_id="s:0", kind="send")
SEEN = JournalEntry(request_id="s:1", kind="receive", observed=True, result="m0")


def test_one_mails_record_is_one_statement_its_journal_in_the_mails_row(
    sqlite_store: SQLiteStore,
) -> None:
    store = fenced(sqlite_store)
    store.save_run(run("s", status=RunStatus.RUNNING))
    journal = SaveJournal("s", (SENT, SEEN))
    with traced(sqlite_store) as statements:
        store.record_mails([mail("m1", "s", "o")], journal, AttemptFence("s"))
    assert len(statements) == 1 and statements[0].startswith("INSERT OR IGNORE INTO mail")
    assert rows(sqlite_store.path, "SELECT count(*) FROM journal") == [(0,)]
    assert sqlite_store.journal_of("s") == [SENT, SEEN]


def test_the_one_statement_builds_no_temporary_table(sqlite_store: SQLiteStore) -> None:
    """The statement runs once per durable mail: SQLite's program for it opens no temporary
    b-tree (``OpenEphemeral``, what an ``IN (...)`` list costs each time it runs; it was a
    fifth of the statement's instructions)."""
    store = fenced(sqlite_store)
    store.save_run(run("s", status=RunStatus.RUNNING))
    with traced(sqlite_store) as statements:
        store.record_mails([mail("m1", "s", "o")], SaveJournal("s", (SENT,)), AttemptFence("s"))
        store.record_mails([mail("m2", "s", "o")], None, None)  # (no attempt: the lease alone)
    assert len(statements) == 2
    for statement in statements:
        program = rows(sqlite_store.path, f"EXPLAIN {statement}")
        opcodes = {str(row[1]) for row in program}
        assert "Insert" in opcodes and "OpenEphemeral" not in opcodes, statement


@pytest.mark.parametrize("status", sorted(TERMINAL_STATUSES, key=lambda s: s.value))
def test_the_one_statement_refuses_a_run_in_every_terminal_status(
    sqlite_store: SQLiteStore, status: RunStatus
) -> None:
    store = fenced(sqlite_store)
    store.save_run(run("s", status=status))
    with (
        traced(sqlite_store) as statements,
        pytest.raises(AttemptOver, match=rf"run s ended \({status.value}\)"),
    ):
        store.record_mails([mail("m1", "s", "o")], None, AttemptFence("s"))
    assert statements[0].startswith("INSERT OR IGNORE INTO mail")
    assert len(statements) > 1  # then checked
    assert rows(sqlite_store.path, "SELECT count(*) FROM mail") == [(0,)]


def test_the_attempt_fence_reads_the_runs_counts_not_its_record(
    sqlite_store: SQLiteStore,
) -> None:
    """The run's record is not decoded in the record's transaction (its size is the task's):
    a record the store could not even read does not stop a sender's mail; its counts do."""
    store = fenced(sqlite_store)
    store.save_run(run("s", status=RunStatus.RUNNING, retries=1))
    conn = sqlite3.connect(sqlite_store.path)
    conn.execute("UPDATE runs SET record = '{not a record' WHERE run_id = 's'")
    conn.commit()
    conn.close()
    store.record_mails([mail("m1", "s", "o")], None, AttemptFence("s", retries=1))
    two = [mail("m2", "s", "o"), mail("m3", "s", "p")]  # several: statements
    store.record_mails(two, None, AttemptFence("s", retries=1))
    with pytest.raises(AttemptOver, match=r"retries 0 -> 1"):
        store.record_mails([mail("m4", "s", "o")], None, AttemptFence("s"))
    got = rows(sqlite_store.path, "SELECT mail_id FROM mail ORDER BY seq")
    assert got == [("m1",), ("m2",), ("m3",)]


def test_a_refused_record_keeps_nothing_and_says_why(sqlite_store: SQLiteStore) -> None:
    """The one statement inserts nothing when a check fails; the record is then made again
    as statements, which say which check failed (and keep nothing either)."""
    store = fenced(sqlite_store)
    store.save_run(run("s", status=RunStatus.RUNNING))
    store.save_run(run("ended", status=RunStatus.COMPLETED))
    refused = SaveJournal("ended", (SENT,))
    with pytest.raises(AttemptOver, match=r"ended \(completed\)"):
        store.record_mails([mail("m1", "ended", "o")], refused, AttemptFence("ended"))
    sqlite_store.release_lease(LEASE.owner)  # taken over
    with pytest.raises(Fenced):
        store.record_mails([mail("m2", "s", "o")], SaveJournal("s", (SENT,)), AttemptFence("s"))
    assert rows(sqlite_store.path, "SELECT count(*) FROM mail") == [(0,)]
    assert sqlite_store.journal_of("s") == [] and sqlite_store.journal_of("ended") == []


def test_a_mail_recorded_already_keeps_its_journal_once_more_as_a_row(
    sqlite_store: SQLiteStore,
) -> None:
    """A mail id kept already inserts nothing; the journal entries its record carried are
    kept all the same (as a journal row, by the record made again as statements)."""
    store = fenced(sqlite_store)
    store.save_run(run("s", status=RunStatus.RUNNING))
    store.save_mails([mail("m1", "s", "o")])
    store.record_mails([mail("m1", "s", "o")], SaveJournal("s", (SENT,)), AttemptFence("s"))
    assert sqlite_store.journal_of("s") == [SENT]
    assert [m.mail_id for m in sqlite_store.mail_for("s")] == ["m1"]


def test_a_cleaned_runs_carried_journal_goes_with_its_journal(sqlite_store: SQLiteStore) -> None:
    store = fenced(sqlite_store)
    store.save_run(run("s", status=RunStatus.RUNNING, cleanup="delete"))
    store.record_mails([mail("m1", "s", "o")], SaveJournal("s", (SENT,)), AttemptFence("s"))
    store.save_run(run("s", status=RunStatus.COMPLETED, ended_at=1.0, cleanup="delete"))
    report = sqlite_store.sweep(now=10_000.0, archive_after_minutes=1)
    assert report.cleaned == ("s",)
    assert sqlite_store.journal_of("s") == []
    assert [m.mail_id for m in sqlite_store.mail_for("s")] == ["m1"]  # mail stays till delete


def test_a_v8_store_gets_its_runs_counts_as_columns(tmp_path: Path) -> None:
    """A store made before v9: each run's restarts and retries are copied from its record,
    so the attempt fence of a start of before tells it from a later one."""
    path = tmp_path / "runs.sqlite3"
    record = run("s", status=RunStatus.RUNNING, restarts=2, retries=1)
    conn = store_of_version(path, 8)
    conn.execute(  # as v8's save_run wrote it: no count columns
        "INSERT INTO runs (run_id, agent, status, root_run_id, depth, created_at, record)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        ("s", record.agent, "running", "s", 0, 1.0, msgspec.json.encode(record).decode()),
    )
    conn.execute("COMMIT")
    conn.close()
    with SQLiteStore(path) as store:
        assert store.found_version == 8
        writer = fenced(store)
        writer.record_mails([mail("m1", "s", "o")], None, AttemptFence("s", restarts=2, retries=1))
        with pytest.raises(AttemptOver, match=r"restarts 0 -> 2, retries 0 -> 1"):
            writer.record_mails([mail("m2", "s", "o")], None, AttemptFence("s"))
        assert [m.mail_id for m in store.mail_for("s")] == ["m1"]


def test_a_record_never_joins_a_transaction_left_open(sqlite_store: SQLiteStore) -> None:
    """The one statement commits by itself only outside a transaction: on a connection
    left inside one it would write and not commit. It refuses instead (the sender's mail
    then goes by the supervisor), and keeps nothing."""
    store = fenced(sqlite_store)
    store.save_run(run("s", status=RunStatus.RUNNING))
    conn = sqlite_store._tx.connection()
    conn.execute("BEGIN")
    with pytest.raises(StoreError, match="a transaction is open"):
        store.record_mails([mail("m1", "s", "o")], None, AttemptFence("s"))
    conn.execute("ROLLBACK")
    assert sqlite_store.mail_for("s") == []


def test_a_deleted_recipient_takes_none_of_its_senders_journal(sqlite_store: SQLiteStore) -> None:
    """A run deleted by the sweep goes with its mail both ways, the mail sent to it
    included; the journal entries its sender's record carried in that mail are the
    sender's, and stay its journal, in their place (a live sender resumed after that
    replays them: without them it would do again, or fail on, what it did)."""
    store = fenced(sqlite_store)
    store.save_run(run("s", status=RunStatus.RUNNING))
    store.save_run(run("r", status=RunStatus.RUNNING))
    start = AttemptFence("s")
    before = JournalEntry(request_id="s:0", kind="spawn", digest=1)
    after = JournalEntry(request_id="s:9", kind="send")
    store.save_journal("s", (before,))
    store.record_mails([mail("m1", "s", "r")], SaveJournal("s", (SENT, SEEN)), start)
    store.record_mails([mail("m2", "s", "o")], SaveJournal("s", (SENT,)), start)
    store.save_run(run("r", status=RunStatus.COMPLETED, ended_at=1.0))
    assert sqlite_store.sweep(now=10_000.0, archive_after_minutes=1).archived == ("r",)
    report = sqlite_store.sweep(now=10_000.0 + 86_400 * 3, retention_days=1)
    assert report.deleted == ("r",)
    store.save_journal("s", (after,))
    assert [m.mail_id for m in sqlite_store.mail_for("s")] == ["m2"]  # r's mail went with it
    assert sqlite_store.journal_of("s") == [before, SENT, SEEN, SENT, after]


def test_the_one_statement_reads_the_leases_epoch_from_its_column(
    sqlite_store: SQLiteStore,
) -> None:
    """The fence's epoch is a column (schema v10): the statement run per durable mail parses
    no lease document (``json_extract`` of it was ~8% of the statement's instructions)."""
    store = fenced(sqlite_store)
    store.save_run(run("s", status=RunStatus.RUNNING))
    with traced(sqlite_store) as statements:
        store.record_mails([mail("m1", "s", "o")], None, AttemptFence("s"))
    (statement,) = statements
    functions = [str(row[5]) for row in rows(sqlite_store.path, f"EXPLAIN {statement}")]
    assert not [f for f in functions if "json" in f]


def test_a_v9_store_gets_its_leases_epochs_as_a_column(tmp_path: Path) -> None:
    """A store made before v10: each lease's epoch is copied from its document, so the
    runtime holding it goes on writing under it, fenced as before, across the upgrade; a
    document without an epoch (none given) keeps none."""
    path = tmp_path / "runs.sqlite3"
    held = msgspec.structs.replace(LEASE, epoch=7)
    unnumbered = Lease(owner="h:2:b", host="h", pid=2, renewed_at=1.0, expires_at=16.0)
    conn = store_of_version(path, 9)
    conn.execute(
        "INSERT INTO runs (run_id, agent, status, root_run_id, depth, created_at, record)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        ("s", "a", "running", "s", 0, 1.0, msgspec.json.encode(run("s")).decode()),
    )
    fields = msgspec.structs.asdict(unnumbered)
    del fields["epoch"]  # (a document written before leases had epochs)
    documents = {
        held.owner: msgspec.json.encode(held),
        unnumbered.owner: msgspec.json.encode(fields),
    }
    for owner, document in documents.items():  # as v9 wrote them: no epoch column
        conn.execute(
            "INSERT INTO leases (owner, host, pid, renewed_at, expires_at, lease)"
            " VALUES (?, 'h', 1, 1.0, 16.0, ?)",
            (owner, document.decode()),
        )
    conn.execute("COMMIT")
    conn.close()
    with SQLiteStore(path) as store:
        assert store.found_version == 9
        got = rows(path, "SELECT owner, epoch FROM leases ORDER BY owner")
        assert got == [(LEASE.owner, 7), ("h:2:b", None)]
        writer = FencedStore(store, Fence(LEASE.owner, 7))
        writer.record_mails([mail("m1", "s", "o")], None, AttemptFence("s"))
        with pytest.raises(Fenced, match="epoch 6"):
            FencedStore(store, Fence(LEASE.owner, 6)).record_mails(
                [mail("m2", "s", "o")], None, AttemptFence("s")
            )
        assert store.renew_lease(msgspec.structs.replace(held, renewed_at=2.0))
        store.check_fence(LEASE.owner, 7)  # renewed at its epoch, the column kept with it
        taken = store.acquire_lease(held)  # taken again: a new epoch, in the column too
        assert rows(path, f"SELECT epoch FROM leases WHERE owner = '{LEASE.owner}'") == [(taken,)]
        with pytest.raises(Fenced, match=f"epoch {taken}"):
            writer.record_mails([mail("m3", "s", "o")], None, AttemptFence("s"))
        assert [m.mail_id for m in store.mail_for("s")] == ["m1"]


def test_a_runtime_of_before_v17_cannot_end_a_lease_fenced_by_its_view(tmp_path: Path) -> None:
    """A runtime opened before the upgrade to v17 goes on writing leases as it did: it
    neither makes nor drops a fence's view (``store.lease_fences``). Its taking again of an
    owner's lease (as v9 wrote it: the document only, the v10 trigger moving the column),
    its release and its takeover of a v17 lease would leave the view of the taking it ended,
    which the stalled taking's sender passes: the guards refuse each, saying why, and the
    lease stays held (so its sender goes on writing: nobody took it); a lease of its own,
    new, is written as before."""
    path = tmp_path / "runs.sqlite3"
    with SQLiteStore(path) as store:
        store.save_run(run("s", status=RunStatus.RUNNING))
        stalled = fenced(store)
        stalled.record_mails([mail("m1", "s", "o")], None, AttemptFence("s"))
        (epoch,) = rows(path, f"SELECT epoch FROM leases WHERE owner = '{LEASE.owner}'")[0]
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(  # as v9's acquire_lease wrote it, word for word
            """INSERT INTO meta (key, value) VALUES ('lease_epoch', '1')
               ON CONFLICT (key) DO UPDATE SET value = CAST(value AS INTEGER) + 1"""
        )
        (raw,) = conn.execute("SELECT value FROM meta WHERE key = 'lease_epoch'").fetchone()
        again = msgspec.structs.replace(LEASE, epoch=int(raw), pid=2)
        older = (
            (
                """INSERT INTO leases (owner, host, pid, renewed_at, expires_at, lease)
                   VALUES (?, ?, ?, ?, ?, ?)
                   ON CONFLICT (owner) DO UPDATE SET host = excluded.host, pid = excluded.pid,
                       renewed_at = excluded.renewed_at, expires_at = excluded.expires_at,
                       lease = excluded.lease""",
                ("h:1:a", "h", 2, 1.0, 16.0, msgspec.json.encode(again).decode()),
            ),
            ("DELETE FROM leases WHERE owner = ?", (LEASE.owner,)),  # a takeover's, v16's
            ("DELETE FROM leases WHERE owner = ? AND epoch = ?", (LEASE.owner, epoch)),
        )
        for sql, params in older:
            with pytest.raises(sqlite3.IntegrityError, match="before v17 cannot end it"):
                conn.execute(sql, params)
        other = msgspec.structs.replace(LEASE, owner="h:3:c", epoch=int(raw) + 1)
        conn.execute(  # and a lease of its own, new
            "INSERT INTO leases (owner, host, pid, renewed_at, expires_at, lease)"
            " VALUES (?, 'h', 3, 1.0, 16.0, ?)",
            (other.owner, msgspec.json.encode(other).decode()),
        )
        conn.execute("COMMIT")
        conn.close()
        stalled.record_mails([mail("m2", "s", "o")], None, AttemptFence("s"))
        store.check_fence(LEASE.owner, epoch)
        store.check_fence(other.owner, other.epoch)
        assert [m.mail_id for m in store.mail_for("s")] == ["m1", "m2"]


def test_a_record_inside_a_batch_goes_with_the_batch_even_before_it_began(
    sqlite_store: SQLiteStore,
) -> None:
    """Inside a batch of this thread on the store itself (not yet begun: nothing read or
    sent; ``FencedStore``'s own batches take their own path) the one statement is not run
    in autocommit beside it (``execute_alone`` answers None): the record is the batch's, so
    a batch that fails keeps none of it, and one that commits keeps it."""
    store = fenced(sqlite_store)
    store.save_run(run("s", status=RunStatus.RUNNING))
    with pytest.raises(LookupError), sqlite_store.batch():
        store.record_mails([mail("m1", "s", "o")], SaveJournal("s", (SENT,)), AttemptFence("s"))
        raise LookupError("the batch fails")
    assert rows(sqlite_store.path, "SELECT count(*) FROM mail") == [(0,)]
    with sqlite_store.batch():
        store.record_mails([mail("m2", "s", "o")], SaveJournal("s", (SENT,)), AttemptFence("s"))
    assert rows(sqlite_store.path, "SELECT mail_id FROM mail") == [("m2",)]
    assert sqlite_store.journal_of("s") == [SENT]


def test_a_record_on_a_closed_store_says_the_store_is_closed(sqlite_store: SQLiteStore) -> None:
    store = fenced(sqlite_store)
    store.save_run(run("s", status=RunStatus.RUNNING))
    with store.batch():  # (this thread's batch state left behind, at depth 0)
        pass
    sqlite_store.close()
    with pytest.raises(StoreError, match="the store is closed"):
        store.record_mails([mail("m1", "s", "o")], None, AttemptFence("s"))
