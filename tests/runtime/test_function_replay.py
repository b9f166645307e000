"""Exact replay of function agents, in process: a restarted function agent (``restart:
transient``) runs again from the top and is handed, call by call, what its earlier start was
(the mail it received, the mail its mailbox read took, a stop's answer), without anything
being done twice; a replay that goes another way fails with a clear error.

The crash case (SIGKILL of the process) is tests/durability/test_function_replay.py."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from subagents.actors import agent as agent_actor
from subagents.behaviour.function import (
    NONDETERMINISTIC,
    AgentContext,
    FunctionAgent,
    FunctionBehaviour,
)
from subagents.messages import Event, EventKind, RunStatus
from subagents.runtime import Runtime
from subagents.store.base import RunStore

from .conftest import WAIT, Events

pytestmark = pytest.mark.usefixtures("no_new_threads")


async def idle(ctx: AgentContext) -> str:
    await ctx.receive(timeout=WAIT * 3)
    return "woke"


async def twice(ctx: AgentContext) -> str:
    """Mails its parent twice in one step: they arrive together."""
    ctx.send(ctx.parent_run_id or "", "a")
    await ctx.send(ctx.parent_run_id or "", "b")
    return "sent"


def test_a_restarted_function_gets_its_mail_and_its_stop_answer_again(store: RunStore) -> None:
    starts: list[int] = []

    async def boss(ctx: AgentContext) -> dict[str, Any]:
        starts.append(1)
        child = await ctx.spawn("idle", "wait", background=True)
        mail = await ctx.receive(timeout=WAIT)
        stopped = await ctx.stop(child)
        if len(starts) == 1:
            raise RuntimeError("crash after the receive and the stop")
        assert mail is not None
        return {"mail": mail.content, "stopped": stopped == [child]}

    events = Events()
    agents = [FunctionAgent.create("boss", boss, restart="transient"), idle]
    with Runtime(agents, store=store) as rt:
        rt.subscribe(events)
        handle = rt.spawn("boss", "go")
        events.wait_count(EventKind.STARTED, "idle", 1)
        events.wait_count(EventKind.WAITING, "boss", 1)
        rt.send(handle.run_id, "hello")
        outcome = handle.result(timeout=WAIT)
        assert outcome.status is RunStatus.COMPLETED, outcome
        assert outcome.value == {"mail": "hello", "stopped": True}
        assert len(starts) == 2
        assert events.of(EventKind.RESTARTED, "boss")
        (child,) = rt.runs(agent="idle")  # spawned once, stopped once
        assert child.status is RunStatus.CANCELLED


def test_a_restarted_function_gets_the_same_mailbox_read_and_receive_timeout(
    store: RunStore,
) -> None:
    starts: list[int] = []

    async def boss(ctx: AgentContext) -> list[Any]:
        starts.append(1)
        await ctx.spawn("twice", "go")
        first = await ctx.receive(timeout=WAIT)
        box = ctx.mailbox()  # "b" came with "a", in the same delivery
        nothing = await ctx.receive(timeout=0.01)
        if len(starts) == 1:
            raise RuntimeError("crash after the mailbox read")
        assert first is not None and nothing is None
        return [first.content, [m.content for m in box]]

    agents = [FunctionAgent.create("boss", boss, restart="transient"), twice]
    with Runtime(agents, store=store) as rt:
        outcome = rt.run("boss", "go", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED, outcome
        assert outcome.value == ["a", ["b"]]
        assert len(starts) == 2
        assert len(rt.runs(agent="twice")) == 1


def test_a_replay_that_calls_something_else_fails_naming_the_position_and_both_calls(
    store: RunStore,
) -> None:
    starts: list[int] = []

    async def fickle(ctx: AgentContext) -> str:
        starts.append(1)
        await ctx.spawn("idle", "first", background=True)
        await ctx.spawn("idle", "second" if len(starts) == 1 else "other", background=True)
        if len(starts) == 1:
            raise RuntimeError("crash")
        return "done"

    agents = [FunctionAgent.create("fickle", fickle, restart="transient"), idle]
    with Runtime(agents, store=store) as rt:
        outcome = rt.run("fickle", "go", wait=WAIT)
        assert outcome.status is RunStatus.FAILED
        assert outcome.error_kind == NONDETERMINISTIC
        assert outcome.error is not None
        assert "non-deterministic replay of fickle" in outcome.error
        assert "at call 1 its earlier start called spawn('idle', 'second')" in outcome.error
        assert "this start spawn('idle', 'other')" in outcome.error
        assert len(starts) == 2  # not restarted again: a restart would replay the same way
        assert sorted(r.task for r in rt.runs(agent="idle")) == ["first", "second"]


def test_a_replay_that_returns_before_the_calls_it_made_fails(store: RunStore) -> None:
    starts: list[int] = []

    async def quitter(ctx: AgentContext) -> str:
        starts.append(1)
        await ctx.spawn("idle", "one", background=True)
        if len(starts) > 1:
            return "gave up early"
        await ctx.send("idle", "two")
        raise RuntimeError("crash")

    agents = [FunctionAgent.create("quitter", quitter, restart="transient"), idle]
    with Runtime(agents, store=store) as rt:
        outcome = rt.run("quitter", "go", wait=WAIT)
        assert outcome.error_kind == NONDETERMINISTIC
        assert outcome.error is not None
        (idle_run,) = rt.runs(agent="idle")  # the earlier send, shown from its mail's record
        assert f"at call 1 its earlier start called send('{idle_run.run_id}', 'two')" in (
            outcome.error
        )
        assert "this start nothing: it returned" in outcome.error


def test_a_retry_starts_anew_and_ignores_the_earlier_journal(store: RunStore) -> None:
    starts: list[int] = []

    async def retried(ctx: AgentContext) -> list[str]:
        starts.append(1)
        out = await ctx.spawn("twice", "go")
        if len(starts) == 1:
            raise RuntimeError("first attempt fails")
        got = [await ctx.receive(timeout=WAIT) for _ in range(2)]
        return [str(out.result), *(m.content for m in got if m is not None)]

    with Runtime([retried, twice], store=store) as rt:
        outcome = rt.run("retried", "go", wait=WAIT, on_failure="retry", max_retries=1)
        assert outcome.status is RunStatus.COMPLETED, outcome
        assert outcome.value == ["sent", "a", "b"]
        assert len(rt.runs(agent="twice")) == 2  # the retry did spawn again


def test_sleep_waits_without_a_thread_and_rejects_nonsense() -> None:
    async def napper(ctx: AgentContext) -> str:
        await ctx.gather(ctx.sleep(0.01), ctx.sleep(0))
        try:
            ctx.sleep(float("nan"))
        except TypeError as exc:
            return f"slept; {exc}"
        return "slept"

    with Runtime([napper]) as rt:
        outcome = rt.run("napper", "go", wait=WAIT)
        assert outcome.result == "slept; sleep(): seconds must be a number of seconds, got nan"


def test_a_replayed_send_with_other_content_is_a_divergence(store: RunStore) -> None:
    starts: list[int] = []

    async def chatty(ctx: AgentContext) -> str:
        starts.append(1)
        child = await ctx.spawn("idle", "listen", background=True)
        await ctx.send(child, "hello" if len(starts) == 1 else "goodbye")
        if len(starts) == 1:
            raise RuntimeError("crash")
        return "done"

    agents = [FunctionAgent.create("chatty", chatty, restart="transient"), idle]
    with Runtime(agents, store=store) as rt:
        outcome = rt.run("chatty", "go", wait=WAIT)
        (child,) = rt.runs(agent="idle")
        assert outcome.error_kind == NONDETERMINISTIC
        assert outcome.error is not None
        assert f"at call 1 its earlier start called send('{child.run_id}', 'hello')" in (
            outcome.error
        )
        assert f"this start send('{child.run_id}', 'goodbye')" in outcome.error


def test_a_restarted_function_is_handed_the_status_it_saw(store: RunStore) -> None:
    seen: list[tuple[str, str]] = []

    async def boss(ctx: AgentContext) -> str:
        child = await ctx.spawn("idle", "wait", background=True)
        status = ctx.status(child)  # before the stop: live; replayed as it was seen
        try:
            ctx.status("r-of-no-tree")
        except ValueError as exc:
            missing = str(exc)
        await ctx.stop(child)
        seen.append((str(status.status), missing))
        if len(seen) == 1:
            raise RuntimeError("crash after the stop")
        return "done"

    agents = [FunctionAgent.create("boss", boss, restart="transient"), idle]
    with Runtime(agents, store=store) as rt:
        outcome = rt.run("boss", "go", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED, outcome
        (child,) = rt.runs(agent="idle")
        assert child.status is RunStatus.CANCELLED  # what a live status would say now
    assert len(seen) == 2 and seen[0] == seen[1]
    assert seen[0][0] in ("queued", "running", "waiting")
    assert "no such run in this tree" in seen[0][1]


def test_a_status_the_supervisor_did_not_answer_in_time_is_journaled_as_such(
    store: RunStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ctx.status`` asked of a stalled supervisor times out (``agent.ASK_TIMEOUT_S``): the
    function is told so, and its journal keeps what happened, so a replay hands it the same
    words. It said (and replayed) "the runtime is closing: no status", which it was not."""
    monkeypatch.setattr(agent_actor, "ASK_TIMEOUT_S", 1.0)
    timed_out, stalled = threading.Event(), threading.Event()
    seen: list[str] = []

    async def asker(ctx: AgentContext) -> str:
        try:
            said = f"status: {ctx.status(ctx.run_id).status}"
        except ValueError as exc:
            said = str(exc)
        timed_out.set()
        seen.append(said)
        if len(seen) == 1:
            raise RuntimeError("crash after the status")
        return said

    def stall(event: Event) -> None:
        """On the supervisor's thread: stalls it once, as the asker starts."""
        if event.kind is EventKind.STARTED and not stalled.is_set():
            stalled.set()
            timed_out.wait(WAIT)

    agents = [FunctionAgent.create("asker", asker, restart="transient")]
    with Runtime(agents, store=store) as rt:
        rt.subscribe(stall)
        outcome = rt.run("asker", "go", wait=WAIT)
    assert outcome.status is RunStatus.COMPLETED, outcome
    assert len(seen) == 2 and seen[0] == seen[1]  # the restart replayed what it saw
    assert "did not answer" in seen[0] and "closing" not in seen[0], seen[0]


def test_a_restarted_start_loads_its_journal_into_maps_of_its_own(store: RunStore) -> None:
    """Most starts resume nothing: their journal maps are ``FunctionBehaviour``'s read-only
    empty ones (five dicts fewer made per run). A restarted start loads maps of its own and
    replays from them; the class's stay empty and unwritable for every other run."""
    starts: list[int] = []

    async def flaky(ctx: AgentContext) -> str:
        starts.append(1)
        mail = await ctx.receive(timeout=0.01)  # journaled: replayed by the second start
        if len(starts) == 1:
            raise RuntimeError("crash after a journaled call")
        return f"again, mail {mail}"

    def plain(ctx: AgentContext) -> str:
        return ctx.task

    agents = [FunctionAgent.create("flaky", flaky, restart="transient"), plain]
    with Runtime(agents, store=store) as rt:
        outcome = rt.run("flaky", "go", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED, outcome
        assert outcome.value == "again, mail None" and len(starts) == 2
        assert rt.run("plain", "after it", wait=WAIT).value == "after it"
    for name in ("recovered", "journaled", "mails", "sent", "agents"):
        shared = getattr(FunctionBehaviour, name)
        assert len(shared) == 0, name
        with pytest.raises(TypeError):
            shared["k"] = []
