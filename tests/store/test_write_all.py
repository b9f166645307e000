"""store.writes.write_all: a decision's writes in one batch, straight to the store a fenced
batch wraps, a run saved twice saved once, and what the store holds afterwards unchanged."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from storekit import checkpoint, event, mail, outcome, run

from subagents.messages import (
    Checkpoint,
    Event,
    JournalEntry,
    Lease,
    Mail,
    MailState,
    Outcome,
    RunRecord,
    RunStatus,
)
from subagents.store.base import AlreadyEnded, Fenced, RunStore
from subagents.store.fencing import Fence, FencedStore
from subagents.store.memory import MemoryStore
from subagents.store.sqlite import SQLiteStore
from subagents.store.writes import (
    AppendEvent,
    SaveCheckpoint,
    SaveJournal,
    SaveMails,
    SaveOutcome,
    SaveRun,
    SetMailsState,
    apply_writes,
    superseded,
    write_all,
)


def test_an_earlier_save_of_the_same_run_is_superseded_by_the_later() -> None:
    admitted = SaveRun(run("a", status=RunStatus.QUEUED))
    started = SaveRun(run("a", status=RunStatus.RUNNING))
    writes = [admitted, AppendEvent(event("a")), SaveRun(run("b")), started]
    assert superseded(writes) == {0}
    assert superseded([admitted]) == set()
    assert superseded([SaveRun(run("a")), SaveRun(run("b"))]) == set()


def test_a_live_save_is_kept_before_a_terminal_one() -> None:
    # a live save takes a run out of the archive, which the terminal save after it does not
    restarted = SaveRun(run("a", status=RunStatus.RUNNING))
    ended = SaveRun(run("a", status=RunStatus.FAILED))
    assert superseded([restarted, ended]) == set()
    assert superseded([ended, SaveRun(run("a", status=RunStatus.COMPLETED))]) == {0}
    assert superseded([ended, restarted]) == {0}


def test_write_all_leaves_what_each_write_in_turn_would(store: RunStore) -> None:
    last = run("a", status=RunStatus.RUNNING, task="started")
    writes = [
        SaveRun(run("a", status=RunStatus.QUEUED)),
        AppendEvent(event("a")),
        SaveRun(last),
        SaveRun(run("b")),
        SaveOutcome(outcome("b")),
    ]
    write_all(store, writes)
    assert store.get_run("a") == last
    assert store.get_run("b") == run("b")
    assert len(store.events("a")) == 1
    assert [o.run_id for o in store.undelivered_outcomes()] == ["b"]


def test_write_all_through_a_fenced_store_checks_the_fence(store: RunStore) -> None:
    lease = Lease(owner="h:1:a", host="h", pid=1, renewed_at=1.0, expires_at=16.0)
    fenced = FencedStore(store, Fence("h:1:a", store.acquire_lease(lease)))
    write_all(fenced, [SaveRun(run("kept")), AppendEvent(event("kept"))])
    store.release_lease("h:1:a")  # a resume took its runs over
    with pytest.raises(Fenced):
        write_all(fenced, [SaveRun(run("lost")), AppendEvent(event("lost"))])
    assert [r.run_id for r in store.list_runs()] == ["kept"]
    assert len(store.events("kept")) == 1
    assert store.events("lost") == []


def test_a_fenced_stores_write_batch_checks_the_fence_and_keeps_nothing_refused(
    store: RunStore,
) -> None:
    """``FencedStore.write_batch`` (the supervisor's writes of a decision): with a memory
    store, the batch, its fence check and its writes in one call of the store
    (``MemoryStore._apply_batch``); refused as ``write_all`` is once the lease is taken
    over, none of its writes kept, whatever the store."""
    lease = Lease(owner="h:1:a", host="h", pid=1, renewed_at=1.0, expires_at=16.0)
    fenced = FencedStore(store, Fence("h:1:a", store.acquire_lease(lease)))
    fenced.write_batch([SaveRun(run("kept")), AppendEvent(event("kept"))])
    store.release_lease("h:1:a")  # a resume took its runs over
    with pytest.raises(Fenced, match="h:1:a"):
        fenced.write_batch([SaveRun(run("lost")), AppendEvent(event("lost"))])
    with pytest.raises(Fenced, match="h:1:a"):
        fenced.write_batch([AppendEvent(event("kept", text="late"))])
    assert [r.run_id for r in store.list_runs()] == ["kept"]
    assert [e.data for e in store.events("kept")] == [{}]
    assert store.events("lost") == []


def test_a_fenced_stores_write_batch_inside_its_open_batch_is_part_of_it() -> None:
    """Inside a fenced batch of this thread (a group the supervisor holds open), the writes
    join it: checked once with it, and undone with it when it fails."""
    store = MemoryStore()
    lease = Lease(owner="h:1:a", host="h", pid=1, renewed_at=1.0, expires_at=16.0)
    fenced = FencedStore(store, Fence("h:1:a", store.acquire_lease(lease)))
    with fenced.batch():
        store.release_lease("h:1:a")  # taken over after the batch's check
        fenced.write_batch([SaveRun(run("in")), SaveRun(run("in", task="again"))])
    assert store.get_run("in") == run("in", task="again")  # (the batch was checked: kept)


class _CountedBatches(MemoryStore):
    """A memory store whose ``batch`` counts its transactions (tests/runtime/test_last_step.py
    and test_step_spawns.py number the supervisor's transactions so)."""

    def __init__(self) -> None:
        super().__init__()
        self.batches = 0

    def batch(self) -> AbstractContextManager[None]:
        self.batches += 1
        return super().batch()


def test_a_fenced_stores_write_batch_opens_a_subclasss_own_batch() -> None:
    """``write_batch``'s one call of ``MemoryStore._apply_batch`` never passes a subclass's
    ``batch``: a store that overrides it has its batch opened, as ``write_all`` opens it."""
    store = _CountedBatches()
    lease = Lease(owner="h:1:a", host="h", pid=1, renewed_at=1.0, expires_at=16.0)
    fenced = FencedStore(store, Fence("h:1:a", store.acquire_lease(lease)))
    fenced.write_batch([SaveRun(run("a")), AppendEvent(event("a"))])
    assert store.batches == 1
    assert store.get_run("a") == run("a")


def test_an_archived_run_saved_live_and_ended_in_one_batch_is_refused_and_stays_archived(
    db_path: Path,
) -> None:
    """An ended run is never saved live again (an end is not undone: ``AlreadyEnded``), so
    no batch takes an archived run out of the archive: both saves refused with the batch."""
    store = SQLiteStore(db_path)
    store.save_run(run("a", status=RunStatus.COMPLETED, created_at=1.0, ended_at=2.0))
    store.sweep(now=1e9, archive_after_minutes=1)
    assert store.list_runs() == []  # archived
    restarted = run("a", status=RunStatus.RUNNING, created_at=1.0)
    ended = run("a", status=RunStatus.FAILED, created_at=1.0, ended_at=3.0)
    with pytest.raises(AlreadyEnded):
        write_all(store, [SaveRun(restarted), SaveRun(ended)])
    assert store.list_runs() == []  # still archived
    kept = store.get_run("a")
    assert kept is not None and (kept.status, kept.ended_at) == (RunStatus.COMPLETED, 2.0)
    store.close()


def test_a_memory_batch_taken_in_one_call_leaves_what_each_write_in_turn_would() -> None:
    """``MemoryStore._apply_batch``: the kinds every run writes kept directly, the others
    through their methods, in order: what one write at a time leaves, a superseded save
    skipped (a run saved twice is saved twice there: the last save stays)."""
    last = run("a", status=RunStatus.RUNNING, task="started")
    writes = [
        SaveRun(run("a", status=RunStatus.QUEUED)),
        AppendEvent(event("a")),
        SaveMails((mail("m1", "a", "b"),)),
        SaveRun(last),
        SaveCheckpoint(checkpoint("a", 1)),
        SetMailsState(("m1",), MailState.READ),
        SaveOutcome(outcome("b"), delivered=True),
        SaveOutcome(outcome("c")),
        AppendEvent(event("a", text="second")),
    ]
    batched, each = MemoryStore(), MemoryStore()
    write_all(FencedStore(batched), writes)  # (unfenced: the path every runtime's batch takes)
    for i, write in enumerate(writes):
        if i not in superseded(writes):
            apply_writes(each, (write,))
    for store in (batched, each):
        assert store.get_run("a") == last
        assert [e.data for e in store.events("a")] == [{}, {"text": "second"}]
        assert [m.state for m in store.mail_for("a")] == [MailState.READ]
        assert store.load_checkpoint("a") == checkpoint("a", 1)
        assert [o.run_id for o in store.undelivered_outcomes()] == ["c"]
    assert batched.events_after(0) == each.events_after(0)


class _CheckpointFails(MemoryStore):
    """A memory store whose checkpoint write raises: a kind ``_apply_batch`` keeps through
    its method, so a run's records are still kept directly (``_direct``)."""

    def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        raise RuntimeError("the checkpoint broke")


def test_a_run_saved_twice_in_a_failed_memory_batch_is_put_back_as_it_was() -> None:
    """The memory store keeps each of a batch's saves of a run (no superseded save left out:
    the last one stays); a batch that fails after them puts the run back as it was before
    the batch, and a run it saved anew is gone."""
    store = _CheckpointFails()
    assert store._direct
    before = run("a", status=RunStatus.QUEUED)
    store.save_run(before)
    writes = [
        SaveRun(run("a", status=RunStatus.RUNNING)),
        SaveRun(run("new")),
        SaveRun(run("a", status=RunStatus.COMPLETED, ended_at=2.0)),
        SaveRun(run("new", task="again")),
        SaveCheckpoint(checkpoint("a", 1)),
    ]
    with pytest.raises(RuntimeError, match="the checkpoint broke"):
        write_all(FencedStore(store), writes)
    assert store.get_run("a") == before
    assert store.get_run("new") is None
    write_all(FencedStore(store), writes[:4])  # and without the failing write: the last saves
    assert store.get_run("a") == run("a", status=RunStatus.COMPLETED, ended_at=2.0)
    assert store.get_run("new") == run("new", task="again")


class _SecondEventFails(MemoryStore):
    """A memory store whose second event write raises (a store that fails mid-batch), and
    that notes every run and outcome it saves: its own methods, as a subclass's are."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def save_run(self, record: RunRecord) -> None:
        self.calls.append(f"run {record.run_id}")
        super().save_run(record)

    def append_event(self, event: Event) -> None:
        self.calls.append(f"event {event.run_id}")
        if self.calls.count(f"event {event.run_id}") == 2:
            raise RuntimeError("the second event broke")
        super().append_event(event)

    def save_outcome(self, outcome: Outcome, delivered: bool = False) -> None:
        self.calls.append(f"outcome {outcome.run_id}")
        super().save_outcome(outcome, delivered)


def test_a_memory_store_subclass_has_its_own_writes_called_and_fails_where_it_fails() -> None:
    """``MemoryStore._apply_batch`` keeps records, events and outcomes itself, but never
    past a subclass's override of them (tests/runtime/test_last_step.py's store notes its
    outcomes): the batch goes through its methods, stopping at the write that raised, and
    keeps none of the writes before it (all or nothing, as SQLite's batch: before, it kept
    them, the stores disagreeing)."""
    store = _SecondEventFails()
    writes = [
        SaveOutcome(outcome("a")),
        SaveRun(run("a")),
        AppendEvent(event("a")),
        AppendEvent(event("a", text="second")),
        SaveRun(run("b")),
    ]
    with pytest.raises(RuntimeError, match="the second event broke"):
        write_all(FencedStore(store), writes)
    assert store.calls == ["outcome a", "run a", "event a", "event a"]
    assert store.undelivered_outcomes() == []  # undone
    assert store.get_run("a") is None
    assert store.events("a") == [] and store.last_event_seq() == 0
    assert store.get_run("b") is None  # nothing after the write that failed


class _NotesMail(MemoryStore):
    """A memory store that notes every mail, mail state and journal write it makes: its
    own methods, as a subclass's are (tests/runtime/test_records_fail_alone.py's fails one
    journal, test_supervisor_survives.py's one mail)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def save_mails(self, mails: Sequence[Mail]) -> None:
        self.calls.append("mails")
        super().save_mails(mails)

    def set_mails_state(self, mail_ids: Sequence[str], state: MailState) -> None:
        self.calls.append(f"state {state.value}")
        super().set_mails_state(mail_ids, state)

    def save_journal(self, run_id: str, entries: Sequence[JournalEntry]) -> None:
        self.calls.append(f"journal {run_id}")
        super().save_journal(run_id, entries)


def test_a_memory_store_subclass_has_its_own_mail_and_journal_writes_called() -> None:
    """``MemoryStore._apply_batch`` keeps mail, its states and journals itself (a
    ping-pong's every mail: no method call, no hold of the lock again), never past a
    subclass's override of them; and what it keeps is what each method would."""
    entry = JournalEntry(request_id="b:1", kind="receive", observed=True)
    writes = [
        SaveMails((mail("m1", "a", "b"),)),
        SaveJournal("b", (entry,)),
        SetMailsState(("m1",), MailState.READ),
        SaveJournal("b", (entry,)),
    ]
    noted, direct = _NotesMail(), MemoryStore()
    for store in (noted, direct):
        write_all(FencedStore(store), writes)
        assert [m.state for m in store.mail_for("a")] == [MailState.READ]
        assert store.mail_for("b") == store.mail_for("a")
        assert store.journal_of("b") == [entry, entry]
    assert noted.calls == ["mails", "journal b", "state read", "journal b"]


def test_a_journal_write_marks_the_mail_its_entries_read_on_every_store(store: RunStore) -> None:
    """``SaveJournal.read_mail`` (schema v11: a sender's record carries its receipts so) is
    kept with the entries by every store's batch: ``MemoryStore._apply_batch``'s way (which
    keeps a journal itself) as ``write_all``'s (``_save_journal``)."""
    seen = JournalEntry(request_id="a:1", kind="receive", observed=True, result="m1")
    store.save_mails([mail("m1", "b", "a", state=MailState.DELIVERED)])
    write_all(FencedStore(store), [SaveJournal("a", (seen,), ("m1",))])
    assert store.journal_of("a") == [seen]
    assert [m.state for m in store.mail_for("a")] == [MailState.READ]


def test_a_memory_batch_that_fails_puts_back_the_mail_a_journal_marked_read() -> None:
    """All or nothing, as a batch of SQLite's: a journal's receipts are undone with it."""
    seen = JournalEntry(request_id="a:1", kind="receive", observed=True, result="m1")
    store = _SecondEventFails()
    store.save_mails([mail("m1", "b", "a", state=MailState.DELIVERED)])
    writes = [
        AppendEvent(event("a")),
        SaveJournal("a", (seen,), ("m1",)),
        AppendEvent(event("a", text="second")),
    ]
    with pytest.raises(RuntimeError, match="the second event broke"):
        write_all(FencedStore(store), writes)
    assert store.journal_of("a") == []
    assert [m.state for m in store.mail_for("a")] == [MailState.DELIVERED]
