"""A definition's hooks are parsed once for all its runs (``behaviour/tool_calls.py``
``hooks_of``, kept in ``AgentEnv.parsed_hooks``), not at each run's start: a definition
replaced by a new ``AgentSpec`` (registered again in code; hot reload keeps a file
definition's hooks as read at start, ``definitions/commands_at_start.py``) has its own hooks
at its next run, a bad one fails every
run's set-up (a failure is not kept), and the cache stays bounded however many times
definitions are reloaded.

Real ``ToolCalls`` set up as a run's start sets them up, over a real ``AgentEnv``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
import structlog

from subagents.behaviour.port import AgentEnv
from subagents.behaviour.tool_calls import NETWORKS_MAX, ToolCalls
from subagents.definitions.spec import AgentSpec
from subagents.messages import RunRecord
from subagents.models.scripted import ScriptedModel
from subagents.tools.hooks import HookConfigError
from subagents.tools.workspace import Workspace


class _Port:
    """What a run's ``ToolCalls`` reads of its run at its start (``_Port(spec)``: ``Any``)."""

    def __init__(self, spec: AgentSpec) -> None:
        self.record = RunRecord(run_id="r1", agent=spec.name, task="t", root_run_id="r1")
        self.spec = spec
        self.log: Any = structlog.get_logger("test")


def _port(spec: AgentSpec) -> Any:
    return _Port(spec)


def _hooks(command: str) -> dict[str, Any]:
    return {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": command}]}]}


HOOKED = AgentSpec(name="hooked", description="hooked", tools=("Bash",), hooks=_hooks("echo a"))


def _env(tmp_path: Path) -> AgentEnv:
    return AgentEnv(
        model=ScriptedModel({}),
        agents=lambda: [HOOKED],
        workspace=Workspace(tmp_path),
        allow_hooks=True,
    )


def _commands(env: AgentEnv, spec: AgentSpec) -> list[str]:
    calls = ToolCalls(env, _port(spec))
    assert calls.hooks is not None
    return [c.command for c in calls.hooks.commands("PreToolUse", "Bash")]


def test_a_definitions_hooks_are_parsed_once_for_all_its_runs(tmp_path: Path) -> None:
    env = _env(tmp_path)
    first = ToolCalls(env, _port(HOOKED))
    second = ToolCalls(env, _port(HOOKED))
    assert first.hooks is not None
    assert second.hooks is first.hooks  # the same parse, not one per run


def test_a_reloaded_definitions_hooks_are_its_next_runs(tmp_path: Path) -> None:
    env = _env(tmp_path)
    assert _commands(env, HOOKED) == ["echo a"]
    reloaded = msgspec.structs.replace(HOOKED, hooks=_hooks("echo b"))
    assert _commands(env, reloaded) == ["echo b"]
    assert _commands(env, HOOKED) == ["echo a"]  # the old object keeps its own
    unhooked = msgspec.structs.replace(HOOKED, hooks={"Stop": []})
    assert ToolCalls(env, _port(unhooked)).hooks is None


def test_bad_hooks_fail_every_runs_set_up(tmp_path: Path) -> None:
    env = _env(tmp_path)
    bad = msgspec.structs.replace(HOOKED, hooks={"PreToolUse": "echo"})
    for _ in range(2):  # not kept as an answer
        with pytest.raises(HookConfigError, match=r"hooks\.PreToolUse must be a list"):
            ToolCalls(env, _port(bad))


def test_hooks_kept_stay_bounded_however_often_definitions_are_reloaded(tmp_path: Path) -> None:
    env = _env(tmp_path)
    for i in range(NETWORKS_MAX + 10):
        reloaded = msgspec.structs.replace(HOOKED, hooks=_hooks(f"echo {i}"))
        assert _commands(env, reloaded) == [f"echo {i}"]
        assert len(env.parsed_hooks) <= NETWORKS_MAX
