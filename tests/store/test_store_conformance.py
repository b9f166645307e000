"""The RunStore protocol, every method, against MemoryStore and SQLiteStore alike.

Both stores must behave identically: the runtime is written against the protocol and may be
handed either.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from storekit import checkpoint, event, mail, outcome, run

from subagents.messages import (
    CheckpointDelta,
    EventKind,
    JournalEntry,
    Lease,
    MailState,
    Outcome,
    Preview,
    RunStatus,
    Subscription,
    ToolResultBlock,
)
from subagents.store.base import Fenced, RunStore
from subagents.store.fencing import AttemptOver, Fence, FencedStore
from subagents.store.memory import MemoryStore
from subagents.store.writes import (
    AppendEvent,
    AttemptFence,
    PostCommand,
    SaveCheckpoint,
    SaveJournal,
    SaveMails,
    SaveOutcome,
    SavePreview,
    SaveRun,
    SaveSubscription,
    SetMailsState,
    write_all,
)


def test_save_and_get_run_round_trips_every_field(store: RunStore) -> None:
    record = run(
        "r1",
        parent_run_id="p",
        root_run_id="root",
        depth=2,
        context="ctx",
        label="lbl",
        model="haiku",
        status=RunStatus.RUNNING,
        background=True,
        created_at=10.25,
        started_at=11.5,
        deadline_s=42.0,
        outcome=outcome("r1"),
        steps=3,
        restarts=1,
        cleanup="delete",
    )
    store.save_run(record)
    assert store.get_run("r1") == record
    assert store.get_run("missing") is None


def test_save_run_again_replaces_the_record(store: RunStore) -> None:
    store.save_run(run("r1", created_at=1.0))
    done = run("r1", created_at=1.0, status=RunStatus.COMPLETED, ended_at=5.0, steps=4)
    store.save_run(done)
    assert store.get_run("r1") == done
    assert store.list_runs() == [done]


def test_list_runs_orders_by_creation_then_id_and_filters(store: RunStore) -> None:
    a = run("a", created_at=3.0, agent="planner", root_run_id="a")
    b = run("b", created_at=1.0, agent="worker", root_run_id="a", status=RunStatus.RUNNING)
    c = run("c", created_at=1.0, agent="worker", root_run_id="c", status=RunStatus.COMPLETED)
    d = run("d", created_at=2.0, agent="worker", root_run_id="a", status=RunStatus.COMPLETED)
    for r in (a, b, c, d):
        store.save_run(r)
    assert store.list_runs() == [b, c, d, a]
    assert store.list_runs(statuses=[RunStatus.COMPLETED]) == [c, d]
    assert store.list_runs(statuses=[RunStatus.QUEUED, RunStatus.RUNNING]) == [b, a]
    assert store.list_runs(statuses=[]) == []
    assert store.list_runs(root_run_id="a") == [b, d, a]
    assert store.list_runs(agent="worker") == [b, c, d]
    assert store.list_runs(agent="worker", root_run_id="a", statuses=["completed"]) == [d]  # type: ignore[list-item]
    assert store.list_runs(limit=2) == [b, c]
    assert store.list_runs(limit=0) == []
    assert store.list_runs(agent="nobody") == []


def test_events_are_kept_in_append_order_per_run(store: RunStore) -> None:
    e1 = event("r1", EventKind.SPAWNED)
    e2 = event("r2", EventKind.STARTED)
    e3 = event("r1", EventKind.STEP, step=1, tokens={"in": 3, "out": [1, 2]}, note="é ✓")
    e4 = event("r1", EventKind.COMPLETED)
    for e in (e1, e2, e3, e4):
        store.append_event(e)
    assert store.events("r1") == [e1, e3, e4]
    assert store.events("r2") == [e2]
    assert store.events("nothing") == []


def test_every_runs_events_are_read_in_one_order_after_a_number(store: RunStore) -> None:
    assert store.last_event_seq() == 0 and store.events_after(0) == []
    appended = [event(f"r{i % 3}", EventKind.STEP, step=i) for i in range(7)]
    for e in appended:
        store.append_event(e)
    everything = store.events_after(0)
    assert [s.event for s in everything] == appended
    seqs = [s.seq for s in everything]
    assert seqs == sorted(set(seqs)) and store.last_event_seq() == seqs[-1]
    assert [s.event for s in store.events_after(seqs[2], limit=3)] == appended[3:6]
    assert store.events_after(seqs[-1]) == [] and store.events_after(0, limit=0) == []
    later = event("r9", EventKind.COMPLETED)
    store.append_event(later)
    assert [s.event for s in store.events_after(seqs[-1])] == [later]


def test_checkpoint_keeps_the_latest_per_run(store: RunStore) -> None:
    assert store.load_checkpoint("r1") is None
    first = checkpoint("r1", 1, "first")
    store.save_checkpoint(first)
    assert store.load_checkpoint("r1") == first
    second = checkpoint("r1", 2, "second")
    store.save_checkpoint(second)
    store.save_checkpoint(checkpoint("r2", 7))
    assert store.load_checkpoint("r1") == second
    assert store.load_checkpoint("r2") == checkpoint("r2", 7)


def test_checkpoint_deltas_apply_in_order_until_the_next_checkpoint(store: RunStore) -> None:
    base = checkpoint("r1", 3)
    store.add_to_checkpoint(CheckpointDelta(run_id="r1", step=3, started="lost"))
    assert store.load_checkpoint("r1") is None  # a delta without its checkpoint is nothing
    store.save_checkpoint(base)
    answer = ToolResultBlock(tool_use_id="tu2", content="ok é ✓", is_error=True)
    for delta in (
        CheckpointDelta(run_id="r1", step=3, started="tu2"),
        CheckpointDelta(run_id="r1", step=3, started="tu3"),
        CheckpointDelta(run_id="r1", step=3, answered=answer),
        CheckpointDelta(run_id="r1", step=3, ended="tu3"),  # raised: no longer "started"
        CheckpointDelta(run_id="r1", step=2, started="stale"),  # of an older step: ignored
        CheckpointDelta(run_id="r2", step=3, started="other"),  # of another run
    ):
        store.add_to_checkpoint(delta)
    loaded = store.load_checkpoint("r1")
    assert loaded == msgspec.structs.replace(
        base, answered=(*base.answered, answer), started=("tu2",)
    )
    # the next step's checkpoint holds what it needs: the deltas before it are gone
    following = checkpoint("r1", 4)
    store.save_checkpoint(following)
    assert store.load_checkpoint("r1") == following
    store.add_to_checkpoint(CheckpointDelta(run_id="r1", step=4, started="tu9"))
    assert store.load_checkpoint("r1") == msgspec.structs.replace(following, started=("tu9",))


def test_mail_for_sender_and_recipient_in_order_and_by_state(store: RunStore) -> None:
    m1 = mail("m1", "a", "b", sent_at=1.0)
    m2 = mail("m2", "b", "a", sent_at=2.0, reply_to="m1", sender_agent="worker")
    m3 = mail("m3", "external", "b", sent_at=3.0, state=MailState.DELIVERED)
    m4 = mail("m4", "c", "c", sent_at=4.0)
    for m in (m1, m2, m3, m4):
        store.save_mail(m)
    assert store.mail_for("b") == [m1, m2, m3]
    assert store.mail_for("a") == [m1, m2]
    assert store.mail_for("c") == [m4]
    assert store.mail_for("b", [MailState.DELIVERED]) == [m3]
    assert store.mail_for("b", [MailState.ACCEPTED, MailState.DELIVERED]) == [m1, m2, m3]
    assert store.mail_for("b", []) == []
    assert store.mail_for("zzz") == []


def test_save_mails_and_set_mails_state_are_the_single_calls_in_order(store: RunStore) -> None:
    mails = [mail(f"m{i}", "a", "b", sent_at=float(i)) for i in range(4)]
    mails.append(mail("m4", "c", "c", sent_at=4.0))  # to itself: listed once
    with store.batch():  # inside a batch (SQLite: held until its commit)
        store.save_mails(mails[:3])
        store.save_mails([])
    store.save_mails(mails[3:])  # outside one: written at once
    assert store.mail_for("b") == mails[:4]
    assert store.mail_for("c") == [mails[4]]
    with store.batch():
        store.set_mails_state(["m2", "unknown", "m0"], MailState.READ)
    store.set_mails_state(["m4"], MailState.DEAD)
    store.set_mails_state([], MailState.DEAD)
    assert [(m.mail_id, m.state) for m in store.mail_for("b")] == [
        ("m0", MailState.READ),
        ("m1", MailState.ACCEPTED),
        ("m2", MailState.READ),
        ("m3", MailState.ACCEPTED),
    ]
    assert store.mail_for("c") == [msgspec.structs.replace(mails[4], state=MailState.DEAD)]
    # saving again keeps the first (a mail id is kept once)
    store.save_mails([msgspec.structs.replace(mails[1], content="new")])
    assert [m.content for m in store.mail_for("b")] == ["hi m0", "hi m1", "hi m2", "hi m3"]


def test_set_mail_state_changes_state_and_keeps_order(store: RunStore) -> None:
    store.save_mail(mail("m1", "a", "b"))
    store.save_mail(mail("m2", "a", "b"))
    store.set_mail_state("m1", MailState.READ)
    store.set_mail_state("unknown", MailState.READ)  # no such mail: nothing happens
    got = store.mail_for("b")
    assert [m.mail_id for m in got] == ["m1", "m2"]
    assert [m.state for m in got] == [MailState.READ, MailState.ACCEPTED]
    assert got[0] == msgspec.structs.replace(mail("m1", "a", "b"), state=MailState.READ)
    assert store.mail_for("b", [MailState.ACCEPTED]) == [mail("m2", "a", "b")]
    # saving the mail again leaves the one kept as it is (its state included)
    store.save_mail(mail("m1", "a", "b", state=MailState.DEAD))
    assert [(m.mail_id, m.state) for m in store.mail_for("b")] == [
        ("m1", MailState.READ),
        ("m2", MailState.ACCEPTED),
    ]


def test_a_mail_recorded_twice_is_kept_once_as_first_recorded(store: RunStore) -> None:
    """A node's sender's record whose answer was lost, then the supervisor's record of the
    same mail (``SendMail.mail_id``), in either order and in or out of a batch: one mail,
    and a state it reached meanwhile (read) is not undone by the late record."""
    sent = mail("m1", "a", "b", state=MailState.DELIVERED)
    store.save_mails([sent])
    store.set_mails_state(["m1"], MailState.READ)  # the recipient read it
    with store.batch():
        store.save_mails([msgspec.structs.replace(sent, sent_at=9.0)])  # the late record
    store.save_mail(sent)
    assert store.mail_for("b") == [msgspec.structs.replace(sent, state=MailState.READ)]
    assert store.mail_for("a") == store.mail_for("b")
    assert store.mail_for("b", [MailState.DELIVERED]) == []  # never handed over again


def test_journals_are_kept_per_run_in_the_order_written(store: RunStore) -> None:
    first = (
        JournalEntry(request_id="r1:0", kind="spawn", call="spawn('w', 't')", digest=7),
        JournalEntry(request_id="r1:1", kind="receive", observed=True, result="m1"),
    )
    store.save_journal("r1", first)
    store.save_journal("r2", (JournalEntry(request_id="r2:0", kind="sleep", result=12.5),))
    with store.batch():
        store.save_journal(
            "r1", (JournalEntry(request_id="r1:2", kind="mailbox", observed=True, result=["a"]),)
        )
        store.save_journal("r1", ())
    assert store.journal_of("r1") == [
        *first,
        JournalEntry(request_id="r1:2", kind="mailbox", observed=True, result=["a"]),
    ]
    assert store.journal_of("r2") == [JournalEntry(request_id="r2:0", kind="sleep", result=12.5)]
    assert store.journal_of("nobody") == []
    store.save_outcome(Outcome(run_id="r2", status=RunStatus.COMPLETED))
    if isinstance(store, MemoryStore):  # nothing replays a finished run: memory is freed
        assert store.journal_of("r2") == []
    else:  # kept until the sweeper cleans the run
        assert len(store.journal_of("r2")) == 1


def test_a_typed_outcome_keeps_its_value(store: RunStore) -> None:
    typed = Outcome(
        run_id="r1", status=RunStatus.COMPLETED, result='{"n":[1,2.5,null,true]}', typed=True
    )
    store.save_outcome(typed)
    store.save_run(run("r1", status=RunStatus.COMPLETED, outcome=typed))
    (kept,) = store.undelivered_outcomes()
    assert kept == typed and kept.value == {"n": [1, 2.5, None, True]}
    record = store.get_run("r1")
    assert record is not None and record.outcome is not None
    assert record.outcome.value == {"n": [1, 2.5, None, True]}


def test_outcomes_until_delivered(store: RunStore) -> None:
    o1 = outcome("r1")
    o2 = outcome("r2", RunStatus.FAILED, error_kind="crash", error="boom", steps=2)
    store.save_outcome(o1)
    store.save_outcome(o2)
    assert store.undelivered_outcomes() == [o1, o2]
    store.mark_outcome_delivered("r1")
    store.mark_outcome_delivered("never-saved")
    assert store.undelivered_outcomes() == [o2]
    # saving an outcome again makes it undelivered again, in its first place
    o1b = outcome("r1", RunStatus.CANCELLED)
    store.save_outcome(o1b)
    assert store.undelivered_outcomes() == [o1b, o2]
    store.mark_outcome_delivered("r1")
    store.mark_outcome_delivered("r2")
    assert store.undelivered_outcomes() == []


def test_an_outcome_saved_delivered_is_not_handed_again(store: RunStore) -> None:
    """``save_outcome(..., delivered=True)``: the one write of an outcome handed to its
    requester in the transaction that keeps it (``Lifecycle.finish``); saved again
    undelivered, it is handed again."""
    o1, o2 = outcome("r1"), outcome("r2")
    with store.batch():
        store.save_outcome(o1, delivered=True)
        store.save_outcome(o2)
    assert store.undelivered_outcomes() == [o2]
    o1b = outcome("r1", RunStatus.CANCELLED)
    store.save_outcome(o1b)
    assert store.undelivered_outcomes() == [o1b, o2]
    store.save_outcome(o1b, delivered=True)
    assert store.undelivered_outcomes() == [o2]


def test_commands_are_taken_once_in_order(store: RunStore) -> None:
    assert store.take_commands() == []
    first = store.post_command("stop", "r1")
    second = store.post_command("send", "r2", "please hurry")
    assert second > first
    taken = store.take_commands()
    assert [(c.command_id, c.kind, c.run_id, c.content) for c in taken] == [
        (first, "stop", "r1", None),
        (second, "send", "r2", "please hurry"),
    ]
    assert all(c.ts > 0 for c in taken)
    assert store.take_commands() == []
    third = store.post_command("stop", "r3")
    assert third > second
    assert [c.command_id for c in store.take_commands()] == [third]


def test_unknown_command_kind_is_refused_by_name(store: RunStore) -> None:
    with pytest.raises(ValueError, match="'pause'"):
        store.post_command("pause", "r1")
    assert store.take_commands() == []


def test_batch_commits_every_write_inside_it(store: RunStore) -> None:
    with store.batch():
        store.save_run(run("r1"))
        store.append_event(event("r1"))
        with store.batch():  # nested batches join the outer one
            store.save_checkpoint(checkpoint("r1", 1))
            store.save_mail(mail("m1", "r1", "r2"))
        store.save_outcome(outcome("r1"))
        # reads inside the batch see its writes
        assert store.get_run("r1") == run("r1")
    assert store.get_run("r1") == run("r1")
    assert store.events("r1") == [event("r1")]
    assert store.load_checkpoint("r1") == checkpoint("r1", 1)
    assert store.mail_for("r2") == [mail("m1", "r1", "r2")]
    assert store.undelivered_outcomes() == [outcome("r1")]


def test_close_is_idempotent(store: RunStore) -> None:
    store.save_run(run("r1"))
    store.close()
    store.close()


def test_take_commands_for_some_runs_leaves_the_others_pending(store: RunStore) -> None:
    a1 = store.post_command("stop", "a")
    b1 = store.post_command("send", "b", "for b")
    a2 = store.post_command("send", "a", "again")
    assert [c.command_id for c in store.take_commands(["a", "nobody"])] == [a1, a2]
    assert store.take_commands(["a"]) == []
    assert store.take_commands(set()) == []
    assert [(c.command_id, c.content) for c in store.take_commands()] == [(b1, "for b")]


def test_the_runs_with_commands_pending_are_read_without_claiming_them(store: RunStore) -> None:
    """What a taker asks first (``pending_command_runs``): each run once, in the order of its
    oldest pending command; reading claims nothing."""
    assert store.pending_command_runs() == []
    store.post_command("stop", "b")
    store.post_command("send", "a", "for a")
    store.post_command("send", "b", "again")
    assert store.pending_command_runs() == ["b", "a"]
    assert store.pending_command_runs() == ["b", "a"]  # (nothing claimed)
    assert [c.run_id for c in store.take_commands(["b"])] == ["b", "b"]
    assert store.pending_command_runs() == ["a"]
    store.take_commands()
    assert store.pending_command_runs() == []


def test_leases_are_written_renewed_listed_and_released(store: RunStore) -> None:
    first = Lease(owner="h:1:a", host="h", pid=1, renewed_at=1.0, expires_at=16.0)
    other = Lease(owner="h:2:b", host="h", pid=2, machine="m", renewed_at=2.0, expires_at=17.0)
    assert store.leases() == []
    first = msgspec.structs.replace(first, epoch=store.acquire_lease(first))
    other = msgspec.structs.replace(other, epoch=store.acquire_lease(other))
    assert first.epoch != other.epoch
    assert sorted(store.leases(), key=lambda x: x.owner) == [first, other]
    renewed = msgspec.structs.replace(first, renewed_at=6.0, expires_at=21.0)
    assert store.renew_lease(renewed) is True
    store.release_lease("h:2:b")
    assert store.leases() == [renewed]
    # a lease released by someone else cannot be renewed: its holder learns it lost it
    assert store.renew_lease(other) is False
    assert store.leases() == [renewed]
    again = store.acquire_lease(other)  # taken again explicitly: a new epoch
    assert again not in (first.epoch, other.epoch)
    assert len(store.leases()) == 2
    assert store.renew_lease(other) is False  # the old taking's renewal is refused
    store.release_lease(other.owner, other.epoch)  # nor does it release the new one
    assert len(store.leases()) == 2


def test_a_fence_holds_while_its_lease_is_held_at_its_epoch(store: RunStore) -> None:
    lease = Lease(owner="h:1:a", host="h", pid=1, renewed_at=1.0, expires_at=16.0)
    epoch = store.acquire_lease(lease)
    with store.batch():
        store.check_fence("h:1:a", epoch)
    with (
        pytest.raises(Fenced, match=r"the lease of h:1:a \(epoch 0\) is no longer held"),
        store.batch(),
    ):
        store.check_fence("h:1:a", 0)
    store.release_lease("h:1:a")  # its runs taken over
    with pytest.raises(Fenced, match="it is gone"), store.batch():
        store.check_fence("h:1:a", epoch)
    later = store.acquire_lease(lease)  # the same owner again (a restarted detached host)
    assert later > epoch  # an epoch is never given twice
    with pytest.raises(Fenced, match=f"taken again, epoch {later}"), store.batch():
        store.check_fence("h:1:a", epoch)


def test_a_fenced_store_writes_nothing_once_its_lease_is_taken(store: RunStore) -> None:
    lease = Lease(owner="h:1:a", host="h", pid=1, renewed_at=1.0, expires_at=16.0)
    fenced = FencedStore(store, Fence("h:1:a", store.acquire_lease(lease)))
    with fenced.batch():
        fenced.save_run(run("kept"))
        with fenced.batch():  # nested: checked once, with the outer batch
            fenced.append_event(event("kept"))
    fenced.save_outcome(outcome("kept"))  # outside a batch: a fenced batch of its own
    sent = JournalEntry(request_id="kept:0", kind="send")
    # a sender's own, with its journal told before it (SQLite: one commit)
    fenced.record_mails([mail("m1", "kept", "other")], SaveJournal("kept", (sent,)))
    store.release_lease("h:1:a")  # a resume took its runs over
    with pytest.raises(Fenced), fenced.batch():
        fenced.save_run(run("kept", status=RunStatus.RUNNING, task="again"))
        fenced.save_run(run("lost"))
    with pytest.raises(Fenced):
        fenced.save_outcome(outcome("kept", status=RunStatus.FAILED))
    with pytest.raises(Fenced):
        fenced.take_commands()
    with pytest.raises(Fenced):
        fenced.save_mails([mail("m2", "kept", "other")])
    later = JournalEntry(request_id="kept:1", kind="send")
    with pytest.raises(Fenced):
        fenced.record_mails([mail("m3", "kept", "other")], SaveJournal("kept", (later,)))
    assert [m.mail_id for m in store.mail_for("kept")] == ["m1"]
    assert store.journal_of("kept") == [sent]
    assert [r.run_id for r in store.list_runs()] == ["kept"]
    assert store.get_run("kept") == run("kept")
    assert [o.status for o in store.undelivered_outcomes()] == [RunStatus.COMPLETED]
    assert len(store.events("kept")) == 1


def test_a_senders_record_is_refused_once_its_start_is_over(store: RunStore) -> None:
    """The attempt fence (``AttemptFence``) is the fenced store's, whatever the store: a
    record commits while the run keeps the counts its start had, and is refused, nothing of
    it kept, once the run was retried (or restarted) or has ended."""
    lease = Lease(owner="h:1:a", host="h", pid=1, renewed_at=1.0, expires_at=16.0)
    fenced = FencedStore(store, Fence("h:1:a", store.acquire_lease(lease)))
    fenced.save_run(run("s", status=RunStatus.RUNNING))
    first = AttemptFence.of(run("s"))
    fenced.record_mails([mail("m1", "s", "o")], None, first)
    fenced.save_run(run("s", status=RunStatus.RUNNING, retries=1))  # a retry, committed
    with pytest.raises(AttemptOver, match=r"retries 0 -> 1"):
        fenced.record_mails([mail("m2", "s", "o")], None, first)
    second = AttemptFence("s", retries=1)
    fenced.record_mails([mail("m3", "s", "o")], None, second)
    fenced.save_run(run("s", status=RunStatus.TIMED_OUT, retries=1))
    with pytest.raises(AttemptOver, match=r"ended \(timed_out\)"):
        fenced.record_mails([mail("m4", "s", "o")], None, second)
    with pytest.raises(AttemptOver, match="not in the store"):
        fenced.record_mails([mail("m5", "t", "o")], None, AttemptFence("t"))
    assert [m.mail_id for m in store.mail_for("o")] == ["m1", "m3"]


def test_a_senders_carried_journal_is_read_in_the_order_committed(store: RunStore) -> None:
    """The journal entries a sender's record carries (``UnsavedJournal``) are read back in
    their place among the run's other journal rows, whatever the store keeps them in (SQLite:
    a one-mail record's in its mail row, ``store.sqlite_record``): a replay groups entries
    by call, its first the call (``FunctionBehaviour.call``), so a result read before its
    call would fail the run."""
    lease = Lease(owner="h:1:a", host="h", pid=1, renewed_at=1.0, expires_at=16.0)
    fenced = FencedStore(store, Fence("h:1:a", store.acquire_lease(lease)))
    fenced.save_run(run("s", status=RunStatus.RUNNING))
    start = AttemptFence.of(run("s"))
    spawn = JournalEntry(request_id="s:0", kind="spawn", digest=7)
    send = JournalEntry(request_id="s:1", kind="send")
    wait = JournalEntry(request_id="s:2", kind="receive")
    got = JournalEntry(request_id="s:2", kind="receive", observed=True, result="m9")
    done = JournalEntry(request_id="s:0", observed=True, result="ok")
    again = JournalEntry(request_id="s:3", kind="send")
    both = JournalEntry(request_id="s:4", kind="send")
    fenced.save_journal("s", (spawn,))  # by the supervisor
    fenced.record_mails([mail("m1", "s", "o")], SaveJournal("s", (send, wait)), start)
    fenced.save_journal("s", (got,))
    fenced.record_mails([mail("m2", "s", "o")], SaveJournal("s", (done,)), start)
    fenced.record_mails([mail("m3", "s", "o")], SaveJournal("s", (again,)), start)
    fenced.save_journal("t", (JournalEntry(request_id="t:0", kind="send"),))  # another run's
    two = [mail("m4", "s", "o"), mail("m5", "s", "p")]  # several mails: one record
    fenced.record_mails(two, SaveJournal("s", (both,)), start)
    assert store.journal_of("s") == [spawn, send, wait, got, done, again, both]
    assert [m.mail_id for m in store.mail_for("s")] == ["m1", "m2", "m3", "m4", "m5"]
    assert store.journal_of("o") == []  # a recipient's journal has none of its sender's


def test_subscriptions_are_kept_in_order_once_and_dropped(store: RunStore) -> None:
    def sub(run_id: str, topic: str) -> Subscription:
        return Subscription(run_id=run_id, root_run_id="root", topic=topic)

    for s in (sub("b", "news"), sub("a", "news"), sub("a", "alerts"), sub("b", "news")):
        store.save_subscription(s)  # (the second of b's: already kept, nothing changes)
    assert store.subscriptions() == [sub("b", "news"), sub("a", "news"), sub("a", "alerts")]
    assert store.subscriptions(["a"]) == [sub("a", "news"), sub("a", "alerts")]
    assert store.subscriptions([]) == []
    store.drop_subscriptions("a", ["news"])
    assert store.subscriptions() == [sub("b", "news"), sub("a", "alerts")]
    with store.batch():  # written with the decision that makes them, in one transaction
        store.save_subscription(sub("c", "news"))
        store.drop_subscriptions("b")
    assert store.subscriptions() == [sub("a", "alerts"), sub("c", "news")]


def test_previews_are_kept_one_per_run_replaced_and_dropped(store: RunStore) -> None:
    first = Preview(run_id="r1", turn=1, text="Hello", chars=5, seq=1, ts=1.0)
    later = Preview(run_id="r1", turn=1, text="Hello, world\n[tool Read] {", chars=25, seq=2,
                    tool="Read", ts=2.0)  # fmt: skip
    other = Preview(run_id="r2", turn=3, text="", chars=0, seq=4, voided=1, ts=3.0)
    with store.batch():
        store.save_preview(first)
        store.save_preview(later)  # replaces the first, in one transaction
    store.save_preview(other)
    assert store.previews(["r1", "r2", "missing"]) == {"r1": later, "r2": other}
    assert store.previews([]) == {}
    store.drop_preview("r1")
    store.drop_preview("missing")  # nothing to drop: no error
    assert store.previews(["r1", "r2"]) == {"r2": other}


def test_a_batch_of_writes_that_raises_halfway_keeps_none_of_them(store: RunStore) -> None:
    """A decision's writes (``write_all``) are all or nothing in every store: one that raises
    (here a command of an unknown kind, refused by every store) leaves none of those before
    it, as SQLite and PostgreSQL roll the batch back. Before, a MemoryStore kept them: the
    run's record completed, its events, mail, journal and outcome, though the batch failed."""
    before = run("r1", status=RunStatus.RUNNING)
    write_all(store, [SaveRun(before), SaveJournal("r1", (JournalEntry(request_id="q0"),))])
    done = run("r1", status=RunStatus.COMPLETED, ended_at=5.0)
    halfway = [
        SaveRun(done),
        AppendEvent(event("r1")),
        SaveMails((mail("m1", "r1", "r2"),)),
        SaveJournal("r1", (JournalEntry(request_id="q1"),)),
        SaveJournal("r2", (JournalEntry(request_id="q2"),)),  # (a run with none before)
        SaveCheckpoint(checkpoint("r1", 1)),
        SavePreview(Preview(run_id="r1", turn=1, text="so far", chars=6, ts=1.0)),
        SaveSubscription(Subscription(run_id="r1", topic="news", root_run_id="r1")),
        PostCommand("stop", "r1"),
        SaveOutcome(outcome("r1")),  # (drops the run's journal in a MemoryStore)
        PostCommand("pause", "r1"),  # refused: the batch fails here
    ]
    with pytest.raises(ValueError, match="'pause'"):
        write_all(store, halfway)
    assert store.get_run("r1") == before
    assert store.events("r1") == []
    assert store.mail_for("r1") == store.mail_for("r2") == []
    assert [e.request_id for e in store.journal_of("r1")] == ["q0"]
    assert store.journal_of("r2") == []
    assert store.load_checkpoint("r1") is None
    assert store.previews(["r1"]) == {}
    assert store.subscriptions() == []
    assert store.take_commands() == []
    assert store.undelivered_outcomes() == []
    assert store.last_event_seq() == 0
    write_all(store, halfway[:-1])  # the store goes on taking writes
    assert store.get_run("r1") == done
    assert store.events("r1") == [event("r1")]


