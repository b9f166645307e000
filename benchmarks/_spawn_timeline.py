"""_spawn_timeline: where a trivial run's latency goes, stage by stage, ours and least_run's.

A diagnostic, not a figure of the suite: ``benchmarks/spawn.py``'s trivial run (``rt.run``
one after another, MemoryStore) with ``time.perf_counter_ns`` marks put in from outside (the
runtime's methods wrapped here, its code untouched), and the same for ``least_run`` (its
supervisor loop written again here with the same marks). Each run's marks, on the caller's,
the supervisor's and the agent's threads, are read in time order; the output gives, for the
order most runs took, the median time of each mark since ``c.start`` (``at_us``) and of each
step from one mark to the next (``step_us``; a wrapper's own ~0.3 us is in it). A step that
ends on another thread (``c.told -> s.wake1``) is a hand-off: the rest of the waker's turn,
then the woken thread's kernel wake-up and its taking of the GIL; a step on one thread is
that thread's work. Where the marks sit:

caller  ``c.start`` run called, ``c.told`` its request told (``RootRuns.spawn`` returned),
        ``c.woke`` its waiter open, ``c.done`` run returned;
super   ``s.wake1`` the spawn received, ``s.decided`` the core's spawn decided, ``s.apply``
        its effects begun (its writes done), ``s.put`` its agent started (the loop handed to a
        thread), ``s.out1`` the spawn's handling over; ``s.wake2`` the end received (the
        line of reports' ``ReportsDue``), ``s.land`` the caller's waiter being opened,
        ``s.out2`` the end's handling over;
agent   ``a.wake`` its first handling, ``a.report`` its end being told.

``--detail`` adds the caller's steps before its tell (``c.checked``, ``c.window``,
``c.waiter``, ``c.stamped``, ``c.tell``), the end's decision (``s.decided2``), the two
decisions' writes done (``s.wrote``, ``s.wrote2``) and the agent's steps after its report
(``a.begun``: its behaviour returned; ``a.stop``; ``a.out``: its dispatcher turn over);
each wrapper costs ~0.3 us more on the path.

``--spin SITE:WHEN:US`` (the question a reorder asks: is work after a wake off the path?):
``US`` microseconds of busy work, the GIL held, put just ``before`` or ``after`` one wake on
the path of both contenders alike: ``start`` (the supervisor hands the agent its loop:
``Effector._start``; least_run's ``_LeastAgent.start``), ``land`` (the supervisor opens the
caller's waiter: ``Waiter.land``; least_run's reply ``put``). Spun before, it is on the path
by construction; spun after, it is on the path only as far as the woken thread waits for it
(its wake-up, then the GIL). Compare ``c.done`` of before and after at the same ``US``, in
one quiet window: the difference is what moving that much work past the wake buys.

Usage: ``PYTHONPATH=$PWD/src python benchmarks/_spawn_timeline.py [--n 2000] [--detail]``
(one JSON on stdout). Under load every hand-off reads shorter (the CPUs never sleep deep)
and the medians move: compare ours and least_run's from one process, a branch and main
interleaved, and give the load.
"""

from __future__ import annotations

import argparse
import itertools
import queue
import statistics
import time
from collections.abc import Callable
from typing import Any

from _common import emit, parse_args, quiet_logs, settle
from spawn import PARKED, _LeastAgent, _LeastRuntime, trivial
from subagents.actors import agent as agent_module
from subagents.actors.agent import AgentActor
from subagents.actors.effector import Effector
from subagents.actors.group_linger import ReportsDue
from subagents.actors.pooled_actor import PooledActor
from subagents.actors.supervisor import SupervisorActor
from subagents.actors.supervisor_client import SupervisorClient
from subagents.messages import RunFinished, SpawnRequest
from subagents.runtime import Runtime
from subagents.runtime._root_runs import RootRuns
from subagents.runtime._root_waiters import RootWaiters, Waiter
from subagents.runtime._spawn_window import SpawnWindow
from subagents.store.memory import MemoryStore
from subagents.store.writes import write_all
from subagents.supervision.core import SupervisorCore

_now = time.perf_counter_ns
MARKS: list[tuple[str, int]] = []
"""The current run's marks (one run at a time: appended from three threads, in turn)."""

SPIN_SITES = ("start", "land")


def mark(name: str) -> None:
    MARKS.append((name, _now()))


