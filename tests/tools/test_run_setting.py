"""A run's setting (workspace, permission policy, hooks, network) is made once for all the
runs of a definition under one ceiling and shared (``behaviour/run_setting.py``): what may
differ between runs never is. Each run under another ceiling is narrowed by its own; a
reloaded definition or the runtime's permissions replaced are never served the old one; a
worktree-isolated definition's runs each work in their own tree; a tightened mode is logged
by every run, a bad definition fails every run's set-up.

Real ``ToolCalls`` set up as a run's start sets them up, over a real ``AgentEnv`` (and real
git worktrees for isolation)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import msgspec
import pytest
import structlog
from structlog.testing import capture_logs

from subagents.behaviour.port import AgentEnv
from subagents.behaviour.run_setting import SETTINGS_MAX
from subagents.behaviour.tool_calls import ToolCalls
from subagents.definitions.spec import AgentSpec
from subagents.messages import PermissionGrant, RunRecord
from subagents.models.scripted import ScriptedModel
from subagents.tools.permissions import Permissions
from subagents.tools.workspace import Workspace

WORKER = AgentSpec(name="worker", description="no tools", tools=())
PLAN = (PermissionGrant(agent="lead", run_id="r0", mode="plan", disallowed_tools=("Bash",)),)
OTHER_PLAN = (PermissionGrant(agent="lead", run_id="r9", mode="plan"),)


def _repo(root: Path) -> Path:
    """A git repository with one commit (worktrees are made from it)."""
    root.mkdir(parents=True)
    for args in (
        ("init", "-q", "-b", "main"),
        (
            "-c",
            "user.email=t@example.com",
            "-c",
            "user.name=T",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "first",
        ),
    ):
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)
    return root


class _Port:
    """What ``ToolCalls`` reads of its run at the start."""

    def __init__(self, record: RunRecord, spec: AgentSpec) -> None:
        self.record = record
        self.spec = spec
        self.log: Any = structlog.get_logger("test")


def _env(root: Path, spec: AgentSpec = WORKER) -> AgentEnv:
    return AgentEnv(model=ScriptedModel({}), agents=lambda: [spec], workspace=Workspace(root))


def _calls(
    env: AgentEnv, spec: AgentSpec = WORKER, ceiling: tuple[PermissionGrant, ...] = (), n: int = 1
) -> ToolCalls:
    record = RunRecord(run_id=f"r{n}", agent=spec.name, task="t", root_run_id="r0", ceiling=ceiling)
    return ToolCalls(env, _Port(record, spec))  # type: ignore[arg-type]


def test_the_runs_of_a_definition_under_one_ceiling_share_one_setting(tmp_path: Path) -> None:
    env = _env(tmp_path)
    first = _calls(env, ceiling=PLAN, n=1)
    [kept] = env.settings.values()
    second = _calls(env, ceiling=PLAN, n=2)
    assert list(env.settings.values()) == [kept] and env.settings[(id(WORKER), PLAN)] is kept
    assert second.policy is first.policy is kept.policy  # made once, not per run
    assert second.workspace is first.workspace is env.workspace
    assert len(env.settings) == 1


def test_each_ceiling_narrows_its_own_runs(tmp_path: Path) -> None:
    """A fan-out's children under different requesters: each under its own grants, however
    many runs of the same definition came before under another."""
    env = _env(tmp_path)
    free, held, other = _calls(env), _calls(env, ceiling=PLAN), _calls(env, ceiling=OTHER_PLAN)
    assert free.policy.mode == "default" and held.policy.mode == "plan"
    assert [limit.agent for limit in held.policy.limits] == ["worker", "lead"]
    assert [limit.agent for limit in free.policy.limits] == ["worker"]  # (its own only)
    assert other.policy.mode == "plan" and other.policy is not held.policy
    assert _calls(env).policy is free.policy  # and the root's is served again as it was


def test_a_reloaded_definition_is_never_served_the_old_setting(tmp_path: Path) -> None:
    env = _env(tmp_path)
    old = _calls(env)
    reloaded = msgspec.structs.replace(WORKER, permission_mode="plan")
    assert _calls(env, reloaded).policy.mode == "plan"
    assert old.policy.mode == "default" and _calls(env).policy is old.policy


def test_the_runtimes_permissions_replaced_are_the_next_runs(tmp_path: Path) -> None:
    env = _env(tmp_path)
    assert _calls(env).policy.mode == "default"
    env.permissions = Permissions(mode="plan")
    assert _calls(env).policy.mode == "plan"


def test_a_tightened_mode_is_logged_by_every_run(tmp_path: Path) -> None:
    env = _env(tmp_path)
    with capture_logs() as logs:
        for n in range(3):
            _calls(env, ceiling=PLAN, n=n)
    tightened = [e for e in logs if e["event"] == "permission mode tightened"]
    assert len(tightened) == 3 and "requester lead (r0)" in tightened[0]["reason"]


def test_a_bad_definition_fails_every_runs_set_up(tmp_path: Path) -> None:
    env = _env(tmp_path)
    bad = msgspec.structs.replace(WORKER, permission_mode="sideways")
    for _ in range(2):  # a failure is not kept
        with pytest.raises(ValueError, match="sideways"):
            _calls(env, bad)
    assert env.settings == {}


def test_a_worktree_isolated_definitions_runs_each_work_in_their_own_tree(
    tmp_path: Path,
) -> None:
    repo = _repo(tmp_path / "repo")
    isolated = msgspec.structs.replace(WORKER, metadata={"isolation": "worktree"})
    env = _env(repo, isolated)
    first, second = _calls(env, isolated, n=1), _calls(env, isolated, n=2)
    assert first.workspace.root != second.workspace.root
    assert repo not in (first.workspace.root, second.workspace.root)
    assert first.policy.root == first.workspace.root  # its rules read from its own tree
    assert second.policy.root == second.workspace.root
    assert env.worktrees is not None
    env.worktrees.close()


def test_settings_kept_stay_bounded_however_often_definitions_are_reloaded(
    tmp_path: Path,
) -> None:
    env = _env(tmp_path)
    for i in range(SETTINGS_MAX + 10):
        reloaded = msgspec.structs.replace(WORKER, description=f"version {i}")
        _calls(env, reloaded)
        assert len(env.settings) <= SETTINGS_MAX
