"""SQLiteStore's held writes: sent before any read, in order, and a failure still loses the
whole batch and names the write that failed."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
from storekit import event, mail, run

from subagents.messages import Mail, MailState
from subagents.store.base import StoreError
from subagents.store.sqlite import SQLiteStore

BIG = "x" * 20_000


def _big_mail(i: int) -> Mail:
    return Mail(mail_id=f"m{i:03d}", sender="r1", recipient="r2", content=BIG)


def test_reads_inside_a_batch_see_its_held_writes_in_order(sqlite_store: SQLiteStore) -> None:
    store = sqlite_store
    with store.batch():
        store.save_run(run("r1"))
        for i in range(5):
            store.save_mail(mail(f"m{i}", "r1", "r2"))
            store.append_event(event("r1", n=i))
        store.set_mail_state("m3", MailState.READ)
        with store.batch():  # a nested batch that reads: its savepoint reaches SQLite
            store.set_mail_state("m4", MailState.DEAD)
            assert store.get_run("r1") == run("r1")
        assert [m.mail_id for m in store.mail_for("r2")] == [f"m{i}" for i in range(5)]
        assert [m.mail_id for m in store.mail_for("r2", [MailState.READ])] == ["m3"]
        store.save_mail(mail("m5", "r1", "r2"))
    states = {m.mail_id: m.state for m in SQLiteStore(store.path).mail_for("r2")}
    assert states == {
        "m0": MailState.ACCEPTED,
        "m1": MailState.ACCEPTED,
        "m2": MailState.ACCEPTED,
        "m3": MailState.READ,
        "m4": MailState.DEAD,
        "m5": MailState.ACCEPTED,
    }
    assert [e.data["n"] for e in store.events("r1")] == list(range(5))


def test_mail_state_is_read_from_its_column(sqlite_store: SQLiteStore) -> None:
    """Read is written to the column alone (schema v11), any other state to the document
    too; a mail is read with its column's state either way."""
    sqlite_store.save_mail(mail("m1", "r1", "r2", sent_at=1234.5678))
    sqlite_store.save_mail(mail("m2", "r1", "r2", sent_at=1234.5678))
    sqlite_store.set_mail_state("m1", MailState.READ)
    sqlite_store.set_mail_state("m2", MailState.DEAD)
    sqlite_store.set_mail_state("unknown", MailState.READ)  # no such mail: nothing happens
    conn = sqlite3.connect(sqlite_store.path)
    got = conn.execute("SELECT state, json_extract(mail, '$.state') FROM mail").fetchall()
    conn.close()
    assert got == [("read", "accepted"), ("dead", "dead")]
    assert sqlite_store.mail_for("r1") == [
        mail("m1", "r1", "r2", sent_at=1234.5678, state="read"),
        mail("m2", "r1", "r2", sent_at=1234.5678, state="dead"),
    ]


def test_a_nested_batch_undone_after_its_writes_were_sent_keeps_the_outer_ones(
    sqlite_store: SQLiteStore,
) -> None:
    store = sqlite_store
    with store.batch():
        store.save_run(run("outer1"))
        with pytest.raises(KeyError), store.batch():
            store.save_run(run("inner"))
            assert store.get_run("inner") is not None  # sends it (and the savepoint)
            store.save_run(run("inner2"))  # held again
            raise KeyError("inner fails")
        store.save_run(run("outer2"))
    assert [r.run_id for r in SQLiteStore(store.path).list_runs()] == ["outer1", "outer2"]


def test_a_held_write_that_fails_at_commit_loses_the_whole_batch_and_is_named(
    db_path: Path,
) -> None:
    store = SQLiteStore(db_path, max_bytes=256 * 1024)
    store.save_run(run("committed"))
    with pytest.raises(StoreError) as caught, store.batch():
        store.save_run(run("in-batch"))
        for i in range(50):
            store.save_mail(_big_mail(i))  # held: nothing fails yet
    message = str(caught.value)
    assert "batch rolled back: a write in it failed" in message
    # the mail went in one executemany: the first is named, with how many were sent with it
    assert "saving mail m000 (or one of the 49 writes sent with it): disk full" in message
    for s in (store, SQLiteStore(db_path)):
        assert [r.run_id for r in s.list_runs()] == ["committed"]
        assert s.mail_for("r2") == []


