"""A root's end in a write whose fate is not known (``UnsureWrite``): its caller is told what
the store keeps, once the store answers again.

On a cluster the store is a process; lost before it answered, the write may or may not have
been committed (tests/cluster/test_lost_commit.py does it with the head's process killed).
Here, on one machine and without Ray, a real SQLite store that commits the batch holding the
root's end and then says it was lost (``applied``), or says so before committing it. Told at
once that the run failed and "its end is not recorded yet", the caller heard the opposite of
what the store kept when the write had been committed; now the caller waits for the store:
completed (the end that was committed), or failed as the recovery records it then.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec
import pytest

from run_ends import ends_of
from subagents import FunctionAgent, Runtime, SQLiteStore, StoreError, UnsureWrite
from subagents.actors import outage
from subagents.behaviour.function import AgentContext
from subagents.messages import Event, EventKind, Outcome, RunRecord, RunStatus

WAIT = 60.0


class LosesAnAnswer(SQLiteStore):
    """Its first batch that saves the outcome ``task`` is lost before it answers: committed
    (``applied``), or not."""

    def __init__(self, path: Path, task: str, applied: bool) -> None:
        super().__init__(path)
        self.task, self.applied = task, applied
        self.armed = False
        self.lost = False

    def save_outcome(self, outcome: Outcome, delivered: bool = False) -> None:
        if outcome.result == self.task and not self.lost:
            self.lost = True
            if not self.applied:  # (inside the batch: it is rolled back)
                raise UnsureWrite("the store was lost before it answered")
            self.armed = True
        super().save_outcome(outcome, delivered)

    @contextmanager
    def fenced_batch(self, owner: str, epoch: int) -> Iterator[None]:
        with super().fenced_batch(owner, epoch):
            yield
        if self.armed:  # committed, then the answer lost
            self.armed = False
            raise UnsureWrite("the store was lost before it answered")


def _echo(ctx: AgentContext) -> str:
    return ctx.task


@pytest.mark.parametrize("applied", [True, False], ids=["applied", "not applied"])
def test_a_roots_end_in_a_write_of_unknown_fate_is_told_as_the_store_keeps_it(
    tmp_path: Path, applied: bool
) -> None:
    store = LosesAnAnswer(tmp_path / "runs.db", "lost", applied)
    with Runtime([FunctionAgent.create("echo", _echo)], store=store) as rt:
        handle = rt.spawn("echo", "lost")
        outcome = handle.result(timeout=WAIT)
        again = rt.run("echo", "again", timeout=WAIT)  # the runtime goes on
        attached = rt.attach(handle.run_id).result(timeout=WAIT)
    assert store.lost
    record = store.get_run(handle.run_id)
    kept = RunStatus.COMPLETED if applied else RunStatus.FAILED
    assert record is not None and record.status is kept
    assert outcome.status is kept and attached.status is kept, outcome
    ends = [kind.value for kind in ends_of(store, handle.run_id)]
    assert ends == [kept.value]  # recorded once
    assert again.status is RunStatus.COMPLETED
    if applied:
        assert outcome.result == "lost"
    else:
        assert outcome.error is not None and "lost before it answered" in outcome.error
        assert "not recorded" not in outcome.error  # told once it was recorded
    store.close()


class GoneAfterLosingAnAnswer(SQLiteStore):
    """Its batch that saves the outcome ``task`` is lost before it answers (not committed),
    and every batch after it fails until ``gone`` is cleared: a store that does not come back."""

    def __init__(self, path: Path, task: str) -> None:
        super().__init__(path)
        self.task = task
        self.gone = False

    def save_outcome(self, outcome: Outcome, delivered: bool = False) -> None:
        if outcome.result == self.task and not self.gone:
            self.gone = True
            raise UnsureWrite("the store was lost before it answered")
        super().save_outcome(outcome, delivered)

    @contextmanager
    def fenced_batch(self, owner: str, epoch: int) -> Iterator[None]:
        if self.gone:
            raise StoreError("the store is gone")
        with super().fenced_batch(owner, epoch):
            yield


def test_a_caller_held_for_a_write_of_unknown_fate_is_told_when_the_store_stays_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store never answers again and nothing closes the runtime: the caller is not held
    for ever (``UNSURE_HOLD_S``, made 0 here: the first recovery that fails tells it), but
    told that the end may or may not be recorded. Without the bound it waited until the
    close (here: ``result`` timed out)."""
    monkeypatch.setattr(outage, "UNSURE_HOLD_S", 0.0)
    store = GoneAfterLosingAnAnswer(tmp_path / "runs.db", "lost")
    with Runtime([FunctionAgent.create("echo", _echo)], store=store) as rt:
        handle = rt.spawn("echo", "lost")
        outcome = handle.result(timeout=20.0)
        store.gone = False  # back: the close records it
    assert outcome.status is RunStatus.FAILED, outcome
    assert outcome.error is not None and "may or may not be recorded" in outcome.error
    record = store.get_run(handle.run_id)
    assert record is not None and record.status is RunStatus.FAILED
    ends = [kind.value for kind in ends_of(store, handle.run_id)]
    assert ends == ["failed"]
    store.close()


