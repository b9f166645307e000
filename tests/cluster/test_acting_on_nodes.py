"""Runs on a cluster's node act as on one machine: a real MCP server (the mcp SDK, over
stdio) started on the node that runs the agent, ``isolation: worktree`` on that node's
machine, and the model and tool calls traced into the driver's tracer provider, under their
run's span. Every run here is pinned to the worker node."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from isolation.test_worktrees import make_repo, worktree_paths
from mcp_servers.conftest import START_WAIT_S, server_config
from raycluster import WORKER, LocalCluster
from subagents.definitions.spec import AgentSpec
from subagents.messages import Event, EventKind, RunStatus
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.tools.permissions import Permissions

pytestmark = pytest.mark.ray

WAIT_S = 120.0
ON_WORKER = {"resources": {WORKER: 1}}


def use(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "input": arguments}


def test_mcp_worktrees_and_tracing_work_for_a_run_on_the_other_node(
    ray_cluster: LocalCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    monkeypatch.setenv("MCP_TIMEOUT", str(int(START_WAIT_S * 1000)))  # a loaded machine
    repo = make_repo(tmp_path / "repo")
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    model = ScriptedModel(
        {
            "adder": [
                {"tool_calls": [use("mcp__calc__add", a=20, b=22), use("mcp__calc__pid")]},
                {"text": "sum {result0} by {result1}"},
            ],
            "writer": [
                {"tool_calls": [use("Write", file_path="NEW.md", content="from the node\n")]},
                {"text": "written"},
            ],
        }
    )
    agents = [
        AgentSpec(name="adder", description="Adds.", prompt="Add.", metadata=ON_WORKER),
        AgentSpec(
            name="writer",
            description="Writes.",
            prompt="Write.",
            metadata={**ON_WORKER, "isolation": "worktree"},
        ),
    ]
    with Runtime(
        agents,
        model=model,
        workspace=repo,
        permissions="acceptEdits",
        mcp_servers={"calc": server_config()},
        tracer_provider=provider,
        cluster=ray_cluster.address,
        restore=False,
    ) as rt:
        added = rt.run("adder", "add them", wait=WAIT_S)
        written = rt.run("writer", "write it", wait=WAIT_S)
        placed = rt.placements()
        driver_mcp = rt.mcp.status()
    assert placed[added.run_id] == placed[written.run_id] == [ray_cluster.worker_node_id]

    # MCP: the server ran on the node that ran the agent, not in the driver
    assert added.status is RunStatus.COMPLETED, added
    assert added.result is not None and added.result.startswith("sum 42 by ")
    assert driver_mcp == {}  # the driver's hub started nothing
    assert int(added.result.split(" by ")[1].split()[0]) > 0  # the node's server's pid

    # worktree: made from the workspace's repository on the node's machine, kept (changed)
    assert written.status is RunStatus.COMPLETED, written
    assert written.result is not None and "[worktree kept: " in written.result
    kept = [Path(p) for p in worktree_paths(repo) if Path(p) != repo]
    assert len(kept) == 1 and (kept[0] / "NEW.md").read_text() == "from the node\n"
    assert not (repo / "NEW.md").exists()  # the main tree never saw it

    # tracing: the node's model and tool calls are spans of the driver's provider, under
    # their run's span
    spans = exporter.get_finished_spans()
    runs = {s.attributes["gen_ai.agent.id"]: s for s in spans if s.name.startswith("invoke_agent")}
    calls = [s for s in spans if s.name.startswith(("chat ", "execute_tool "))]
    names = sorted(s.name for s in calls)
    assert names.count("execute_tool mcp__calc__add") == 1, names
    assert names.count("execute_tool Write") == 1, names
    assert sum(1 for n in names if n.startswith("chat ")) == 4, names  # two steps per run
    for call in calls:
        run = runs[call.attributes["gen_ai.agent.id"]]
        assert call.parent is not None and call.parent.span_id == run.context.span_id
        assert call.context.trace_id == run.context.trace_id
        assert run.start_time <= call.start_time <= call.end_time <= run.end_time


def test_a_child_on_the_other_node_is_held_to_its_plan_mode_lead(
    ray_cluster: LocalCluster, tmp_path: Path
) -> None:
    """Permissions narrow down the tree on a cluster too: the lead (plan mode, Bash
    disallowed) and its child run on the worker node's host, from records the driver made;
    the child, in a bypassPermissions runtime, writes nothing and is not offered Bash."""
    work = tmp_path / "work"
    work.mkdir()
    model = ScriptedModel(
        {
            "lead": [
                {"tool_calls": [use("spawn_subagent", agent="child", task="act")]},
                {"text": "lead: {result0_result}"},
            ],
            "child": [
                {"tool_calls": [
                    use("Write", file_path="written.txt", content="x"),
                    use("Bash", command="echo ran > bash.txt"),
                ]},
                {"text": "write: {result0} | bash: {result1}"},
            ],
        }
    )  # fmt: skip
    agents = [
        AgentSpec(
            name="lead", description="Plans.", prompt="Plan.", metadata=ON_WORKER,
            permission_mode="plan", disallowed_tools=("Bash",),
        ),
        AgentSpec(name="child", description="Acts.", prompt="Act.", metadata=ON_WORKER),
    ]  # fmt: skip
    with Runtime(
        agents, model=model, workspace=work, permissions="bypassPermissions",
        cluster=ray_cluster.address, restore=False,
    ) as rt:  # fmt: skip
        outcome = rt.run("lead", "go", wait=WAIT_S)
        placed = rt.placements()
    assert outcome.status is RunStatus.COMPLETED, outcome
    assert set(map(tuple, placed.values())) == {(ray_cluster.worker_node_id,)}
    assert not (work / "written.txt").exists() and not (work / "bash.txt").exists()
    assert outcome.result is not None
    assert "write: Permission to use Write was denied: plan mode is read-only" in outcome.result
    assert "bash: tool 'Bash' is not available to child" in outcome.result


def echo_into_count(line: str) -> dict[str, Any]:
    """A model step calling Bash to append ``line`` to count.txt (asked in default mode)."""
    return {"tool_calls": [use("Bash", command=f"echo {line} >> count.txt")]}


class Asked:
    """The approvals asked of a runtime, and the run's end, waited for without sleeping."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.ended = False
        self._changed = threading.Condition()

    def __call__(self, event: Event) -> None:
        with self._changed:
            if event.kind is EventKind.APPROVAL_ASKED:
                self.ids.append(event.data["approval_id"])
            elif event.kind.value in ("completed", "failed", "cancelled", "timed_out"):
                self.ended = True
            self._changed.notify_all()

    def wait(self, predicate: Callable[[], bool]) -> None:
        with self._changed:
            assert self._changed.wait_for(predicate, WAIT_S)


