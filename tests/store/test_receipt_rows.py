"""Read receipts read from their reader's row (schema v15): a reader's one-statement record
carries the receipt of the mail it read in its own row's ``receipt`` and writes nothing into
the read mail's row; every reader of a mail's state (``mail_for``: ``subagents log``,
``info``, the console, a run's unread count, a restart's and a restore's "what is unread")
gives ``read`` all the same. A store written before v15 reads as it did, a v14 writer still
open across the upgrade has its receipts read, and a sweep that deletes the row a receipt
rides on keeps the mail it marks read."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import msgspec
from storekit import fenced, mail, rows, run, store_of_version

from subagents.messages import JournalEntry, MailState, RunStatus
from subagents.store.migrations import SCHEMA_VERSION
from subagents.store.sqlite import SQLiteStore
from subagents.store.writes import AttemptFence, SaveJournal

SEEN = JournalEntry(request_id="s:1", kind="receive", observed=True, result="m0")
DELIVERED, READ = MailState.DELIVERED, MailState.READ
UNREAD = (MailState.ACCEPTED, DELIVERED)
HOUR, DAY, NOW = 3600.0, 86400.0, 1_000_000.0


def shown(
    store: SQLiteStore, run_id: str, states: tuple[MailState, ...] | None = None
) -> dict[str, MailState]:
    return {m.mail_id: m.state for m in store.mail_for(run_id, states)}


def test_a_receipt_on_the_readers_row_reads_as_read_and_the_unread_filter_leaves_it_out(
    sqlite_store: SQLiteStore,
) -> None:
    store = fenced(sqlite_store)
    store.save_run(run("s", status=RunStatus.RUNNING))
    store.save_mails([mail("m0", "o", "s", state=DELIVERED), mail("m1", "o", "s", state=DELIVERED)])
    store.record_mails([mail("r", "s", "o")], SaveJournal("s", (SEEN,), ("m0",)), AttemptFence("s"))
    assert rows(sqlite_store.path, "SELECT mail_id, state, receipt FROM mail ORDER BY seq") == [
        ("m0", "delivered", None),  # the read row is not written
        ("m1", "delivered", None),
        ("r", "accepted", "m0"),
    ]
    assert shown(sqlite_store, "s") == {"m0": READ, "m1": DELIVERED, "r": MailState.ACCEPTED}
    assert shown(sqlite_store, "o") == shown(sqlite_store, "s")  # the sender's view too
    assert list(shown(sqlite_store, "s", UNREAD)) == ["m1", "r"]
    assert list(shown(sqlite_store, "s", (READ,))) == ["m0"]
    assert list(shown(sqlite_store, "o", (READ, DELIVERED))) == ["m0", "m1"]


def test_a_v14_store_reads_as_it_did_and_a_v14_writer_open_across_the_upgrade_is_read(
    tmp_path: Path,
) -> None:
    """v14's trigger marked read in the column: those rows read as they did. A v14 runtime
    still open writes its receipts into ``receipt`` with v14's SQL (its trigger dropped by
    the upgrade): the mail it read shows read to this code."""
    path = tmp_path / "runs.sqlite3"
    conn = store_of_version(path, 14)
    for mail_id in ("m0", "m1", "m2"):
        kept = msgspec.json.encode(mail(mail_id, "o", "s", state=DELIVERED)).decode()
        conn.execute(
            "INSERT INTO mail (mail_id, sender, recipient, state, sent_at, mail)"
            " VALUES (?, 'o', 's', 'delivered', 0.0, ?)",
            (mail_id, kept),
        )
    conn.execute("COMMIT")
    insert = (
        "INSERT INTO mail (mail_id, sender, recipient, state, sent_at, mail, receipt)"
        " VALUES (?, 's', 'o', 'accepted', 0.0, ?, ?)"
    )
    reply = msgspec.json.encode(mail("r0", "s", "o")).decode()
    conn.execute(insert, ("r0", reply, "m0"))  # v14's trigger marks m0 read
    assert rows(path, "SELECT state FROM mail WHERE mail_id = 'm0'") == [("read",)]
    with SQLiteStore(path) as store:
        assert (store.found_version, store.schema_version) == (14, SCHEMA_VERSION)
        assert shown(store, "s") == {
            "m0": READ,
            "m1": DELIVERED,
            "m2": DELIVERED,
            "r0": MailState.ACCEPTED,
        }
        late = msgspec.json.encode(mail("r1", "s", "o")).decode()
        conn.execute(insert, ("r1", late, "m1"))  # the v14 runtime, after the upgrade
        conn.close()
        assert shown(store, "s", UNREAD) == {
            "m2": DELIVERED,
            "r0": MailState.ACCEPTED,
            "r1": MailState.ACCEPTED,
        }
        assert shown(store, "s", (READ,)) == {"m0": READ, "m1": READ}
    assert rows(path, "SELECT count(*) FROM sqlite_master WHERE name = 'mail_receipt'") == [(0,)]
    assert rows(path, "PRAGMA integrity_check") == [("ok",)]


def test_a_sweep_deleting_the_row_a_receipt_rides_on_keeps_the_mail_read(
    sqlite_store: SQLiteStore,
) -> None:
    """s read m0 (from o) and its receipt rides on its mail to d; d is deleted by the
    sweep, with its mail both ways: m0, which s and o keep, stays read."""
    store = fenced(sqlite_store)
    store.save_run(run("s", status=RunStatus.RUNNING))
    store.save_run(run("o", status=RunStatus.RUNNING))
    store.save_mails([mail("m0", "o", "s", state=DELIVERED), mail("m1", "o", "s", state=DELIVERED)])
    store.record_mails([mail("r", "s", "d")], SaveJournal("s", (SEEN,), ("m0",)), AttemptFence("s"))
    store.save_run(
        run(
            "d",
            created_at=0.0,
            status=RunStatus.COMPLETED,
            ended_at=NOW - 2 * HOUR,
            cleanup="delete",
        )
    )
    sqlite_store.sweep(now=NOW)
    report = sqlite_store.sweep(now=NOW + 10 * DAY, retention_days=7)
    assert report.deleted == ("d",)
    assert rows(sqlite_store.path, "SELECT mail_id FROM mail ORDER BY seq") == [("m0",), ("m1",)]
    assert shown(sqlite_store, "s") == {"m0": READ, "m1": DELIVERED}


def test_a_sweep_marks_read_only_the_mail_sent_to_the_receipts_writer(
    sqlite_store: SQLiteStore,
) -> None:
    """A receipt on a deleted run's row names a mail sent to another run than its writer's
    (an older runtime's raw insert: the record's statement names only mail sent to it):
    neither ``mail_for`` nor the sweep takes it for a receipt, before or after."""
    store = fenced(sqlite_store)
    for run_id in ("s", "o", "x"):
        store.save_run(run(run_id, status=RunStatus.RUNNING))
    store.save_mails([mail("m0", "o", "x", state=DELIVERED), mail("m1", "o", "s", state=DELIVERED)])
    store.save_mails([mail("r", "s", "d", state=DELIVERED)])
    conn = sqlite3.connect(sqlite_store.path, isolation_level=None)
    conn.execute("UPDATE mail SET receipt = 'm0' WHERE mail_id = 'r'")  # m0 is x's, not s's
    conn.close()
    assert shown(sqlite_store, "x") == {"m0": DELIVERED}
    store.save_run(
        run(
            "d",
            created_at=0.0,
            status=RunStatus.COMPLETED,
            ended_at=NOW - 2 * HOUR,
            cleanup="delete",
        )
    )
    sqlite_store.sweep(now=NOW)
    assert sqlite_store.sweep(now=NOW + 10 * DAY, retention_days=7).deleted == ("d",)
    assert rows(sqlite_store.path, "SELECT mail_id, state FROM mail ORDER BY seq") == [
        ("m0", "delivered"),
        ("m1", "delivered"),
    ]
    assert shown(sqlite_store, "x") == {"m0": DELIVERED}
    assert shown(sqlite_store, "s") == {"m1": DELIVERED}
