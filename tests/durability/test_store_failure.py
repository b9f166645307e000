"""When the store fails mid-job (here: the disk is full), no caller hangs and nothing is
acknowledged that was not kept: every run is stopped, every caller gets the store's error,
and the store keeps its last committed state for a later runtime to resume."""

from __future__ import annotations

from pathlib import Path

import pytest

from subagents import FunctionAgent, Runtime, ScriptedModel, SQLiteStore
from subagents.behaviour.function import AgentContext
from subagents.messages import RunStatus
from subagents.store.base import StoreError


async def busy(ctx: AgentContext) -> str:
    for i in range(10_000):  # far more than the small disk holds
        await ctx.spawn("leaf", "x" * 2_000 + str(i))
    return "never"


def leaf(ctx: AgentContext) -> str:
    return "ok " + ctx.task[-4:]


def test_a_full_disk_stops_the_runs_and_tells_every_caller(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db", max_bytes=256 * 1024)
    agents = [FunctionAgent.create("busy", busy), FunctionAgent.create("leaf", leaf)]
    with Runtime(agents, model=ScriptedModel(), store=store) as rt:
        outcome = rt.spawn("busy", "fill the disk").result(timeout=60)
        assert outcome.status is RunStatus.FAILED
        assert outcome.error_kind == "store"
        assert "full" in (outcome.error or "")
        with pytest.raises(StoreError, match="the run store failed"):
            rt.spawn("leaf", "more")
    # what was committed is still there, and says the job was not finished
    reopened = SQLiteStore(tmp_path / "runs.db")
    [root] = [r for r in reopened.list_runs() if r.agent == "busy"]
    assert not root.status.terminal
    reopened.close()
