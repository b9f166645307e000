"""The children of one parent share the ceiling and the narrowing worked out for the first
(``supervision/child_ceilings.py``): the same answers as ``child_ceiling`` and ``narrowed``,
made once per parent (and per child definition), not once per child."""

from __future__ import annotations

from subagents.definitions.spec import AgentSpec
from subagents.messages import EventKind, PermissionGrant, RunRecord
from subagents.supervision.ceilings import child_ceiling, narrowed
from subagents.supervision.child_ceilings import ChildCeilings

from .test_core import Harness

LEAD = AgentSpec(name="lead", description="d", permission_mode="plan", disallowed_tools=("Bash",))
WORKER = AgentSpec(name="worker", description="d", permission_mode="acceptEdits")
CRITIC = AgentSpec(name="critic", description="d")


def _record(run_id: str, ceiling: tuple[PermissionGrant, ...] = ()) -> RunRecord:
    return RunRecord(run_id=run_id, agent="lead", task="t", root_run_id=run_id, ceiling=ceiling)


def test_the_answers_are_the_functions_answers_for_each_parent_and_definition() -> None:
    memo = ChildCeilings()
    outer = (PermissionGrant(agent="boss", run_id="r0", mode="default", tools=("Read",)),)
    for parent, spec in [
        (_record("r1"), LEAD),
        (_record("r1"), CRITIC),
        (_record("r2", outer), LEAD),
        (_record("r2", outer), CRITIC),
        (_record("r1"), LEAD),  # the first parent again, after another
    ]:
        ceiling = memo.ceiling(parent, spec)
        assert ceiling == child_ceiling(parent, spec)
        for child in (WORKER, CRITIC, WORKER):
            assert memo.narrowed(child, ceiling) == narrowed(child, ceiling)
    other = child_ceiling(_record("r9"), LEAD)  # a ceiling it did not make: as asked
    assert memo.narrowed(WORKER, other) == narrowed(WORKER, other)


def test_a_redefined_child_gets_its_own_narrowing() -> None:
    memo = ChildCeilings()
    ceiling = memo.ceiling(_record("r1"), LEAD)
    assert memo.narrowed(WORKER, ceiling) is not None
    assert "asks for acceptEdits" in (memo.narrowed(WORKER, ceiling) or "")
    quiet = AgentSpec(name="worker", description="d", permission_mode="plan")  # reloaded
    assert memo.narrowed(quiet, ceiling) == narrowed(quiet, ceiling)
    assert "asks for" not in (memo.narrowed(quiet, ceiling) or "")


def test_the_children_of_one_parent_share_its_ceiling_and_keep_their_narrowing() -> None:
    h = Harness(None, LEAD, WORKER, CRITIC)
    lead = h.run("lead")
    first, second, third = (h.run(a, lead) for a in ("worker", "worker", "critic"))
    records = [h.core.runs.get(r) for r in (first, second, third)]
    ceilings = [s.record.ceiling for s in records if s is not None]
    assert len(ceilings) == 3
    assert ceilings[0] == child_ceiling(_record(lead), LEAD)
    assert ceilings[1] is ceilings[0] and ceilings[2] is ceilings[0]  # made once
    for run_id, spec in ((first, WORKER), (second, WORKER), (third, CRITIC)):
        (spawned,) = [e for e in h.store.events(run_id) if e.kind == EventKind.SPAWNED]
        assert spawned.data.get("permissions") == narrowed(spec, ceilings[0])
