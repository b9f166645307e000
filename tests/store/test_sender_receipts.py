"""Read receipts in a SQLite store since schema v11: a receipt writes the ``state`` column
alone (the document keeps the state it had; ``mail_for`` gives the column's), and a sender's
record carries the receipts of the mail its journal entries read (``SaveJournal.read_mail``),
in its own transaction: one statement for one mail and one receipt (since v15 the reader's
row's ``receipt``, read by ``mail_for``, not written into the read mail's row), statements
otherwise; nothing marked read when the record is refused."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import msgspec
import pytest
from storekit import LEASE, fenced, mail, rows, run, store_of_version, traced

from subagents.messages import JournalEntry, MailState, RunStatus
from subagents.store.base import Fenced
from subagents.store.fencing import AttemptOver, Fence, FencedStore
from subagents.store.sqlite import SQLiteStore
from subagents.store.writes import AttemptFence, SaveJournal

SEEN = JournalEntry(request_id="s:1", kind="receive", observed=True, result="m0")
DELIVERED = MailState.DELIVERED


def states(path: Path) -> dict[object, tuple[object, object]]:
    """Each mail's state column and its document's state."""
    got = rows(path, "SELECT mail_id, state, json_extract(mail, '$.state') FROM mail")
    return {mail_id: (column, document) for mail_id, column, document in got}


def state_of(store: SQLiteStore, run_id: str, mail_id: str) -> MailState:
    (found,) = [m for m in store.mail_for(run_id) if m.mail_id == mail_id]
    return found.state


def test_one_mail_carries_the_receipt_of_the_mail_it_answers_in_its_one_statement(
    sqlite_store: SQLiteStore,
) -> None:
    store = fenced(sqlite_store)
    store.save_run(run("s", status=RunStatus.RUNNING))
    store.save_mails([mail("m0", "o", "s", state=DELIVERED)])
    journal = SaveJournal("s", (SEEN,), ("m0",))
    with traced(sqlite_store) as ran:
        store.record_mails([mail("m1", "s", "o", state=DELIVERED)], journal, AttemptFence("s"))
    assert len(ran) == 1 and ran[0].startswith("INSERT OR IGNORE INTO mail")
    assert state_of(sqlite_store, "s", "m0") is MailState.READ
    assert state_of(sqlite_store, "s", "m1") is DELIVERED
    assert sqlite_store.journal_of("s") == [SEEN]


def test_a_receipt_marks_only_mail_sent_to_the_reader(sqlite_store: SQLiteStore) -> None:
    """A receipt names mail its reader received: one sent to another run is left as it is,
    by the one statement and by the statements alike."""
    store = fenced(sqlite_store)
    store.save_run(run("s", status=RunStatus.RUNNING))
    store.save_mails([mail("x1", "o", "p", state=DELIVERED), mail("x2", "o", "p", state=DELIVERED)])
    store.record_mails(
        [mail("m1", "s", "o")], SaveJournal("s", (SEEN,), ("x1",)), AttemptFence("s")
    )
    two = [mail("m2", "s", "o"), mail("m3", "s", "o")]  # several: statements
    store.record_mails(two, SaveJournal("s", (SEEN,), ("x2",)), AttemptFence("s"))
    assert states(sqlite_store.path)["x1"][0] == "delivered"
    assert states(sqlite_store.path)["x2"][0] == "delivered"
    assert state_of(sqlite_store, "p", "x1") is DELIVERED  # (v15: not read from s's row)
    assert state_of(sqlite_store, "p", "x2") is DELIVERED


def test_several_receipts_and_several_mails_are_one_transaction(
    sqlite_store: SQLiteStore,
) -> None:
    store = fenced(sqlite_store)
    store.save_run(run("s", status=RunStatus.RUNNING))
    store.save_mails([mail(f"m{i}", "o", "s", state=DELIVERED) for i in range(3)])
    journal = SaveJournal("s", (SEEN,), ("m0", "m1", "m2"))
    with traced(sqlite_store) as ran:
        store.record_mails([mail("a", "s", "o")], journal, AttemptFence("s"))
    assert ran[0] == "BEGIN IMMEDIATE" and ran[-1] == "COMMIT"
    assert all(state_of(sqlite_store, "s", f"m{i}") is MailState.READ for i in range(3))


def test_a_refused_record_marks_nothing_read(sqlite_store: SQLiteStore) -> None:
    """A start that is over, or a lease taken over, commits neither the mail nor the
    receipts: a receipt is never kept for mail the run's current start has not read."""
    store = fenced(sqlite_store)
    store.save_run(run("s", status=RunStatus.RUNNING, restarts=1))
    store.save_mails([mail("m0", "o", "s", state=DELIVERED)])
    journal = SaveJournal("s", (SEEN,), ("m0",))
    with pytest.raises(AttemptOver):
        store.record_mails([mail("m1", "s", "o")], journal, AttemptFence("s", restarts=0))
    stale = FencedStore(sqlite_store, Fence(LEASE.owner, 0))
    with pytest.raises(Fenced):
        stale.record_mails([mail("m2", "s", "o")], journal, AttemptFence("s", restarts=1))
    assert states(sqlite_store.path) == {"m0": ("delivered", "delivered")}


