"""A commit lost with the head: the store's actor killed while the supervisor's commit of a
run's end is in flight to it.

The head's process is stopped (SIGSTOP) while a child on the worker node waits; the child is
let go and ends; its end reaches the supervisor, whose commit of it is sent to the stopped
head (seen in the driver: the supervisor's thread inside its group's commit, waiting on the
store's call); then the head's process is killed. Ray starts it again on the same file. The
driver is told the store was lost during the write ("a write may or may not have been
committed"): a store failure, as on one machine. What the test pins: every run is stopped
(the child's host too), the root's caller is told once, failed, that its end is not recorded
yet; once the head is back, the runtime records every run it held as failed (the child's
end, lost with the commit, is not recorded completed as well), each run has one terminal
event, and the runtime goes on (a new run completes).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

import pytest

from gates import Gate
from polling import wait_until
from subagents.behaviour.function import AgentContext, FunctionAgent
from subagents.cluster.store_service import PROTOCOL
from subagents.messages import EventKind, RunStatus

from .test_cluster_runtime import (
    ON_HEAD,
    ON_WORKER,
    TERMINAL,
    WAIT_S,
    Observed,
    double,
    runtime,
    store,
)

pytestmark = [pytest.mark.ray, pytest.mark.timeout(600)]

__all__ = ["store"]  # the fixture, shared with test_cluster_runtime


async def lead(ctx: AgentContext) -> str:
    child = await ctx.spawn("child", ctx.task, background=False)
    return f"lead:{child.result}"


def _committing() -> bool:
    """Whether a thread of this process is inside a batch's commit to the cluster store,
    waiting on its answer (``remote_store``'s ``_get`` under its ``_batch``). Any thread's,
    not only the supervisor's ``_commit_group``: CI saw that wait time out after 120 s
    while the driver's batch was in flight to the stopped head for 60 s (its store
    failure logged "did not answer a batch within 60 s"), committed by a path the
    supervisor-only look did not name."""
    for frame in sys._current_frames().values():
        names = set()
        while frame is not None:
            names.add((os.path.basename(frame.f_code.co_filename), frame.f_code.co_name))
            frame = frame.f_back
        if {("remote_store.py", "_get"), ("remote_store.py", "_batch")} <= names:
            return True
    return False


def test_a_commit_lost_with_the_heads_process_stops_the_runs_and_decides_nothing_twice(
    ray_cluster: Any, store: Any
) -> None:

    go, ended = Gate(), Gate()

    def child(ctx: AgentContext) -> str:
        assert go.wait(WAIT_S), "never let go"
        ended.set()
        return f"child:{ctx.task}"

    agents = [
        FunctionAgent.create("lead", lead, metadata=ON_HEAD),
        FunctionAgent.create("child", child, metadata=ON_WORKER),
        FunctionAgent.create("double", double, metadata=ON_WORKER),
    ]
    observed = Observed()
    events = observed.events
    head_pid = _head_pid(store)
    # no command poll: its read of the stopped head would hold the supervisor (60 s, then
    # a failure of its own) with the child's end queued behind it, never in a commit
    with runtime(ray_cluster, store, agents, command_poll_s=0) as rt:
        rt.subscribe(observed)
        handle = rt.spawn("lead", "t")
        observed.wait_for(EventKind.STARTED, 1, "child")
        os.kill(head_pid, signal.SIGSTOP)
        try:
            go.set()
            assert ended.wait(WAIT_S)
            wait_until(_committing, "the child's end in a commit to the head")
        finally:
            os.kill(head_pid, signal.SIGKILL)
        outcome = handle.result(WAIT_S)
        wait_until(lambda: _head_pid(store) not in (None, head_pid), "the head back")
        rt.stats()  # an ask: the store takes writes again, the runs held are recorded
        again = rt.run("double", "21", timeout=WAIT_S)
    assert outcome.status is RunStatus.FAILED, outcome
    assert outcome.error is not None and "was lost during" in outcome.error, outcome.error
    assert "its end is not recorded yet" in outcome.error
    assert again.status is RunStatus.COMPLETED and again.result == "42"
    lead_run = store.get_run(outcome.run_id)
    (child_run,) = store.list_runs(agent="child")
    for record in (lead_run, child_run):
        assert record.status is RunStatus.FAILED, record
        ends = [e for e in store.events(record.run_id) if e.kind.value in TERMINAL]
        assert len(ends) == 1, [e.kind for e in store.events(record.run_id)]
    told = [e for e in events if e.run_id == outcome.run_id and e.kind.value in TERMINAL]
    assert len(told) <= 1, told


def _head_pid(store: Any) -> int | None:
    """The pid of the store actor's process; None while Ray starts it again."""
    import ray

    try:
        pid: int = ray.get(store._actor.info.remote(PROTOCOL), timeout=10).pid
    except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
        return None
    return pid