@pytest.mark.parametrize("breaks", ["a refused command", "a malformed event", "a malformed mail"])
def test_a_batch_that_raises_puts_back_what_its_writes_replaced(
    store: RunStore, breaks: str
) -> None:
    """All or nothing over what the store held before the batch: a record saved again
    (twice in the batch: a live save, then a terminal one), events appended to a run that
    had some, an outcome saved again over one undelivered, are put back as they were; and
    a batch may break at a record, event or outcome as well as at another kind of write."""
    before = run("r1", status=RunStatus.RUNNING)
    first = outcome("r1", RunStatus.FAILED, error="first")
    sent = mail("m0", "r2", "r1")
    kept = [SaveRun(before), AppendEvent(event("r1", n=0)), SaveOutcome(first), SaveMails((sent,))]
    write_all(store, kept)
    last: Any = {
        "a malformed event": AppendEvent(None),  # type: ignore[arg-type]
        "a malformed mail": SaveMails((mail("m3", "r1", "r2"), None)),  # type: ignore[arg-type]
    }.get(breaks, PostCommand("pause", "r1"))
    batch = [
        SaveRun(run("r2", status=RunStatus.RUNNING)),
        AppendEvent(event("r1", n=1)),
        SaveRun(run("r1", status=RunStatus.RUNNING, task="again")),
        AppendEvent(event("r2", n=1)),
        SaveOutcome(outcome("r1")),
        SaveRun(run("r1", status=RunStatus.COMPLETED, ended_at=5.0)),
        SaveMails((mail("m1", "r1", "r2"), sent, mail("m2", "r2", "r1"))),
        SetMailsState(("m0", "m1", "nobody's"), MailState.READ),
        AppendEvent(event("r1", n=2)),
        last,
    ]
    with pytest.raises((ValueError, AttributeError)):
        write_all(store, batch)
    assert store.get_run("r1") == before and store.get_run("r2") is None
    assert [e.data for e in store.events("r1")] == [{"n": 0}] and store.events("r2") == []
    assert store.last_event_seq() == 1
    assert store.undelivered_outcomes() == [first]
    assert store.mail_for("r1") == store.mail_for("r2") == [sent]
    write_all(store, batch[:-1])  # the store goes on taking writes
    assert [e.data for e in store.events("r1")] == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert store.last_event_seq() == 4


