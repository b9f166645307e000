"""A run ended by another writer while this runtime holds it, outside any recovery: the
runtime's own end of it is refused by the store (``AlreadyEnded``: a run ends once), and
only that end is dropped (``actors/end_race.py``): every other write of its transaction, or
of the group it was in, is written again, no outage begins, and no other run is touched.

Before: the refused write took the runtime through an outage, as a full disk does: every
live run was stopped and recorded failed with the store's error, and every other decision
in the group was lost with the end.

The other writer is a stranger here (a second connection writing the run's end where it
lies); ``subagents stop`` of an orphaned run writes so only once the host's lease lapsed,
and releases it (the host is then fenced first). Every store: the memory store (the
stranger writes the same object), SQLite (a second connection to the file) and PostgreSQL
(a second connection to the database: tests/pgserver.py's real server).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from pathlib import Path
from typing import Any

import msgspec

import two_handles
from polling import wait_until
from run_ends import ends_of
from subagents import FunctionAgent, Runtime
from subagents.behaviour.function import AgentContext
from subagents.messages import (
    Batch,
    Event,
    EventKind,
    RunFinished,
    RunStatus,
)
from subagents.store.base import RunStore

WAIT = 60.0


stores = two_handles.stores


def _in_line(supervisor: Any, run_id: str) -> bool:
    """``run_id``'s end is in the supervisor's line of reports (``LateReports``, SQLite's
    way: a wake-up already on its way takes it too, so the inbox does not grow)."""
    late = supervisor._ref._actor_weakref().late  # (pykka holds its actor weakly)
    for _, report in list(late._reports):
        messages = report.messages if isinstance(report, Batch) else (report,)
        if any(isinstance(m, RunFinished) and m.run_id == run_id for m in messages):
            return True
    return False


def _gated(gates: dict[str, threading.Event]) -> Any:
    def held(ctx: AgentContext) -> str:
        assert gates[ctx.task].wait(WAIT)
        return ctx.task

    return held


def test_an_end_refused_drops_only_itself_and_no_other_run_is_stopped(
    stores: tuple[RunStore, RunStore],
) -> None:
    store, other = stores
    gates = {"a": threading.Event(), "b": threading.Event()}
    agents = [FunctionAgent.create("held", _gated(gates))]
    with Runtime(agents, store=store, command_poll_s=0) as rt:
        a, b = rt.spawn("held", "a"), rt.spawn("held", "b")
        two_handles.end_elsewhere(other, two_handles.started(store, a.run_id))
        two_handles.started(store, b.run_id)
        gates["a"].set()  # its own end now: refused
        told = a.result(timeout=WAIT)
        gates["b"].set()
        went_on = b.result(timeout=WAIT)
    kept = store.get_run(a.run_id)
    assert kept is not None and kept.status is RunStatus.CANCELLED
    assert told.status is RunStatus.CANCELLED and told.error == "elsewhere", told
    assert ends_of(store, a.run_id) == []  # (the stranger appended none; ours was dropped)
    assert went_on.status is RunStatus.COMPLETED and went_on.result == "b", went_on
    finished = store.get_run(b.run_id)
    assert finished is not None and finished.status is RunStatus.COMPLETED
    assert ends_of(store, b.run_id) == [EventKind.COMPLETED]


def test_an_end_refused_in_a_group_keeps_the_groups_other_decisions(
    stores: tuple[RunStore, RunStore],
) -> None:
    """The end decided in the supervisor's open group with other reports: the spawns
    queued behind it (decided in the same transaction) are kept, and so is every event of
    theirs; the refused run's subscribers see the end the store keeps (none: the stranger
    wrote no event), not the runtime's ``completed``; a run live meanwhile goes on."""
    store, other = stores
    gates = {"a": threading.Event(), "b": threading.Event()}
    armed, holding, release = threading.Event(), threading.Event(), threading.Event()
    seen: list[Event] = []

    def hold(event: Event) -> None:  # the supervisor's thread, publishing a run's start
        seen.append(event)
        if event.kind is EventKind.STARTED and armed.is_set() and not holding.is_set():
            holding.set()
            assert release.wait(WAIT)  # meanwhile the run ends, and two spawns queue

    agents = [
        FunctionAgent.create("held", _gated(gates)),
        FunctionAgent.create("echo", lambda ctx: ctx.task),
    ]
    with Runtime(agents, store=store, command_poll_s=0) as rt:
        rt.subscribe(hold)
        a, b = rt.spawn("held", "a"), rt.spawn("held", "b")
        two_handles.end_elsewhere(other, two_handles.started(store, a.run_id))
        two_handles.started(store, b.run_id)
        armed.set()
        try:
            first = rt.spawn("echo", "first")
            assert holding.wait(WAIT)
            supervisor: Any = rt._hosting.supervisor
            inbox = supervisor._ref.actor_inbox  # held: nothing takes from it
            gates["a"].set()  # its end queues behind the held start
            wait_until(
                lambda: inbox.qsize() >= 2 or _in_line(supervisor, a.run_id),
                "a's end queued (told, or in the line of reports: its wake-up may be first's)",
            )
            behind = [rt.spawn("echo", "second"), rt.spawn("echo", "third")]
        finally:
            release.set()
        told = a.result(timeout=WAIT)
        outcomes = [h.result(timeout=WAIT) for h in (first, *behind)]
        again = rt.run("echo", "again", timeout=WAIT)
        gates["b"].set()
        went_on = b.result(timeout=WAIT)
    assert told.status is RunStatus.CANCELLED and told.error == "elsewhere", told
    assert ends_of(store, a.run_id) == []
    assert [e for e in seen if e.run_id == a.run_id and e.kind is EventKind.COMPLETED] == []
    for handle, outcome in zip((first, *behind), outcomes, strict=True):
        assert outcome.status is RunStatus.COMPLETED, outcome
        assert ends_of(store, handle.run_id) == [EventKind.COMPLETED]
    assert again.status is RunStatus.COMPLETED
    assert went_on.status is RunStatus.COMPLETED and went_on.result == "b", went_on