def _held_head(name: str, path: str, committed: str, hold: str, applied: bool) -> Any:
    """A head actor (a ``Head``, started by ``head_actor``) whose first write
    that records a run ``completed`` is held while the file ``hold`` is missing (the test
    kills the process first): after it is committed (``applied``), or before. ``committed``,
    a file, says it got there. Files, not ``Gate``s: the test's modules are not importable
    in the head's worker. Ray starts it again as it is (``committed`` exists then: nothing
    more is held)."""
    from subagents.cluster.head import Head, head_actor

    def held() -> None:
        open(committed, "w").close()
        until = time.monotonic() + WAIT_S
        while not os.path.exists(hold) and time.monotonic() < until:
            time.sleep(0.01)

    class AnswerHeld(Head):
        def write(self, calls: Any, protocol: int | None = None) -> None:
            ends = [
                c
                for c in calls
                for a in c.args
                if getattr(a, "status", None) is RunStatus.COMPLETED and hasattr(a, "agent")
            ]
            now = bool(ends) and not os.path.exists(committed)
            if now and not applied:
                held()
            super().write(calls, protocol)
            if now and applied:
                held()

    return head_actor(name=name, path=path, kind=AnswerHeld)


@pytest.mark.parametrize("applied", [True, False], ids=["applied", "not applied"])
def test_a_roots_end_in_a_write_lost_with_the_head_is_told_as_the_store_keeps_it(
    ray_cluster: Any, tmp_path: Any, applied: bool
) -> None:
    """The head gets a root's end, commits it (or not), then dies before answering. The
    driver cannot tell the two apart ("may or may not have been committed"). What the store
    keeps and what the root's caller is told agree: its caller is told once the store
    answers again, what it keeps: completed, or failed as the recovery records it then.
    Before, it was told at once that it failed and "its end is not recorded yet ... a
    restore runs it again", while the store kept it completed and a later ``attach`` said
    so. Each run is recorded once."""
    import ray

    from subagents.cluster.remote_store import ClusterStore

    go = Gate()
    committed, hold = tmp_path / "committed", tmp_path / "hold"

    def ender(ctx: AgentContext) -> str:
        assert go.wait(WAIT_S), "never let go"
        return f"ender:{ctx.task}"

    name = f"test-lc-{tmp_path.name}"[:60]
    path = str(tmp_path / "runs.sqlite3")
    actor = _held_head(name, path, str(committed), str(hold), applied)
    store = ClusterStore(actor, name=name)
    try:
        head_pid = _head_pid(store)
        agents = [
            FunctionAgent.create("ender", ender, metadata=ON_WORKER),
            FunctionAgent.create("double", double, metadata=ON_WORKER),
        ]
        with runtime(ray_cluster, store, agents) as rt:
            handle = rt.spawn("ender", "t")
            go.set()
            try:
                wait_until(committed.exists, "the root's end held by the head")
            finally:
                os.kill(head_pid, signal.SIGKILL)
            outcome = handle.result(WAIT_S)
            wait_until(lambda: _head_pid(store) not in (None, head_pid), "the head back")
            rt.stats()  # an ask: the store takes writes again
            again = rt.run("double", "21", timeout=WAIT_S)
            attached = rt.attach(outcome.run_id).result(timeout=WAIT_S)
        record = store.get_run(outcome.run_id)
        ends = [e.kind.value for e in store.events(outcome.run_id) if e.kind.value in TERMINAL]
    finally:
        hold.touch()
        store.close()
        ray.kill(actor)
    assert again.status is RunStatus.COMPLETED
    kept = RunStatus.COMPLETED if applied else RunStatus.FAILED  # (the recovery's record)
    assert record is not None and record.status is kept and record.outcome is not None
    assert ends == [kept.value]  # recorded once: the recovery did not end it again
    assert outcome.status is kept, outcome.error  # told what is kept
    assert attached.status is kept  # and a later look is told the same
    if applied:
        assert outcome.result == record.outcome.result == "ender:t"
    else:
        assert outcome.error is not None and "was lost during" in outcome.error
        assert "not recorded" not in outcome.error and "may or may not be" not in outcome.error


