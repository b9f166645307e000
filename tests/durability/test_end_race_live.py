"""A live save (a wait) of a run another writer ended, refused by the store and taken as
the store's end (``end_race.ended_here``: ``SupervisorCore.ended_elsewhere``), as a reviewer
checks it: the run's slot freed (a run queued behind it starts) and, a background child,
its parent mailed the end the store keeps (not the runtime's cancel "ended by another writer").

Every store: memory, SQLite (a second connection to the file), PostgreSQL (a second
connection: tests/pgserver.py)."""

from __future__ import annotations

import threading

import msgspec

import two_handles
from polling import wait_until
from subagents import FunctionAgent, Runtime
from subagents.behaviour.function import AgentContext
from subagents.messages import RunStatus
from subagents.store.base import RunStore

WAIT = 60.0


stores = two_handles.stores


def test_a_refused_wait_frees_the_slot_for_the_run_queued_behind(
    stores: tuple[RunStore, RunStore],
) -> None:
    """One slot for the agent (``per_agent=1``): the second run queues behind the first;
    the first, ended elsewhere, then waits (its wait refused, the store's end taken): its
    slot is freed and the second starts and completes (before the first's own wait would
    end: it waits longer than the test does)."""
    store, other = stores
    gate = threading.Event()

    async def lead(ctx: AgentContext) -> str:
        if ctx.task == "second":
            return "second"
        assert gate.wait(WAIT)
        await ctx.receive(timeout=3 * WAIT)  # its wait: a live save, refused
        return "read"

    agents = [FunctionAgent.create("lead", lead)]
    try:
        with Runtime(agents, store=store, command_poll_s=0, limits={"per_agent": 1}) as rt:
            first = rt.spawn("lead", "first")
            started = two_handles.started(store, first.run_id)
            second = rt.spawn("lead", "second")
            two_handles.end_elsewhere(other, started)
            gate.set()
            went_on = second.result(timeout=WAIT)  # the first's slot was freed
            told = first.result(timeout=WAIT)
    finally:
        gate.set()
    assert told.status is RunStatus.CANCELLED and told.error == "elsewhere", told
    assert went_on.status is RunStatus.COMPLETED and went_on.result == "second", went_on


def test_a_background_child_ended_elsewhere_that_waits_reports_the_kept_end(
    stores: tuple[RunStore, RunStore],
) -> None:
    """A background child ended by another writer that then waits (refused, ended here by
    ``ended_elsewhere``): its parent is mailed the end the store keeps, once."""
    store, other = stores
    gate = threading.Event()

    async def lead(ctx: AgentContext) -> str:
        await ctx.spawn("waits", "c", background=True)
        mail = await ctx.receive(timeout=WAIT)
        more = await ctx.receive(timeout=0.5)
        assert more is None, more  # (reported once)
        return "no report" if mail is None else mail.content

    async def waits(ctx: AgentContext) -> str:
        assert gate.wait(WAIT)
        await ctx.receive(timeout=WAIT)
        return "read"

    agents = [FunctionAgent.create("lead", lead), FunctionAgent.create("waits", waits)]
    try:
        with Runtime(agents, store=store, command_poll_s=0) as rt:
            parent = rt.spawn("lead", "p")
            wait_until(
                lambda: any(r.agent == "waits" for r in store.list_runs()), "the child's record"
            )
            child = next(r for r in store.list_runs() if r.agent == "waits")
            two_handles.end_elsewhere(other, two_handles.started(store, child.run_id))
            gate.set()
            report = parent.result(timeout=WAIT)
    finally:
        gate.set()
    assert report.status is RunStatus.COMPLETED, report
    assert report.result is not None and report.result.startswith("[background result] ")
    said = msgspec.json.decode(report.result.split(" ", 2)[2])
    assert (said["status"], said["error"]) == ("cancelled", "elsewhere"), said
    kept = [m.content for m in store.mail_for(parent.run_id) if m.sender == child.run_id]
    assert kept == [report.result]