def spin(us: int) -> None:
    """``us`` microseconds of busy work, the GIL held (a loop of Python, no call that waits)."""
    end = _now() + us * 1000
    while _now() < end:
        pass


def _around(owner: Any, name: str, before: str | None, after: str | None) -> None:
    """``owner.name`` wrapped: ``before`` marked on entry, ``after`` on return."""
    inner = getattr(owner, name)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if before is not None:
            mark(before)
        out = inner(*args, **kwargs)
        if after is not None:
            mark(after)
        return out

    setattr(owner, name, wrapped)


def _spun(owner: Any, name: str, when: str, us: int) -> None:
    """``owner.name`` wrapped: ``us`` of busy work just ``before`` or ``after`` it."""
    inner = getattr(owner, name)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if when == "before":
            spin(us)
        out = inner(*args, **kwargs)
        if when == "after":
            spin(us)
        return out

    setattr(owner, name, wrapped)


def instrument_runtime(spun: tuple[str, str, int] | None) -> None:
    """The runtime's marks (the module doc), and its ``--spin`` (set before the marks: a
    mark is made outside the spin, at the wake itself)."""
    if spun is not None:
        site, when, us = spun
        if site == "start":
            _spun(Effector, "_start", when, us)
        else:
            _spun(Waiter, "land", when, us)
    _around(RootRuns, "spawn", None, "c.told")
    _around(Waiter, "wait", None, "c.woke")
    _around(Waiter, "land", "s.land", None)
    _around(SupervisorCore, "spawn", None, "s.decided")
    _around(Effector, "_start", None, "s.put")
    _around(AgentActor, "on_start", "a.wake", None)
    _around(agent_module, "_report", "a.report", None)
    receive = SupervisorActor._handle_receive
    apply = SupervisorActor._apply

    def handle(self: Any, message: Any) -> Any:
        kind = type(message)  # (an end comes in the line of reports: a ``ReportsDue``)
        first = kind is SpawnRequest
        marked = first or kind is RunFinished or kind is ReportsDue
        if marked:
            mark("s.wake1" if first else "s.wake2")
        out = receive(self, message)
        if marked:
            mark("s.out1" if first else "s.out2")
        return out

    def applied(self: Any, effects: Any) -> Any:
        if MARKS and MARKS[-1][0] == "s.decided":
            mark("s.apply")
        return apply(self, effects)

    SupervisorActor._handle_receive = handle  # type: ignore[method-assign]
    SupervisorActor._apply = applied  # type: ignore[method-assign]


def instrument_detail() -> None:
    """``--detail``'s marks (the module doc)."""
    _around(RootRuns, "check", None, "c.checked")
    _around(SpawnWindow, "enter", None, "c.window")
    _around(RootWaiters, "expect", None, "c.waiter")
    _around(RootRuns, "_stamped", None, "c.stamped")
    _around(SupervisorClient, "tell", "c.tell", None)
    _around(SupervisorCore, "finished", None, "s.decided2")
    write = SupervisorActor._write

    def wrote(self: Any, decision: Any) -> None:
        write(self, decision)
        mark("s.wrote" if MARKS[-1][0] == "s.decided" else "s.wrote2")

    SupervisorActor._write = wrote  # type: ignore[method-assign]
    _around(AgentActor, "_begin", None, "a.begun")
    _around(PooledActor, "_stop", "a.stop", None)
    _around(PooledActor, "_drain", None, "a.out")


class _MarkedAgent(_LeastAgent):
    def on_start(self) -> None:
        mark("a.wake")
        mark("a.report")
        super().on_start()


class _MarkedLeast(_LeastRuntime):
    """``_LeastRuntime`` with the runtime's marks at the same places (``s.decided``: the
    core's ``spawn``, wrapped), and the same ``--spin``."""

    spun: tuple[str, str, int] | None = None

    def _spin(self, site: str, when: str) -> None:
        if self.spun is not None and self.spun[:2] == (site, when):
            spin(self.spun[2])

    def _serve(self) -> None:
        while (item := self.inbox.get()) is not None:
            kind, run_id, payload = item
            if kind == "spawn":
                mark("s.wake1")
                request, reply = payload
                self._waiters[run_id] = reply
                admitted = self.core.spawn(request)
                write_all(self.store, admitted.writes)
                mark("s.apply")
                self._spin("start", "before")
                _MarkedAgent.start(self.inbox, run_id, request.task, self.parked)
                self._spin("start", "after")
                mark("s.put")
                mark("s.out1")
            else:
                mark("s.wake2")
                finished = self.core.finished(RunFinished(run_id=run_id, result=payload))
                write_all(self.store, finished.writes)
                self._spin("land", "before")
                mark("s.land")
                self._waiters.pop(run_id).put(payload)
                self._spin("land", "after")
                mark("s.out2")

    def run(self, i: int, reply: queue.SimpleQueue[str]) -> str:
        run_id = f"r-least-{i}"
        request = SpawnRequest(request_id=run_id, agent="trivial", task=str(i), run_id=run_id)
        self.inbox.put(("spawn", run_id, (request, reply)))
        mark("c.told")
        out = reply.get()
        mark("c.woke")
        return out