class LosesTwoAnswers(SQLiteStore):
    """Its batch that saves the outcome ``task`` is lost before it answers, not committed;
    then the recovery's batch that records that run failed is committed and its answer lost
    too: a recovery's own write of unknown fate."""

    def __init__(self, path: Path, task: str) -> None:
        super().__init__(path)
        self.task = task
        self.run_id: str | None = None
        self.armed = False
        self.losses = 0

    def save_outcome(self, outcome: Outcome, delivered: bool = False) -> None:
        if outcome.result == self.task and self.losses == 0:
            self.losses, self.run_id = 1, outcome.run_id
            raise UnsureWrite("the store was lost before it answered")  # (rolled back)
        if outcome.run_id == self.run_id and self.losses == 1:
            self.losses, self.armed = 2, True  # the recovery's: committed, answer lost
        super().save_outcome(outcome, delivered)

    @contextmanager
    def fenced_batch(self, owner: str, epoch: int) -> Iterator[None]:
        with super().fenced_batch(owner, epoch):
            yield
        if self.armed:
            self.armed = False
            raise UnsureWrite("the store was lost before it answered the recovery")


def test_a_recoverys_own_write_of_unknown_fate_records_one_end(tmp_path: Path) -> None:
    """The recovery writes an owed decision again after its own write was lost unanswered:
    had that write been committed, the run's events read two ends. Before writing again it
    reads what the store kept, and leaves out the runs the store keeps ended (the test read
    ``['failed', 'failed']`` without it)."""
    store = LosesTwoAnswers(tmp_path / "runs.db", "lost")
    with Runtime([FunctionAgent.create("echo", _echo)], store=store, command_poll_s=0.05) as rt:
        handle = rt.spawn("echo", "lost")
        outcome = handle.result(timeout=WAIT)
        again = rt.run("echo", "again", timeout=WAIT)  # the runtime goes on
    assert store.losses == 2 and not store.armed  # both answers were lost
    record = store.get_run(handle.run_id)
    assert record is not None and record.status is RunStatus.FAILED
    assert outcome.status is RunStatus.FAILED, outcome
    ends = [kind.value for kind in ends_of(store, handle.run_id)]
    assert ends == ["failed"]
    assert again.status is RunStatus.COMPLETED
    store.close()


