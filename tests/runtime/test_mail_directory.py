"""The mail directory (``actors/mail_desk.py``) lists the live runs' agents only: a run whose
agent was told to stop is out of it, whatever else the same decision did to it first."""

from __future__ import annotations

import threading
from typing import Any

import pykka
import pytest

from subagents.actors.agent import AgentActor, AgentKit
from subagents.actors.mail_desk import MailDesk
from subagents.actors.pooled import Dispatcher
from subagents.actors.pooled_agent import PooledAgentActor
from subagents.actors.threads import ThreadPool
from subagents.actors.timer import TimerService
from subagents.behaviour.function import AgentContext, FunctionAgent
from subagents.definitions.spec import AgentSpec
from subagents.messages import Event, EventKind, RunRecord, RunStatus
from subagents.runtime import Runtime
from subagents.supervision.effects import StartRun
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


class _Looking:
    """A behaviour that, as the first thing its run does, looks itself up in the directory."""

    def __init__(self, directory: Any, run_id: str, seen: list[Any], ready: threading.Event):
        self.directory, self.run_id, self.seen, self.ready = directory, run_id, seen, ready

    def start(self, checkpoint: Any, pending_mail: Any, recovered: Any = ()) -> None:
        self.seen.append(self.directory.get(self.run_id))
        self.ready.set()

    def on_message(self, message: Any) -> None:
        pass

    def unread_mail(self) -> tuple[str, ...]:
        return ()

    def close(self) -> None:
        pass


@pytest.mark.parametrize("host", ["pooled", "own_thread"])
def test_a_started_run_is_listed_before_any_of_its_code_runs(host: str) -> None:
    """The first thing a run's behaviour does finds its start listed. The effector listed
    it after the actor's ``start`` returned: the start's handling, on another thread, could
    run first, and a first mail flushed then went by the supervisor (the sender not found
    in the directory), which a crash test that forced its mail straight saw under load. An
    actor started alone (no effector) lists itself now: without it, it is never listed."""
    dispatcher = Dispatcher(size=2, name="t-listed") if host == "pooled" else None
    pool, timer = ThreadPool(name="t-listed-own"), TimerService()
    desk = MailDesk(limits=Limits(), generation=lambda: 0, record=None)
    seen: list[Any] = []
    ready = threading.Event()
    start = StartRun(
        record=RunRecord(run_id="r1", agent="looking", task="t", root_run_id="r0"),
        spec=AgentSpec(name="looking", description="d"),
        deadline=0.0,
        attempt=3,
    )
    kit = AgentKit(
        supervisor=pykka.ThreadingActor.start(),
        timer=timer,
        behaviour_for=lambda _: lambda port: _Looking(desk.directory, "r1", seen, ready),
        pool=None if dispatcher is not None else pool,
        mail=desk,
    )
    actor = PooledAgentActor if dispatcher is not None else AgentActor
    where: dict[str, Any] = {"dispatcher": dispatcher} if dispatcher is not None else {}
    ref = actor.start(start, threading.Event(), kit, **where)
    try:
        assert ready.wait(WAIT)
        (listed,) = seen
        assert listed is not None, "the run's code ran before its start was listed"
        assert (listed.ref, listed.attempt, listed.root_run_id) == (ref, 3, "r0")
    finally:
        ref.stop(timeout=WAIT)
        kit.supervisor.stop(timeout=WAIT)
        timer.stop()
        if dispatcher is not None:
            assert dispatcher.close(WAIT) == []
        assert pool.close(WAIT) == []