def test_ended_among_names_the_ended_ids_alone(store: RunStore) -> None:
    """``ended_among``: those of the ids kept ended, nothing of a live run or of an id not
    kept; inside a batch, as the batch's own writes left them. The protocol's default (what
    a store of one's own inherits: the records read) answers the same on every store."""
    store.save_run(run("live", status=RunStatus.WAITING))
    store.save_run(run("done", status=RunStatus.COMPLETED, ended_at=2.0))
    store.save_run(run("gone", status=RunStatus.CANCELLED, ended_at=2.0))
    ids = ["live", "done", "missing", "gone"]
    assert sorted(store.ended_among(ids)) == ["done", "gone"]
    assert sorted(RunStore.ended_among(store, ids)) == ["done", "gone"]
    assert store.ended_among([]) == []
    with store.batch():
        store.save_run(run("live", status=RunStatus.FAILED, ended_at=3.0))
        assert store.ended_among(["live"]) == ["live"]
    assert sorted(store.ended_among(ids)) == ["done", "gone", "live"]


def test_ended_by_others_names_no_run_nobody_ended(store: RunStore) -> None:
    """``ended_by_others``: with no end written since it last said, it names no run (empty,
    or None: it cannot tell); the protocol's default, a store of one's own's, cannot tell.
    (That an end by another writer is never left out: tests/runtime/test_ends_look.py.)"""
    store.save_run(run("a", status=RunStatus.WAITING))
    store.ended_by_others()  # (the first look: whatever it says)
    store.save_run(run("a", status=RunStatus.RUNNING))
    assert store.ended_by_others() in (None, [])
    assert RunStore.ended_by_others(store) is None