def test_a_caller_held_for_a_write_of_unknown_fate_is_told_without_an_ask(
    tmp_path: Path,
) -> None:
    """No command poll (``command_poll_s=0``) and nothing asked of the runtime: the store is
    tried again all the same while a caller waits on it (``UNSURE_RETRY_S``), and the caller
    is told what it keeps. Before, only an ask, a spawn or a poll tried it: the caller
    waited (here: ``result`` timed out)."""
    store = LosesAnAnswer(tmp_path / "runs.db", "lost", applied=True)
    with Runtime([FunctionAgent.create("echo", _echo)], store=store, command_poll_s=0) as rt:
        handle = rt.spawn("echo", "lost")
        outcome = handle.result(timeout=20.0)
    assert store.lost
    assert outcome.status is RunStatus.COMPLETED and outcome.result == "lost", outcome
    ends = [kind.value for kind in ends_of(store, handle.run_id)]
    assert ends == ["completed"]
    store.close()


class ReadOnlyAfterLosingAnAnswer(SQLiteStore):
    """Its batch that saves the outcome ``task`` is committed and its answer lost; after it,
    the store reads but takes no write until ``refusing`` is cleared (a store that answers
    again, but not yet for writes)."""

    def __init__(self, path: Path, task: str) -> None:
        super().__init__(path)
        self.task = task
        self.armed = self.refusing = False

    def save_outcome(self, outcome: Outcome, delivered: bool = False) -> None:
        if outcome.result == self.task and not self.refusing:
            self.armed = True
        super().save_outcome(outcome, delivered)

    @contextmanager
    def fenced_batch(self, owner: str, epoch: int) -> Iterator[None]:
        if self.refusing:
            raise StoreError("the store takes no writes yet")
        with super().fenced_batch(owner, epoch):
            yield
        if self.armed:
            self.armed, self.refusing = False, True
            raise UnsureWrite("the store was lost before it answered")


def test_a_caller_held_for_a_write_of_unknown_fate_is_told_once_the_store_reads_it_ended(
    tmp_path: Path,
) -> None:
    """The store answers reads again but still refuses writes: a root it keeps ended is told
    that end at once (nothing changes an ended record), not after the recovery's write nor
    at ``UNSURE_HOLD_S`` (60 s) as 'may or may not be recorded' (before: ``result`` timed
    out here)."""
    store = ReadOnlyAfterLosingAnAnswer(tmp_path / "runs.db", "lost")
    with Runtime([FunctionAgent.create("echo", _echo)], store=store) as rt:
        handle = rt.spawn("echo", "lost")
        try:
            outcome = handle.result(timeout=20.0)
        finally:
            store.refusing = False  # back for writes: the close records what it must
    assert outcome.status is RunStatus.COMPLETED and outcome.result == "lost", outcome
    ends = [kind.value for kind in ends_of(store, handle.run_id)]
    assert ends == ["completed"]
    store.close()


class LandsLate(SQLiteStore):
    """Its batch that saves the outcome ``task`` is committed and its answer lost, and the
    commit is not seen by the store's first listing after (a PostgreSQL ``COMMIT`` still
    being applied when the recovery reads: the run listed unfinished); the recovery's
    write that records that run failed is then lost too, before it is committed."""

    def __init__(self, path: Path, task: str) -> None:
        super().__init__(path)
        self.task = task
        self.run_id: str | None = None
        self.armed = self.hiding = self.losing = False

    def save_outcome(self, outcome: Outcome, delivered: bool = False) -> None:
        if outcome.result == self.task and self.run_id is None:
            self.run_id, self.armed = outcome.run_id, True
        elif outcome.run_id == self.run_id and self.losing:
            self.losing = False  # the recovery's write: lost before it is committed
            raise UnsureWrite("the store was lost before it answered the recovery")
        super().save_outcome(outcome, delivered)

    def list_runs(self, *args: Any, **kwargs: Any) -> list[RunRecord]:
        records = super().list_runs(*args, **kwargs)
        if self.hiding and kwargs.get("statuses") is not None:
            self.hiding, self.losing = False, True
            kept = super().get_run(self.run_id or "")
            assert kept is not None
            unseen = msgspec.structs.replace(
                kept, status=RunStatus.RUNNING, ended_at=None, outcome=None
            )
            records.append(unseen)  # (its end committed, not yet seen)
        return records

    @contextmanager
    def fenced_batch(self, owner: str, epoch: int) -> Iterator[None]:
        with super().fenced_batch(owner, epoch):
            yield
        if self.armed:  # committed, then the answer lost
            self.armed, self.hiding = False, True
            raise UnsureWrite("the store was lost before it answered")