def test_a_stop_posted_for_a_run_another_writer_ended_keeps_the_stores_end(
    stores: tuple[RunStore, RunStore],
) -> None:
    """A stop posted from another process (`subagents stop`, the console) for a run the
    poster saw live, which another writer ended meanwhile: the command poll's end was
    refused (``AlreadyEnded``) outside ``EndRace`` and took the runtime through an outage
    (the other run stopped and recorded failed), and the stopped run's caller was never
    told. Now its end is the store's, told to its caller; the other run goes on."""
    store, other = stores
    gates = {"a": threading.Event(), "b": threading.Event()}
    agents = [FunctionAgent.create("held", _gated(gates))]
    try:
        with Runtime(agents, store=store, command_poll_s=0.05) as rt:
            a, b = rt.spawn("held", "a"), rt.spawn("held", "b")
            two_handles.end_elsewhere(other, two_handles.started(store, a.run_id))
            two_handles.started(store, b.run_id)
            other.post_command("stop", a.run_id, "stopped from the console")
            told = a.result(timeout=WAIT)  # (the poll's decision: the run's agent let go)
            gates["b"].set()
            went_on = b.result(timeout=WAIT)
    finally:
        gates["a"].set()
    assert told.status is RunStatus.CANCELLED and told.error == "elsewhere", told
    assert went_on.status is RunStatus.COMPLETED and went_on.result == "b", went_on
    kept = store.get_run(a.run_id)
    assert kept is not None and kept.status is RunStatus.CANCELLED
    assert kept.outcome is not None and kept.outcome.error == "elsewhere"


def test_a_stop_whose_writes_fail_tells_the_stopped_runs_caller(tmp_path: Path) -> None:
    """The store fails at the command poll's writes (here a trigger another connection put
    on the file refuses the stop's record, as a full disk would): the runtime goes through
    its outage, as for any store failure, and the stopped run's caller is told. Before, the
    decision's effects were lost with its writes, and the caller waited for ever."""
    from subagents.store.sqlite import SQLiteStore

    db = tmp_path / "runs.db"
    gate = threading.Event()
    agents = [FunctionAgent.create("held", _gated({"a": gate}))]
    with SQLiteStore(db) as store, SQLiteStore(db) as other:
        try:
            with Runtime(agents, store=store, command_poll_s=0.05) as rt:
                a = rt.spawn("held", "a")
                two_handles.started(store, a.run_id)
                stranger = sqlite3.connect(db)  # (a stranger's DDL, committed at once)
                with contextlib.closing(stranger), stranger:
                    stranger.execute(
                        "CREATE TRIGGER refuse_stop BEFORE UPDATE ON runs"
                        " WHEN NEW.status = 'cancelled'"
                        " BEGIN SELECT RAISE(ABORT, 'disk full (a test)'); END"
                    )
                other.post_command("stop", a.run_id, "stopped from the CLI")
                told = a.result(timeout=WAIT)
        finally:
            gate.set()
    assert told.status is RunStatus.FAILED, told
    assert "disk full (a test)" in (told.error or ""), told


