"""The Runtime facade at its edges: bad input gets a clear error; subscribers; handles."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from subagents.behaviour.function import AgentContext, FunctionAgent
from subagents.behaviour.tools import Tool
from subagents.messages import Event, EventKind, RunStatus
from subagents.models.scripted import ScriptedModel
from subagents.runtime import AdmissionError, Runtime
from subagents.supervision.limits import Limits

from .conftest import WAIT, Events, spec

pytestmark = pytest.mark.usefixtures("no_new_threads")


def test_unknown_agents_runs_and_recipients_are_named() -> None:
    with Runtime([spec("a"), spec("b")], model=ScriptedModel({})) as rt:
        with pytest.raises(AdmissionError, match="unknown agent 'zed'; known agents: a, b"):
            rt.spawn("zed", "x")
        with pytest.raises(LookupError, match="no run with id 'r-none'"):
            rt.stop("r-none")
        with pytest.raises(LookupError, match="no run with id 'r-none'"):
            rt.send("r-none", "hello")
        with pytest.raises(TypeError, match="task must be a string, got int"):
            rt.spawn("a", 42)  # type: ignore[arg-type]
        # the same mistake with the agent: the same class, naming the argument
        with pytest.raises(TypeError, match="agent must be a string, got int"):
            rt.spawn(5, "x")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="agent must be a string, got NoneType"):
            rt.run(None, "x", wait=WAIT)  # type: ignore[arg-type]
        with pytest.raises(LookupError, match="no run with id 'r-none'"):
            rt.tree("r-none")
        assert rt.runs() == []


def test_bad_agents_and_tools_are_refused_when_the_runtime_is_built() -> None:
    with pytest.raises(TypeError, match="agent 'x': expected an AgentSpec, a FunctionAgent or a"):
        Runtime({"x": 42})  # type: ignore[arg-type]

    def spawn_subagent(agent: str) -> str:
        return agent

    with pytest.raises(ValueError, match="tool name 'spawn_subagent' is reserved"):
        Runtime([spec("a")], model=ScriptedModel({}), tools=[spawn_subagent])

    def variadic(*args: Any) -> str:
        return ""

    with pytest.raises(TypeError, match=r"tool variadic: \*args/\*\*kwargs cannot be described"):
        Tool.from_function(variadic)


def test_a_failing_subscriber_does_not_stop_the_others_and_unsubscribe_works() -> None:
    seen = Events()
    dropped: list[Event] = []

    def broken(event: Event) -> None:
        raise RuntimeError("subscriber bug")

    with Runtime([spec("a")], model=ScriptedModel({})) as rt:
        rt.subscribe(broken)
        unsubscribe = rt.subscribe(dropped.append)
        rt.subscribe(seen)
        unsubscribe()
        outcome = rt.run("a", "x", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED
        assert [e.kind for e in seen.snapshot() if e.run_id == outcome.run_id][-1] is (
            EventKind.COMPLETED
        )
        assert dropped == []


def test_a_handle_waits_with_a_timeout_and_reports_status() -> None:
    release = threading.Event()

    def hold(ctx: AgentContext) -> str:
        assert release.wait(WAIT)
        return "held"

    with Runtime([FunctionAgent.create("hold", hold)]) as rt:
        handle = rt.spawn("hold", "x")
        with pytest.raises(TimeoutError) as timed_out:
            handle.result(timeout=0.01)
        run_id = handle.run_id  # the same words as run(wait=)'s: the run goes on, and how
        assert str(timed_out.value) == (  # to reach it (a fan_out raises a handle's)
            f"run {run_id} did not finish within 0.01 s; it goes on while this runtime is open"
            f" (its close cancels it): rt.attach('{run_id}') gives a handle to wait for it,"
            f" rt.stop('{run_id}') ends it"  # (no terminal: its store is in memory)
        )
        assert handle.status is RunStatus.RUNNING and not handle.done
        release.set()
        assert handle.result(WAIT).result == "held"
        assert handle.done and handle.status is RunStatus.COMPLETED
        assert repr(handle) == f"RunHandle('{handle.run_id}', agent='hold', status=completed)"


def test_run_waits_as_a_handle_would_without_one() -> None:
    """``run`` waits on its waiter itself (no handle made): the same words on a time out,
    and the outcome, or the refusal, as ``result`` gives them."""
    release = threading.Event()

    def hold(ctx: AgentContext) -> str:
        assert release.wait(WAIT)
        return ctx.task

    limits = Limits(max_concurrency=1, queue_bound=1)
    with Runtime([FunctionAgent.create("hold", hold)], limits=limits) as rt:
        with pytest.raises(TimeoutError) as timed_out:
            rt.run("hold", "first", wait=0.01)
        # the run goes on, and the message names it and what reaches it (it has no handle)
        [first] = [r.run_id for r in rt.runs() if r.task == "first"]
        assert str(timed_out.value) == (
            f"run {first} did not finish within 0.01 s; it goes on while this runtime is open"
            f" (its close cancels it): rt.attach('{first}') gives a handle to wait for it,"
            f" rt.stop('{first}') ends it"  # (no terminal: its store is in memory)
        )
        attached = rt.attach(first)
        queued = rt.spawn("hold", "queued")  # the queue's one place
        with pytest.raises(AdmissionError, match="queue bound"):
            rt.run("hold", "refused", wait=WAIT)
        release.set()
        assert attached.result(WAIT).result == "first"  # it went on past the wait
        assert queued.result(WAIT).result == "queued"
        assert rt.run("hold", "last", wait=WAIT).result == "last"


def test_a_model_factory_is_given_the_loaded_definitions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "set, but the factory decides")
    (tmp_path / "scripted.md").write_text(
        "---\nname: scripted\ndescription: plays a script\nscript:\n"
        "  - text: 'scripted answer to {task}'\n---\nPrompt.\n"
    )
    with Runtime(agent_dirs=[tmp_path], model=ScriptedModel.from_specs) as rt:
        assert isinstance(rt.model, ScriptedModel)
        assert rt.run("scripted", "the task", wait=60).result == "scripted answer to the task"


def test_run_hears_a_refusal_without_asking_and_forgets_the_run() -> None:
    # run() tells the supervisor instead of asking it: the refusal comes to its waiter.
    with Runtime([spec("a")], model=ScriptedModel({})) as rt:
        with pytest.raises(AdmissionError, match="unknown agent 'zed'; known agents: a"):
            rt.run("zed", "x", wait=WAIT)
        with pytest.raises(TypeError, match="context must be a string, got int"):
            rt.run("a", "x", wait=WAIT, context=123)  # (a wrong type: the call's mistake)
        with pytest.raises(TypeError, match="unexpected keyword arguments: parent_run_id"):
            rt.run("a", "x", wait=WAIT, parent_run_id="r-other")
        with pytest.raises(TypeError, match="task must be a string, got int"):
            rt.run("a", 42, wait=WAIT)  # type: ignore[arg-type]
        assert rt._roots.waiting() == []  # nothing left waiting for the refused runs
        assert rt.runs() == []
        outcome = rt.run("a", "x", wait=WAIT, label="fine", shared={"k": 1})
        assert outcome.status is RunStatus.COMPLETED
        assert rt.runs()[0].label == "fine"
        assert rt.runs()[0].shared == {"k": 1}


def test_an_owner_given_is_stamped_on_the_runs_and_a_bad_one_is_refused() -> None:
    def hello(ctx: AgentContext) -> str:
        return "hi"

    with Runtime({"hello": hello}, owner="box:1:abcd:tree-x") as rt:
        outcome = rt.run("hello", "go", wait=60)
        record = rt.get(outcome.run_id)
    assert rt.owner == "box:1:abcd:tree-x"
    assert record is not None and record.owner == "box:1:abcd:tree-x"
    for bad in ("", "has space", 7, "x" * 201):
        with pytest.raises(ValueError, match="owner must"):
            Runtime({"hello": hello}, owner=bad)  # type: ignore[arg-type]


def test_a_team_folder_may_extend_a_built_in_agent_without_discover(tmp_path: Path) -> None:
    # agents/code's scout, planner and fixer extend explore, plan and code: read from their
    # folder alone (no discover), they were dropped with only a warning line.
    (tmp_path / "scout.md").write_text(
        "---\nname: scout\ndescription: looks around\nextends: explore\nscript:\n"
        "  - text: 'scouted {task}'\n---\n"
    )
    with Runtime(agent_dirs=[tmp_path], model=ScriptedModel.from_specs) as rt:
        agents = {agent.name: agent for agent in rt.agents()}
        assert sorted(agents) == ["scout"]  # the built-ins are parents, not agents of their own
        scout = agents["scout"]
        assert scout.permission_mode == "plan" and scout.tools is not None
        assert "Grep" in scout.tools and "investigator" in scout.prompt
        assert rt.run("scout", "the repo", wait=WAIT).result == "scouted the repo"