def test_held_rows_of_several_calls_fail_together_named_by_their_first(db_path: Path) -> None:
    store = SQLiteStore(db_path, max_bytes=256 * 1024)
    with pytest.raises(StoreError) as caught, store.batch():
        store.save_mail(_big_mail(0))
        store.save_mails([_big_mail(i) for i in range(1, 30)])  # one held entry of 29 rows
        store.save_mails([_big_mail(i) for i in range(30, 50)])
    assert "saving mail m000 (or one of the 49 writes sent with it): disk full" in str(caught.value)
    assert SQLiteStore(db_path).mail_for("r2") == []
    # outside a batch, the rows are one transaction of their own: none of them is kept
    with pytest.raises(StoreError, match=r"saving mail m000 \(50 rows\).*disk full"):
        store.save_mails([_big_mail(i) for i in range(50)])
    assert SQLiteStore(db_path).mail_for("r2") == []


def test_set_mails_state_in_chunks_reaches_every_mail(sqlite_store: SQLiteStore) -> None:
    store = sqlite_store
    mails = [mail(f"m{i:04d}", "r1", "r2") for i in range(1203)]  # chunks of 500, 500, 203
    store.save_mails(mails)
    with store.batch():
        store.set_mails_state([m.mail_id for m in mails[1:]], MailState.READ)
    conn = sqlite3.connect(store.path)
    rows = conn.execute("SELECT mail_id, state, json_extract(mail, '$.state') FROM mail").fetchall()
    conn.close()
    assert rows[0] == ("m0000", "accepted", "accepted")  # not in the list: untouched
    assert {(state, doc) for _, state, doc in rows[1:]} == {("read", "accepted")}  # (v11)
    assert len(rows) == 1203


def test_a_held_write_that_fails_at_a_read_aborts_the_batch(db_path: Path) -> None:
    store = SQLiteStore(db_path, max_bytes=256 * 1024)
    with pytest.raises(StoreError, match="batch rolled back: a write in it failed"), store.batch():
        for i in range(50):
            store.save_mail(_big_mail(i))
        with pytest.raises(StoreError, match=r"saving mail m000 \(or one .*: disk full"):
            store.mail_for("r2")
        # the caller swallowed the error: later writes are refused, not committed alone
        with pytest.raises(StoreError, match="aborted"):
            store.save_run(run("after-error"))
    assert SQLiteStore(db_path).list_runs() == []
    assert SQLiteStore(db_path).mail_for("r2") == []


def test_a_batch_holding_writes_does_not_hold_up_another_threads_batch(
    sqlite_store: SQLiteStore,
) -> None:
    """The supervisor's group holds its writes as data while it decides: a sender's own
    batch (the mail it takes straight to its recipient) commits meanwhile, without waiting
    for the group's end (``store.sqlite_tx``: batches begin lazily)."""
    store = sqlite_store
    committed = threading.Event()
    errors: list[BaseException] = []

    def sender() -> None:
        try:
            with store.batch():
                store.save_mails([mail("straight", "r1", "r2")])
            committed.set()
        except BaseException as exc:
            errors.append(exc)

    other = threading.Thread(target=sender)
    with store.batch():  # the group: open, writes held, not committed
        store.save_run(run("r1"))
        store.append_event(event("r1"))
        other.start()
        went = committed.wait(timeout=30)
    other.join(timeout=30)
    assert went, "the sender's batch waited for the other thread's open batch"
    assert errors == []
    fresh = SQLiteStore(store.path)
    assert [m.mail_id for m in fresh.mail_for("r2")] == ["straight"]
    assert fresh.get_run("r1") == run("r1")
    assert len(fresh.events("r1")) == 1


