"""``isolation: worktree`` runs through the whole runtime, on real git repositories: parallel
editors keep their changes apart, an unchanged worktree disappears, a changed one is kept and
named in the result, and a workspace outside git is a clear failure."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from polling import wait_until
from subagents.definitions.spec import AgentSpec
from subagents.messages import RunStatus, ToolResultBlock
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime

from .test_worktrees import make_repo, worktree_paths

WAIT = 60.0


def use(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "input": arguments}


def editor(name: str, **fields: Any) -> AgentSpec:
    return AgentSpec(
        name=name,
        description=f"The {name} agent.",
        prompt="You edit.",
        metadata={"isolation": "worktree"},
        **fields,
    )


def answers(model: ScriptedModel, name: str) -> list[list[ToolResultBlock]]:
    out = []
    for request in model.requests:
        if request.agent == name and request.messages[-1].role == "user":
            found = [b for b in request.messages[-1].content if isinstance(b, ToolResultBlock)]
            if found:
                out.append(found)
    return out


@pytest.fixture
def no_new_threads() -> Any:
    before = set(threading.enumerate())
    yield
    left = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    assert left == [], f"threads left behind: {[t.name for t in left]}"


def edits(me: str, other: str, barrier: Path) -> list[dict[str, Any]]:
    """Read app.py, change it, wait until the other editor has changed its copy, read it."""
    meet = (
        f"touch {barrier / me}; for i in $(seq 1200); do"
        f" [ -f {barrier / other} ] && exit 0; sleep 0.05; done; exit 1"
    )
    return [
        {"tool_calls": [use("Read", file_path="src/app.py"), use("Bash", command="pwd")]},
        {"tool_calls": [use("Edit", file_path="src/app.py", old_string="1", new_string=repr(me))]},
        {"tool_calls": [use("Bash", command=meet)]},  # both have edited now
        {"tool_calls": [use("Read", file_path="src/app.py")]},
        {"text": "{result0}"},
    ]


def test_two_parallel_editors_keep_their_changes_apart(
    tmp_path: Path, no_new_threads: None
) -> None:
    repo = make_repo(tmp_path / "repo")
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    model = ScriptedModel(
        {
            "lead": [
                {  # one turn, two spawns: the editors run in parallel
                    "tool_calls": [
                        use("spawn_subagent", agent="left", task="edit"),
                        use("spawn_subagent", agent="right", task="edit"),
                    ]
                },
                {"text": "done"},
            ],
            "left": edits("left", "right", barrier),
            "right": edits("right", "left", barrier),
        }
    )
    agents = [
        AgentSpec(name="lead", description="Leads.", prompt="You lead."),
        editor("left"),
        editor("right"),
    ]
    # the barrier outside both worktrees is the test's meeting point: the sandbox would
    # (rightly) refuse a run's write there, so it is off here (tests/tools/test_sandbox*.py)
    with Runtime(
        agents, model=model, workspace=repo, permissions="bypassPermissions", sandbox=False
    ) as rt:
        outcome = rt.run("lead", "two edits", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED, outcome
        records = {r.agent: r for r in rt.runs()}
    for name, other in (("left", "right"), ("right", "left")):
        record = records[name]
        assert record.outcome is not None and record.status is RunStatus.COMPLETED, record
        path = repo / ".claude" / "worktrees" / f"{name}-{record.run_id}"
        first, _edited, met, _read = answers(model, name)
        assert first[1].content.strip() == str(path)  # Bash started in the worktree
        assert not met[0].is_error  # the other editor had edited its copy by then
        result = record.outcome.result or ""
        seen = result.split("[worktree kept")[0]
        assert f"VALUE = '{name}'" in seen and f"VALUE = '{other}'" not in seen
        assert f"[worktree kept: {path} on branch subagents/{name}-{record.run_id}" in result
        assert (path / "src" / "app.py").read_text() == f"VALUE = '{name}'\n"
    # the main tree never saw either change; both worktrees are kept for review
    assert (repo / "src" / "app.py").read_text() == "VALUE = 1\n"
    assert len(worktree_paths(repo)) == 3


def test_a_run_that_changes_nothing_leaves_no_worktree(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    model = ScriptedModel(
        {"reader": [{"tool_calls": [use("Read", file_path="README.md")]}, {"text": "read"}]}
    )
    with Runtime([editor("reader")], model=model, workspace=repo) as rt:
        outcome = rt.run("reader", "read", wait=WAIT)
    assert outcome.status is RunStatus.COMPLETED and outcome.result == "read"
    assert answers(model, "reader")[0][0].content.endswith("demo")
    assert worktree_paths(repo) == [str(repo)]
    branches = subprocess.run(
        ["git", "-C", str(repo), "branch", "--list", "subagents/*"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert branches.strip() == ""


def test_a_run_stopped_during_its_model_call_has_its_worktree_ended_at_once(
    tmp_path: Path,
) -> None:
    """Stopped mid-step, the run never reaches its end (``LLMBehaviour._closing``): its
    actor's ``close`` ends the worktree (unchanged: removed), while the runtime goes on, not
    only when the runtime closes (``close_tool_services``)."""
    repo = make_repo(tmp_path / "repo")
    model = ScriptedModel({"reader": [{"text": "never", "delay": 600}]})
    with Runtime([editor("reader")], model=model, workspace=repo) as rt:
        handle = rt.spawn("reader", "read")
        wait_until(lambda: len(model.requests) == 1, "the run in its model call", WAIT)
        assert len(worktree_paths(repo)) == 2  # its worktree is open
        handle.stop()
        assert handle.result(timeout=WAIT).status is RunStatus.CANCELLED
        wait_until(lambda: worktree_paths(repo) == [str(repo)], "its worktree ended", WAIT)


def test_a_failed_run_says_where_its_changes_are(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    model = ScriptedModel(
        {
            "writer": [
                {"tool_calls": [use("Write", file_path="NEW.md", content="new\n")]},
                {"text": "x", "error": {"kind": "overloaded", "message": "no capacity"}},
            ]
        }
    )
    with Runtime([editor("writer")], model=model, workspace=repo, permissions="acceptEdits") as rt:
        outcome = rt.run("writer", "write", wait=WAIT)
    assert outcome.status is RunStatus.FAILED
    assert outcome.error is not None and "no capacity" in outcome.error
    assert "[worktree kept: " in outcome.error and "NEW.md" in outcome.error
    assert not (repo / "NEW.md").exists()


def test_isolation_outside_a_git_repository_fails_the_run_clearly(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    model = ScriptedModel({"coder": ["never"]})
    with Runtime([editor("coder")], model=model, workspace=plain) as rt:
        outcome = rt.run("coder", "edit", wait=WAIT)
    assert outcome.status is RunStatus.FAILED and outcome.error_kind == "worktree"
    assert outcome.error is not None
    assert f"needs the workspace in a git repository, and {plain} is not in one" in (outcome.error)
    assert len(model.requests) == 0  # failed before any model call


def test_an_unknown_isolation_fails_the_run_naming_it(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    spec = AgentSpec(name="boxed", description="d", metadata={"isolation": "container"})
    with Runtime([spec], model=ScriptedModel({}), workspace=repo) as rt:
        outcome = rt.run("boxed", "go", wait=WAIT)
    assert outcome.status is RunStatus.FAILED and outcome.error_kind == "bad_definition"
    assert outcome.error is not None and "isolation 'container' is not known" in outcome.error
