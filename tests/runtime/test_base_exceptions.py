"""A ``BaseException`` that is not an ``Exception`` (``SystemExit``, ``KeyboardInterrupt``)
raised by user code fails that run at once, with error kind ``base_exception`` naming it and
what raised it; the runtime goes on serving. Before, the run's actor stopped without a word
and the caller heard ``timed_out`` at the deadline (300 s by default): these tests wait with
``wait=WAIT`` and the default deadline, so without the fix they fail by ``TimeoutError``."""

from __future__ import annotations

from typing import Any

import pytest

from subagents import AgentSpec, FunctionAgent, Runtime, ScriptedModel
from subagents.behaviour.function import AgentContext
from subagents.messages import ModelRequest, ModelResponse, RunStatus
from subagents.models.base import CancelSignal

from .conftest import WAIT

pytestmark = pytest.mark.usefixtures("no_new_threads")


def quit_now() -> str:
    """Calls sys.exit, as a command-line library's main does."""
    raise SystemExit(3)


class InterruptedModel:
    """A model backend whose calls for ``interrupted`` raise KeyboardInterrupt (a user's own
    backend, say, re-raising what its HTTP library raised); other agents play scripts."""

    def __init__(self) -> None:
        self.scripted = ScriptedModel(
            {"tooler": [{"tool_calls": [{"name": "quit_now", "input": {}}]}, "never"]}
        )

    def complete(
        self,
        request: ModelRequest,
        *,
        deadline: float | None = None,
        cancel: CancelSignal | None = None,
    ) -> ModelResponse:
        if request.agent == "interrupted":
            raise KeyboardInterrupt
        return self.scripted.complete(request, deadline=deadline, cancel=cancel)


def exits(ctx: AgentContext) -> str:
    raise SystemExit(0)


async def interrupts(ctx: AgentContext) -> str:
    await ctx.sleep(0)  # raised after an await: on a later handling, not the first
    raise KeyboardInterrupt


async def spawns_an_exiting_child(ctx: AgentContext) -> str:
    outcome = await ctx.spawn("exits", "go")
    return f"{outcome.status}: {outcome.error_kind}: {outcome.error}"


AGENTS: list[Any] = [
    AgentSpec(name="tooler", description="calls a tool that exits"),
    AgentSpec(name="interrupted", description="its model raises KeyboardInterrupt"),
    AgentSpec(name="fine", description="answers"),
    FunctionAgent.create("exits", exits),
    FunctionAgent.create("interrupts", interrupts),
    FunctionAgent.create("parent", spawns_an_exiting_child),
]


@pytest.mark.parametrize("threads", ["shared", "own"])
def test_a_base_exception_fails_its_run_at_once_naming_it(threads: str) -> None:
    expected = {
        "tooler": "tool quit_now raised SystemExit: 3",
        "interrupted": "the model of interrupted raised KeyboardInterrupt",
        "exits": "function agent exits raised SystemExit: 0",
        "interrupts": "function agent interrupts raised KeyboardInterrupt",
    }
    with Runtime(AGENTS, model=InterruptedModel(), tools=[quit_now], agent_threads=threads) as rt:
        for agent, error in expected.items():
            outcome = rt.run(agent, "go", wait=WAIT)
            assert outcome.status is RunStatus.FAILED, outcome
            assert outcome.error_kind == "base_exception"
            assert outcome.error == error
        # a child's: its parent is told at once, and goes on
        told = rt.run("parent", "go", wait=WAIT)
        assert told.result == ("failed: base_exception: function agent exits raised SystemExit: 0")
        # the runtime keeps serving, on every kind of agent
        assert rt.run("fine", "still here", wait=WAIT).status is RunStatus.COMPLETED
        assert rt.run("tooler", "again", wait=WAIT).error_kind == "base_exception"


def test_a_subscriber_raising_system_exit_leaves_the_runtime_serving() -> None:
    """Subscribers run on the supervisor's thread: a BaseException there made pykka stop
    every actor, and the runtime answered nothing more."""
    raised: list[str] = []

    def exits_once(event: Any) -> None:
        if event.kind == "started" and not raised:
            raised.append(event.run_id)
            raise SystemExit("a subscriber quits")

    with Runtime(AGENTS, model=InterruptedModel(), tools=[quit_now]) as rt:
        rt.subscribe(exits_once)
        first = rt.run("fine", "one", wait=WAIT)
        assert raised == [first.run_id]
        assert first.status is RunStatus.COMPLETED
        assert rt.run("fine", "two", wait=WAIT).status is RunStatus.COMPLETED
