"""A root's end whose write fails: its caller still hears an answer.

The core forgets a root as it decides its end, so once the decision's writes fail nothing
else would tell its caller (the caller waited for ever). The failures are real: a store
whose ``save_outcome`` refuses one run's outcome (a ``StoreError``: the store fails, the
supervisor halts) or breaks on it (a ``TypeError``: a bug, the supervisor goes on). The end
is handled in the supervisor's open group (``RunFinished`` is a grouped report): a
MemoryStore's group holds the store's lock, which the halt must let go of, or the close
hangs on it (``release_lease``)."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from polling import wait_until
from subagents import FunctionAgent, MemoryStore, Runtime, SQLiteStore
from subagents.behaviour.function import AgentContext
from subagents.messages import Event, EventKind, Outcome, RunStatus
from subagents.store.base import StoreError

WAIT = 60.0
REFUSED = "refused"  # the result whose outcome the store refuses
BUGGY = "buggy"  # the result whose outcome the store breaks on


def _check(outcome: Outcome) -> None:
    if outcome.result == REFUSED:
        raise StoreError("the disk is full")
    if outcome.result == BUGGY:
        raise TypeError("save_outcome() got an unexpected keyword argument")


class RefusingSQLite(SQLiteStore):
    def save_outcome(self, outcome: Outcome, delivered: bool = False) -> None:
        _check(outcome)
        super().save_outcome(outcome, delivered)


class RefusingMemory(MemoryStore):
    def save_outcome(self, outcome: Outcome, delivered: bool = False) -> None:
        _check(outcome)
        super().save_outcome(outcome, delivered)


def _echo(ctx: AgentContext) -> str:
    return ctx.task


AGENTS = [FunctionAgent.create("echo", _echo)]


def test_a_root_whose_end_the_store_refuses_has_its_caller_told(tmp_path: Path) -> None:
    store = RefusingSQLite(tmp_path / "runs.db")
    with Runtime(AGENTS, store=store) as rt:
        handle = rt.spawn("echo", REFUSED)
        outcome = handle.result(timeout=WAIT)  # (before the fix: never told, TimeoutError)
        assert outcome.status is RunStatus.FAILED and outcome.error_kind == "store"
        assert "the disk is full" in (outcome.error or "")
        # the store takes writes again: the runtime goes on, and records the run as its
        # caller was told (failed, the store's error), not as it ended in memory
        assert rt.spawn("echo", "ok").result(timeout=WAIT).result == "ok"
        record = store.get_run(handle.run_id)
        assert record is not None and record.status is RunStatus.FAILED
        assert record.outcome is not None and record.outcome.error_kind == "store"


def test_a_halt_in_a_memory_stores_group_lets_the_close_finish() -> None:
    store = RefusingMemory()
    rt = Runtime(AGENTS, store=store)
    closed = threading.Event()
    try:
        outcome = rt.spawn("echo", REFUSED).result(timeout=WAIT)
        assert outcome.status is RunStatus.FAILED and outcome.error_kind == "store"
    finally:

        def close() -> None:
            rt.close()
            closed.set()

        # (daemon: before the fix it waits for ever on the store's lock the supervisor's
        # thread kept, and must not keep the test process alive)
        threading.Thread(target=close, daemon=True).start()
    assert closed.wait(WAIT), "the close hung (the store's lock left held by the halt)"


def test_a_root_whose_end_write_breaks_has_its_caller_told_of_the_bug(tmp_path: Path) -> None:
    store = RefusingSQLite(tmp_path / "runs.db")
    with Runtime(AGENTS, store=store) as rt:
        handle = rt.spawn("echo", BUGGY)
        outcome = handle.result(timeout=WAIT)  # (before the fix: never told, TimeoutError)
        assert outcome.status is RunStatus.FAILED and outcome.error_kind == "supervisor"
        assert "TypeError" in (outcome.error or "") and "recorded failed" in (outcome.error or "")
        # a bug, not the store: the supervisor goes on; the run is recorded as its caller
        # was told (before: left unfinished, and the next runtime's restore ran it again)
        assert rt.spawn("echo", "ok").result(timeout=WAIT).result == "ok"
        _recorded_as_told(store, handle.run_id, outcome)
    with Runtime(AGENTS, store=SQLiteStore(tmp_path / "runs.db")) as again:
        assert again.restore_report.resumed == again.restore_report.requeued == []


def _recorded_as_told(store: MemoryStore | SQLiteStore, run_id: str, told: Outcome) -> None:
    """The store says of ``run_id`` what its caller was told: failed, with that error."""
    record = store.get_run(run_id)
    assert record is not None and record.status is RunStatus.FAILED, record
    assert record.outcome is not None and record.outcome.error_kind == "supervisor"
    assert record.outcome.error == told.error


def test_a_memory_store_records_a_root_whose_end_write_broke_as_told() -> None:
    """The same bug in a MemoryStore (whose batch of writes is all or nothing too,
    ``store/memory_undo.py``): the run is recorded as the caller was told."""
    store = RefusingMemory()
    with Runtime(AGENTS, store=store) as rt:
        handle = rt.spawn("echo", BUGGY)
        outcome = handle.result(timeout=WAIT)
        assert outcome.status is RunStatus.FAILED and outcome.error_kind == "supervisor"
        assert rt.spawn("echo", "ok").result(timeout=WAIT).result == "ok"
        _recorded_as_told(store, handle.run_id, outcome)


async def _parent(ctx: AgentContext) -> str:
    child = await ctx.spawn("echo", BUGGY)  # awaited: its end is told to this run
    return f"{child.status.value} {child.error_kind}: {child.error}"


def test_a_child_whose_end_write_breaks_has_its_awaiting_parent_told(tmp_path: Path) -> None:
    """The child's end is told to its parent, not the outside: lost with the effects, the
    parent awaited it for ever, and so did the root's caller (a ``TimeoutError`` here)."""
    store = RefusingSQLite(tmp_path / "runs.db")
    agents = [*AGENTS, FunctionAgent.create("parent", _parent)]
    with Runtime(agents, store=store) as rt:
        outcome = rt.spawn("parent", "go").result(timeout=WAIT)
        assert outcome.status is RunStatus.COMPLETED, outcome
        told = outcome.result or ""
        assert told.startswith("failed supervisor:") and "TypeError" in told, told
        assert "recorded failed" in told, told
        # the child is recorded as its parent was told: nothing unfinished to run again
        assert all(r.status.terminal for r in store.list_runs())


