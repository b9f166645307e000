"""Runs started from the queue park at their first wait by themselves, with real actors.

Four function agents that wait for mail, started with ``spawn_many`` under one slot per agent:
the first starts at once (nobody queued behind it: it is asked to park, as before); the
second and third start from the queue with runs of their key behind them, so each parks at
its wait by itself and says so (its ``parked`` event has ``at_wait``); the fourth has nobody
behind it and keeps its slot. Then each gets mail: the parked ones take a slot again, one at
a time, and every run ends with what it received (supervision/parking.py; the decisions
alone: tests/supervision/test_park_at_wait.py)."""

from __future__ import annotations

from subagents import FunctionAgent, Limits, Runtime
from subagents.behaviour.function import AgentContext
from subagents.messages import EventKind, RunStatus

from .conftest import WAIT, Events, SlotTally


async def idle(ctx: AgentContext) -> str:
    mail = await ctx.receive(timeout=WAIT)
    return "no mail" if mail is None else mail.content


def test_runs_started_from_the_queue_lend_their_slot_at_their_wait_unasked() -> None:
    events, tally = Events(), SlotTally()
    with Runtime([FunctionAgent.create("idle", idle)], limits=Limits(per_agent=1)) as rt:
        rt.subscribe(events)
        rt.subscribe(tally)
        handles = rt.spawn_many([("idle", str(i)) for i in range(4)], timeout=WAIT)
        ids = [h.run_id for h in handles]  # type: ignore[union-attr]
        events.wait_count(EventKind.WAITING, "idle", 4)
        events.wait_count(EventKind.PARKED, "idle", 3)
        parked = {e.run_id: e.data for e in events.of(EventKind.PARKED)}
        assert parked == {ids[0]: {}, ids[1]: {"at_wait": True}, ids[2]: {"at_wait": True}}
        for run_id in ids:
            rt.send(run_id, f"to {run_id}")
        outcomes = [h.result(WAIT) for h in handles]  # type: ignore[union-attr]
    assert [(o.status, o.result) for o in outcomes] == [
        (RunStatus.COMPLETED, f"to {run_id}") for run_id in ids
    ]
    assert tally.max_of("agent:") == 1  # never two working at once


async def reporter(ctx: AgentContext) -> str:
    await ctx.send(ctx.task, "done")  # its first wait: its mail's id, which comes at once
    return "sent"


async def collector(ctx: AgentContext) -> str:
    for _ in range(3):
        ctx.spawn("reporter", ctx.run_id, background=True)
    done = 0
    while done < 3:  # (the children's ends come as mail too: background)
        mail = await ctx.receive(timeout=WAIT)
        if mail is None:
            return f"{done} done"
        done += mail.content == "done"
    return "3 done"


def test_a_run_whose_first_wait_is_its_own_mails_id_takes_it_before_it_parks() -> None:
    """Children started from the queue (one at a time under their parent) whose first wait is
    the id of the mail they just sent: the mail goes straight to the parent and its id comes
    back in the same handling, so each child ends there, holding its slot; it never lends it
    to have to ask for it back (a ``parked`` and an ``unparked`` event per child, and two
    messages more each, before the agent took its mail's id ahead of parking)."""
    events = Events()
    agents = [
        FunctionAgent.create("reporter", reporter),
        FunctionAgent.create("collector", collector),
    ]
    with Runtime(agents, limits=Limits(max_children=1)) as rt:
        rt.subscribe(events)
        outcome = rt.run("collector", "go", timeout=WAIT)
    assert (outcome.status, outcome.result) == (RunStatus.COMPLETED, "3 done")
    assert events.of(EventKind.QUEUED, "reporter") != []  # (they did start from the queue)
    assert [e.kind for e in events.of(EventKind.PARKED) + events.of(EventKind.UNPARKED)] == []
