"""A node's sender's record of its mail (``RecordMails``, written by the driver from its pool
of answering threads, without the supervisor) still on its way when its node is declared
lost is refused: it must not commit after the supervisor moved the node's runs
(``cluster.record_fence``, docs/cluster.md "A lost node's records").

On a real 2-node Ray cluster with SQLite on the driver: two runs of one node, the sender's
record of its mail held in the driver (in the store's write, before its transaction
begins: ``HeldStore``), the node's host SIGKILLed, the runs started again (the new attempt
sends its mail again), and only then the held record let go."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from held_store import HeldStore
from raycluster import LocalCluster
from runtime.conftest import Events
from subagents.behaviour.function import AgentContext
from subagents.cluster.record_fence import RecordRefused
from subagents.messages import EventKind, Mail, RunStatus
from subagents.runtime import Runtime

pytestmark = pytest.mark.ray

WAIT_S = 120.0
CONTENT = "from the sender"


async def sink(ctx: AgentContext) -> str:
    mail: Mail | None = await ctx.receive(timeout=WAIT_S)
    assert mail is not None
    return mail.content


async def sender(ctx: AgentContext) -> str:
    await ctx.send(ctx.task, CONTENT)  # straight to the sink, on this node: recorded first
    return "sent"


async def root(ctx: AgentContext) -> str:
    sink_id: str = await ctx.spawn("sink", "wait", background=True)
    out = await ctx.spawn("sender", sink_id)
    # the sink's end (its ``[background result]`` mail) is awaited too: a root that ended
    # as soon as the sender did would cancel the sink before it read the mail
    ended: Mail | None = await ctx.receive(timeout=WAIT_S)
    return f"{out.result}; the sink {'ended' if ended is not None else 'was not heard'}"


def test_a_record_held_past_its_nodes_loss_is_refused(
    ray_cluster: LocalCluster, tmp_path: Path
) -> None:
    """The sender's record is held in the driver; its node's host is SIGKILLed; the sender
    starts again and its new attempt's mail is kept and read. Then the held record goes on:
    it is refused (``RecordRefused``), and the store keeps the new attempt's mail only.
    (Without the fence it committed: the lost attempt's mail under the new one's run,
    two mails of one send.)"""
    import ray

    from subagents.cluster.connect import NAMESPACE
    from subagents.cluster.node_host import runtime_host_name

    store = HeldStore(tmp_path / "runs.db", CONTENT, WAIT_S)
    events = Events()
    agents = {"root": root, "sink": sink, "sender": sender}
    try:
        with Runtime(agents, store=store, cluster=ray_cluster.address, restore=False) as rt:
            rt.subscribe(events)
            handle = rt.spawn("root", "go")
            assert store.reached.wait(WAIT_S), "the sender's mail was not recorded by it"
            (sender_run,) = rt.runs(agent="sender")
            (sink_run,) = rt.runs(agent="sink")
            (node,) = rt.placements()[sender_run.run_id]
            assert rt.placements()[sink_run.run_id] == [node]  # one node: mail goes straight
            host = ray.get_actor(runtime_host_name(rt.owner, node), namespace=NAMESPACE)
            os.kill(ray.get(host.describe.remote(), timeout=WAIT_S)["pid"], signal.SIGKILL)
            events.wait_count(EventKind.RESTARTED, "sender", 1)
            outcome = handle.result(WAIT_S)
            assert outcome.status is RunStatus.COMPLETED, outcome
            assert outcome.result == "sent; the sink ended", outcome
            events.wait_count(EventKind.COMPLETED, "sink", 1)  # it read the new attempt's
            store.release.set()
            assert store.done.wait(WAIT_S)
            sent = [m for m in rt.store.mail_for(sink_run.run_id) if m.sender == sender_run.run_id]
            assert [m.content for m in sent] == [CONTENT]
            assert isinstance(store.error, RecordRefused), store.error
    finally:
        store.release.set()
        store.close()


TIMEOUT_S = 8.0
"""The late sender's deadline: it records its mail at its first step, well before (the record
is then held in the driver until the test has seen it time out)."""


async def late_sender(ctx: AgentContext) -> str:
    # the sink's id, mailed by its parent: this receive's journal entry (which mail it took)
    # is carried with the straight mail, in the record's transaction
    told: Mail | None = await ctx.receive(timeout=WAIT_S)
    assert told is not None
    await ctx.send(told.content, CONTENT)
    return "sent"


async def late_root(ctx: AgentContext) -> str:
    sink_id: str = await ctx.spawn("sink", "wait", background=True)
    sender_id: str = await ctx.spawn("sender", "send", background=True, timeout=TIMEOUT_S)
    await ctx.send(sender_id, sink_id)
    ended: Mail | None = await ctx.receive(timeout=WAIT_S)  # the sender's end
    return "ended" if ended is not None else "no end heard"


def test_a_record_held_past_its_runs_timeout_on_a_live_node_is_refused(
    ray_cluster: LocalCluster, tmp_path: Path
) -> None:
    """The node stays live; only the sender's start is over: its record of a mail is held in
    the driver while the run times out (committed, its event published), then let go. The
    link's fence passes it (the node was not lost); the attempt's refuses it
    (``AttemptOver``: the run ended), so the store keeps no delivered mail of the timed-out
    run, nor the journal entries it carried. (Without the attempt fence it committed after
    the run's end, and the sink was handed it.)"""
    from subagents.store.fencing import AttemptOver

    store = HeldStore(tmp_path / "runs.db", CONTENT, WAIT_S)
    events = Events()
    agents = {"root": late_root, "sink": sink, "sender": late_sender}
    try:
        with Runtime(agents, store=store, cluster=ray_cluster.address, restore=False) as rt:
            rt.subscribe(events)
            handle = rt.spawn("root", "go")
            assert store.reached.wait(WAIT_S), "the sender's mail was not recorded by it"
            (sender_run,) = rt.runs(agent="sender")
            (sink_run,) = rt.runs(agent="sink")
            assert rt.placements()[sink_run.run_id] == rt.placements()[sender_run.run_id]
            events.wait_count(EventKind.TIMED_OUT, "sender", 1)  # committed, then published
            store.release.set()
            assert store.done.wait(WAIT_S)
            outcome = handle.result(WAIT_S)
            assert outcome.status is RunStatus.COMPLETED and outcome.result == "ended", outcome
            sent = [m for m in rt.store.mail_for(sink_run.run_id) if m.sender == sender_run.run_id]
            # nothing kept: the driver's refusal reached the node as ``AttemptOver`` (not
            # an error of the link), so its mail went by the supervisor unnamed: no dead letter
            assert sent == [], sent
            kinds = [e.kind for e in rt.store.journal_of(sender_run.run_id)]
            assert "send" not in kinds, kinds
            assert isinstance(store.error, AttemptOver), store.error
    finally:
        store.release.set()
        store.close()
