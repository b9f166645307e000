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
