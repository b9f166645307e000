"""``actors.end_race.write_again``: writes refused for an end another writer made first are
written again without that run's, and the effects tell what the store keeps.

Plain data and a real in-memory store, no threads (the runtime's paths through it: alone, in
a group, at the group's commit, on every store: tests/durability/test_end_race.py)."""

from __future__ import annotations

import msgspec
import pytest

from subagents import MemoryStore
from subagents.actors.end_race import ELSEWHERE, write_again
from subagents.messages import (
    Batch,
    ChildDone,
    Event,
    EventKind,
    MailState,
    Outcome,
    RunRecord,
    RunStatus,
)
from subagents.store.base import AlreadyEnded
from subagents.store.writes import (
    AppendEvent,
    SaveOutcome,
    SaveRun,
    SetMailsState,
    Write,
    write_all,
)
from subagents.supervision.effects import Effect, Publish, StopAgent, Tell, TellOutside


def _run(run_id: str, parent: str | None = None) -> RunRecord:
    return RunRecord(
        run_id=run_id,
        agent="echo",
        task="t",
        root_run_id=parent or run_id,
        parent_run_id=parent,
        status=RunStatus.RUNNING,
        started_at=1.0,
    )


def _end(record: RunRecord, status: RunStatus, ts: float, result: str) -> tuple[Write, ...]:
    """What an end writes: the record, the outcome, the end event."""
    outcome = Outcome(run_id=record.run_id, status=status, result=result)
    ended = msgspec.structs.replace(record, status=status, ended_at=ts, outcome=outcome)
    kind = EventKind(status.value)
    event = Event(kind=kind, run_id=record.run_id, agent="echo", root_run_id="r", ts=ts)
    return SaveRun(ended), SaveOutcome(outcome, delivered=True), AppendEvent(event)


def _effects(writes: tuple[Write, ...], request: str, parent: str | None) -> list[Effect]:
    outcome = next(w.outcome for w in writes if isinstance(w, SaveOutcome))
    done = ChildDone(request_id=request, outcome=outcome)
    told: Effect = TellOutside(done) if parent is None else Tell(parent, Batch(messages=(done,)))
    event = next(w.event for w in writes if isinstance(w, AppendEvent))
    return [Publish(event), told, StopAgent(outcome.run_id)]


@pytest.mark.parametrize("event", [True, False], ids=["its-event", "no-event"])
def test_only_the_refused_runs_writes_go_and_its_requester_is_told_the_kept_end(
    event: bool,
) -> None:
    store = MemoryStore()
    root, child, other = _run("root"), _run("child", parent="lead"), _run("other")
    for record in (root, child, other):
        store.save_run(record)
    theirs = _end(root, RunStatus.CANCELLED, 5.0, "elsewhere")  # the stranger's, first
    store.save_run(theirs[0].record)  # type: ignore[union-attr]
    store.save_outcome(theirs[1].outcome)  # type: ignore[union-attr]
    if event:
        store.append_event(theirs[2].event)  # type: ignore[union-attr]
    failed = _end(child, RunStatus.FAILED, 5.0, "x")[0].record  # type: ignore[union-attr]
    store.save_run(msgspec.structs.replace(failed, outcome=None))  # (a record alone)
    ours_root = _end(root, RunStatus.COMPLETED, 6.0, "mine")
    ours_child = _end(child, RunStatus.COMPLETED, 6.0, "mine")
    ours_other = _end(other, RunStatus.COMPLETED, 6.0, "theirs too")
    mail = SetMailsState(("m1",), MailState.DEAD)
    writes = [*ours_root, mail, *ours_child, *ours_other]
    effects = [
        *_effects(ours_root, "req-root", None),
        *_effects(ours_child, "req-child", "lead"),
        *_effects(ours_other, "req-other", None),
    ]
    with pytest.raises(AlreadyEnded):
        write_all(store, writes)  # (what the supervisor met)
    out = write_again(store, writes, effects, AlreadyEnded("refused"))

    kept_root, kept_child = store.get_run("root"), store.get_run("child")
    assert kept_root is not None and kept_root.status is RunStatus.CANCELLED
    assert kept_child is not None and kept_child.status is RunStatus.FAILED
    done = store.get_run("other")
    assert done is not None and done.status is RunStatus.COMPLETED  # the rest written
    assert [e.kind for e in store.events("other")] == [EventKind.COMPLETED]
    assert [e.kind for e in store.events("root")] == ([EventKind.CANCELLED] if event else [])
    assert store.undelivered_outcomes() == []  # the kept outcome was handed: delivered

    told = {e.message.request_id: e.message.outcome for e in out if isinstance(e, TellOutside)}
    assert told["req-root"].status is RunStatus.CANCELLED and told["req-root"].result == (
        "elsewhere"
    )
    assert told["req-other"].result == "theirs too"
    (to_lead,) = [e for e in out if isinstance(e, Tell)]
    assert isinstance(to_lead.message, Batch)
    (child_done,) = to_lead.message.messages
    assert isinstance(child_done, ChildDone) and child_done.request_id == "req-child"
    assert child_done.outcome.status is RunStatus.FAILED and child_done.outcome.error == ELSEWHERE
    published = [(e.event.run_id, e.event.kind) for e in out if isinstance(e, Publish)]
    root_shown = [("root", EventKind.CANCELLED)] if event else []
    assert published == [*root_shown, ("other", EventKind.COMPLETED)]
    assert [e.run_id for e in out if isinstance(e, StopAgent)] == ["root", "child", "other"]


def test_the_same_end_saved_again_is_no_refusal_and_is_written() -> None:
    """A run the store keeps ended with this very end (its status and time: a relabel) is
    not another writer's: its writes and effects stay as they were."""
    store = MemoryStore()
    record = _run("r")
    store.save_run(record)
    ours = _end(record, RunStatus.COMPLETED, 6.0, "mine")
    store.save_run(ours[0].record)  # type: ignore[union-attr]
    effects = _effects(ours, "req", None)
    out = write_again(store, list(ours), effects, AlreadyEnded("refused"))
    assert out == effects
    assert [e.kind for e in store.events("r")] == [EventKind.COMPLETED]


def test_a_refused_runs_dead_letters_stay_written_and_shown_with_their_mails_state() -> None:
    """The runtime's end of a run refused makes its unread mail dead all the same (the run
    ended either way): the mail's state is kept, and so is its ``dead_letter`` event, in the
    store and for subscribers; only the run's end (record, outcome, end event) is the
    store's."""
    store = MemoryStore()
    record = _run("r")
    store.save_run(record)
    theirs = _end(record, RunStatus.CANCELLED, 5.0, "elsewhere")
    store.save_run(theirs[0].record)  # type: ignore[union-attr]
    ours = _end(record, RunStatus.COMPLETED, 6.0, "mine")
    dead = Event(
        kind=EventKind.DEAD_LETTER,
        run_id="r",
        agent="echo",
        root_run_id="r",
        ts=6.0,
        data={"mail_id": "m1", "sender": "s"},
    )
    writes: list[Write] = [*ours, SetMailsState(("m1",), MailState.DEAD), AppendEvent(dead)]
    effects = [*_effects(ours, "req", None), Publish(dead)]
    out = write_again(store, writes, effects, AlreadyEnded("refused"))
    assert [e.kind for e in store.events("r")] == [EventKind.DEAD_LETTER]
    assert [e.event.kind for e in out if isinstance(e, Publish)] == [EventKind.DEAD_LETTER]