def test_a_root_a_recovery_owed_leaves_out_is_told_what_the_store_keeps(
    tmp_path: Path,
) -> None:
    """A recovery owed to the store ends a root its first listing read unfinished; by the
    time it is written again the root's own end has landed, and ``still_owed`` leaves the
    root out. Its caller is told what the store keeps (completed), not failed as if the
    recovery had recorded it (before: told failed while the store kept it completed)."""
    store = LandsLate(tmp_path / "runs.db", "lost")
    with Runtime([FunctionAgent.create("echo", _echo)], store=store, command_poll_s=0) as rt:
        handle = rt.spawn("echo", "lost")
        outcome = handle.result(timeout=WAIT)
        again = rt.run("echo", "again", timeout=WAIT)  # the runtime goes on
    assert not (store.armed or store.hiding or store.losing)  # all three happened
    record = store.get_run(handle.run_id)
    assert record is not None and record.status is RunStatus.COMPLETED
    ends = [kind.value for kind in ends_of(store, handle.run_id)]
    assert ends == ["completed"]
    assert outcome.status is RunStatus.COMPLETED and outcome.result == "lost", outcome
    assert again.status is RunStatus.COMPLETED
    store.close()


class EndLandsAfterTheRead(SQLiteStore):
    """Its batch that saves the outcome ``task`` is lost before it answers (not committed);
    then the run's end lands through another connection just after the recovery listed the
    run unfinished, before the recovery writes it failed: a late ``COMMIT`` between the
    recovery's read and its write."""

    def __init__(self, path: Path, task: str) -> None:
        super().__init__(path)
        self.task = task
        self.run_id: str | None = None
        self.landing = False

    def save_outcome(self, outcome: Outcome, delivered: bool = False) -> None:
        if outcome.result == self.task and self.run_id is None:
            self.run_id, self.landing = outcome.run_id, True
            raise UnsureWrite("the store was lost before it answered")
        super().save_outcome(outcome, delivered)

    def list_runs(self, *args: Any, **kwargs: Any) -> list[RunRecord]:
        records = super().list_runs(*args, **kwargs)
        if self.landing and kwargs.get("statuses") is not None:
            self.landing = False
            self._land(self.run_id or "")
        return records

    def _land(self, run_id: str) -> None:
        live = super().get_run(run_id)
        assert live is not None and not live.status.terminal
        end = Outcome(run_id=run_id, status=RunStatus.COMPLETED, result="landed late")
        ended = msgspec.structs.replace(
            live, status=RunStatus.COMPLETED, ended_at=live.created_at + 1.0, outcome=end
        )
        other = SQLiteStore(self.path)  # (another connection: the late writer's)
        try:
            with other.batch():
                kind = EventKind.COMPLETED
                other.append_event(
                    Event(kind=kind, run_id=run_id, agent=live.agent, root_run_id=run_id, ts=1.0)
                )
                other.save_run(ended)
                other.save_outcome(end)
        finally:
            other.close()


