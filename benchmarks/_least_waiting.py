"""_least_waiting: the least a waiting run of this design must do, started in batches or
one at a time.

The anchor of ``scale.py``'s ``spawn_many`` row, measured in the same process after the
runtime closed (labelled ``least_waiting`` in its JSON). Per batch of ``batch`` runs, as
``Runtime.spawn_many`` sends them: one hand-off from the caller to a "supervisor" thread and
one back (the caller waits once per batch). Told one each (``one_each``; ``scale.py``'s
``least_one_spawn``, the floor of the one-``spawn``-each row), as ``Runtime.spawn`` tells
its request and returns without waiting: one put per run from the caller into the
supervisor's queue, and one take of it there, nothing answered (the runtime answers once
per group it decided; its caller waits only when 1,000 are undecided, which this floor
leaves out). Per run, on the supervisor's thread: a run id
drawn, a record kept and listed (a dict entry of a small struct), and an agent actor made
as the runtime's agent actors are (a ``PooledActor`` on a real ``Dispatcher``: not in pykka's
registry, a ``Mailbox`` inbox, the GC pacing counting it) and listed. On a pooled thread,
the actor's first handling (``on_start``): its function's coroutine made and run up to its
first wait (an ``await`` that parks it), kept on the actor, and one report to the
supervisor, which counts it. The start ends when every run's report was counted.

Left out, as nothing a waiting run must pay in any design of this kind: no request checked
(definition, limits, policies, ancestors), no event made or published, no deadline armed, no
store write, no handle or waiter, no journal. So the runtime's start over this is the cost of
those and of how it does the rest; if this alone were over the goal, the goal would need
another design (fewer objects per run, no actor per run).
"""

from __future__ import annotations

import gc
import itertools
import queue
import threading
import time
from collections.abc import Callable, Coroutine, Generator
from typing import Any

import msgspec

from subagents.actors.gc_pacing import PACING
from subagents.actors.inbox import stop_message
from subagents.actors.pooled import Dispatcher
from subagents.actors.pooled_actor import PooledActor


class _Record(msgspec.Struct):
    """What the supervisor keeps of a run at the least: its id, agent, task and status."""

    run_id: str
    agent: str
    task: str
    status: str = "running"


class _End(msgspec.Struct):
    """What the supervisor keeps of a run's end at the least: its id and final status."""

    run_id: str
    status: str


class _EndEvent(msgspec.Struct):
    """A run's end event at the least (the store keeps one per run's end, its ``cancelled``
    at a close): its kind, its run and its time."""

    kind: str
    run_id: str
    ts: float


class _Park:
    """An awaitable that suspends its coroutine once (a waiting ``receive``)."""

    def __await__(self) -> Generator[None, None, None]:
        yield None


async def _idle(task: str) -> str:
    await _Park()  # the run's wait for mail
    return task


class _LeastAgent(PooledActor):
    """An agent actor doing the least a waiting run's first handling does: its coroutine
    run to its first wait, then one report to the supervisor."""

    def __init__(self, supervisor: queue.SimpleQueue[Any], run_id: str, task: str) -> None:
        super().__init__()
        self._supervisor, self._run_id, self._task = supervisor, run_id, task
        self._coro: Coroutine[Any, Any, str] | None = None

    def on_start(self) -> None:
        coro = _idle(self._task)
        coro.send(None)  # runs up to its wait
        self._coro = coro
        self._supervisor.put(("waiting", self._run_id))

    def on_stop(self) -> None:
        if self._coro is not None:
            self._coro.close()


