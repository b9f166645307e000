"""The built-in explore, plan and code agents with the real tools on a real git repository:
what each may do, what each is refused, and the environment note that tells them where."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from subagents.definitions.discovery import BUILTIN_DIR
from subagents.messages import ModelRequest, RunStatus, ToolResultBlock
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime

WAIT = 30.0


def use(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "input": arguments}


def answers(model: ScriptedModel, name: str) -> list[list[ToolResultBlock]]:
    out = []
    for request in model.requests:
        if request.agent == name and request.messages[-1].role == "user":
            found = [b for b in request.messages[-1].content if isinstance(b, ToolResultBlock)]
            if found:
                out.append(found)
    return out


def first_request(model: ScriptedModel, name: str) -> ModelRequest:
    return next(r for r in model.requests if r.agent == name)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "config.py").write_text(
        "def load_config(path):\n    return open(path).read()\n", encoding="utf-8"
    )
    (root / "pkg" / "main.py").write_text(
        "from pkg.config import load_config\n\nCONFIG = load_config('app.toml')\n",
        encoding="utf-8",
    )
    identity = ["-c", "user.name=t", "-c", "user.email=t@t"]
    for args in (["init", "-q"], ["add", "."], [*identity, "commit", "-qm", "config loader"]):
        subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)
    return root


@pytest.mark.parametrize("name", ["explore", "plan"])
def test_explore_and_plan_search_read_and_look_at_history_but_change_nothing(
    repo: Path, name: str
) -> None:
    config = repo / "pkg" / "config.py"
    model = ScriptedModel(
        {
            name: [
                {
                    "tool_calls": [
                        use("Grep", pattern="load_config", output_mode="files_with_matches"),
                        use("Glob", pattern="**/*.py"),
                        use("Read", file_path=str(config)),
                        use("LS", path=str(repo)),
                        use("Bash", command="git log --oneline"),
                    ]
                },
                {
                    "tool_calls": [
                        use("Bash", command="touch pwned"),
                        use("Edit", file_path=str(config), old_string="open", new_string="x"),
                        use("Write", file_path=str(repo / "new.py"), content="x = 1\n"),
                    ]
                },
                "found it",
            ]
        }
    )
    # even a runtime that allows everything: the definitions' plan mode and tools decide
    with Runtime(
        agent_dirs=[BUILTIN_DIR], model=model, workspace=repo, permissions="bypassPermissions"
    ) as rt:
        outcome = rt.run(name, "where is the config loaded?", wait=WAIT)
    assert outcome.status is RunStatus.COMPLETED, outcome
    reads, writes = answers(model, name)
    assert [a.is_error for a in reads] == [False] * 5, reads
    assert str(config) in reads[0].content and str(repo / "pkg" / "main.py") in reads[0].content
    assert "def load_config(path):" in reads[2].content
    assert "config loader" in reads[4].content
    touch, edit, write = writes
    assert touch.is_error and "may use Bash only as" in touch.content
    assert edit.is_error and edit.content == f"tool 'Edit' is not available to {name}"
    assert write.is_error and write.content == f"tool 'Write' is not available to {name}"
    assert not (repo / "pwned").exists() and not (repo / "new.py").exists()
    assert "open(path)" in config.read_text()
    offered = {t.name for t in first_request(model, name).tools}
    assert offered == {"Read", "Grep", "Glob", "LS", "Bash"}


def test_every_agent_with_file_tools_is_told_where_it_works(repo: Path) -> None:
    model = ScriptedModel({})
    with Runtime(agent_dirs=[BUILTIN_DIR], model=model, workspace=repo) as rt:
        for name in ("explore", "code", "plan"):
            rt.run(name, "look", wait=WAIT)
    for name in ("explore", "code", "plan"):
        system = first_request(model, name).system
        prompt, note = system.split("\n\n<env>\n")
        assert len(prompt) > 500 and note.endswith("</env>")
        assert f"Working directory: {repo}\n" in note
        assert "Is directory a git repo: Yes\n" in note


def test_an_agent_without_file_tools_gets_no_environment_note(tmp_path: Path) -> None:
    from subagents.definitions.spec import AgentSpec

    talker = AgentSpec(name="talker", description="d", prompt="You talk.", tools=("send_message",))
    model = ScriptedModel({})
    with Runtime([talker], model=model, workspace=tmp_path) as rt:
        rt.run("talker", "hi", wait=WAIT)
    assert first_request(model, "talker").system == "You talk."


def test_a_worktree_run_is_told_its_branch(repo: Path) -> None:
    from subagents.definitions.spec import AgentSpec

    isolated = AgentSpec(
        name="iso", description="d", prompt="You edit.", metadata={"isolation": "worktree"}
    )
    model = ScriptedModel({})
    with Runtime([isolated], model=model, workspace=repo) as rt:
        handle = rt.spawn("iso", "go")
        handle.result(WAIT)
        run_id = handle.run_id
    note = first_request(model, "iso").system.split("<env>")[1]
    assert f"Working directory: {repo / '.claude' / 'worktrees' / f'iso-{run_id}'}\n" in note
    assert f"your own git worktree, on branch subagents/iso-{run_id}" in note