def _twice_held_head(name: str, path: str, marks: str, hold: str) -> Any:
    """A head actor (the real ``Head``) that loses two answers, each held while the file
    ``hold`` is missing (the test kills its process meanwhile): its first write recording a
    run ``completed``, before committing it (``marks``/1 says it got there); then its first
    write recording a run ``failed`` (the recovery's), after committing it (``marks``/2).
    Files, not ``Gate``s: the test's modules are not importable in the head's worker."""
    from subagents.cluster.head import Head, head_actor

    def held(mark: str) -> None:
        with open(f"{mark}.tmp", "w") as f:  # the holder's pid, whole once it is there
            f.write(str(os.getpid()))
        os.rename(f"{mark}.tmp", mark)
        until = time.monotonic() + WAIT_S
        while not os.path.exists(hold) and time.monotonic() < until:
            time.sleep(0.01)

    def ending(calls: Any, status: RunStatus) -> bool:
        return any(
            getattr(a, "status", None) is status and hasattr(a, "agent")
            for c in calls
            for a in c.args
        )

    class TwiceLost(Head):
        def write(self, calls: Any, protocol: int | None = None) -> None:
            first, second = os.path.join(marks, "1"), os.path.join(marks, "2")
            if ending(calls, RunStatus.COMPLETED) and not os.path.exists(first):
                held(first)  # then killed: never applied
            super().write(calls, protocol)
            if (
                os.path.exists(first)
                and ending(calls, RunStatus.FAILED)
                and not os.path.exists(second)
            ):
                held(second)  # committed, then killed before answering

    return head_actor(name=name, path=path, kind=TwiceLost)


def _kill_holding(mark: Any) -> None:
    """Once the head holds the write ``mark`` names, the process holding it (its pid in the
    mark: the head is busy with the write, so it cannot be asked) killed. Not waited for
    back: the next mark says it is, and the supervisor tries it again by itself."""
    wait_until(mark.exists, f"write {mark.name} held by the head")
    pid = int(mark.read_text())
    assert pid > 0, pid  # (never kill(0) or kill(-1))
    os.kill(pid, signal.SIGKILL)


def test_a_recoverys_own_write_lost_with_the_head_records_one_end(
    ray_cluster: Any, tmp_path: Any
) -> None:
    """The head dies before answering twice: with a root's end (not committed), then with
    the recovery's write recording it failed (committed). The recovery writes its decision
    again at the next try; before, the root's events read two ``failed`` ends. Now it reads
    what the store kept first and leaves out what is ended there (``actors.owed``): one end,
    and the caller told failed once. No ask is made meanwhile: the supervisor tries the
    store again by itself while the root's caller waits (``UNSURE_RETRY_S``, and the
    command poll)."""
    import ray

    from subagents.cluster.remote_store import ClusterStore

    go = Gate()
    marks, hold = tmp_path, tmp_path / "hold"

    def ender(ctx: AgentContext) -> str:
        assert go.wait(WAIT_S), "never let go"
        return f"ender:{ctx.task}"

    name = f"test-lc2-{tmp_path.name}"[:60]
    path = str(tmp_path / "runs.sqlite3")
    actor = _twice_held_head(name, path, str(marks), str(hold))
    store = ClusterStore(actor, name=name)
    try:
        agents = [
            FunctionAgent.create("ender", ender, metadata=ON_WORKER),
            FunctionAgent.create("double", double, metadata=ON_WORKER),
        ]
        with runtime(ray_cluster, store, agents) as rt:
            handle = rt.spawn("ender", "t")
            go.set()
            _kill_holding(marks / "1")  # the root's end
            _kill_holding(marks / "2")  # the recovery's write
            outcome = handle.result(WAIT_S)
            again = rt.run("double", "21", timeout=WAIT_S)
        record = store.get_run(outcome.run_id)
        ends = [e.kind.value for e in store.events(outcome.run_id) if e.kind.value in TERMINAL]
    finally:
        hold.touch()
        store.close()
        ray.kill(actor)
    assert again.status is RunStatus.COMPLETED
    assert record is not None and record.status is RunStatus.FAILED
    assert ends == ["failed"]  # recorded once, though the recovery's write was made twice
    assert outcome.status is RunStatus.FAILED, outcome
