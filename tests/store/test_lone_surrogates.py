"""A text UTF-8 cannot encode (a lone surrogate: a bad decode's) in one write of a batch
loses nothing else of the batch, on every store: refused at its call with a ``ValueError``
naming it (only its nested batch fails), or kept (memory: as given; SQLite: a held event's
run fields, which it encodes only when the batch is sent, with U+FFFD in its place, named
in the log: ``store.lone_surrogates``). Before session 31 such a run field failed the whole
SQLite batch at its commit with a raw ``UnicodeEncodeError``, every other run's writes lost
and the transaction left open (the file's write lock held)."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from storekit import event, run

from subagents.cluster.remote_store import ClusterStore
from subagents.messages import Event, JournalEntry, MailState
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


def test_a_batch_whose_held_value_cannot_be_sent_is_rolled_back_and_the_store_goes_on(
    store: RunStore,
) -> None:
    """A held write naming a key UTF-8 cannot encode (a mail id: refused at every entry of
    the runtime, held as it is by the store) fails its batch when it is sent (SQLite,
    PostgreSQL) with a ``StoreError`` naming it, rolled back whole; the store goes on (no
    transaction left open: it went out as a bare ``UnicodeEncodeError`` and left it open)."""
    try:
        with store.batch():
            store.save_run(run("r-lost"))
            store.set_mail_state(BAD, MailState.DELIVERED)
    except StoreError as exc:
        assert "surrogate" in str(exc), exc
        assert store.get_run("r-lost") is None
    else:
        assert isinstance(store, MemoryStore)
    store.save_run(run("r-next"))
    assert store.get_run("r-next") == run("r-next")


def test_a_batch_that_cannot_be_sent_is_rolled_back_and_lets_go_of_the_file(
    tmp_path: Path,
) -> None:
    """A held value SQLite's binding refuses (a mail id with a lone surrogate, held as it
    is) fails its batch with a ``StoreError`` naming it; the transaction is rolled back and
    the write lock let go: another connection writes at once, this one goes on."""
    path = tmp_path / "runs.db"
    with SQLiteStore(path) as store, SQLiteStore(path, busy_timeout=0.5) as other:
        with pytest.raises(StoreError, match="surrogate"), store.batch():
            store.save_run(run("r-lost"))
            store.set_mail_state(BAD, MailState.DELIVERED)
        other.save_run(run("r-other"))
        store.save_run(run("r-next"))
        assert store.get_run("r-lost") is None
        assert other.get_run("r-next") == run("r-next")