def test_an_end_landing_between_the_recoverys_read_and_its_write_is_the_runs_one(
    tmp_path: Path,
) -> None:
    """The recovery read the root unfinished and decided it failed; its end landed before
    the recovery's write. The store refuses the recovery's second end (``AlreadyEnded``),
    the recovery is written again without it, and the caller is told the end that landed.
    Before, the recovery wrote over it: the events held ``completed`` then ``failed``, the
    record said failed, and so was the caller told."""
    store = EndLandsAfterTheRead(tmp_path / "runs.db", "lost")
    with Runtime([FunctionAgent.create("echo", _echo)], store=store, command_poll_s=0) as rt:
        handle = rt.spawn("echo", "lost")
        outcome = handle.result(timeout=WAIT)
        again = rt.run("echo", "again", timeout=WAIT)  # the runtime goes on
    assert store.run_id == handle.run_id and not store.landing  # it landed
    assert outcome.status is RunStatus.COMPLETED and outcome.result == "landed late", outcome
    record = store.get_run(handle.run_id)
    assert record is not None and record.status is RunStatus.COMPLETED
    assert ends_of(store, handle.run_id) == [EventKind.COMPLETED]
    assert again.status is RunStatus.COMPLETED
    store.close()


class EndsAHeldRunAfterTheRead(EndLandsAfterTheRead):
    """Refuses the outcome ``task`` (the store fails: every live run is stopped); then, as
    the recovery lists the runs unfinished, another writer ends the held run ``held_id``
    (completed, ``_land``) just after the read: the recovery's ``failed`` for it is refused
    and it is left out of the recovery written again."""

    def __init__(self, path: Path, task: str) -> None:
        super().__init__(path, task)
        self.held_id: str | None = None
        self.failing = True

    def save_outcome(self, outcome: Outcome, delivered: bool = False) -> None:
        if outcome.result == self.task and self.failing:
            self.failing = False
            raise StoreError("the disk is full")
        SQLiteStore.save_outcome(self, outcome, delivered)

    def list_runs(self, *args: Any, **kwargs: Any) -> list[RunRecord]:
        records = SQLiteStore.list_runs(self, *args, **kwargs)
        if self.held_id is not None and not self.failing and kwargs.get("statuses") is not None:
            held, self.held_id = self.held_id, None
            self._land(held)
        return records


END_KINDS = {EventKind.COMPLETED, EventKind.FAILED, EventKind.CANCELLED, EventKind.TIMED_OUT}


def test_a_held_run_a_recovery_leaves_out_has_the_end_the_store_keeps_published(
    tmp_path: Path,
) -> None:
    """Live subscribers (and the runtime's own waits on ends) are shown the end the store
    keeps of a run the recovery left out, not the recovery's ``failed`` the store refused
    (before: published ``failed`` while the store kept ``completed``)."""
    store = EndsAHeldRunAfterTheRead(tmp_path / "runs.db", "boom")
    ends: list[tuple[str, EventKind]] = []
    started = threading.Event()
    ended = threading.Event()
    landed = ""

    async def held(ctx: AgentContext) -> str:
        await ctx.receive(timeout=WAIT)  # (stopped by the store's failure)
        return "held"

    agents = [FunctionAgent.create("echo", _echo), FunctionAgent.create("held", held)]
    with Runtime(agents, store=store, command_poll_s=0.05) as rt:

        def seen(event: Event) -> None:
            if event.kind is EventKind.STARTED and event.agent == "held":
                started.set()
            elif event.kind in END_KINDS:
                ends.append((event.run_id, event.kind))
                if event.run_id == landed:
                    ended.set()

        rt.subscribe(seen)
        handle = rt.spawn("held", "wait")
        assert started.wait(WAIT), "the held run never started"
        store.held_id = landed = handle.run_id
        failed = rt.run("echo", "boom", timeout=WAIT)  # the store fails
        assert failed.error_kind == "store", failed
        assert rt.run("echo", "again", timeout=WAIT).status is RunStatus.COMPLETED
        assert ended.wait(WAIT), "no end published for the held run"
    assert store.held_id is None  # it landed
    record = store.get_run(handle.run_id)
    assert record is not None and record.status is RunStatus.COMPLETED
    assert ends_of(store, handle.run_id) == [EventKind.COMPLETED]
    assert [kind for run_id, kind in ends if run_id == handle.run_id] == [EventKind.COMPLETED]
    store.close()
