"""One rule book for spawning, the same for every requester, with real actors and threads.

What the LLM is offered (the spawn tool and its enum) and what admission lets through agree;
a refusal names the rule: an ``is_error`` tool result for a model, ``SpawnRefused`` for a
function agent, ``AdmissionError`` for the Python API.
"""

from __future__ import annotations

from typing import Any

import pytest

from shown import ShownModel
from subagents.behaviour.fan_out_tool import FAN_OUT
from subagents.behaviour.function import AgentContext, FunctionAgent, SpawnRefused
from subagents.behaviour.tools import SPAWN
from subagents.messages import EventKind, RunStatus, ToolSchema
from subagents.runtime import AgentLike, Runtime
from subagents.supervision.limits import Limits

from .conftest import WAIT, Events, requests_of, spec, tool_results

pytestmark = pytest.mark.usefixtures("no_new_threads")


def spawn_call(agent: str, task: str) -> dict[str, Any]:
    return {"name": SPAWN, "input": {"agent": agent, "task": task}}


def offered(tools: tuple[ToolSchema, ...]) -> dict[str, list[str] | None]:
    """Tool name -> the agents its enum lists (None for a tool without one)."""
    out: dict[str, list[str] | None] = {}
    for tool in tools:
        props = tool.input_schema.get("properties", {})
        if tool.name == SPAWN:
            out[tool.name] = list(props["agent"]["enum"])
        elif tool.name == FAN_OUT:
            out[tool.name] = list(props["runs"]["items"]["properties"]["agent"]["enum"])
        else:
            out[tool.name] = None
    return out


def test_a_model_that_spawns_itself_is_refused_naming_the_rule() -> None:
    # the enum does not list the lead itself; the model calls it anyway
    model = ShownModel({"lead": [{"tool_calls": [spawn_call("lead", "again")]}, "after: {last}"]})
    events = Events()
    with Runtime([spec("lead"), spec("worker")], model=model) as rt:
        rt.subscribe(events)
        outcome = rt.run("lead", "job", wait=WAIT)
    assert outcome.status is RunStatus.COMPLETED
    first, second = requests_of(model, "lead")
    assert offered(first.tools)[SPAWN] == ["worker"]
    (result,) = tool_results(second.messages[-1])
    assert result.is_error
    assert result.content == (
        "spawn rule: lead may not spawn itself (a definition opts in with allowSelfSpawn: true)"
    )
    assert len(events.of(EventKind.SPAWNED, "lead")) == 1  # only the root: nothing recursed


