"""A commit a sender waits behind is cut at the points between decisions (``store/sqlite_split.py``
``split_point``, ``allow_split``, ``cut``): the sender's record goes in at the next point, not
after the whole batch; the rest is committed after it, its fence checked again; a batch not
allowed to split, or a point inside a savepoint, is never cut.

Real SQLite files and threads. The batch's first event stops in a SQLite function (a temporary
trigger on the store's own connection) until the sender is blocked on the store's lock, so the
sender surely waits behind the commit; what the batch's later event saw of the mail table when
it was inserted says whether the sender went first."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from storekit import event, mail, run

from polling import wait_until
from subagents.messages import Lease, RunStatus
from subagents.store import sqlite_split
from subagents.store.base import Fenced
from subagents.store.deferred import SPLIT, DeferredWrites
from subagents.store.sqlite import SQLiteStore

LEASE = Lease(owner="h:1:a", host="h", pid=1, renewed_at=1.0, expires_at=16.0)
HANG_GUARD_S = 120.0


class _Gated:
    """The store's connection with two SQLite functions its temporary triggers call: ``gate``
    (the ``gate`` event waits there until a sender is blocked on the lock) and ``seen`` (the
    ``after`` event keeps how many mails were in the table when it was inserted)."""

    def __init__(self, store: SQLiteStore) -> None:
        self.store = store
        self.mails_seen: list[int] = []
        self.entered = threading.Event()
        conn = store._tx.connection()
        conn.create_function("gate", 0, self._gate)
        conn.create_function("seen", 1, self.mails_seen.append)
        conn.execute(
            "CREATE TEMP TRIGGER gate AFTER INSERT ON main.events WHEN NEW.run_id = 'gate'"
            " BEGIN SELECT gate(); END"
        )
        conn.execute(
            "CREATE TEMP TRIGGER seen AFTER INSERT ON main.events WHEN NEW.run_id = 'after'"
            " BEGIN SELECT seen((SELECT count(*) FROM main.mail)); END"
        )

    def _gate(self) -> None:
        self.entered.set()
        wait_until(lambda: self.store._tx.splits.wanted, "a sender blocked on the store's lock")


def _events(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return [r for (r,) in conn.execute("SELECT run_id FROM events ORDER BY seq").fetchall()]
    finally:
        conn.close()


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SQLiteStore]:
    # the hand-over's bound is a bound, not the subject: a loaded machine may take long to
    # wake the sender, and this test asserts that it was let in
    monkeypatch.setattr(sqlite_split, "HAND_OVER_S", HANG_GUARD_S)
    s = SQLiteStore(tmp_path / "runs.sqlite3")
    yield s
    s.close()


def _sender(store: SQLiteStore, epoch: int, gated: _Gated) -> threading.Thread:
    """A thread that, once the batch's commit is inside its first event, records a mail as a
    runtime's sender does (``save_mails_fenced``: one statement on the store's lock)."""

    def send() -> None:
        assert gated.entered.wait(HANG_GUARD_S)
        store.save_mails_fenced([mail("m1", "s", "o")], LEASE.owner, epoch, ())

    return threading.Thread(target=send, name="sender")


def _commit(store: SQLiteStore, epoch: int, *, split: bool) -> None:
    """Two decisions' events in one lazily begun, fenced batch, a split point between them."""
    with store.fenced_batch(LEASE.owner, epoch):
        store.append_event(event("gate"))
        store.split_point()
        store.append_event(event("after"))
        if split:
            store.allow_split()


def test_a_waiting_sender_goes_in_at_the_next_split_point(store: SQLiteStore) -> None:
    """Seen failing with ``cut`` never taken (the flush ignoring ``SPLIT``): [0]."""
    epoch = store.acquire_lease(LEASE)
    store.save_run(run("s", status=RunStatus.RUNNING))
    gated = _Gated(store)
    sender = _sender(store, epoch, gated)
    sender.start()
    _commit(store, epoch, split=True)
    sender.join(HANG_GUARD_S)
    assert gated.mails_seen == [1]  # the mail was committed before the batch's second part
    assert _events(store.path) == ["gate", "after"]
    assert [m.mail_id for m in store.mail_for("o")] == ["m1"]


def test_a_batch_not_allowed_to_split_keeps_the_sender_waiting(store: SQLiteStore) -> None:
    epoch = store.acquire_lease(LEASE)
    store.save_run(run("s", status=RunStatus.RUNNING))
    gated = _Gated(store)
    sender = _sender(store, epoch, gated)
    sender.start()
    _commit(store, epoch, split=False)
    sender.join(HANG_GUARD_S)
    assert gated.mails_seen == [0]  # one transaction: the sender came after all of it
    assert [m.mail_id for m in store.mail_for("o")] == ["m1"]


def test_the_part_after_a_cut_checks_the_fence_again(store: SQLiteStore) -> None:
    """The lease taken over while the sender is let in: the first part stays committed (it
    was written under the lease), the rest is refused as ``Fenced``, nothing of it kept."""
    epoch = store.acquire_lease(LEASE)
    gated = _Gated(store)

    def take_over() -> None:  # through the senders' own path to the lock
        assert gated.entered.wait(HANG_GUARD_S)
        store._tx.execute_alone(
            "UPDATE leases SET lease = json_set(lease, '$.epoch', ?) WHERE owner = ?",
            (epoch + 1, LEASE.owner),
            "taking the lease over",
        )

    other = threading.Thread(target=take_over, name="sender")
    other.start()
    with pytest.raises(Fenced):
        _commit(store, epoch, split=True)
    other.join(HANG_GUARD_S)
    assert _events(store.path) == ["gate"]
    assert gated.mails_seen == []


class _Splitter:
    """Always wants a cut; records where (the statements sent before each)."""

    def __init__(self, conn: sqlite3.Connection, sent: list[str]) -> None:
        self.conn = conn
        self.sent = sent
        self.cuts: list[int] = []

    def wants_cut(self) -> bool:
        return True

    def cut(self) -> sqlite3.Connection:
        self.cuts.append(len(self.sent))
        return self.conn


def test_no_cut_inside_a_savepoint() -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("CREATE TABLE t (n INTEGER)")
    conn.execute("BEGIN")
    sent: list[str] = []
    conn.set_trace_callback(sent.append)
    held = DeferredWrites()
    insert = "INSERT INTO t (n) VALUES (?)"
    held.mark("SAVEPOINT batch_1", "a nested batch")
    held.add("t", insert, (1,), "one")
    held.items.append(SPLIT)  # inside the savepoint: not a place to commit
    held.mark("RELEASE batch_1", "its end")
    held.add("t", insert, (2,), "two")
    held.items.append(SPLIT)
    held.add("t", insert, (3,), "three")
    splitter = _Splitter(conn, sent)
    held.flush(conn, splitter)
    conn.execute("COMMIT")
    assert splitter.cuts == [4]  # after SAVEPOINT, 1, RELEASE, 2: not between 1 and RELEASE
    assert [n for (n,) in conn.execute("SELECT n FROM t")] == [1, 2, 3]


def test_a_split_point_with_nothing_before_it_holds_nothing(store: SQLiteStore) -> None:
    """A batch that wrote nothing begins no transaction for its split points."""
    statements: list[Any] = []
    store._tx.connection().set_trace_callback(statements.append)
    with store.batch():
        store.split_point()
        with store.batch():
            store.split_point()
        store.allow_split()
    store._tx.connection().set_trace_callback(None)
    assert statements == []
