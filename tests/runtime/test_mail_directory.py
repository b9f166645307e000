"""The mail directory (``actors/mail_desk.py``) lists the live runs' agents only: a run whose
agent was told to stop is out of it, whatever else the same decision did to it first."""

from __future__ import annotations

import threading
from typing import Any

from subagents.behaviour.function import AgentContext, FunctionAgent
from subagents.messages import Event, EventKind, RunStatus
from subagents.runtime import Runtime
from subagents.supervision.limits import Limits

from .conftest import WAIT


def _directory(rt: Runtime) -> Any:
    supervisor = rt._hosting.supervisor
    assert supervisor is not None
    effector = supervisor._ref.proxy().effector.get(timeout=WAIT)
    assert effector.mail is not None  # (the memory store: its agents take mail straight)
    return effector.mail.directory


def test_a_queued_run_started_and_stopped_by_one_cancel_is_not_left_listed() -> None:
    """A cancel walk frees a slot (a worker ends) and so starts a queued sibling, which the
    same walk then stops: its ``StartRun`` and its ``StopAgent`` come in one decision, in
    that order. The effector unlists the runs a decision stops before carrying any of it
    out, and the start listed it again: the stopped run stayed in the directory, its
    stopped agent's mail taken straight as to a live run, and its entry kept for good."""
    started, release = threading.Event(), threading.Event()

    def worker(ctx: AgentContext) -> str:
        started.set()
        release.wait(WAIT)  # working (not waiting): its slot is not lent to the queued one
        return ctx.task

    async def lead(ctx: AgentContext) -> Any:
        first = ctx.spawn("worker", "a")
        second = ctx.spawn("worker", "b")  # queued: one worker at a time
        return await ctx.gather(first, second)

    queued = threading.Event()

    def on_event(event: Event) -> None:
        if event.kind is EventKind.QUEUED:
            queued.set()

    agents = [FunctionAgent.create("lead", lead), FunctionAgent.create("worker", worker)]
    with Runtime(agents, limits=Limits(max_concurrency=8, per_agent=1)) as rt:
        try:
            rt.subscribe(on_event)
            handle = rt.spawn("lead", "go")
            assert started.wait(WAIT) and queued.wait(WAIT)
            children = [r.run_id for r in rt.store.list_runs() if r.parent_run_id]
            assert len(children) == 2
            stopped = rt.stop(handle.run_id)
            assert set(stopped) == {handle.run_id, *children}
            assert handle.result(WAIT).status is RunStatus.CANCELLED
            directory = _directory(rt)
            assert [r for r in stopped if directory.get(r) is not None] == []
        finally:
            release.set()
