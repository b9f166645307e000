"""A text UTF-8 cannot encode (a lone surrogate: a bad decode's) in one write of a batch
loses nothing else of the batch, on every store: refused at its call with a ``ValueError``
naming it (only its nested batch fails), or kept (memory: as given; SQLite: a held event's
run fields, which it encodes only when the batch is sent, with U+FFFD in its place, named
in the log: ``store.lone_surrogates``). Before session 31 such a run field failed the whole
SQLite batch at its commit with a raw ``UnicodeEncodeError``, every other run's writes lost
and the transaction left open (the file's write lock held). Keys a store held raw in a batch
(mail ids, a subscription's texts, a run id of ``drop_preview``/``mark_outcome_delivered``)
failed the whole batch when it was sent, until session 32: now refused at their call too."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from storekit import event, run

from subagents.cluster.remote_store import ClusterStore
from subagents.messages import Event, JournalEntry, MailState, Subscription
from subagents.store.base import RunStore, StoreError
from subagents.store.memory import MemoryStore
from subagents.store.sqlite import SQLiteStore

BAD = "x\ud800y"
RUN_FIELDS = ("run_id", "agent", "root_run_id", "parent_run_id")


def _bad_event(field: str) -> Event:
    return msgspec.structs.replace(event("r-bad"), **{field: BAD})


@pytest.mark.parametrize("field", RUN_FIELDS)
def test_a_lone_surrogate_in_an_events_run_fields_loses_nothing_else(
    store: RunStore, field: str
) -> None:
    refused: list[str] = []
    with store.batch():
        store.save_run(run("r-good"))
        store.append_event(event("r-good"))
        try:
            with store.batch():
                store.append_event(_bad_event(field))
        except ValueError as exc:
            refused.append(str(exc))
        store.append_event(event("r-good"))
    assert store.get_run("r-good") == run("r-good")
    assert store.events("r-good") == [event("r-good"), event("r-good")]
    kept = [e.event for e in store.events_after(0) if e.event.run_id != "r-good"]
    if refused:  # (PostgreSQL: checked when appended)
        assert "lone surrogate" in refused[0], refused
        assert kept == []
    else:  # memory: as given; SQLite: repaired
        assert len(kept) == 1
        assert getattr(kept[0], field) in (BAD, "x\ufffdy")
    store.save_run(run("r-after"))  # (the store goes on: no transaction left open)
    assert store.get_run("r-after") == run("r-after")


CALLS = {
    "post_command": lambda s: s.post_command("send", "r-bad", BAD),
    "save_journal": lambda s: s.save_journal("r-bad", [JournalEntry(request_id=BAD)]),
    "release_lease": lambda s: s.release_lease(BAD),
    "get_run": lambda s: s.get_run(BAD),
    "events": lambda s: s.events(BAD),
    "mail_for": lambda s: s.mail_for(BAD),
    # keys held raw in a batch: they failed the whole batch when it was sent (session 32)
    "set_mail_state": lambda s: s.set_mail_state(BAD, MailState.DELIVERED),
    "set_mails_state": lambda s: s.set_mails_state(["m-fine", BAD], MailState.DELIVERED),
    "set_mails_state read": lambda s: s.set_mails_state(["m-fine", BAD], MailState.READ),
    "save_subscription": lambda s: s.save_subscription(
        Subscription(run_id="r-bad", root_run_id="r-bad", topic=BAD)
    ),
    "save_subscription run": lambda s: s.save_subscription(
        Subscription(run_id=BAD, root_run_id="r-bad", topic="t")
    ),
    "drop_subscriptions": lambda s: s.drop_subscriptions("r-bad", ["t", BAD]),
    "drop_subscriptions run": lambda s: s.drop_subscriptions(BAD),
    "mark_outcome_delivered": lambda s: s.mark_outcome_delivered(BAD),
    "drop_preview": lambda s: s.drop_preview(BAD),
}


@pytest.mark.parametrize("call", list(CALLS))
def test_a_call_naming_a_text_utf8_cannot_encode_is_refused_by_name_alone(
    store: RunStore, call: str
) -> None:
    """A call whose text the store's database cannot take (SQLite, PostgreSQL: bound as a
    parameter, or encoded, at the call) is a ``ValueError`` naming what it was doing and
    the text (a bare ``UnicodeEncodeError`` before session 31), its nested batch alone
    failed; memory keeps objects, and answers. A cluster's batch is one call to its head,
    sent whole at its end: a write refused there fails the batch, by name."""
    refused: list[ValueError] = []
    try:
        with store.batch():
            store.save_run(run("r-good"))
            try:
                with store.batch():
                    CALLS[call](store)
            except ValueError as exc:
                refused.append(exc)
    except ValueError as exc:
        assert isinstance(store, ClusterStore), exc
        refused.append(exc)
        assert store.get_run("r-good") is None
    else:
        assert refused or isinstance(store, MemoryStore), "the store took a text it cannot keep"
        assert store.get_run("r-good") == run("r-good")
    for exc in refused:
        assert "lone surrogate" in str(exc) and "\\ud800" in str(exc), exc
        str(exc).encode("utf-8")  # (printable, loggable)
    store.save_run(run("r-next"))  # (the store goes on)
    assert store.get_run("r-next") == run("r-next")


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RunStore]:
    """A store of a database (held writes sent at the batch's end)."""
    if request.param == "postgres":
        from subagents.store.postgres import PostgresStore

        pg = PostgresStore(request.getfixturevalue("pg_url"))
        yield pg
        pg.close()
        return
    with SQLiteStore(tmp_path / "runs.db") as store:
        yield store


def _held_raw(store: RunStore) -> None:
    """A write held as it is, its key UTF-8 cannot encode: what no call of the protocol makes
    any more (each checks such a key at the call), held through the store's own transactions
    to keep the last guard tested: a failure when the batch is sent."""
    tx: Any = store._tx  # type: ignore[attr-defined]
    if isinstance(store, SQLiteStore):
        tx.defer("mail", "UPDATE mail SET state = ? WHERE mail_id = ?", ("read", BAD), "held")
    else:
        tx.defer("UPDATE mail SET state = %s WHERE mail_id = %s", ("read", BAD), "held")


def test_a_batch_whose_held_value_cannot_be_sent_is_rolled_back_and_the_store_goes_on(
    database: RunStore,
) -> None:
    """A held value the database's binding refuses fails its batch when it is sent (SQLite,
    PostgreSQL) with a ``StoreError`` naming it, rolled back whole; the store goes on (no
    transaction left open: it went out as a bare ``UnicodeEncodeError`` and left it open)."""
    with pytest.raises(StoreError, match="surrogate"), database.batch():
        database.save_run(run("r-lost"))
        _held_raw(database)
    assert database.get_run("r-lost") is None
    database.save_run(run("r-next"))
    assert database.get_run("r-next") == run("r-next")


def test_a_batch_that_cannot_be_sent_is_rolled_back_and_lets_go_of_the_file(
    tmp_path: Path,
) -> None:
    """A held value SQLite's binding refuses fails its batch with a ``StoreError`` naming
    it; the transaction is rolled back and the write lock let go: another connection writes
    at once, this one goes on."""
    path = tmp_path / "runs.db"
    with SQLiteStore(path) as store, SQLiteStore(path, busy_timeout=0.5) as other:
        with pytest.raises(StoreError, match="surrogate"), store.batch():
            store.save_run(run("r-lost"))
            _held_raw(store)
        other.save_run(run("r-other"))
        store.save_run(run("r-next"))
        assert store.get_run("r-lost") is None
        assert other.get_run("r-next") == run("r-next")
