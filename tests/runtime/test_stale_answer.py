"""The answer to a request of a start that is over must not reach the run's current start.

A restarted function agent's calls have the same keys as its earlier start's (positional:
``run_id:N``, the prefix changes only on a retry). The earlier start's actor may still be
finishing a handling after the restart; a spawn (or a mail) it asks for then is refused
("requesting run ... is not running"). The refusal was told by run id, so to the CURRENT
start, which took it as the answer to its own pending call of the same key: its receive
raised the old start's ``SpawnRefused``."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from subagents.behaviour.function import AgentContext, FunctionAgent
from subagents.messages import EventKind, Mail
from subagents.runtime import Runtime
from subagents.store.sqlite import SQLiteStore

from .conftest import WAIT, Events

pytestmark = pytest.mark.usefixtures("no_new_threads")


def test_a_refusal_of_an_earlier_starts_request_leaves_the_current_start_alone(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    events = Events()
    fail, old_may_go, old_blocked = threading.Event(), threading.Event(), threading.Event()
    new_waiting = threading.Event()
    old_stopped: list[threading.Event] = []
    starts: list[int] = []
    heard: list[str] = []
    raised: list[BaseException] = []

    async def doomed(ctx: AgentContext) -> str:
        assert fail.wait(WAIT)
        raise RuntimeError("the child failed")

    async def parent(ctx: AgentContext) -> str:
        starts.append(1)
        # call 1 (replayed by the restart): the child whose failure restarts this run
        await ctx.spawn("doomed", "fail", background=True, on_failure="fail_parent")
        if len(starts) == 1:  # the first start: still in this handling after the restart
            port: Any = ctx._b.port  # its agent actor: stopped once this handling ends
            old_stopped.append(port.actor_stopped)  # (pykka's Event)
            old_blocked.set()
            assert old_may_go.wait(WAIT)
            # call 2, asked by a start that is over: refused ("is not running"); told to the
            # supervisor as this handling ends, before the actor stops (the restart told it to)
            await ctx.spawn("doomed", "again", background=True)
            return "old"
        new_waiting.set()  # (in the handling that makes call 2 pending: told after it)
        try:  # call 2 of the current start: waits for the test's mail
            mail: Mail | None = await ctx.receive(timeout=WAIT)
        except Exception as exc:
            raised.append(exc)
            return "raised"
        heard.append(mail.content if mail is not None else "(timed out)")
        return "heard"

    async def root(ctx: AgentContext) -> str:
        await ctx.spawn("parent", "p", background=True)
        got: Mail | None = await ctx.receive(timeout=WAIT)  # the parent's end
        return "ended" if got is not None else "no end heard"

    agents = [
        FunctionAgent.create("root", root),
        FunctionAgent.create("parent", parent, restart="transient", restart_backoff=0.0),
        FunctionAgent.create("doomed", doomed),
    ]
    try:
        with Runtime(agents, store=store) as rt:
            rt.subscribe(events)
            rt.spawn("root", "go")
            assert old_blocked.wait(WAIT)
            (parent_run,) = rt.runs(agent="parent")
            fail.set()
            events.wait_count(EventKind.RESTARTED, "parent", 1)
            assert new_waiting.wait(WAIT)
            old_may_go.set()
            # the old start's actor has stopped: its spawn request is in the reports' line,
            # which the supervisor takes before the next message (the test's mail)
            assert old_stopped[0].wait(WAIT)
            rt.send(parent_run.run_id, "for the current start")
            events.wait_count(EventKind.COMPLETED, "parent", 1)
            assert raised == [] and heard == ["for the current start"]
    finally:
        fail.set()
        old_may_go.set()
        store.close()
