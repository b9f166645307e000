"""The tools a run is offered are made once per definition object and ceiling
(``behaviour/offer.py``'s ``_settled``, kept in ``AgentEnv.offers``): a hot-reloaded
definition (a new ``AgentSpec``) is offered its own tools at its next run, and a run whose
requesters narrow it (another mode, disallowed tools) gets its own offer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import structlog

from subagents.behaviour.offer import offered_tools
from subagents.behaviour.port import AgentEnv
from subagents.definitions.spec import AgentSpec
from subagents.messages import PermissionGrant, RunRecord
from subagents.models.scripted import ScriptedModel
from subagents.runtime._assembly import tools_for
from subagents.tools.workspace import Workspace


class _Port:
    """What ``offered_tools`` reads of its run (spawning is off for these definitions)."""

    def __init__(self, record: RunRecord, spec: AgentSpec) -> None:
        self.record = record
        self.spec = spec
        self.log: Any = structlog.get_logger("test")


READER = AgentSpec(name="reader", description="reads", tools=("Read",))


def _offered(env: AgentEnv, spec: AgentSpec, ceiling: tuple[PermissionGrant, ...] = ()) -> set[str]:
    record = RunRecord(run_id="r1", agent=spec.name, task="t", root_run_id="r0", ceiling=ceiling)
    port: Any = _Port(record, spec)
    return {s.name for s in offered_tools(env, port, env.tools, ())}


def _env(tmp_path: Path) -> AgentEnv:
    return AgentEnv(
        model=ScriptedModel({}),
        agents=lambda: [READER],
        tools=tools_for([], builtin_tools=True),
        workspace=Workspace(tmp_path),
    )


def test_a_reloaded_definitions_tools_are_offered_to_its_next_run(tmp_path: Path) -> None:
    env = _env(tmp_path)
    assert _offered(env, READER) == {"Read"} == _offered(env, READER)  # kept after the first
    reloaded = msgspec.structs.replace(READER, tools=("Read", "Grep"))
    assert _offered(env, reloaded) == {"Read", "Grep"}
    narrowed = msgspec.structs.replace(reloaded, disallowed_tools=("Read",))
    assert _offered(env, narrowed) == {"Grep"}
    assert _offered(env, READER) == {"Read"}  # the old object keeps its own answer


def test_a_run_narrowed_by_its_requesters_gets_its_own_offer(tmp_path: Path) -> None:
    env = _env(tmp_path)
    both = msgspec.structs.replace(READER, tools=("Read", "Grep"))
    assert _offered(env, both) == {"Read", "Grep"}
    no_grep = (PermissionGrant(agent="lead", run_id="r0", disallowed_tools=("Grep",)),)
    assert _offered(env, both, no_grep) == {"Read"}
    in_plan = (PermissionGrant(agent="lead", run_id="r0", mode="plan"),)
    assert _offered(env, both, in_plan) == {"Read", "Grep"}  # read-only tools: still offered
    assert _offered(env, both) == {"Read", "Grep"}  # the root's offer unchanged
