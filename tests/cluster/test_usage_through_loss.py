"""A run's tokens through its node host's loss: counted once, not spent twice in the count.

A run on the worker node has taken one turn (recorded, with its usage) and is in its second
model call when its host is SIGKILLed: the run is started again from its checkpoint and takes
the second turn again. Its record then says the tokens of two turns, exactly what the same run
without a loss says (the lost attempt's unfinished call reported nothing; the recorded turn is
not added again at the move), and a token budget of exactly that much is not exceeded.
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


class SecondTurnHeld(ScriptedModel):
    """The first second-turn call anywhere (on any node's copy) waits for ``release``."""

    def __init__(self, scripts: Any, entered: Gate, release: Gate) -> None:
        super().__init__(scripts)
        self.entered, self.release = entered, release

    def complete(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        turn = sum(1 for m in request.messages if m.role == "assistant")
        if turn == 1 and not self.entered.is_set():
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
        moved = rt.spawn("worker", "work")
        assert entered.wait(WAIT_S), "the second turn never began on the node"
        name = runtime_host_name(rt.owner, ray_cluster.worker_node_id)
        host = ray.get_actor(name, namespace=NAMESPACE)
        os.kill(ray.get(host.describe.remote(), timeout=WAIT_S)["pid"], signal.SIGKILL)
        assert moved.result(timeout=WAIT_S).status is RunStatus.COMPLETED
        assert len(rt.placements()[moved.run_id]) == 2  # started again after the loss
        plain = rt.run("worker", "work", wait=WAIT_S)  # the same run, no loss
        assert plain.status is RunStatus.COMPLETED, plain
        used = store.get_run(moved.run_id)
        expected = store.get_run(plain.run_id)
        assert used is not None and expected is not None
        assert used.usage.total_tokens > 0
        assert used.usage == expected.usage
        budget = expected.usage.total_tokens
        release.set()
        entered_again, release_again = Gate(), Gate()
    # the same loss under a budget of exactly the run's tokens: not exceeded
    with Runtime(
        [spec],
        model=SecondTurnHeld({"worker": script}, entered_again, release_again),
        store=store,
        cluster=ray_cluster.address,
        workspace=work,
        permissions="bypassPermissions",
        restore=False,
    ) as rt:
        handle = rt.spawn("worker", "work", token_budget=budget)
        assert entered_again.wait(WAIT_S), "the second turn never began on the node"
        name = runtime_host_name(rt.owner, ray_cluster.worker_node_id)
        host = ray.get_actor(name, namespace=NAMESPACE)
        os.kill(ray.get(host.describe.remote(), timeout=WAIT_S)["pid"], signal.SIGKILL)
        outcome = handle.result(timeout=WAIT_S)
        release_again.set()
    assert outcome.status is RunStatus.COMPLETED, outcome
    record = store.get_run(handle.run_id)
    assert record is not None and record.usage.total_tokens == budget
    store.close()