def timeline(one: Callable[[int], None], n: int) -> dict[str, Any]:
    """``n`` runs of ``one``, each's marks in time order: for the order most runs took, the
    median of each mark since ``c.start`` and of each step from the mark before it."""
    at: dict[str, list[float]] = {}
    steps: dict[str, list[float]] = {}
    orders: dict[tuple[str, ...], int] = {}
    for i in range(n):
        MARKS.clear()
        mark("c.start")
        one(i)
        mark("c.done")
        marks = sorted(MARKS, key=lambda m: m[1])
        t0 = marks[0][1]
        order = tuple(name for name, _ in marks)
        orders[order] = orders.get(order, 0) + 1
        for k, (name, t) in enumerate(marks):
            at.setdefault(name, []).append((t - t0) / 1e3)
            if k:
                step = f"{marks[k - 1][0]} -> {name}"
                steps.setdefault(step, []).append((t - marks[k - 1][1]) / 1e3)
    common = max(orders.items(), key=lambda kv: kv[1])[0]
    return {
        "runs": n,
        "order_share": round(orders[common] / n, 3),
        "at_us": {name: round(statistics.median(at[name]), 1) for name in common},
        "step_us": {
            f"{a} -> {b}": round(statistics.median(steps[f"{a} -> {b}"]), 1)
            for a, b in itertools.pairwise(common)
        },
    }


def spin_option(text: str) -> tuple[str, str, int]:
    """``SITE:WHEN:US`` checked: a site of ``SPIN_SITES``, ``before`` or ``after``, an int."""
    parts = text.split(":")
    if len(parts) != 3 or parts[0] not in SPIN_SITES or parts[1] not in ("before", "after"):
        raise argparse.ArgumentTypeError(
            f"--spin takes SITE:WHEN:US (SITE one of {', '.join(SPIN_SITES)}; WHEN before or"
            f" after; US whole microseconds), got {text!r}"
        )
    try:
        us = int(parts[2])
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--spin: US must be whole microseconds, got {parts[2]!r}"
        ) from None
    if us < 0:
        raise argparse.ArgumentTypeError(f"--spin: US must be >= 0, got {us}")
    return parts[0], parts[1], us


def _extra(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n", type=int, default=None, help="runs per contender")
    parser.add_argument("--detail", action="store_true", help="more marks (module doc)")
    parser.add_argument("--spin", type=spin_option, default=None, help="SITE:WHEN:US (doc)")


def main() -> None:
    args = parse_args(__doc__ or "", _extra)
    quiet_logs()
    n = args.n or (50 if args.quick else 2000)
    least = _MarkedLeast()
    least.spun = args.spin
    reply: queue.SimpleQueue[str] = queue.SimpleQueue()
    instrument_runtime(args.spin)
    if args.detail:
        instrument_detail()
    rt = Runtime([trivial], store=MemoryStore())
    try:

        def ours(i: int) -> None:
            if rt.run("trivial", str(i), wait=30).result != str(i):
                raise RuntimeError(f"run {i} ended wrongly")

        def least_one(i: int) -> None:
            if least.run(i, reply) != str(i):
                raise RuntimeError("the least run answered wrongly")

        for i in range(min(n, 200)):  # warm-up
            ours(-1 - i)
            least_one(-1 - i)
        settle()
        timelines = {"least_run": timeline(least_one, n)}
        settle()
        timelines["ours"] = timeline(ours, n)
    finally:
        rt.close()
        least.close()
        PARKED.close()
    spun = None if args.spin is None else ":".join(map(str, args.spin))
    emit("spawn_timeline", {"timelines": timelines, "spin": spun, "detail": args.detail})


if __name__ == "__main__":
    main()