def test_a_rule_remembered_on_the_driver_answers_a_run_on_the_other_node(
    ray_cluster: LocalCluster, tmp_path: Path
) -> None:
    """``approve --remember``'s rule, kept in the driver's store, answers the later asks it
    matches of a run on the worker node, as on one machine (the node asks the driver for
    its tree's rules); and never widens what the permissions deny there. Before, a node
    read no rule: the second call was asked again."""
    model = ScriptedModel(
        {"worker": [
            echo_into_count("one"), echo_into_count("two"), echo_into_count("secret"),
            {"text": "secret: {result0}"},
        ]}
    )  # fmt: skip
    agents = [AgentSpec(name="worker", description="Counts.", prompt="Count.", metadata=ON_WORKER)]
    asked = Asked()
    with Runtime(
        agents, model=model, workspace=tmp_path, approve="store",
        permissions=Permissions(deny=("Bash(echo secret:*)",)),
        cluster=ray_cluster.address, restore=False,
    ) as rt:  # fmt: skip
        rt.subscribe(asked)
        handle = rt.spawn("worker", "count")
        asked.wait(lambda: len(asked.ids) >= 1)
        rt.answer(asked.ids[0], True, remember="Bash(echo:*)")
        asked.wait(lambda: asked.ended or len(asked.ids) >= 2)
        if not asked.ended:  # asked again (the assertion below says so): let it end
            rt.answer(asked.ids[1], False, "asked again")
        outcome = handle.result(timeout=WAIT_S)
        placed = rt.placements()
    assert placed[handle.run_id] == [ray_cluster.worker_node_id]
    assert len(asked.ids) == 1, "the remembered rule did not answer the run on the node"
    assert outcome.status is RunStatus.COMPLETED, outcome
    assert (tmp_path / "count.txt").read_text() == "one\ntwo\n"
    assert outcome.result is not None
    assert outcome.result.startswith("secret: Permission to use Bash was denied")
    assert "Bash(echo secret:*)" in outcome.result