def _sleeper(started: threading.Event) -> Callable[[AgentContext], Awaitable[str]]:
    async def sleeper(ctx: AgentContext) -> str:
        started.set()
        await ctx.sleep(3600)  # (until stopped)
        return "woke"

    return sleeper


def _lead(started: threading.Event) -> Callable[[AgentContext], Awaitable[str]]:
    async def lead(ctx: AgentContext) -> str:
        await ctx.spawn("sleeper", "zz", background=True)
        while not started.is_set():  # (its agent running: the lead's end cancels it)
            await ctx.sleep(0.01)  # (not a blocking wait: the two may share a thread)
        return BUGGY

    return lead


def test_a_root_whose_end_write_breaks_has_its_cancelled_children_stopped_and_recorded(
    tmp_path: Path,
) -> None:
    """The root's end cancels its background child (its record, and its agent's stop, in
    the decision the bug loses). Nobody waits on the child, yet the core ended it: its
    agent is stopped and it is recorded failed as the root is. Before, its agent ran on
    (its reports dropped: the core had ended it) and the store kept it unfinished, so the
    next runtime's restore ran it again though the runtime that hosted it said it ended."""
    store = RefusingSQLite(tmp_path / "runs.db")
    started = threading.Event()
    agents = [
        *AGENTS,
        FunctionAgent.create("lead", _lead(started)),
        FunctionAgent.create("sleeper", _sleeper(started)),
    ]
    with Runtime(agents, store=store) as rt:
        outcome = rt.spawn("lead", "go").result(timeout=WAIT)
        assert outcome.status is RunStatus.FAILED and "recorded failed" in (outcome.error or "")
        (child,) = [r for r in store.list_runs() if r.agent == "sleeper"]
        live = rt._supervisor._ref._actor_weakref().effector.live  # type: ignore[attr-defined]
        wait_until(lambda: child.run_id not in live, "the cancelled child's agent stopped", WAIT)
        assert all(r.status.terminal for r in store.list_runs()), store.list_runs()
        record = store.get_run(child.run_id)
        assert record is not None and record.status is RunStatus.FAILED, record
        assert record.outcome is not None and record.outcome.error_kind == "supervisor"
        assert "recorded failed" in (record.outcome.error or "")
    with Runtime(agents, store=SQLiteStore(tmp_path / "runs.db")) as again:
        assert again.restore_report.resumed == again.restore_report.requeued == []


def test_a_queued_run_whose_start_a_broken_end_write_lost_is_stopped_and_told(
    tmp_path: Path,
) -> None:
    """One slot: the second root waits queued; the first's end gives it the slot (its
    start, in the decision the bug loses). The core holds it running, yet no agent was
    started and no deadline armed: it is stopped, its caller told why, its slot given
    back (a third root runs). Before, its caller waited for ever (here: ``TimeoutError``)."""
    go = threading.Event()

    async def first(ctx: AgentContext) -> str:
        # until the second is queued behind it: blocking, so that the run keeps its slot
        # (brief sleeps adding up to more would park it, its slot lent to the second)
        assert go.wait(WAIT)
        return BUGGY

    store = RefusingSQLite(tmp_path / "runs.db")
    agents = [*AGENTS, FunctionAgent.create("first", first)]
    with Runtime(agents, store=store, limits={"max_concurrency": 1}) as rt:
        one = rt.spawn("first", "a")
        two = rt.spawn("echo", "b")
        wait_until(lambda: store.get_run(two.run_id) is not None, "the second queued", WAIT)
        go.set()
        assert one.result(timeout=WAIT).status is RunStatus.FAILED
        outcome = two.result(timeout=WAIT)  # (before the fix: never told, TimeoutError)
        assert outcome.status is RunStatus.CANCELLED, outcome
        assert "its start was lost" in (outcome.error or "") and "TypeError" in (
            outcome.error or ""
        )
        record = store.get_run(two.run_id)
        assert record is not None and record.status is RunStatus.CANCELLED
        assert rt.spawn("echo", "ok").result(timeout=WAIT).result == "ok"


