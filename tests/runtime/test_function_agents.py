"""Function agents: Python callables as agents, the runtime as a plain concurrency runtime."""

from __future__ import annotations

import threading

import msgspec
import pytest

from subagents.behaviour.function import (
    AgentContext,
    FunctionAgent,
    SpawnRefused,
    StopError,
)
from subagents.messages import EventKind, Mail, Outcome, RunStatus
from subagents.runtime import Runtime
from subagents.supervision.limits import Limits

from .conftest import WAIT, Events

pytestmark = pytest.mark.usefixtures("no_new_threads")


def double(ctx: AgentContext) -> str:
    """Doubles the number in its task."""
    return str(int(ctx.task) * 2)


def test_a_sync_function_is_an_agent() -> None:
    with Runtime({"double": double}) as rt:
        outcome = rt.run("double", "21", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED
        assert outcome.result == "42"
        (agent,) = rt.agents()
        assert agent.description == "Doubles the number in its task."


def test_an_async_function_spawns_and_gathers_children() -> None:
    async def fan(ctx: AgentContext) -> list[str | None]:
        outcomes: list[Outcome] = await ctx.gather(*(ctx.spawn("double", str(i)) for i in range(5)))
        return [o.result for o in outcomes]

    events = Events()
    with Runtime({"fan": fan, "double": double}) as rt:
        rt.subscribe(events)
        outcome = rt.run("fan", "go", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED
        assert msgspec.json.decode(outcome.result or "") == ["0", "2", "4", "6", "8"]
        children = rt.runs(agent="double")
        assert len(children) == 5
        assert {c.parent_run_id for c in children} == {outcome.run_id}
        assert {c.depth for c in children} == {1}
        assert len(events.of(EventKind.COMPLETED, "double")) == 5
        # the parent went back to its mailbox while its children ran
        assert events.of(EventKind.WAITING, "fan")


def test_send_and_receive_between_function_agents() -> None:
    async def echo(ctx: AgentContext) -> str:
        mail: Mail | None = await ctx.receive(timeout=WAIT)
        assert mail is not None
        await ctx.send(mail.sender, f"echo: {mail.content}", reply_to=mail.mail_id)
        return "echoed"

    async def caller(ctx: AgentContext) -> str:
        child_id: str = await ctx.spawn("echo", "wait for mail", background=True)
        mail_id: str = await ctx.send(child_id, "hello")
        reply: Mail | None = await ctx.receive(timeout=WAIT)
        assert reply is not None
        assert reply.reply_to == mail_id
        assert reply.sender == child_id and reply.sender_agent == "echo"
        return reply.content

    with Runtime({"caller": caller, "echo": echo}) as rt:
        outcome = rt.run("caller", "go", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED, outcome
        assert outcome.result == "echo: hello"


def test_receive_times_out_with_none() -> None:
    async def lonely(ctx: AgentContext) -> str:
        mail = await ctx.receive(timeout=0.05)
        return "none" if mail is None else "mail"

    with Runtime({"lonely": lonely}) as rt:
        assert rt.run("lonely", "x", wait=WAIT).result == "none"


def test_stop_a_child_that_waits_for_mail() -> None:
    async def waiter(ctx: AgentContext) -> str:
        await ctx.receive(timeout=WAIT * 3)
        return "never stopped"

    async def boss(ctx: AgentContext) -> str:
        child_id: str = await ctx.spawn("waiter", "wait", background=True)
        stopped: list[str] = await ctx.stop(child_id)
        assert stopped == [child_id]
        try:
            await ctx.stop(ctx.run_id)
        except StopError as exc:
            return f"stopped {len(stopped)}; refused: {exc}"
        return "stopping myself was allowed"

    with Runtime({"boss": boss, "waiter": waiter}) as rt:
        outcome = rt.run("boss", "go", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED
        assert outcome.result is not None
        assert outcome.result.startswith("stopped 1; refused:")
        assert "only stop its own descendants" in outcome.result
        (child,) = rt.runs(agent="waiter")
        assert child.status is RunStatus.CANCELLED


def test_a_refused_spawn_raises_in_the_function() -> None:
    async def greedy(ctx: AgentContext) -> str:
        try:
            await ctx.spawn("ghost", "x")
        except SpawnRefused as exc:
            first = str(exc)
        try:
            await ctx.spawn("greedy", "deeper")
        except SpawnRefused as exc:
            return f"{first} | {exc}"
        return "spawned"

    agent = FunctionAgent.create("greedy", greedy, metadata={"allowSelfSpawn": True})
    with Runtime([agent], limits=Limits(max_depth=0)) as rt:
        outcome = rt.run("greedy", "x", wait=WAIT)
        assert outcome.result == (
            "unknown agent 'ghost'; known agents: greedy | depth limit: a child of greedy would"
            " be at depth 1, the limit is 0"
        )


def test_a_spawn_given_no_string_raises_a_type_error_naming_it_as_rt_spawn_does() -> None:
    """The same mistake as ``rt.spawn(5, "t")``: the same class, naming the argument (it
    was a ``SpawnRefused`` from the supervisor, ``agent and task must be strings``)."""

    async def careless(ctx: AgentContext) -> str:
        said = []
        for agent, task in ((5, "t"), ("careless", None)):
            try:
                await ctx.spawn(agent, task)  # type: ignore[arg-type]
            except TypeError as exc:
                said.append(str(exc))
        return " | ".join(said)

    agent = FunctionAgent.create("careless", careless, metadata={"allowSelfSpawn": True})
    with Runtime([agent]) as rt:
        outcome = rt.run("careless", "x", wait=WAIT)
        assert (
            outcome.result
            == "agent must be a string, got int | task must be a string, got NoneType"
        )


def test_a_crashing_function_fails_its_run_and_its_parent_hears_it() -> None:
    def broken(ctx: AgentContext) -> str:
        raise RuntimeError("bug in user code")

    async def broken_async(ctx: AgentContext) -> str:
        await ctx.receive(timeout=0.0)
        raise KeyError("later")

    async def parent(ctx: AgentContext) -> str:
        a, b = await ctx.gather(ctx.spawn("broken", "x"), ctx.spawn("broken_async", "y"))
        return f"{a.status}:{a.error} / {b.status}:{b.error}"

    agents = {"broken": broken, "broken_async": broken_async, "parent": parent}
    with Runtime(agents) as rt:
        outcome = rt.run("parent", "go", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED
        assert outcome.result == (
            "failed:RuntimeError: bug in user code / failed:KeyError: 'later'"
        )
        direct = rt.run("broken", "x", wait=WAIT)
        assert direct.status is RunStatus.FAILED
        assert direct.error_kind == "crash"


@pytest.mark.parametrize("seconds", [0, 0.01])
def test_awaiting_asyncio_is_a_clear_error_naming_ctx_sleep(
    seconds: float, capfd: pytest.CaptureFixture[str]
) -> None:
    """``asyncio.sleep(0)`` yields None to the driver; ``asyncio.sleep(0.01)`` raises
    "no running event loop" inside asyncio before yielding anything: both say what to do."""
    import asyncio

    async def sleeper(ctx: AgentContext) -> str:
        await asyncio.sleep(seconds)
        return "slept"

    with Runtime({"sleeper": sleeper}) as rt:
        outcome = rt.run("sleeper", "x", wait=WAIT)
        assert outcome.status is RunStatus.FAILED
        assert outcome.error_kind == "crash"
        assert outcome.error is not None
        assert outcome.error.startswith("function agent sleeper: it awaited ")
        assert "may await only its ctx operations: ctx.sleep(seconds), not asyncio.sleep" in (
            outcome.error
        )
    assert "Traceback" not in capfd.readouterr().err  # a misuse named, not a crash dump


def test_a_function_used_as_a_plain_concurrency_runtime() -> None:
    """A map over 40 items, 4 at a time, results in order; no thread is blocked waiting."""
    lock = threading.Lock()
    running = 0
    peak = 0

    def square(ctx: AgentContext) -> int:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        try:
            return int(ctx.task) ** 2
        finally:
            with lock:
                running -= 1

    async def mapper(ctx: AgentContext) -> list[int]:
        outcomes: list[Outcome] = await ctx.gather(
            *(ctx.spawn("square", str(i)) for i in range(40))
        )
        return [int(o.result or "0") for o in outcomes]

    limits = Limits(max_concurrency=5, per_agent=4, max_children=40)
    with Runtime({"mapper": mapper, "square": square}, limits=limits) as rt:
        outcome = rt.run("mapper", "go", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED
        assert msgspec.json.decode(outcome.result or "") == [i * i for i in range(40)]
        assert peak <= 4
        assert rt.stats().peak <= 5
