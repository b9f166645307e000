"""The head's watch on a node host that Ray calls unavailable for now (restarting) is made
again, not taken for its death (cluster/liveness.py).

Why: the head's handle may still see a host as restarting for a moment after its new process
registered; the new incarnation's first watch then failed at once with
``ActorUnavailableError``, and the live host was reported lost (its runs to be taken up
elsewhere, itself made to join again). Seen in a loaded whole run (session 31):
test_node_hosts' killed host reported lost twice, its old incarnation and its new one.
Made here for sure: an actor's process is SIGKILLed and its next incarnation registered
at once, while Ray restarts it."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from polling import wait_until
from raycluster import LocalCluster
from subagents.cluster.liveness import Liveness
from subagents.cluster.membership import Lost, NodeInfo

pytestmark = pytest.mark.ray


def test_a_host_restarting_when_it_registers_is_not_reported_lost(
    ray_cluster: LocalCluster,
) -> None:
    import ray

    @ray.remote(max_restarts=-1, max_concurrency=4)
    class Host:
        """A node host's watch (answered when it leaves) and its pid."""

        def __init__(self) -> None:
            self._left = threading.Event()

        def watch(self) -> None:
            self._left.wait()

        def leave(self) -> None:
            self._left.set()

        def pid(self) -> int:
            return os.getpid()

    host: Any = Host.remote()  # type: ignore[attr-defined]
    losses: list[Lost] = []
    liveness = Liveness(ray, on_lost=losses.append, timeout_s=3600, tick_s=0.1)
    info = NodeInfo(node="node-a")
    try:
        first = liveness.register(info, host)
        pid = ray.get(host.pid.remote(), timeout=120)
        assert pid > 1, pid
        os.kill(pid, signal.SIGKILL)
        second = liveness.register(info, host)  # its new self, while Ray restarts it

        def answers() -> bool:
            try:
                return bool(ray.get(host.pid.remote(), timeout=120) != pid)
            except ray.exceptions.ActorUnavailableError:
                return False

        wait_until(answers, "the host restarted", 120)
        # its second incarnation's first watch failed while the host was restarting: by now
        # that failure was taken (the watch loop ticks every 0.1 s); only the first is lost
        wait_until(
            lambda: (
                ("node-a", second) in liveness._watches.values()
                or not liveness.membership.is_member("node-a", second)
            ),
            "the second incarnation watched again (or lost)",
            120,
        )
        assert liveness.membership.is_member("node-a", second), losses
        assert [(x.node, x.incarnation) for x in losses] == [("node-a", first)], losses
    finally:
        liveness.close()
        ray.kill(host)


def test_a_host_stuck_restarting_is_lost_when_its_heartbeats_stop(
    ray_cluster: LocalCluster, tmp_path: Path
) -> None:
    """The bound of the watch made again: a host Ray keeps calling unavailable (its restart
    never ends: here its constructor hangs) is no member past its heartbeats' timeout."""
    import ray

    stuck = tmp_path / "stuck"

    @ray.remote(max_restarts=-1, max_concurrency=4)
    class Host:
        """A node host whose restart hangs once ``stuck`` exists."""

        def __init__(self) -> None:
            self._left = threading.Event()
            while stuck.exists():  # (a restart: it never ends)
                time.sleep(0.1)

        def watch(self) -> None:
            self._left.wait()

        def pid(self) -> int:
            return os.getpid()

    host: Any = Host.remote()  # type: ignore[attr-defined]
    losses: list[Lost] = []
    liveness = Liveness(ray, on_lost=losses.append, timeout_s=10, tick_s=0.1)
    try:
        incarnation = liveness.register(NodeInfo(node="node-b"), host)
        pid = ray.get(host.pid.remote(), timeout=120)
        assert pid > 1, pid
        (first,) = liveness._watches  # its watch, pending
        stuck.touch()
        os.kill(pid, signal.SIGKILL)
        # beaten while its watch fails as unavailable (then made again): it stays a member
        # (a beat refused: it was lost, by that failure)
        wait_until(
            lambda: not liveness.beat("node-b", incarnation) or first not in liveness._watches,
            "the watch failing",
            120,
        )
        assert not losses, losses
        wait_until(lambda: bool(losses), "the loss, once the heartbeats stopped", 120)
        assert [(x.node, x.incarnation) for x in losses] == [("node-b", incarnation)]
        assert "no heartbeat" in losses[0].reason, losses
    finally:
        liveness.close()
        stuck.unlink(missing_ok=True)
        ray.kill(host)