def test_a_receipt_writes_the_state_column_alone(sqlite_store: SQLiteStore) -> None:
    """Read lives in the column (``json_set`` of the document was ~40% of a receipt): the
    document keeps its state, and every read of the mail gives the column's; other states
    keep the document in step. A receipt carried by the reader's one-statement record
    writes neither (v15): its row says it, and every read of the mail gives ``read``."""
    store = fenced(sqlite_store)
    store.save_run(run("s", status=RunStatus.RUNNING))
    store.save_mails([mail(f"m{i}", "o", "s", state=DELIVERED) for i in range(4)])
    with sqlite_store.batch():
        sqlite_store.set_mails_state(("m0", "m1"), MailState.READ)
        sqlite_store.set_mail_state("m3", MailState.DEAD)
    store.record_mails([mail("a", "s", "o")], SaveJournal("s", (SEEN,), ("m2",)), AttemptFence("s"))
    assert states(sqlite_store.path) == {
        "m0": ("read", "delivered"),
        "m1": ("read", "delivered"),
        "m2": ("delivered", "delivered"),
        "m3": ("dead", "dead"),
        "a": ("accepted", "accepted"),
    }
    got = {m.mail_id: m.state for m in sqlite_store.mail_for("s")}
    assert got == {
        "m0": MailState.READ,
        "m1": MailState.READ,
        "m2": MailState.READ,
        "m3": MailState.DEAD,
        "a": MailState.ACCEPTED,
    }
    assert [m.mail_id for m in sqlite_store.mail_for("s", (MailState.READ,))] == ["m0", "m1", "m2"]


def test_a_v10_store_upgraded_keeps_its_mail_and_a_v10_writer_still_writes(
    tmp_path: Path,
) -> None:
    """A store made before v11: its mail reads as before; a runtime of v10 still open on it
    goes on writing mail and receipts with v10's SQL, word for word (no receipt column: the
    trigger runs nothing), and what it wrote reads back right."""
    path = tmp_path / "runs.sqlite3"
    conn = store_of_version(path, 10)
    for mail_id, state in (("m0", DELIVERED), ("m1", MailState.READ)):
        kept = mail(mail_id, "o", "s", state=state)
        conn.execute(
            "INSERT INTO mail (mail_id, sender, recipient, state, sent_at, mail)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (mail_id, "o", "s", state.value, 0.0, msgspec.json.encode(kept).decode()),
        )
    conn.execute("COMMIT")
    conn.close()
    with SQLiteStore(path) as store:
        assert store.found_version == 10
        assert [(m.mail_id, m.state) for m in store.mail_for("s")] == [
            ("m0", DELIVERED),
            ("m1", MailState.READ),
        ]
        v10 = sqlite3.connect(path, isolation_level=None)
        late = mail("m2", "o", "s", state=DELIVERED)
        v10.execute(  # v10's SAVE_MAIL and its receipt, word for word
            """INSERT INTO mail (mail_id, sender, recipient, state, sent_at, mail)
    VALUES (?, ?, ?, ?, ?, ?)
    ON CONFLICT (mail_id) DO NOTHING""",
            ("m2", "o", "s", "delivered", 0.0, msgspec.json.encode(late).decode()),
        )
        v10.execute(
            "UPDATE mail SET state = ?, mail = json_set(mail, '$.state', ?)"
            " WHERE mail_id IN (?, ?)",
            ("read", "read", "m0", "m2"),
        )
        v10.close()
        assert {m.mail_id: m.state for m in store.mail_for("s")} == {
            "m0": MailState.READ,
            "m1": MailState.READ,
            "m2": MailState.READ,
        }