class BreakingRetrySQLite(SQLiteStore):
    """Breaks (a bug) on the event that says a run goes again."""

    def append_event(self, event: Event) -> None:
        if event.kind is EventKind.RESTARTED:
            raise TypeError("append_event() got an unexpected keyword argument")
        super().append_event(event)


def _fails_once(tries: list[int]) -> Callable[[AgentContext], str]:
    def fails_once(ctx: AgentContext) -> str:
        tries.append(1)
        if len(tries) == 1:
            raise RuntimeError("the first try fails")
        return "second try"

    return fails_once


def test_a_retry_whose_timer_a_broken_write_lost_is_stopped_and_told(tmp_path: Path) -> None:
    """A run that fails and goes again (``on_failure="retry"``): the decision that says so
    (its record, its ``restarted`` event, its restart's timer) is lost to a bug. The core
    holds it waiting to start again, with no timer to start it: it is stopped, its caller
    told why. Before, its caller waited for ever (here: ``TimeoutError``)."""
    tries: list[int] = []
    store = BreakingRetrySQLite(tmp_path / "runs.db")
    agents = [FunctionAgent.create("flaky", _fails_once(tries))]
    with Runtime(agents, store=store) as rt:
        handle = rt.spawn("flaky", "go", on_failure="retry", max_retries=1)
        outcome = handle.result(timeout=WAIT)  # (before the fix: never told, TimeoutError)
        assert outcome.status is RunStatus.CANCELLED, outcome
        assert "its start was lost" in (outcome.error or "") and "TypeError" in (
            outcome.error or ""
        )
        record = store.get_run(handle.run_id)
        assert record is not None and record.status is RunStatus.CANCELLED
        assert tries == [1]  # not started again


class _CommitFailing:
    """A batch of ``store`` that, once armed on its thread, fails its commit (rolled back, a
    ``StoreError`` raised): the disk filled between the writes and the commit."""

    def __init__(self, inner: AbstractContextManager[None], store: CommitFailingSQLite) -> None:
        self.inner, self.store = inner, store

    def __enter__(self) -> None:
        self.inner.__enter__()

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> bool | None:
        if kind is None and self.store.fail_commit_on == threading.get_ident():
            self.store.fail_commit_on = None
            error = StoreError("the disk filled before the commit")
            self.inner.__exit__(StoreError, error, None)  # rolled back
            raise error
        return self.inner.__exit__(kind, exc, tb)


class CommitFailingSQLite(RefusingSQLite):
    """A write that breaks (a bug, ``BUGGY``) and then the commit of the group it was in
    fails too: the outermost (fenced) batch of the supervisor's thread."""

    fail_commit_on: int | None = None

    def save_outcome(self, outcome: Outcome, delivered: bool = False) -> None:
        if outcome.result == BUGGY:
            self.fail_commit_on = threading.get_ident()
        super().save_outcome(outcome, delivered)

    def fenced_batch(self, owner: str, epoch: int) -> AbstractContextManager[None]:
        return _CommitFailing(super().fenced_batch(owner, epoch), self)


def test_a_caller_is_told_recorded_failed_only_once_that_is_committed(tmp_path: Path) -> None:
    """The root's end write breaks (a bug): it is recorded failed instead, in the open group,
    and then that group's commit fails. Its caller must not hear "recorded failed" of a run
    the store keeps unfinished (a restore would run it again): it hears the store's failure,
    which says the end is not recorded yet. Before, it was told "recorded failed" as soon as
    the record was written into the group, before the commit that then failed."""
    store = CommitFailingSQLite(tmp_path / "runs.db")
    with Runtime(AGENTS, store=store) as rt:
        handle = rt.spawn("echo", BUGGY)
        outcome = handle.result(timeout=WAIT)
        record = store.get_run(handle.run_id)
        assert record is not None
        assert outcome.status is RunStatus.FAILED
        assert "recorded failed" not in (outcome.error or ""), outcome.error
        assert outcome.error_kind == "store" and "the disk filled" in (outcome.error or "")
        if record.status.terminal:  # (recovered already: a poll of commands retried it)
            assert record.status is RunStatus.FAILED and record.outcome is not None
            assert record.outcome.error_kind == "store", record.outcome
        # the store takes writes again: the run is recorded as its caller was told
        assert rt.spawn("echo", "ok").result(timeout=WAIT).result == "ok"
        record = store.get_run(handle.run_id)
        assert record is not None and record.status is RunStatus.FAILED, record
        assert record.outcome is not None and record.outcome.error_kind == "store"
