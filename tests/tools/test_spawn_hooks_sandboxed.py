"""A PreToolUse hook that sees a spawn (``spawn_subagent``, ``Task``) runs in the run's
sandbox like every other hook (session 26, e-adv26). Spawning passes no permission, but a
hook matcher written for Claude Code's ``Task`` sees its calls; that path started the hook
with no sandbox at all: a ``plan`` run's hook wrote outside, and read the run store."""

from __future__ import annotations

from pathlib import Path

import pytest

from subagents.messages import RunStatus
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime

from .conftest import WAIT
from .test_sandbox_runs import agent, landlock, results, use


@landlock
@pytest.mark.parametrize(("mode", "tool"), [("plan", "spawn_subagent"), ("default", "Task")])
def test_a_hook_on_a_spawn_is_held_by_the_runs_sandbox(
    repo: Path, tmp_path: Path, mode: str, tool: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    hook = (  # blocks the call when the kernel refuses its write: so it is seen to run
        f"echo hooked > {outside}/hook 2>/dev/null || {{ echo 'the sandbox held me' >&2; exit 2; }}"
    )
    hooks = {"PreToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": hook}]}]}
    spawn = (
        use("spawn_subagent", agent="helper", task="help")
        if tool == "spawn_subagent"
        else use("Task", description="a helper", prompt="help", subagent_type="helper")
    )
    model = ScriptedModel({"lead": [{"tool_calls": [spawn]}, "done"], "helper": ["helped"]})
    agents = [agent("lead", hooks=hooks), agent("helper")]
    with Runtime(agents, model=model, workspace=repo, permissions=mode, allow_hooks=True) as rt:
        assert rt.run("lead", "go", wait=WAIT).status is RunStatus.COMPLETED
        helper = [r for r in rt.runs() if r.agent == "helper"]
    assert helper == []  # the hook blocked the spawn
    (refused,) = results(model, "lead")
    assert refused.is_error and "the sandbox held me" in refused.content, refused
    assert not (outside / "hook").exists()