class _LeastSupervisor:
    """The "supervisor" thread: a batch's records and actors made and listed, its caller
    answered once; each run's report counted."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.records: dict[str, _Record] = {}
        self.actors: dict[str, Any] = {}
        self.ends: list[_End] = []
        self.events: list[_EndEvent] = []
        self.waiting = 0
        self.target = -1
        self.all_waiting = threading.Event()
        self._dispatcher = dispatcher
        self._ids = itertools.count()
        self._thread = threading.Thread(target=self._serve, name="least-supervisor")
        self._thread.start()

    def _serve(self) -> None:
        while (item := self.inbox.get()) is not None:
            if item[0] == "waiting":
                self.waiting += 1
                if self.waiting == self.target:
                    self.all_waiting.set()
                continue
            if item[0] == "one":  # one spawn told: made, not answered (as ``spawn`` tells)
                self._make(item[1], item[2])
                continue
            if item[0] == "close":
                self._close(item[1])
                continue
            _, jobs, reply = item
            reply.put([self._make(agent, task) for agent, task in jobs])

    def _make(self, agent: str, task: str) -> str:
        """A run's record and actor, made and listed; its id."""
        run_id = f"r-{next(self._ids)}"
        self.records[run_id] = _Record(run_id, agent, task)
        self.actors[run_id] = _LeastAgent.start(
            self.inbox, run_id, task, dispatcher=self._dispatcher
        )
        return run_id

    def _close(self, reply: queue.SimpleQueue[int]) -> None:
        """Every run ended, in one pass (``_least_close.py``): its record ended (replaced,
        as the store keeps records), its end and its end event (one clock reading) kept,
        its actor told to stop; the caller answered once, with the number ended."""
        ends, events = self.ends, self.events
        records = self.records
        stop = stop_message
        now = time.time
        for run_id, ref in self.actors.items():
            ended = msgspec.structs.replace(records[run_id], status="cancelled")
            records[run_id] = ended
            ends.append(_End(run_id, ended.status))
            events.append(_EndEvent(ended.status, run_id, now()))
            ref.tell(stop())
        self.actors.clear()
        reply.put(len(ends))

    def close(self) -> None:
        self.inbox.put(None)
        self._thread.join()


Closer = Callable[["_LeastSupervisor", Dispatcher, int, float], dict[str, Any]]
"""What ends the waiting runs, timed (``_least_close.least_close``)."""


def least_waiting(
    n: int,
    batch: int,
    timeout: float = 900.0,
    *,
    one_each: bool = False,
    close: Closer | None = None,
) -> dict[str, Any]:
    """``n`` least waiting runs started in batches of ``batch`` (``one_each``: each told on
    its own, unanswered, as ``Runtime.spawn`` tells, the supervisor taking one per run):
    seconds and CPU seconds of the process until all are waiting, and their CPU per run;
    then all stopped (by ``close``, its figures under ``"close"``; else untimed)."""
    dispatcher = Dispatcher()
    supervisor = _LeastSupervisor(dispatcher)
    supervisor.target = n
    reply: queue.SimpleQueue[list[str]] = queue.SimpleQueue()
    full_before = gc.get_stats()[2]["collections"]
    cpu, started = time.process_time(), time.perf_counter()
    if one_each:
        put = supervisor.inbox.put
        for i in range(n):
            put(("one", "idle", str(i)))
    else:
        for first in range(0, n, batch):
            jobs = [("idle", str(i)) for i in range(first, min(n, first + batch))]
            supervisor.inbox.put(("batch", jobs, reply))
            if len(reply.get(timeout=timeout)) != len(jobs):
                raise RuntimeError("the least supervisor answered a batch wrongly")
    if not supervisor.all_waiting.wait(timeout):
        raise RuntimeError(f"only {supervisor.waiting} of {n} least runs waiting")
    seconds, cpu_s = time.perf_counter() - started, time.process_time() - cpu
    full_passes = gc.get_stats()[2]["collections"] - full_before
    closed = None
    if close is not None:
        closed = close(supervisor, dispatcher, n, timeout)
    else:
        for ref in supervisor.actors.values():
            ref.stop(block=False)
    supervisor.close()
    dispatcher.wait_idle(timeout)
    dispatcher.close(timeout)
    out = {
        "what": "the least a waiting run of this design does (benchmarks/_least_waiting.py)",
        "n": n,
        "batch": 1 if one_each else batch,
        "told": "one each, unanswered" if one_each else "in batches, each answered",
        "start_s": round(seconds, 3),
        "start_cpu_s": round(cpu_s, 3),
        "cpu_us_per_run": round(cpu_s / n * 1e6, 1),
        "gc_full_passes": full_passes,
    }
    if closed is not None:
        out["close"] = closed
    return out


