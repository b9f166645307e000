"""What a run's ``ToolCalls`` makes at the start and what it leaves until first used: the
requester's policy (``ask_parent`` approvals) and the run's tool session are made when first
asked for (a fan-out's child without tools never asks), the same as made at the start."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import structlog

from subagents.behaviour.port import AgentEnv
from subagents.behaviour.tool_calls import ToolCalls
from subagents.definitions.spec import AgentSpec
from subagents.messages import PermissionGrant, RunRecord
from subagents.models.scripted import ScriptedModel
from subagents.tools.permissions import PermissionPolicy
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
