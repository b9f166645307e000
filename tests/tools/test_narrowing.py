"""Permissions only narrow down the tree: a child's effective permissions are its own
intersected with its requesters' (the strictest mode, every deny rule, every tool limit),
kept in its record so they hold without its parent (after a crash, on another node).

The trial's case: a plan-mode lead with Bash disallowed spawned a child that, in the
runtime's bypassPermissions, wrote files and ran Bash."""

from __future__ import annotations

import threading
from pathlib import Path

import msgspec
import pytest

from subagents.definitions.spec import AgentSpec
from subagents.messages import Event, RunRecord, RunStatus
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.store.sqlite import SQLiteStore
from subagents.tools.builtin import builtin_tools
from subagents.tools.permissions import PermissionPolicy, Permissions

from .conftest import WAIT

LEAD = AgentSpec(
    name="lead",
    description="Plans.",
    prompt="You plan.",
    permission_mode="plan",
    disallowed_tools=("Bash", "Edit(secrets/**)"),
)
CHILD = AgentSpec(name="child", description="Does anything.", prompt="You act.")
GREEDY = AgentSpec(
    name="greedy",
    description="Asks for all.",
    prompt="You act.",
    permission_mode="bypassPermissions",
)

SPAWN = [
    {"tool_calls": [{"name": "spawn_subagent", "input": {"agent": "{agent}", "task": "act"}}]},
    {"text": "lead: {result0_result}"},
]
ACT = [
    {"tool_calls": [
        {"name": "Write", "input": {"file_path": "written.txt", "content": "x"}},
        {"name": "Bash", "input": {"command": "echo ran > bash.txt"}},
        {"name": "Read", "input": {"file_path": "src/calc.py"}},
    ]},
    {"text": "write: {result0} | bash: {result1} | read: {result2}"},
]  # fmt: skip


def lead_script(agent: str) -> list[dict[str, object]]:
    return [
        {"tool_calls": [{"name": "spawn_subagent", "input": {"agent": agent, "task": "act"}}]},
        {"text": "lead: {result0_result}"},
    ]


