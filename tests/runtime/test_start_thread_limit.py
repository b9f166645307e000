"""A run whose agent finds no thread to start on (the process's thread limit: a real
``RLIMIT_NPROC``, in a process of its own under a uid nobody else uses: see
``test_thread_limit.py``) fails, with an error naming the thread limit, as any failed start:
its record and events, its parent told, its slot freed.

Before: the start's ``NoThread`` was only logged (``PooledActor._start_actor_loop``, or
``Effector.apply``'s "effect failed" for a run on a thread of its own), and the run stayed
RUNNING for ever, its slot held: nothing tells an agent that never ran to try again.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from subagents.actors.effector import NO_THREAD

from .test_thread_limit import WAIT, _unprivileged

_SCRIPT = textwrap.dedent(
    """
    import json, os, resource, sys, threading
    from subagents.behaviour.function import AgentContext
    from subagents.runtime import Runtime
    from subagents.supervision.limits import Limits

    mode, wait = sys.argv[1], float(sys.argv[2])
    hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]

    def at_the_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NPROC, (len(os.listdir("/proc/self/task")), hard))

    def lifted() -> None:
        resource.setrlimit(resource.RLIMIT_NPROC, (hard, hard))

    async def child(ctx: AgentContext) -> str:
        return "done"

    async def parent(ctx: AgentContext) -> str:
        await ctx.receive(timeout=wait)  # the limit is set meanwhile
        told = await ctx.spawn("child", "at the limit")
        return f"{told.status} {told.error_kind}: {told.error}"

    def outcome(handle) -> list:
        try:
            o = handle.result(timeout=wait)
        except Exception as exc:
            return ["no outcome", type(exc).__name__, str(exc)]
        return [str(o.status), o.error_kind, o.error, o.result]

    seen, events, parent_waits = {}, [], threading.Event()

    def heard(event) -> None:
        events.append([str(event.kind), event.run_id])
        if str(event.kind) == "waiting":
            parent_waits.set()

    limits = Limits(per_agent=1, timeout_s=wait * 3)  # one child at a time: its slot
    agents = {"child": child, "parent": parent}
    with Runtime(agents, limits=limits, agent_threads=mode) as rt:
        rt.subscribe(heard)
        at_the_limit()  # no run has had a thread yet
        first = rt.spawn("child", "at the limit")
        seen["root"] = outcome(first)
        seen["root_id"] = first.run_id
        lifted()
        if mode == "own":  # a child's start at the limit (each run holds a thread of its own)
            p = rt.spawn("parent", "p")
            seen["parent_waited"] = parent_waits.wait(wait)
            at_the_limit()
            rt.send(p.run_id, "go")
            seen["parent"] = outcome(p)
            lifted()
        seen["next"] = outcome(rt.spawn("child", "threads to be had again"))
        kept = rt.get(first.run_id)  # (the store's record)
        o = kept.outcome
        seen["record"] = [str(kept.status), o and o.error_kind, o and o.error]
    seen["events"] = [e for e in events if e[1] == seen["root_id"]]
    print(json.dumps(seen))
    """
)


@pytest.mark.parametrize("agent_threads", ["shared", "own"])
def test_a_run_whose_agent_meets_the_thread_limit_at_its_start_fails_naming_it(
    agent_threads: str,
) -> None:
    """The first run of a runtime at the limit (``shared``: the dispatcher's first thread;
    ``own``: the pool's first) ends FAILED, ``no_thread``, its error naming the limit, in
    the store and its events; the next child of the same agent (one at a time) then runs:
    the failed run's slot was freed. ``own``: a child's start at the limit fails too, and
    its parent is told so (its spawn's outcome)."""
    done = subprocess.run(
        [*_unprivileged(), sys.executable, "-c", _SCRIPT, agent_threads, str(WAIT)],
        capture_output=True,
        text=True,
        timeout=WAIT * 8,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["root"] == ["failed", "no_thread", NO_THREAD, None], seen
    assert "thread limit" in NO_THREAD
    assert seen["events"][-1] == ["failed", seen["root_id"]], seen
    assert seen["next"] == ["completed", None, None, "done"], seen
    if agent_threads == "own":
        assert seen["parent_waited"], seen
        assert seen["parent"] == ["completed", None, None, f"failed no_thread: {NO_THREAD}"]
    assert seen["record"] == ["failed", "no_thread", NO_THREAD], seen


_ASKED_MEANWHILE = textwrap.dedent(
    """
    import json, os, resource, sys
    import pykka
    from subagents.actors.inbox import FastInboxActor
    from subagents.actors.threads import NoThread, ThreadPool

    wait = float(sys.argv[1])
    hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]

    class AskedMeanwhile(FastInboxActor):
        pool = ThreadPool("t-own")
        asks: list = []

        def _start_actor_loop(self) -> None:
            # what another thread can do between pykka's register and the loop's start:
            # ask the actor (ActorRegistry.stop_all's stop, a mail's ask)
            self.asks.append(self.actor_ref.ask("hello", block=False))
            self.asks.append(self.actor_ref.stop(block=False))
            self._loop_on(self.pool)

        def on_receive(self, message):
            return "handled"

    resource.setrlimit(resource.RLIMIT_NPROC, (len(os.listdir("/proc/self/task")), hard))
    seen = {}
    try:
        AskedMeanwhile.start()
        seen["start"] = "started"
    except NoThread:
        seen["start"] = "NoThread"
    ask, stop = AskedMeanwhile.asks
    try:
        seen["ask"] = ask.get(timeout=wait)
    except Exception as exc:
        seen["ask"] = type(exc).__name__
    try:
        seen["stop"] = stop.get(timeout=wait)
    except Exception as exc:
        seen["stop"] = type(exc).__name__
    seen["registered"] = len(pykka.ActorRegistry.get_all())
    print(json.dumps(seen))
    """
)


def test_an_ask_put_before_an_own_thread_start_is_refused_is_answered_dead() -> None:
    """An agent on a thread of its own (``FastInboxActor._loop_on``) whose start finds no
    thread: an ask another thread put between pykka's register and the refused start (a
    ``stop_all``'s stop, say) is answered as pykka's teardown answers it (the stop: it has
    stopped; any other: ``ActorDeadError``), as the pooled agent's closed mailbox does;
    before, it was left in an inbox nobody reads, its asker waiting for ever."""
    done = subprocess.run(
        [*_unprivileged(), sys.executable, "-c", _ASKED_MEANWHILE, str(WAIT / 4)],
        capture_output=True,
        text=True,
        timeout=WAIT * 4,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {
        "start": "NoThread", "ask": "ActorDeadError", "stop": True, "registered": 0
    }, seen  # fmt: skip


_ON_A_NODE = textwrap.dedent(
    """
    import functools, json, os, resource, sys, threading, time
    from subagents.actors.remote import NodeRuns
    from subagents.behaviour.function import FunctionBehaviour
    from subagents.definitions.spec import AgentSpec
    from subagents.messages import RunFinished
    from subagents.supervision.effects import StartRun
    from subagents.messages import RunRecord

    wait = float(sys.argv[1])
    hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]

    async def child(ctx) -> str:
        return "done"

    runs = NodeRuns(lambda spec: functools.partial(FunctionBehaviour, child))
    record = RunRecord(run_id="r1", agent="child", task="t", root_run_id="r1")
    start = StartRun(
        record=record, spec=AgentSpec(name="child", description="d"),
        deadline=time.time() + wait,
    )
    delivered = threading.Event()

    def deliver() -> None:
        runs.deliver([start])
        delivered.set()

    # the thread that delivers, then the limit (the node's dispatcher never had a thread)
    deliverer = threading.Thread(target=deliver, daemon=True)
    resource.setrlimit(resource.RLIMIT_NPROC, (len(os.listdir("/proc/self/task")) + 1, hard))
    deliverer.start()
    seen = {"delivered": delivered.wait(wait)}
    told = [item.message for item in runs.outbox.take(100, 0.1)]
    seen["told"] = [
        [m.run_id, m.error_kind] for m in told if isinstance(m, RunFinished)
    ]
    print(json.dumps(seen))
    sys.stdout.flush()
    os._exit(0)  # (a deliverer stuck for ever holds the node's lock)
    """
)


def test_a_cluster_nodes_run_whose_agent_meets_the_thread_limit_is_reported_failed() -> None:
    """On a cluster node (``NodeRuns``, no Ray: the test reads its outbox as the driver
    would) a run whose agent finds no thread to start on is reported to the driver failed,
    ``no_thread``, and the node's delivery goes on. The report (``Effector._no_thread``) is
    told to the node's supervisor link inside ``NodeRuns.deliver``, whose ``_told`` takes
    the node's lock that ``deliver`` holds: a plain lock deadlocked the node for good."""
    done = subprocess.run(
        [*_unprivileged(), sys.executable, "-c", _ON_A_NODE, str(WAIT / 4)],
        capture_output=True,
        text=True,
        timeout=WAIT * 4,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {"delivered": True, "told": [["r1", "no_thread"]]}, seen