def test_a_definition_that_opts_in_may_spawn_itself_down_to_the_depth_limit() -> None:
    model = ShownModel(
        {"fractal": [{"tool_calls": [spawn_call("fractal", "deeper")]}, "{results}"]}
    )
    agents = [spec("fractal", metadata={"allowSelfSpawn": True})]
    with Runtime(agents, model=model, limits=Limits(max_depth=2)) as rt:
        outcome = rt.run("fractal", "go", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED
        depths = sorted(r.depth for r in rt.runs(agent="fractal"))
    assert depths == [0, 1, 2]
    # at the depth limit nothing is offered; the call made anyway is refused by depth
    deepest = [r for r in requests_of(model, "fractal") if SPAWN not in offered(r.tools)]
    assert deepest, "the run at the depth limit was offered the spawn tool"


def test_allowed_child_types_is_enforced_for_a_model_and_a_function() -> None:
    model = ShownModel(
        {
            "boss": [
                {"tool_calls": [spawn_call("developer", "x"), spawn_call("reviewer", "y")]},
                "{results}",
            ],
            "reviewer": ["reviewed"],
        }
    )

    async def fboss(ctx: AgentContext) -> str:
        try:
            await ctx.spawn("developer", "x")
        except SpawnRefused as exc:
            return str(exc)
        return "spawned"

    agents: list[AgentLike] = [
        spec("boss", metadata={"allowedChildTypes": ["reviewer"]}),
        spec("reviewer", type="reviewer"),
        spec("developer", type="developer"),
        FunctionAgent.create("fboss", fboss, metadata={"allowedChildTypes": "reviewer"}),
    ]
    with Runtime(agents, model=model) as rt:
        outcome = rt.run("boss", "job", wait=WAIT)
        refused = rt.run("fboss", "job", wait=WAIT)
    first, second = requests_of(model, "boss")
    assert offered(first.tools)[SPAWN] == ["reviewer"]
    developer, reviewer = tool_results(second.messages[-1])
    assert developer.is_error and not reviewer.is_error
    expected = (
        "spawn rule: {} may only spawn agents of type reviewer (allowedChildTypes);"
        " developer is of type 'developer'"
    )
    assert developer.content == expected.format("boss")
    assert outcome.status is RunStatus.COMPLETED
    assert refused.result == expected.format("fboss")


def test_claude_code_agent_form_enables_spawning_exactly_those_agents() -> None:
    model = ShownModel(
        {
            "lead": [
                {"tool_calls": [spawn_call("reviewer", "r"), spawn_call("writer", "w")]},
                "{results}",
            ],
            "reviewer": ["ok"],
            "old": [{"tool_calls": [spawn_call("writer", "w")]}, "{results}"],
            "writer": ["written"],
        }
    )
    agents: list[AgentLike] = [
        spec("lead", tools=("Read", "Agent(reviewer)")),
        spec("old", tools=("Task",)),  # the catalog and the runtime agree: bare Task = any
        spec("reviewer", tools=()),
        spec("writer", tools=()),
    ]
    with Runtime(agents, model=model) as rt:
        assert rt.run("lead", "job", wait=WAIT).status is RunStatus.COMPLETED
        old = rt.run("old", "job", wait=WAIT)
        assert rt.registry.check_type_restriction("old", "writer") is None
        assert rt.registry.check_type_restriction("lead", "writer") is not None
    first, second = requests_of(model, "lead")
    tools = offered(first.tools)
    assert tools[SPAWN] == ["reviewer"] and tools[FAN_OUT] == ["reviewer"]
    reviewer, writer = tool_results(second.messages[-1])
    assert not reviewer.is_error
    assert writer.is_error
    assert writer.content == (
        "spawn rule: lead may only spawn reviewer (tools: Agent(reviewer)); not writer"
    )
    assert old.status is RunStatus.COMPLETED and '"result":"written"' in (old.result or "")
    # the reviewer's tools name no spawn tool: it is offered none
    assert SPAWN not in offered(requests_of(model, "reviewer")[0].tools)


def test_disallowed_tools_turn_spawning_off_for_the_offer_and_for_admission() -> None:
    async def quiet(ctx: AgentContext) -> str:
        try:
            await ctx.spawn("worker", "x")
        except SpawnRefused as exc:
            return str(exc)
        return "spawned"

    agents: list[AgentLike] = [
        FunctionAgent.create("quiet", quiet, disallowed_tools=("Agent",)),
        spec("worker"),
    ]
    with Runtime(agents, model=ShownModel({"worker": ["w"]})) as rt:
        outcome = rt.run("quiet", "job", wait=WAIT)
    assert outcome.result == (
        "spawn rule: quiet may not spawn subagents: its disallowedTools list Agent"
    )


def test_an_ancestors_max_depth_bounds_its_grandchildren_in_a_real_run() -> None:
    """b (maxDepth 1) -> c -> d: c (a model) is offered no spawn tool, and fc (a function)
    is refused d naming b's maxDepth; b's own children run."""
    model = ShownModel(
        {
            "b": [{"tool_calls": [spawn_call("c", "x"), spawn_call("fc", "y")]}, "{results}"],
            "c": ["c done"],
            "d": ["d ran"],
        }
    )

    async def fc(ctx: AgentContext) -> str:
        try:
            await ctx.spawn("d", "deeper")
        except SpawnRefused as exc:
            return str(exc)
        return "spawned"

    events = Events()
    agents: list[AgentLike] = [
        spec("b", max_depth=1),
        spec("c"),
        spec("d"),
        FunctionAgent.create("fc", fc),
    ]
    with Runtime(agents, model=model, limits=Limits(max_depth=5)) as rt:
        rt.subscribe(events)
        outcome = rt.run("b", "job", wait=WAIT)
        (refused,) = rt.runs(agent="fc")
    assert outcome.status is RunStatus.COMPLETED
    assert SPAWN in offered(requests_of(model, "b")[0].tools)
    (c_request,) = requests_of(model, "c")
    assert SPAWN not in offered(c_request.tools)
    assert refused.outcome is not None
    assert refused.outcome.result == (
        "depth limit: a child of fc would be at depth 2, the limit is 1"
        " (maxDepth 1 of b, at depth 0)"
    )
    assert len(events.of(EventKind.SPAWNED, "c")) == 1
    assert not events.of(EventKind.SPAWNED, "d")


def test_max_runs_per_tree_refuses_a_spawn_and_empties_the_offer_in_a_real_run() -> None:
    """A tree of at most 3 runs: the lead's first two children are admitted, its third is
    refused naming the limit; the child started when the tree was full is offered no spawn
    tool, the one started before is; a function agent is refused with ``SpawnRefused``."""
    model = ShownModel(
        {
            "lead": [
                {"tool_calls": [spawn_call("a", "1"), spawn_call("b", "2"), spawn_call("c", "3")]},
                "{results}",
            ],
            "a": ["a done"],
            "b": [{"tool_calls": [spawn_call("c", "4")]}, "b saw: {result0}"],
            "c": ["c ran"],
        }
    )

    async def many(ctx: AgentContext) -> str:
        admitted = 0
        try:
            for n in range(5):
                await ctx.spawn("a", f"job {n}")
                admitted += 1
        except SpawnRefused as exc:
            return f"{admitted}: {exc}"
        return f"{admitted}: all admitted"

    agents: list[AgentLike] = [
        spec("lead"),
        spec("a"),
        spec("b"),
        spec("c"),
        FunctionAgent.create("many", many),
    ]
    with Runtime(agents, model=model, limits=Limits(max_runs_per_tree=3)) as rt:
        outcome = rt.run("lead", "job", wait=WAIT)
        function = rt.run("many", "job", wait=WAIT)
    assert outcome.status is RunStatus.COMPLETED
    _, second = requests_of(model, "lead")
    a, b, c = tool_results(second.messages[-1])
    assert not a.is_error and not b.is_error
    assert c.is_error and c.content == (
        f"max_runs_per_tree: the tree of {outcome.run_id} has admitted 3 runs, the limit is 3"
        " (Limits.max_runs_per_tree; --max-runs-per-tree)"
    )
    assert not requests_of(model, "c")
    assert SPAWN in offered(requests_of(model, "a")[0].tools)  # started at 2 runs of 3
    assert SPAWN not in offered(requests_of(model, "b")[0].tools)  # started with the tree full
    # b calls it anyway: it is told why, in admission's words
    (told,) = tool_results(requests_of(model, "b")[1].messages[-1])
    assert told.is_error and told.content == (
        "tool 'spawn_subagent' is not available to b: max_runs_per_tree: the tree of"
        f" {outcome.run_id} has admitted 3 runs, the limit is 3"
        " (Limits.max_runs_per_tree; --max-runs-per-tree)"
    )
    assert (function.result or "").startswith(
        f"2: max_runs_per_tree: the tree of {function.run_id} has admitted 3 runs"
    )
