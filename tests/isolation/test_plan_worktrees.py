"""A run a requester holds to plan mode gets no worktree (session 26, e-scratch): a ``plan``
run's child can never leave plan mode (``plan_exit.held_to_plan``), so it can write nothing,
and an ``isolation: worktree`` definition cost the repository a branch, a checkout and an
``info/exclude`` line for nothing. It reads the runtime's workspace. A run in plan mode by its
own definition still gets its worktree: an approved plan takes it to a writing mode."""

from __future__ import annotations

import subprocess
from pathlib import Path

from subagents.definitions.spec import AgentSpec
from subagents.messages import RunStatus
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime

from .test_worktree_runs import WAIT, answers, editor, use
from .test_worktrees import make_repo, worktree_paths


def branches(repo: Path) -> str:
    listed = ["git", "-C", str(repo), "branch", "--list", "subagents/*"]
    return subprocess.run(listed, capture_output=True, text=True, check=True).stdout.strip()


def excluded(repo: Path) -> str:
    exclude = repo / ".git" / "info" / "exclude"
    return exclude.read_text() if exclude.exists() else ""


def test_a_plan_runs_child_with_worktree_isolation_reads_the_workspace(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    before = excluded(repo)
    lead = AgentSpec(
        name="lead", description="The lead.", prompt="You plan.", permission_mode="plan"
    )
    model = ScriptedModel(
        {
            "lead": [{"tool_calls": [use("spawn_subagent", agent="editor", task="look")]}, "ok"],
            "editor": [{"tool_calls": [use("Bash", command="pwd")]}, "looked"],
        }
    )
    with Runtime([lead, editor("editor")], model=model, workspace=repo) as rt:
        assert rt.run("lead", "plan", wait=WAIT).status is RunStatus.COMPLETED
        (child,) = [r for r in rt.runs() if r.agent == "editor"]
        assert child.status is RunStatus.COMPLETED
    ((pwd,),) = answers(model, "editor")
    assert pwd.content == str(repo)
    assert worktree_paths(repo) == [str(repo)]
    assert branches(repo) == ""
    assert excluded(repo) == before


def test_a_run_in_plan_mode_by_its_definition_still_gets_its_worktree(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    model = ScriptedModel({"editor": [{"tool_calls": [use("Bash", command="pwd")]}, "looked"]})
    with Runtime([editor("editor", permission_mode="plan")], model=model, workspace=repo) as rt:
        assert rt.run("editor", "look", wait=WAIT).status is RunStatus.COMPLETED
    ((pwd,),) = answers(model, "editor")
    assert pwd.content.startswith(str(repo / ".claude" / "worktrees")), pwd


def test_a_held_child_reads_its_parents_worktree(tmp_path: Path) -> None:
    """A ``plan`` lead in its own worktree (plan mode by its definition: it gets one) spawns
    an isolated helper, which its plan mode holds there: the helper gets no worktree, and
    starts where its lead does (its worktree), not in the main tree (session 27); its
    grandchild, held too, the same."""
    repo = make_repo(tmp_path / "repo")
    model = ScriptedModel(
        {
            "lead": [
                {"tool_calls": [use("Bash", command="pwd")]},
                {"tool_calls": [use("spawn_subagent", agent="helper", task="look")]},
                "ok",
            ],
            "helper": [
                {"tool_calls": [use("Bash", command="pwd")]},
                {"tool_calls": [use("spawn_subagent", agent="deeper", task="look")]},
                "looked",
            ],
            "deeper": [{"tool_calls": [use("Bash", command="pwd")]}, "looked"],
        }
    )
    agents = [editor("lead", permission_mode="plan"), editor("helper"), editor("deeper")]
    with Runtime(agents, model=model, workspace=repo) as rt:
        assert rt.run("lead", "plan", wait=WAIT).status is RunStatus.COMPLETED
        assert {r.agent: r.status for r in rt.runs()} == dict.fromkeys(
            ("lead", "helper", "deeper"), RunStatus.COMPLETED
        )
        ((lead_pwd,), *_) = answers(model, "lead")
        tree = Path(lead_pwd.content)
        assert tree.is_relative_to(repo / ".claude" / "worktrees"), lead_pwd
    ((helper_pwd,), _) = answers(model, "helper")
    assert helper_pwd.content == str(tree), helper_pwd
    ((deeper_pwd,),) = answers(model, "deeper")
    assert deeper_pwd.content == str(tree)
    assert worktree_paths(repo) == [str(repo)]  # the lead's, unchanged, removed at its end
