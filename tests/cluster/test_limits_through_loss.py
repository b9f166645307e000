"""A per-tier and a per-parent limit through a node host's loss, with runs working there.

Six children of one parent, of tier 1, on the worker node, under a limit of two (per tier, or
per parent: ``max_children``): two work (held at a gate), four wait in the queue, never
started. The worker's host is SIGKILLed: the two are moved and start again at once (they
hold their slots), the four stay queued, so two work at once, not more (the lost attempts'
slots are not given to the queue and taken again by the moved runs); then the gate opens
and the queue drains (no slot of the lost host is left counted: with one leaked, the last
runs would wait for ever). Measured by the agents themselves (``Tally``, across processes):
a start after the loss counts itself working until the test has seen every start the
supervisor made after the loss arrive, so all of them are working at once when the peak is
read. (tests/cluster/test_cluster_runtime.py's ``test_runs_parked_on_a_lost_host_...`` is
the same with runs parked there; this one with runs working there and a queue never placed.)
And the same with the parent on the lost host too (session 25): it is moved with its two
working children, and its per-parent count holds through its own restart.
"""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest

from gates import Gate, Tally
from raycluster import LocalCluster
from subagents.behaviour.function import AgentContext, FunctionAgent
from subagents.messages import EventKind, RunStatus
from subagents.supervision.limits import Limits

from .test_cluster_runtime import (
    ON_HEAD,
    ON_WORKER,
    TERMINAL,
    WAIT_S,
    Observed,
    runtime,
    store,
    worker_host,
)

pytestmark = pytest.mark.ray

__all__ = ["store"]  # the fixture, shared with test_cluster_runtime

CHILDREN = 6
LIMITS = {
    "per tier": Limits(per_tier={1: 2}),  # (the children are of tier 1, the lead of none)
    "per parent": Limits(max_children=2),
}


async def lead(ctx: AgentContext) -> str:
    outcomes = await ctx.gather(*(ctx.spawn("child", str(i)) for i in range(int(ctx.task))))
    return ",".join(str(o.result) for o in outcomes)


PARENTS = {"parent elsewhere": ON_HEAD, "parent lost too": ON_WORKER}
"""Where the children's parent runs: on the head, or on the lost host with them (moved too,
its function agent replaying its journal: its spawns are not made again)."""


@pytest.mark.parametrize("parent", list(PARENTS))
@pytest.mark.parametrize("limit", list(LIMITS))
def test_runs_working_on_a_lost_host_start_again_within_the_limit_and_the_queue_drains(
    ray_cluster: LocalCluster, store: Any, limit: str, parent: str
) -> None:
    import ray

    tally = Tally()
    killed, release = Gate(), Gate()
    arrived = {str(i): Gate() for i in range(CHILDREN)}

    def child(ctx: AgentContext) -> str:
        # a start before the loss is killed inside its count: it counts apart
        with tally.counting("working" if killed.is_set() else "before the loss"):
            if killed.is_set():
                arrived[ctx.task].set()
            assert release.wait(WAIT_S), "never released"
        return ctx.task

    agents = [
        FunctionAgent.create("lead", lead, metadata=PARENTS[parent]),
        FunctionAgent.create("child", child, metadata=ON_WORKER, tier=1),
    ]
    observed = Observed()
    events = observed.events
    with runtime(ray_cluster, store, agents, limits=LIMITS[limit]) as rt:
        rt.subscribe(observed)
        handle = rt.spawn("lead", str(CHILDREN))
        observed.wait_for(EventKind.STARTED, 2, "child")
        observed.wait_for(EventKind.QUEUED, CHILDREN - 2, "child")
        host = worker_host(rt, ray_cluster)
        pid = ray.get(host.describe.remote(), timeout=WAIT_S)["pid"]
        before = len(events)
        killed.set()  # (nothing starts until a slot frees, and none frees before the kill)
        os.kill(pid, signal.SIGKILL)
        observed.wait_for(EventKind.RESTARTED, 2, "child")  # the two moved (and the lead)

        # and started again (2 before the loss, 2 after): under load (CI) their starts were
        # not yet published at the ``stats`` below, ``again`` was empty, nothing counted
        # (waited for as read: "4 child starts in all" let CI read none after the loss, twice,
        # in sessions 24 and 27: KeyError 'working')
        def started_again() -> list[str]:
            after = events[before:]
            return [e.run_id for e in after if e.kind == EventKind.STARTED and e.agent == "child"]

        observed.wait_until(lambda: len(started_again()) >= 2, "two child starts after the loss")
        rt.stats()  # the loss's whole decision is published (events are, on its thread)
        again = started_again()
        for run_id in again:
            assert arrived[store.get_run(run_id).task].wait(WAIT_S), run_id
        at_once = tally.peak()["working"]  # every run started after the loss is in there
        release.set()
        outcome = handle.result(WAIT_S)
        stats = rt.stats()
    assert outcome.status == RunStatus.COMPLETED, outcome.error
    assert outcome.result == ",".join(str(i) for i in range(CHILDREN))  # the queue drained
    assert at_once == 2 and len(again) == 2
    assert tally.peak()["working"] == 2
    assert (stats.in_flight, stats.queued) == (0, 0)
    children = {e.run_id for e in events if e.agent == "child"}
    terminal = [e.run_id for e in events if e.kind.value in TERMINAL]
    assert sorted(terminal) == sorted([*children, outcome.run_id])  # each ended once
