"""Mail's ``seq`` since schema v12: a plain ``INTEGER PRIMARY KEY``, so a sender's record of
a mail writes no ``sqlite_sequence`` row (a page of the log per durable mail); order among
the mail kept is as before; a real v11 file is upgraded with its mail, and a v11 writer
still open on it goes on writing."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import msgspec
from storekit import fenced, mail, rows, run

from subagents.messages import JournalEntry, MailState, RunStatus
from subagents.store.migrations import MIGRATIONS, SCHEMA_VERSION
from subagents.store.schema import create_v1, set_schema_version
from subagents.store.sqlite import SQLiteStore
from subagents.store.writes import AttemptFence, SaveJournal

SEEN = JournalEntry(request_id="s:1", kind="receive", observed=True, result="m0")
DELIVERED = MailState.DELIVERED


def test_a_senders_record_writes_no_sequence_row(sqlite_store: SQLiteStore) -> None:
    store = fenced(sqlite_store)
    store.save_run(run("s", status=RunStatus.RUNNING))
    for i in range(3):
        journal = SaveJournal("s", (SEEN,), ())
        store.record_mails([mail(f"m{i}", "s", "o", state=DELIVERED)], journal, AttemptFence("s"))
    store.save_mails([mail("x", "o", "s")])  # the supervisor's write too
    assert [m.mail_id for m in sqlite_store.mail_for("s")] == ["m0", "m1", "m2", "x"]
    names = [name for (name,) in rows(sqlite_store.path, "SELECT name FROM sqlite_sequence")]
    assert "mail" not in names


def test_mail_after_the_newest_was_deleted_sorts_after_every_mail_kept(
    sqlite_store: SQLiteStore,
) -> None:
    """What ``AUTOINCREMENT`` kept and a plain key does not: a deleted newest row's ``seq``
    may be given again; it is still above every row kept, so the order read is the same."""
    sqlite_store.save_mails([mail(f"m{i}", "o", "s") for i in range(3)])
    conn = sqlite3.connect(sqlite_store.path)
    conn.execute("DELETE FROM mail WHERE mail_id = 'm2'")
    conn.commit()
    conn.close()
    sqlite_store.save_mails([mail("later", "o", "s")])
    assert [m.mail_id for m in sqlite_store.mail_for("s")] == ["m0", "m1", "later"]


_V11_RECORD = (  # v11's sender's record with a receipt (``store.sqlite_record``), word for word
    "INSERT OR IGNORE INTO mail (mail_id, sender, recipient, state, sent_at, mail, journal,"
    " journal_after, receipt) VALUES (CASE WHEN EXISTS (SELECT 1 FROM leases WHERE owner = ?8"
    " AND epoch = ?9) THEN ?1 END, ?2, ?3, ?4, ?5, ?6, ?7, CASE WHEN ?7 IS NULL THEN NULL"
    " ELSE (SELECT max(seq) FROM journal) END, ?10)"
)


def _v11_file(path: Path) -> None:
    """A v11 store with mail as v11 wrote it: gaps in ``seq`` (a mail deleted), a carried
    journal, a receipt, a read state in the column alone, and its ``sqlite_sequence`` row."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("BEGIN")
    create_v1(conn)
    for migration in MIGRATIONS[:10]:  # v1 -> v11
        migration(conn)
    set_schema_version(conn, 11)
    carried = msgspec.json.encode([SEEN]).decode()
    for seq, mail_id, sender, recipient, state, journal in (
        (3, "a", "o", "s", "read", None),
        (4, "gone", "o", "s", "delivered", None),
        (7, "b", "s", "o", "delivered", carried),
    ):
        document = msgspec.json.encode(mail(mail_id, sender, recipient, state=DELIVERED))
        conn.execute(
            "INSERT INTO mail (seq, mail_id, sender, recipient, state, sent_at, mail, journal,"
            " journal_after, receipt) VALUES (?, ?, ?, ?, ?, 0.0, ?, ?, ?, ?)",
            (seq, mail_id, sender, recipient, state, document.decode(), journal, 0, "a"),
        )
    conn.execute("DELETE FROM mail WHERE mail_id = 'gone'")
    conn.execute(
        "INSERT INTO leases (owner, host, pid, renewed_at, expires_at, lease, epoch)"
        " VALUES ('h', 'h', 1, 1.0, 2.0, '{\"epoch\": 1}', 1)"
    )
    conn.execute("COMMIT")
    conn.close()


def test_a_v11_store_is_upgraded_with_its_mail_and_a_v11_writer_still_writes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.sqlite3"
    _v11_file(path)
    before = rows(path, "SELECT * FROM mail ORDER BY seq")
    v11 = sqlite3.connect(path, isolation_level=None)  # a v11 runtime open across the upgrade
    v11.execute("SELECT count(*) FROM mail").fetchall()
    with SQLiteStore(path) as store:
        assert (store.found_version, store.schema_version) == (11, SCHEMA_VERSION)
        assert rows(path, "SELECT * FROM mail ORDER BY seq") == before  # every column, seq too
        assert [(m.mail_id, m.state) for m in store.mail_for("s")] == [
            ("a", MailState.READ),
            ("b", DELIVERED),
        ]
        assert store.journal_of("s") == [SEEN]
        late = msgspec.json.encode(mail("c", "o", "s", state=DELIVERED)).decode()
        params = ("c", "o", "s", "delivered", 0.0, late, None, "h", 1, "b")
        assert v11.execute(_V11_RECORD, params).rowcount == 1  # its receipt of b, as v11's
        v11.close()
        assert [(m.mail_id, m.state) for m in store.mail_for("o")] == [
            ("a", MailState.READ),
            ("b", MailState.READ),
            ("c", DELIVERED),
        ]
        store.save_mails([mail("d", "o", "s")])
        assert [m.mail_id for m in store.mail_for("s")] == ["a", "b", "c", "d"]
    assert rows(path, "SELECT seq FROM mail WHERE mail_id IN ('c', 'd') ORDER BY seq") == [
        (8,),
        (9,),
    ]
    assert ("mail",) not in rows(path, "SELECT name FROM sqlite_sequence")
    assert rows(path, "PRAGMA integrity_check") == [("ok",)]
    names = rows(path, "SELECT type, name FROM sqlite_master WHERE tbl_name = 'mail'")
    assert set(names) == {
        ("table", "mail"),
        ("index", "sqlite_autoindex_mail_1"),
        ("index", "mail_recipient"),
        ("index", "mail_sender"),
    }  # (v15: no ``mail_receipt`` trigger; a receipt is read from its row)
