"""The record admission makes of a run (``Admission._record``), every field of it: from the
request, its definition and its parent. The record is built in two steps (a call of at most
15 keywords, then ``msgspec.structs.replace`` for the rest: benchmarks/README.md, session
20), so a field left out of either step would fall back to its default silently."""

from __future__ import annotations

from subagents.definitions.spec import AgentSpec
from subagents.messages import PermissionGrant, RunRecord, RunStatus

from .test_core import Harness


def admitted(h: Harness, run_id: str) -> RunRecord:
    record = h.store.get_run(run_id)
    assert record is not None
    return record


def test_a_record_carries_every_option_of_its_request_and_its_parents_share() -> None:
    h = Harness(
        None,
        AgentSpec(name="lead", description="l", model="opus", cleanup="delete", timeout=50),
        AgentSpec(name="worker", description="w", model="inherit"),
    )
    root = h.run(
        "lead", context="ctx", model="m1", timeout=12.5, token_budget=1000, label="L",
        cost_budget_usd=2.5, on_failure="retry", max_retries=2, shared={"a": [1], "b": 2},
        approvals_in_store=True, background=True,
    )  # fmt: skip
    child = h.run("worker", root, detach=True, label="", timeout=0.5, share=("a",))
    record, under = admitted(h, root), admitted(h, child)
    when = {"created_at": record.created_at, "started_at": record.started_at}
    assert record == RunRecord(
        run_id=root, agent="lead", task="task for lead", root_run_id=root, context="ctx",
        label="L", model="m1", status=RunStatus.RUNNING, background=True, deadline_s=12.5,
        cleanup="delete", request_id=record.request_id, owner="", token_budget=1000,
        cost_budget_usd=2.5, on_failure="retry", shared={"a": [1], "b": 2},
        approvals_in_store=True, **when,
    )  # fmt: skip
    assert record.request_id is not None and record.request_id.startswith("q")
    assert record.created_at > 0
    when = {"created_at": under.created_at, "started_at": under.started_at}
    assert under == RunRecord(
        run_id=child, agent="worker", task="task for worker", root_run_id=root,
        parent_run_id=root, depth=1, label="", model="m1", status=RunStatus.RUNNING,
        background=True, deadline_s=0.5, cleanup="delete", request_id=under.request_id,
        owner="", token_budget=under.token_budget, cost_budget_usd=2.5, shared={"a": [1]},
        ceiling=(PermissionGrant(agent="lead", run_id=root),), approvals_in_store=True,
        detached=True, **when,
    )  # fmt: skip
    assert under.token_budget is not None and 0 < under.token_budget <= 1000