def test_a_batch_that_read_or_wrote_directly_holds_its_transaction_to_its_end(
    sqlite_store: SQLiteStore,
) -> None:
    """Once a batch has sent something to SQLite (a read of its held writes), it is a
    transaction: another thread's batch waits for its commit, and never sees half of it."""
    store = sqlite_store
    started, committed = threading.Event(), threading.Event()
    seen: list[list[str]] = []

    def other() -> None:
        started.set()
        with store.batch():
            seen.append([r.run_id for r in store.list_runs()])
            store.save_run(run("r3"))
        committed.set()

    thread = threading.Thread(target=other)
    with store.batch():
        store.save_run(run("r1"))
        assert [r.run_id for r in store.list_runs()] == ["r1"]  # sent: the transaction begun
        thread.start()
        assert started.wait(timeout=30)
        assert not committed.wait(timeout=0.2)  # it waits for this batch (no timing claim:
        store.save_run(run("r2"))  # a wrong early commit would be seen as r1 alone below)
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert seen == [["r1", "r2"]]
    assert sorted(r.run_id for r in SQLiteStore(store.path).list_runs()) == ["r1", "r2", "r3"]


def test_a_batch_that_sends_nothing_commits_nothing(sqlite_store: SQLiteStore) -> None:
    """A batch with nothing held at its end never begins a transaction: no lock, no fence
    check, no commit (an empty group of the supervisor costs nothing)."""
    store = sqlite_store
    begun: list[str] = []
    store._tx.connection().set_trace_callback(begun.append)
    with store.batch(), store.batch():
        pass
    store.save_run(run("r1"))
    store._tx.connection().set_trace_callback(None)
    assert begun.count("BEGIN IMMEDIATE") == 1  # the save_run's own batch only


def test_a_read_inside_a_batch_begins_it_so_a_read_modify_write_stays_atomic(
    sqlite_store: SQLiteStore,
) -> None:
    """A batch that reads before it writes anything (a fence check, a restore reading the
    leases it then takes over) begins its transaction at that read: another thread's
    read-modify-write waits for its commit, so neither loses the other's update."""
    store = sqlite_store
    started, committed = threading.Event(), threading.Event()

    def count_up() -> None:
        with store.batch():
            store.save_run(run(f"r{len(store.list_runs())}"))

    def other() -> None:
        started.set()
        count_up()
        committed.set()

    thread = threading.Thread(target=other)
    with store.batch():
        n = len(store.list_runs())  # nothing held yet: this read begins the transaction
        thread.start()
        assert started.wait(timeout=30)
        committed.wait(timeout=0.5)  # the other's chance to slip in (it must not)
        store.save_run(run(f"r{n}"))
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert sorted(r.run_id for r in store.list_runs()) == ["r0", "r1"]


def test_held_events_of_one_run_go_as_one_row_each_its_own_number(
    sqlite_store: SQLiteStore,
) -> None:
    """40 held events of one run: one statement, one row (``sqlite_event_groups``), not 40
    rows; each still its own number, in the order appended. Seen failing with the rows sent
    16 to a statement as before v13 (3 statements, 40 rows)."""
    statements: list[str] = []
    sqlite_store._tx.connection().set_trace_callback(statements.append)
    with sqlite_store.batch():
        for i in range(40):
            sqlite_store.append_event(event("r1", n=i))
    sqlite_store._tx.connection().set_trace_callback(None)
    inserts = [s for s in statements if s.startswith("INSERT INTO events")]
    assert len(inserts) == 1
    stored = SQLiteStore(sqlite_store.path)
    assert [e.data["n"] for e in stored.events("r1")] == list(range(40))
    assert [s.seq for s in stored.events_after(0)] == list(range(1, 41))
    assert stored.last_event_seq() == 40
    stored.close()


def test_a_held_event_that_fails_after_sixteen_sent_together_is_named_with_its_count(
    db_path: Path,
) -> None:
    """17 held events: the first 16 go as one statement and succeed, the 17th (too big for
    the store) fails alone. The error must not name the first event as the one that failed:
    a long event (over ``row_checks.SURE_EVENT_BYTES``) is held as a row of its own, not in
    the others' group (``sqlite_events``), so the error names it, alone."""
    store = SQLiteStore(db_path, max_bytes=256 * 1024)
    with pytest.raises(StoreError) as caught, store.batch():
        for i in range(16):
            store.append_event(event(f"small{i}"))
        store.append_event(event("huge", blob="x" * 400_000))
    message = str(caught.value)
    assert "appending a step event of run huge" in message
    assert "small0" not in message
    assert "disk full" in message
    assert SQLiteStore(db_path).events_after(0) == []
