"""``spawn.py``'s ``least_run`` is the least a run of this design does: its agent actor must
be made as the runtime's agent actors are, or the "floor" carries costs the runtime does not
pay (a plain ``pykka.ThreadingActor``: a ``queue.Queue`` inbox, a registry entry, a stop
message told to itself) and flatters the claim that the goal is out of the design's reach."""

from __future__ import annotations

import queue
import sys
from pathlib import Path
from typing import Any

import pykka

from subagents.messages import RunStatus

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
WAIT = 60.0


def test_the_least_runs_agent_is_made_as_the_runtimes_agent_actors_are() -> None:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import spawn
    finally:
        sys.path.remove(str(BENCHMARKS))
    seen: queue.SimpleQueue[tuple[Any, Any]] = queue.SimpleQueue()

    class Looked(spawn._LeastAgent):
        def on_start(self) -> None:
            seen.put((pykka.ActorRegistry.get_by_urn(self.actor_urn), self.actor_inbox))
            super().on_start()

    supervisor: queue.SimpleQueue[Any] = queue.SimpleQueue()
    Looked.start(supervisor, "r-1", "t")
    assert supervisor.get(timeout=WAIT) == ("finished", "r-1", "t")
    registered, inbox = seen.get(timeout=WAIT)
    assert registered is None  # the runtime's pooled agent actors are never registered
    assert type(inbox) is queue.SimpleQueue  # FastInboxActor's, not pykka's queue.Queue
    # and a whole least run still answers with its task
    least = spawn._LeastRuntime()
    try:
        assert least.run(7, queue.SimpleQueue()) == "7"
    finally:
        least.close()


def test_the_calls_per_run_are_counted_on_the_threads_of_each_role() -> None:
    """``work_by_role``: every role's threads are named as ``role_of`` expects (a renamed
    thread would count its work as "other" and hide where the runtime's CPU goes)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import spawn
    finally:
        sys.path.remove(str(BENCHMARKS))
    counted = spawn.calls_per_run(20)
    assert set(counted) == {"raw_pooled", "least_run", "memory"}
    for role in ("caller", "agents"):
        assert counted["raw_pooled"][role] > 0
    for name in ("least_run", "memory"):
        for role in ("caller", "supervisor", "agents"):
            assert counted[name][role] > 0, (name, role, counted[name])
    # the runtime's supervisor does at least the least run's decisions
    assert counted["memory"]["supervisor"] >= counted["least_run"]["supervisor"]
    parts = sum(v for role, v in counted["memory"].items() if role != "all")
    assert abs(counted["memory"]["all"] - parts) < 1.0  # (each part rounded apart)


def test_the_least_run_of_three_hand_offs_wakes_its_caller_from_the_agents_thread() -> None:
    """``least_run_three`` measures what three hand-offs per run would buy (the end handed to
    the caller by the agent's thread): its caller must be woken by the agent's thread, not
    by the supervisor's (else it measures ``least_run`` again), and the supervisor must
    still decide each end before the next spawn (told first: its inbox orders them)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import spawn
    finally:
        sys.path.remove(str(BENCHMARKS))
    import threading

    class Reply(queue.SimpleQueue[str]):
        putters: list[str] = []

        def put(self, item: str, block: bool = True, timeout: float | None = None) -> None:
            self.putters.append(threading.current_thread().name)
            super().put(item, block, timeout)

    for three, woken_by in ((True, "least-agent"), (False, "least-supervisor")):
        least = spawn._LeastRuntime(three=three)
        try:
            reply = Reply()
            Reply.putters = []
            assert least.run(1, reply) == "1"
            assert least.run(2, reply) == "2"
            assert [name.rsplit("-", 1)[0] if three else name for name in Reply.putters] == [
                woken_by,
                woken_by,
            ]
            # run 1's end was decided (and written) before run 2's spawn: in the store ended
            first = least.store.get_run("r-least-1")
            assert first is not None and first.status.terminal, first
        finally:
            least.close()


def test_the_least_run_of_two_hand_offs_has_no_supervisor_thread() -> None:
    """``least_run_two`` measures what two hand-offs per run would buy (the supervisor's turn
    taken inline by the caller's thread for the spawn and by the agent's for the end): no
    thread of its own may serve it (else it measures ``least_run`` again), its caller must
    be woken by the agent's thread, and each end must be decided and written before
    ``run`` returns, with the same decisions as ``least_run``'s."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import spawn
    finally:
        sys.path.remove(str(BENCHMARKS))
    import threading

    class Reply(queue.SimpleQueue[str]):
        putters: list[str] = []

        def put(self, item: str, block: bool = True, timeout: float | None = None) -> None:
            self.putters.append(threading.current_thread().name)
            super().put(item, block, timeout)

    before = {t.name for t in threading.enumerate()}
    least = spawn._LeastInline()
    try:
        reply = Reply()
        for i in (1, 2):
            assert least.run(i, reply) == str(i)
            ended = least.store.get_run(f"r-least-{i}")  # decided and written before it returned
            assert ended is not None and ended.status is RunStatus.COMPLETED, ended
        assert [name.rsplit("-", 1)[0] for name in Reply.putters] == ["least-agent"] * 2
        started = {t.name for t in threading.enumerate()} - before
        assert all(name.startswith("least-agent") for name in started), started
        assert not least.turn.locked()
    finally:
        least.close()