class _DecidedRuns:
    """The runs decided so far, as the GC pacing reads a dispatcher's live runs."""

    def __init__(self) -> None:
        self.live = 0
        self.stopped = 0


SETTLED_GROUP = 100
"""The first reports decided per ``settled`` call (``actors/settle_line.py``'s bound)."""


def decisions_alone(n: int, batch: int) -> dict[str, Any]:
    """The supervisor's part of ``n`` waiting runs that is pure decision, on this thread
    alone: ``SupervisorCore.spawn_many`` per batch of ``batch`` root requests (as the
    runtime stamps them: ids set; and filed as checked, as ``RootRuns.admit_many`` files
    them, so that their admission does not check their fields again, as in the runtime:
    unfiled, each run's decisions read ~3% more instructions) and its writes into a
    ``MemoryStore``, then each run's first report (``WaitingChanged``) decided in
    ``settled`` calls of ``SETTLED_GROUP`` with their writes; the GC paced as in the
    runtime (``PACING`` counts the runs decided as live). No actor, no hand-off, no effect
    carried out (no event published, no deadline armed): set against the runtime's start
    CPU it shows how much of the gap to ``least_waiting`` is the decisions and how much the
    rest (effects, reports, plumbing)."""
    from subagents.definitions.spec import AgentSpec
    from subagents.messages import RunStatus, SpawnRequest, WaitingChanged
    from subagents.store.memory import MemoryStore
    from subagents.store.writes import write_all
    from subagents.supervision.core import SupervisorCore
    from subagents.supervision.limits import Limits

    spec = AgentSpec(name="idle", description="Waits for mail.")
    limits = Limits(
        max_concurrency=n, per_agent=n, queue_bound=n, timeout_s=3000.0, max_timeout_s=3000.0
    )
    core = SupervisorCore(
        lookup=lambda name: spec if name == "idle" else None, names=lambda: ["idle"], limits=limits
    )
    store = MemoryStore()
    checked = core.admission.checked.requests
    decided = _DecidedRuns()
    PACING.register(decided)  # the GC paced as the runtime's is (its live runs counted)
    full_before = gc.get_stats()[2]["collections"]
    cpu, started = time.process_time(), time.perf_counter()
    for first in range(0, n, batch):
        requests = []
        for i in range(first, min(n, first + batch)):
            run_id = f"r-decided-{i}"
            request = SpawnRequest(request_id=run_id, agent="idle", task=str(i), run_id=run_id)
            checked[run_id] = request
            requests.append(request)
        decision = core.spawn_many(requests)
        if any(reply.error is not None for reply in decision.reply):
            raise RuntimeError("a decided run was refused")
        write_all(store, decision.writes)
        decided.live += len(requests)
    for first in range(0, n, SETTLED_GROUP):
        reports = [
            WaitingChanged(run_id=f"r-decided-{i}", waiting=True, attempt=1)
            for i in range(first, min(n, first + SETTLED_GROUP))
        ]
        write_all(store, core.settled(reports).writes)
    cpu_s = time.process_time() - cpu
    PACING.unregister(decided)
    for run_id in ("r-decided-0", f"r-decided-{n - 1}"):
        record = store.get_run(run_id)
        if record is None or record.status is not RunStatus.WAITING:
            raise RuntimeError(f"{run_id} was not decided waiting: {record!r:.200}")
    return {
        "what": "the core's decisions of these runs alone, one thread, writes into a MemoryStore",
        "n": n,
        "start_cpu_s": round(cpu_s, 3),
        "cpu_us_per_run": round(cpu_s / n * 1e6, 1),
        "seconds": round(time.perf_counter() - started, 3),
        "gc_full_passes": gc.get_stats()[2]["collections"] - full_before,
    }
