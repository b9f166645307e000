"""A reply meant for a start that is over never reaches the next start of its run.

The supervisor addresses its replies (spawn answers, mail acknowledgements, stop replies) by
run id, and a restart keeps the run's call keys (``run_id:N``). A parent failed by its
``fail_parent`` child is restarted while its first start's actor may still be inside a
handling (here: held by the test); what that old start then asks for is refused (its start
is over), and that refusal, told to the run, settled the NEW start's call with the same key:
its ``receive()`` raised ``SpawnRefused('requesting run ... is not running')`` (or a
``MailError``, a ``StopError``) and the run failed. Now the supervisor does not answer a
start once a later start of its run has begun (``RunTable.answers``).

Held with events, not sleeps: the old start's request is made only once the new start
waits on the call with the same key; the old actor's stop (its handling over, so its
request told) is waited on; then the mail the new start waits for is sent through the
supervisor, behind the old request: a refusal told to the run would be in its mailbox first.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from subagents.behaviour.function import AgentContext, FunctionAgent
from subagents.messages import EventKind, Mail, RunStatus
from subagents.runtime import Runtime
from subagents.store.sqlite import SQLiteStore

from .conftest import WAIT, Events

pytestmark = pytest.mark.usefixtures("no_new_threads")


class _Scene:
    """The agents of one case and the events that hold their starts in step with the test."""

    def __init__(self, stale_call: str) -> None:
        self.stale_call = stale_call
        self.fail, self.old_may_go, self.first_read, self.new_waiting = (
            threading.Event() for _ in range(4)
        )
        self.starts = 0
        self.old_actor: list[Any] = []  # the first start's actor ref
        self.seen: list[tuple[str, ...]] = []

    def release(self) -> None:
        """Let every held thread go (also when the test failed midway)."""
        self.fail.set()
        self.old_may_go.set()

    def agents(self) -> list[FunctionAgent]:
        return [
            FunctionAgent.create("root", self.root),
            FunctionAgent.create("parent", self.parent, restart="transient", restart_backoff=0.0),
            FunctionAgent.create("doomed", self.doomed),
        ]

    async def root(self, ctx: AgentContext) -> str:
        await ctx.spawn("parent", "p", background=True)
        ended: Mail | None = await ctx.receive(timeout=WAIT)  # the parent's end
        return "heard" if ended is not None else "nothing"

    async def doomed(self, ctx: AgentContext) -> str:
        assert self.fail.wait(WAIT)
        raise RuntimeError("child failed")

    async def parent(self, ctx: AgentContext) -> str:
        self.starts += 1
        if self.starts > 2:  # (only without the fix: the new start failed and went again)
            return "a third start"
        child: str = await ctx.spawn("doomed", "fail", background=True, on_failure="fail_parent")
        if self.starts == 2:  # the new start: replays the spawn and the first receive
            first: Mail | None = await ctx.receive(timeout=WAIT)
            self.new_waiting.set()
            try:
                second: Mail | None = await ctx.receive(timeout=WAIT)  # the key of the old call
            except Exception as exc:
                self.seen.append(("new start raised", repr(exc)))
                raise
            got = (first.content if first else "", second.content if second else "")
            self.seen.append(("new start received", *got))
            return "+".join(got)
        # the first start: reads its mail, then is held inside this handling while its
        # child fails and the run is restarted
        await ctx.receive(timeout=WAIT)
        self.old_actor.append(ctx._b.port.actor_ref)  # type: ignore[attr-defined]
        self.first_read.set()
        assert self.old_may_go.wait(WAIT)
        if self.stale_call == "spawn":
            await ctx.spawn("doomed", "again", background=True)
        elif self.stale_call == "send":
            await ctx.send(ctx.parent_run_id or "", "from the old start")
        elif self.stale_call == "stop_children":  # a StopRequested
            await ctx.stop_children()
        else:
            await ctx.stop(child)
        self.seen.append(("old start answered",))
        return "the old start"


@pytest.mark.parametrize("stale_call", ["spawn", "send", "stop", "stop_children"])
def test_a_refusal_of_an_old_starts_request_does_not_settle_the_new_starts_call(
    tmp_path: Path, stale_call: str
) -> None:
    """The new start's ``receive()`` at the key of the old start's refused request gets the
    mail sent to it; the run completes with it. (Without the fix: the refusal settled it, the
    new start raised it and the run failed.)"""
    scene = _Scene(stale_call)
    events = Events()
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        with Runtime(scene.agents(), store=store) as rt:
            rt.subscribe(events)
            rt.spawn("root", "go")
            events.wait_count(EventKind.STARTED, "parent", 1)
            (parent,) = events.of(EventKind.STARTED, "parent")
            rt.send(parent.run_id, "M")
            assert scene.first_read.wait(WAIT)
            scene.fail.set()  # the child fails: the parent restarts
            assert scene.new_waiting.wait(WAIT), events.describe()
            scene.old_may_go.set()  # the old start asks, now that the new one waits
            (old_actor,) = scene.old_actor
            assert old_actor.actor_stopped.wait(WAIT)  # its request is told by now
            rt.send(parent.run_id, "second")  # behind the old request, at the supervisor
            events.wait_for(
                lambda items: any(
                    e.run_id == parent.run_id and e.kind in (EventKind.COMPLETED, EventKind.FAILED)
                    for e in items
                )
            )
            (record,) = rt.runs(agent="parent")
            assert scene.seen == [("new start received", "M", "second")]
            assert record.status is RunStatus.COMPLETED
            assert [e.run_id for e in events.of(EventKind.COMPLETED, "parent")] == [parent.run_id]
            assert scene.starts == 2
    finally:
        scene.release()
        store.close()
