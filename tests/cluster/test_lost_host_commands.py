"""A node host lost while a run's journaled Bash command runs there: the run is started again
(the call answered as interrupted, not run again), and the command must not go on running on
the old node after its run moved.

A command runs in a session of its own (``tools/processes.py``: a process group per command,
killed at the call's end, the run's end or the runtime's close). A node host that is SIGKILLed
(or frozen, then killed by the driver: docs/cluster.md, "A node host lost") ends none of
that: its commands are re-parented to init and go on, side effects included, while the run
they belonged to goes on elsewhere and its model is told the call was interrupted and may
do it again. So the lost host's command's effect can land after the run moved, once or twice.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from ns_pids import NS, pid_in
from pinned import kill_pinned, pin
from polling import wait_until
from raycluster import WORKER, LocalCluster
from subagents import Runtime, ScriptedModel, SQLiteStore
from subagents.definitions.spec import AgentSpec
from subagents.messages import RunStatus

pytestmark = [pytest.mark.ray, pytest.mark.timeout(600)]

WAIT_S = 180.0
GONE_S = 30.0
"""How long the lost host's command may take to die once its run has moved (a hang guard:
on main it never dies)."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(FileNotFoundError, ProcessLookupError):  # reaped meanwhile
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie did its work already
    return False


def _worker_host(rt: Runtime, cluster: LocalCluster) -> Any:
    import ray

    from subagents.cluster.connect import NAMESPACE
    from subagents.cluster.node_host import runtime_host_name

    return ray.get_actor(runtime_host_name(rt.owner, cluster.worker_node_id), namespace=NAMESPACE)


def test_a_lost_hosts_journaled_command_ends_with_it_and_is_not_run_again(
    ray_cluster: LocalCluster, tmp_path: Path
) -> None:
    import ray

    work = tmp_path / "work"
    work.mkdir()
    command = (
        f"echo $$ {NS} > pid.tmp && mv pid.tmp pid; while [ ! -e go ]; do sleep 0.05; done;"
        " echo old >> effects.txt"
    )
    model = ScriptedModel(
        {"worker": [{"tool_calls": [{"name": "Bash", "input": {"command": command}}]}, "{result0}"]}
    )
    spec = AgentSpec(
        name="worker", description="Works.", prompt="Work.", metadata={"resources": {WORKER: 1}}
    )
    pid, left = 0, -1
    try:
        with Runtime(
            [spec],
            model=model,
            store=SQLiteStore(tmp_path / "runs.db"),
            cluster=ray_cluster.address,
            workspace=work,
            permissions="bypassPermissions",
            restore=False,
        ) as rt:
            handle = rt.spawn("worker", "work")
            wait_until((work / "pid").exists, "the journaled command running on the node", WAIT_S)
            pid = pid_in(work / "pid")
            left = pin(pid)  # the cleanup kills this process, never whatever has its number
            host = _worker_host(rt, ray_cluster)
            os.kill(ray.get(host.describe.remote(), timeout=WAIT_S)["pid"], signal.SIGKILL)
            outcome = handle.result(timeout=WAIT_S)
            placed = rt.placements()[handle.run_id]
        assert outcome.status is RunStatus.COMPLETED, outcome
        assert len(placed) == 2  # started on the worker node, then again after the loss
        assert outcome.result is not None
        assert outcome.result.startswith("This Bash call was interrupted"), outcome.result
        wait_until(lambda: not _alive(pid), "the lost host's command ending", GONE_S)
        (work / "go").touch()
        assert not (work / "effects.txt").exists()
    finally:
        kill_pinned(left, group=True)  # the orphan of the lost host: not left on the machine