def run_tree(
    repo: Path, child: str, store: SQLiteStore | None = None
) -> tuple[str, ScriptedModel, list[Event]]:
    model = ScriptedModel({"lead": lead_script(child), child: ACT})
    events: list[Event] = []
    lock = threading.Lock()

    def seen(event: Event) -> None:
        with lock:
            events.append(event)

    with Runtime(
        [LEAD, CHILD, GREEDY], model=model, workspace=repo, permissions="bypassPermissions",
        store=store,
    ) as rt:  # fmt: skip
        rt.subscribe(seen)
        outcome = rt.run("lead", "go", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED, outcome
        (record,) = [r for r in rt.runs() if r.agent == child]
        assert record.outcome is not None and record.outcome.result is not None
        result = record.outcome.result
    return result, model, events


def test_a_plan_mode_lead_without_bash_cannot_give_its_child_more(repo: Path) -> None:
    result, model, _ = run_tree(repo, "child")
    assert not (repo / "written.txt").exists()
    assert not (repo / "bash.txt").exists()
    assert "write: Permission to use Write was denied: plan mode is read-only" in result
    assert "bash: tool 'Bash' is not available to child" in result  # not even offered
    assert "def add(a, b)" in result  # what the lead could do (read), the child can
    (request,) = [r for r in model.requests if r.agent == "child"][:1]
    offered = {t.name for t in request.tools}
    assert "Bash" not in offered and "Read" in offered


def test_a_child_asking_for_a_wider_mode_is_narrowed_and_it_shows(
    repo: Path, tmp_path: Path
) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    result, _, events = run_tree(repo, "greedy", store)
    assert not (repo / "written.txt").exists() and not (repo / "bash.txt").exists()
    assert "plan mode is read-only" in result
    (spawned,) = [e for e in events if e.kind == "spawned" and e.agent == "greedy"]
    shown = spawned.data["permissions"]
    assert shown.startswith(
        "greedy asks for bypassPermissions; narrowed: mode at most plan (lead r"
    )
    assert "not Bash, Edit(secrets/**) (lead)" in shown
    # the ceiling is in the record the store keeps: a run restored after a crash, or hosted
    # on another node, gets it from there, not from its parent
    (kept,) = [r for r in store.list_runs() if r.agent == "greedy"]
    store.close()
    again = msgspec.json.decode(msgspec.json.encode(kept), type=RunRecord)
    runtime, grant = again.ceiling  # the mode of the runtime that spawned the tree, root first
    assert (runtime.agent, runtime.mode) == ("runtime", "bypassPermissions")
    assert (grant.agent, grant.mode, grant.disallowed_tools) == (
        "lead", "plan", ("Bash", "Edit(secrets/**)")
    )  # fmt: skip
    policy, warnings = PermissionPolicy.for_agent(
        Permissions(mode="bypassPermissions"), GREEDY, repo, again.ceiling
    )
    tools = builtin_tools()
    assert policy.mode == "plan"
    assert policy.decide(tools["Bash"], {"command": "ls"}).behavior == "deny"
    assert policy.decide(tools["Write"], {"file_path": "a", "content": ""}).behavior == "deny"
    assert any("requester lead (r" in w for w in warnings)


def test_the_narrowing_is_an_intersection() -> None:
    """Unit: the strictest mode, deny rules unioned, a requester's disallowed tools and the
    forms it may use a tool in are kept; what its ``tools`` list leaves out is not taken from
    its children (a lead that only delegates still has children that edit)."""
    from subagents.messages import PermissionGrant

    tools = builtin_tools()
    root = Path("/work/project")
    grants = (
        PermissionGrant(
            agent="top", run_id="r1", mode="acceptEdits",
            disallowed_tools=("Bash(rm:*)", "NotebookEdit"),
        ),
        PermissionGrant(agent="mid", run_id="r2", tools=("spawn_subagent", "Bash(git:*)")),
    )  # fmt: skip
    own = AgentSpec(name="leaf", description="d")
    bypass = Permissions(mode="bypassPermissions")
    policy, _ = PermissionPolicy.for_agent(bypass, own, root, grants)
    assert policy.mode == "acceptEdits"  # the stricter of bypassPermissions and top's
    assert policy.decide(tools["Edit"], {"file_path": "/work/project/a"}).behavior == "allow"
    assert policy.decide(tools["Write"], {"file_path": "/work/project/a"}).behavior == "allow"
    notebook = policy.decide(tools["NotebookEdit"], {"notebook_path": "/work/project/a.ipynb"})
    assert notebook.behavior == "deny" and "top (r1) may not use it" in notebook.reason
    denied = policy.decide(tools["Bash"], {"command": "git status; /bin/rm -rf x"})
    assert denied.behavior == "deny" and "Bash(rm:*)" in denied.reason
    limited = policy.decide(tools["Bash"], {"command": "make"})
    assert limited.behavior == "deny"
    assert "mid (r2) may use Bash only as: Bash(git:*)" in limited.reason
    assert policy.decide(tools["Bash"], {"command": "git log"}).behavior == "allow"  # reads
    assert policy.decide(tools["Bash"], {"command": "git commit -m x"}).behavior == "ask"
    # a requester that sets nothing narrows nothing
    free, _ = PermissionPolicy.for_agent(
        bypass, own, root, (PermissionGrant(agent="x", run_id="r3"),)
    )
    assert free.mode == "bypassPermissions"
    assert free.decide(tools["Write"], {"file_path": "/work/project/a"}).behavior == "allow"


def test_info_shows_what_the_requesters_hold_a_run_to(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`subagents info` on the narrowed child: a `permissions` line; none on the root."""
    from subagents.cli import info_cmd

    store = SQLiteStore(tmp_path / "runs.db")
    run_tree(repo, "child", store)
    records = {r.agent: r for r in store.list_runs()}
    store.close()
    shown = {}
    for agent in ("child", "lead"):
        info_cmd.show(info_cmd.Info(run=records[agent], children=(), mail=()))
        shown[agent] = capsys.readouterr().out
    child_out, lead_out = shown["child"], shown["lead"]
    line = next(x for x in child_out.splitlines() if x.startswith("permissions"))
    assert "mode at most plan (lead r" in line and "not Bash, Edit(secrets/**) (lead)" in line
    assert "permissions" not in lead_out
