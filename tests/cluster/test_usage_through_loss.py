"""A run's tokens through its node host's loss: counted once, not spent twice in the count.

A run on the worker node has taken one turn (recorded, with its usage) and is in its second
model call when its host is SIGKILLed: the run is started again from its checkpoint and takes
the second turn again. Its record then says the tokens of two turns, exactly what the same run
without a loss said before it (the lost attempt's unfinished call reported nothing; the
recorded turn is not added again at the move), and it ran under a token budget of exactly that
much, not exceeded. One runtime and one loss for both (each costs seconds of CI).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from gates import Gate
from raycluster import WORKER, LocalCluster
from subagents import Runtime, ScriptedModel, SQLiteStore
from subagents.definitions.spec import AgentSpec
from subagents.messages import RunStatus

pytestmark = [pytest.mark.ray, pytest.mark.timeout(600)]

WAIT_S = 180.0
HELD = "held"
"""The task of the run whose second turn is held (the run without a loss has another task of
the same length: the scripted model's usage counts characters)."""


class SecondTurnHeld(ScriptedModel):
    """The first second-turn call of the task ``HELD`` (on any node's copy) waits for
    ``release``."""

    def __init__(self, scripts: Any, entered: Gate, release: Gate) -> None:
        super().__init__(scripts)
        self.entered, self.release = entered, release

    def complete(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        turn = sum(1 for m in request.messages if m.role == "assistant")
        held = HELD in str(request.messages[0].content)
        if held and turn == 1 and not self.entered.is_set():
            self.entered.set()
            assert self.release.wait(WAIT_S), "never released"
        return super().complete(request, *args, **kwargs)


def test_a_moved_runs_tokens_are_counted_once(ray_cluster: LocalCluster, tmp_path: Path) -> None:
    import ray

    from subagents.cluster.connect import NAMESPACE
    from subagents.cluster.node_host import runtime_host_name

    entered, release = Gate(), Gate()
    script = [{"tool_calls": [{"name": "Bash", "input": {"command": "echo hi"}}]}, "done"]
    spec = AgentSpec(
        name="worker", description="Works.", prompt="Work.", metadata={"resources": {WORKER: 1}}
    )
    work = tmp_path / "work"
    work.mkdir()
    store = SQLiteStore(tmp_path / "runs.db")
    with Runtime(
        [spec],
        model=SecondTurnHeld({"worker": script}, entered, release),
        store=store,
        cluster=ray_cluster.address,
        workspace=work,
        permissions="bypassPermissions",
        restore=False,
    ) as rt:
        plain = rt.run("worker", "free", wait=WAIT_S)  # the same run, no loss
        assert plain.status is RunStatus.COMPLETED, plain
        expected = store.get_run(plain.run_id)
        assert expected is not None and expected.usage.total_tokens > 0
        budget = expected.usage.total_tokens
        moved = rt.spawn("worker", HELD, token_budget=budget)
        assert entered.wait(WAIT_S), "the second turn never began on the node"
        name = runtime_host_name(rt.owner, ray_cluster.worker_node_id)
        host = ray.get_actor(name, namespace=NAMESPACE)
        os.kill(ray.get(host.describe.remote(), timeout=WAIT_S)["pid"], signal.SIGKILL)
        outcome = moved.result(timeout=WAIT_S)
        placed = rt.placements()[moved.run_id]
        release.set()
    assert outcome.status is RunStatus.COMPLETED, outcome  # the budget was not exceeded
    assert len(placed) == 2  # started again after the loss
    used = store.get_run(moved.run_id)
    assert used is not None
    assert used.usage == expected.usage
    store.close()
