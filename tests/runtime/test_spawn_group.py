"""Root spawns told by many callers at once are admitted together (``actors/spawn_group``):
in the order they were told, each refused alone on its handle (a refused one refuses only
itself), and a message queued between them keeps its place (it is handled right after
them)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from polling import wait_until
from subagents.behaviour.function import AgentContext, FunctionAgent
from subagents.messages import Event, EventKind
from subagents.runtime import AdmissionError, RunHandle, Runtime
from subagents.supervision.limits import Limits

from .conftest import QUIET, WAIT


def _held(release: threading.Event) -> FunctionAgent:
    def held(ctx: AgentContext) -> str:  # keeps its slot until released
        assert release.wait(WAIT)
        return ctx.task

    return FunctionAgent.create("held", held)


class _Hold:
    """A subscriber that holds the supervisor's thread at the first event, until opened:
    what is asked meanwhile queues in its inbox."""

    def __init__(self) -> None:
        self.held = threading.Event()
        self.gate = threading.Event()
        self.order: list[tuple[EventKind, str]] = []

    def __call__(self, event: Event) -> None:
        self.order.append((event.kind, event.run_id))
        if not self.held.is_set():
            self.held.set()
            assert self.gate.wait(WAIT)


def _inbox(rt: Runtime) -> Any:
    supervisor = rt._hosting.supervisor
    assert supervisor is not None
    return supervisor._ref.actor_inbox


def _in_thread(results: dict[str, Any], key: str, call: Any, *args: Any) -> threading.Thread:
    def run() -> None:
        try:
            results[key] = call(*args)
        except Exception as exc:
            results[key] = exc

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_spawns_queued_together_are_admitted_in_order_each_answered_alone() -> None:
    release = threading.Event()
    hold = _Hold()
    limits = Limits(max_concurrency=3, queue_bound=2)
    with Runtime([_held(release)], limits=limits, **QUIET) as rt:
        rt.subscribe(hold)
        results: dict[str, Any] = {}
        threads = [_in_thread(results, "first", rt.spawn, "held", "first")]
        assert hold.held.wait(WAIT)  # the supervisor is held: what follows queues
        inbox = _inbox(rt)
        for i in range(1, 8):  # asked one after the other, from seven threads
            threads.append(_in_thread(results, f"t{i}", rt.spawn, "held", f"t{i}"))
            wait_until(lambda i=i: inbox.qsize() == i, f"spawn t{i} queued")
        # a question between them: taken out of the inbox when the spawns before it were,
        # answered after they were decided, before what follows it
        threads.append(_in_thread(results, "stats", rt.stats))
        wait_until(lambda: inbox.qsize() == 8, "the stats ask queued")
        threads.append(_in_thread(results, "t8", rt.spawn, "held", "t8"))
        wait_until(lambda: inbox.qsize() == 9, "spawn t8 queued")
        hold.gate.set()
        for thread in threads:
            thread.join(WAIT)
            assert not thread.is_alive()
        # every spawn returned its handle at once (told, not asked): 3 slots (first, t1,
        # t2), 2 queued (t3, t4), the rest refused, each alone, on its handle
        handles = {k: v for k, v in results.items() if isinstance(v, RunHandle)}
        assert sorted(handles) == ["first", *(f"t{i}" for i in range(1, 9))]
        for key in ("t5", "t6", "t7", "t8"):
            with pytest.raises(AdmissionError, match="queue"):
                handles[key].result(WAIT)
            assert "queue" in (handles[key].refused or "")
        stats = results["stats"]
        assert (stats.in_flight, stats.queued) == (3, 2)
        # their events in the order they were asked
        ids = {h.run_id: k for k, h in handles.items()}
        firsts = [
            (kind, ids[run_id])
            for kind, run_id in hold.order
            if run_id in ids and kind in (EventKind.STARTED, EventKind.QUEUED)
        ]
        assert firsts == [
            (EventKind.STARTED, "first"),
            (EventKind.STARTED, "t1"),
            (EventKind.STARTED, "t2"),
            (EventKind.QUEUED, "t3"),
            (EventKind.QUEUED, "t4"),
        ]
        release.set()
        for key in ("first", "t1", "t2", "t3", "t4"):
            assert handles[key].result(WAIT).result == key
