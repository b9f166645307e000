"""``actors.owed``: a recovery owed to the store leaves out the runs the store keeps ended.

Plain data and a real in-memory store, no threads (the runtime's path through it, a
recovery's own write lost unanswered: tests/durability/test_store_failure_unsure.py)."""

from __future__ import annotations

import msgspec

from subagents import MailState, MemoryStore
from subagents.actors.owed import still_owed
from subagents.messages import Event, EventKind, Outcome, RunRecord, RunStatus
from subagents.store.writes import AppendEvent, SaveRun, SetMailsState, Write, apply_writes
from subagents.supervision.closing import failed_unheld
from subagents.supervision.effects import Decision, Publish


def _run(run_id: str) -> RunRecord:
    return RunRecord(run_id=run_id, agent="echo", task="t", root_run_id=run_id)


def test_an_owed_recovery_leaves_out_only_the_runs_the_store_keeps_ended() -> None:
    store = MemoryStore()
    for run_id in ("kept", "absent-no", "open"):
        if run_id != "absent-no":
            store.save_run(_run(run_id))
    apply_writes(store, failed_unheld(_run("kept"), "earlier", 1.0))  # committed before
    mail = SetMailsState(("m1",), state=MailState.DEAD)
    writes = [
        *failed_unheld(_run("kept"), "lost", 2.0),
        mail,
        *failed_unheld(_run("absent-no"), "lost", 2.0),
        *failed_unheld(_run("open"), "lost", 2.0),
    ]
    decision = Decision(("kept", "absent-no", "open"), writes, [])
    owed = still_owed(decision, store, {"open"})
    assert owed.reply == decision.reply
    about = [w.record.run_id for w in owed.writes if isinstance(w, SaveRun)]
    assert about == ["absent-no", "open"]  # the ended one left out, whole
    assert len(owed.writes) == len(writes) - 5 and mail in owed.writes
    unchanged = still_owed(Decision(("open",), writes[6:], []), store, {"open"})
    assert unchanged.writes == writes[6:]


def test_an_owed_recovery_of_more_runs_than_a_read_takes_reads_each_slice() -> None:
    """More ended runs than one read takes (``READ_SLICE``): every slice is read, and the
    runs kept ended in the last one are left out as in the first."""
    from subagents.store.base import READ_SLICE

    store = MemoryStore()
    ids = [f"r{i:05d}" for i in range(2 * READ_SLICE + 7)]
    kept = {ids[0], ids[READ_SLICE + 3], ids[-1]}  # in the first, second and last slice
    for run_id in ids:
        store.save_run(_run(run_id))
    for run_id in kept:
        apply_writes(store, failed_unheld(_run(run_id), "earlier", 1.0))
    writes = [w for run_id in ids for w in failed_unheld(_run(run_id), "lost", 2.0)]
    owed = still_owed(Decision(tuple(ids), writes, []), store, set())
    about = {w.record.run_id for w in owed.writes if isinstance(w, SaveRun)}
    assert about == set(ids) - kept


class _CountedReads(MemoryStore):
    """A memory store that counts the runs whose events are read."""

    def __init__(self) -> None:
        super().__init__()
        self.events_read: list[str] = []

    def events(self, run_id: str) -> list[Event]:
        self.events_read.append(run_id)
        return super().events(run_id)


def test_an_owed_recovery_publishes_another_writers_end_and_reads_no_more() -> None:
    """Of the runs it leaves out, a run another writer ended has the end the store keeps
    published in place of the recovery's ``failed``, its events read; a run whose kept end
    is the recovery's own (its write committed, unanswered) keeps the event decided, and its
    events are not read (a committed recovery of 100,000 runs read each one's); a run the
    recovery published nothing of (unheld) gets nothing published."""
    store = _CountedReads()
    for run_id in ("ours", "theirs", "unheld"):
        store.save_run(_run(run_id))
    writes = {r: failed_unheld(_run(r), "lost", 2.0) for r in ("ours", "theirs", "unheld")}
    apply_writes(store, writes["ours"])  # the recovery's own write, committed
    for run_id in ("theirs", "unheld"):  # another writer's end of each
        done = Outcome(run_id=run_id, status=RunStatus.COMPLETED, result="done")
        ended = msgspec.structs.replace(
            _run(run_id), status=RunStatus.COMPLETED, ended_at=1.5, outcome=done
        )
        store.save_run(ended)
        end = Event(
            kind=EventKind.COMPLETED, run_id=run_id, agent="echo", root_run_id=run_id, ts=1.5
        )
        store.append_event(end)
    published = {r: _event(writes[r]) for r in ("ours", "theirs")}
    effects = [Publish(published["ours"]), Publish(published["theirs"])]
    all_writes = [w for ws in writes.values() for w in ws]
    decision = Decision(("ours", "theirs", "unheld"), all_writes, effects)
    owed = still_owed(decision, store, set())
    assert owed.writes == []  # every run kept ended
    shown = [(e.event.run_id, e.event.kind) for e in owed.effects if isinstance(e, Publish)]
    assert sorted(shown) == [("ours", EventKind.FAILED), ("theirs", EventKind.COMPLETED)]
    assert Publish(published["ours"]) in owed.effects  # the decided event itself
    assert store.events_read == ["theirs"]
    again = still_owed(owed, store, set())  # a next try (its write failed again): as it was
    assert again.writes == [] and again.effects == owed.effects
    assert store.events_read == ["theirs"]


def _event(writes: list[Write]) -> Event:
    (event,) = [w.event for w in writes if isinstance(w, AppendEvent)]
    return event
