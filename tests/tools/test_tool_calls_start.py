"""What a run's ``ToolCalls`` makes at the start and what it leaves until first used: the
requester's policy (``ask_parent`` approvals) and the run's tool session are made when first
asked for (a fan-out's child without tools never asks), the same as made at the start."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
import structlog

from subagents.behaviour.port import AgentEnv
from subagents.behaviour.tool_calls import ToolCalls
from subagents.definitions.spec import AgentSpec
from subagents.messages import PermissionGrant, RunRecord
from subagents.models.scripted import ScriptedModel
from subagents.tools.permissions import PermissionPolicy
from subagents.tools.sandbox import Sandbox
from subagents.tools.workspace import Workspace


class _Port:
    """The three things ``ToolCalls`` reads of its agent at the start."""

    def __init__(self, record: RunRecord, spec: AgentSpec) -> None:
        self.record = record
        self.spec = spec
        self.log: Any = structlog.get_logger("test")


WORKER = AgentSpec(name="worker", description="no tools", tools=())
CEILING = (PermissionGrant(agent="lead", run_id="r0", mode="plan", disallowed_tools=("Bash",)),)


def _calls(tmp_path: Path, ceiling: tuple[PermissionGrant, ...]) -> tuple[ToolCalls, AgentEnv]:
    env = AgentEnv(model=ScriptedModel({}), agents=lambda: [WORKER], workspace=Workspace(tmp_path))
    record = RunRecord(run_id="r1", agent="worker", task="t", root_run_id="r0", ceiling=ceiling)
    return ToolCalls(env, _Port(record, WORKER)), env  # type: ignore[arg-type]


def test_the_requesters_policy_and_the_session_wait_for_their_first_use(tmp_path: Path) -> None:
    calls, env = _calls(tmp_path, CEILING)
    assert calls._requester is None and calls._session is None  # nothing made yet
    requester = calls.requester
    assert requester == PermissionPolicy.of_requester(env.permissions, CEILING, tmp_path)
    assert requester is not None and requester.mode == "plan"
    assert calls.requester is requester  # made once
    session = calls.session
    assert session.cwd == tmp_path and not session.files_read and not session.answers
    assert calls.session is session


def test_a_root_has_no_requester(tmp_path: Path) -> None:
    calls, _ = _calls(tmp_path, ())
    assert calls.requester is None


# ---- the network answer, made once per definition, ceiling and mode --------------------------

PLAN_OFF = Sandbox(network={"default": "on", "plan": "off"}, abi=0)  # abi given: no kernel asked


def _network(env: AgentEnv, spec: AgentSpec, ceiling: tuple[PermissionGrant, ...] = ()) -> bool:
    record = RunRecord(run_id="r1", agent=spec.name, task="t", root_run_id="r0", ceiling=ceiling)
    return ToolCalls(env, _Port(record, spec))._network  # type: ignore[arg-type]


def _env(tmp_path: Path, spec: AgentSpec) -> AgentEnv:
    return AgentEnv(
        model=ScriptedModel({}),
        agents=lambda: [spec],
        workspace=Workspace(tmp_path),
        sandbox=PLAN_OFF,
    )


def test_a_reloaded_definitions_network_is_the_next_runs_not_the_old_ones(tmp_path: Path) -> None:
    env = _env(tmp_path, WORKER)
    assert _network(env, WORKER) and _network(env, WORKER)  # answered once, kept
    reloaded = msgspec.structs.replace(WORKER, network="off")  # a new AgentSpec object
    assert not _network(env, reloaded)
    again = msgspec.structs.replace(reloaded, network="on")
    assert _network(env, again)
    assert not _network(env, reloaded)  # each definition object its own answer


def test_a_run_in_another_mode_or_under_another_ceiling_gets_its_own_network(
    tmp_path: Path,
) -> None:
    env = _env(tmp_path, WORKER)
    assert _network(env, WORKER)  # the runtime's default mode: on
    in_plan = (PermissionGrant(agent="lead", run_id="r0", mode="plan"),)
    assert not _network(env, WORKER, in_plan)  # a requester holds it in plan mode: off
    offline = (PermissionGrant(agent="lead", run_id="r0", network="off"),)
    assert not _network(env, WORKER, offline)  # a requester's definition turned it off
    assert _network(env, WORKER)  # the root's answer is unchanged


def test_a_replaced_sandbox_is_asked_again(tmp_path: Path) -> None:
    env = _env(tmp_path, WORKER)
    planner = msgspec.structs.replace(WORKER, permission_mode="plan")
    assert not _network(env, planner)
    env.sandbox = Sandbox(network={"plan": "on"}, abi=0)
    assert _network(env, planner)


def test_a_bad_network_setting_fails_every_runs_set_up(tmp_path: Path) -> None:
    env = _env(tmp_path, WORKER)
    bad = msgspec.structs.replace(WORKER, network="sometimes")
    for _ in range(2):  # a failure is not kept as an answer
        with pytest.raises(ValueError, match="network"):
            _network(env, bad)


def test_a_run_leaving_plan_mode_is_answered_for_its_new_mode(tmp_path: Path) -> None:
    env = _env(tmp_path, WORKER)
    planner = msgspec.structs.replace(WORKER, permission_mode="plan")
    record = RunRecord(run_id="r1", agent="worker", task="t", root_run_id="r0")
    calls = ToolCalls(env, _Port(record, planner))  # type: ignore[arg-type]
    assert calls.policy.mode == "plan" and not calls._network
    assert calls._network_for("default")  # the same definition and ceiling, another mode
    assert not calls._network_for("plan")