def test_a_wait_saved_over_another_writers_end_keeps_that_end(
    stores: tuple[RunStore, RunStore],
) -> None:
    """Another writer ends a run this runtime holds; the run then waits (a live save of it:
    ``waiting``). Before: the save was taken and the run was live again in the store, the
    stranger's end erased, and its caller waited for a result (the one-end rule refused only
    an end over an end). The store refuses it now (an end is not undone), and the runtime
    takes the store's end: the run's agent stopped, its caller told that end, no outage (the
    other run goes on)."""
    store, other = stores
    gates = {"a": threading.Event(), "b": threading.Event()}

    async def waits(ctx: AgentContext) -> str:
        assert gates[ctx.task].wait(WAIT)
        mail = await ctx.receive(timeout=WAIT)  # nothing comes: it waits
        return f"read {mail}"

    agents = [FunctionAgent.create("waits", waits), FunctionAgent.create("held", _gated(gates))]
    try:
        with Runtime(agents, store=store, command_poll_s=0) as rt:
            a, b = rt.spawn("waits", "a"), rt.spawn("held", "b")
            two_handles.end_elsewhere(other, two_handles.started(store, a.run_id))
            ended = store.get_run(a.run_id)
            two_handles.started(store, b.run_id)
            gates["a"].set()  # it waits now: refused, the store's end taken
            told = a.result(timeout=WAIT)
            gates["b"].set()
            went_on = b.result(timeout=WAIT)
    finally:
        for gate in gates.values():
            gate.set()
    assert told.status is RunStatus.CANCELLED and told.error == "elsewhere", told
    kept = store.get_run(a.run_id)
    assert kept is not None and ended is not None
    assert (kept.status, kept.ended_at) == (RunStatus.CANCELLED, ended.ended_at)
    assert ends_of(store, a.run_id) == []  # (the stranger appended none; ours was dropped)
    assert went_on.status is RunStatus.COMPLETED and went_on.result == "b", went_on
    assert ends_of(store, b.run_id) == [EventKind.COMPLETED]


def test_a_background_childs_report_says_the_end_the_store_keeps(
    stores: tuple[RunStore, RunStore],
) -> None:
    """A background child ended by another writer, whose own end is then refused: its
    parent is mailed the end the store keeps (cancelled, the stranger's error), not the
    runtime's (completed, its result), and so is the mail the store keeps."""
    store, other = stores
    gate = threading.Event()

    async def lead(ctx: AgentContext) -> str:
        await ctx.spawn("held", "c", background=True)
        mail = await ctx.receive(timeout=WAIT)
        return "no report" if mail is None else mail.content

    agents = [FunctionAgent.create("lead", lead), FunctionAgent.create("held", _gated({"c": gate}))]
    try:
        with Runtime(agents, store=store, command_poll_s=0) as rt:
            parent = rt.spawn("lead", "p")
            wait_until(
                lambda: any(r.agent == "held" for r in store.list_runs()), "the child's record"
            )
            child = next(r for r in store.list_runs() if r.agent == "held")
            two_handles.end_elsewhere(other, two_handles.started(store, child.run_id))
            gate.set()  # its own end: refused; its report mailed
            report = parent.result(timeout=WAIT)
    finally:
        gate.set()
    assert report.status is RunStatus.COMPLETED, report
    assert report.result is not None and report.result.startswith("[background result] ")
    said = msgspec.json.decode(report.result.split(" ", 2)[2])
    assert (said["status"], said["error"], said["result"]) == ("cancelled", "elsewhere", None)
    kept = [m.content for m in store.mail_for(parent.run_id) if m.sender == child.run_id]
    assert kept == [report.result]
