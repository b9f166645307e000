"""profile_hot_paths: where the CPU goes per run and per mail, by thread and by function.

Runs one workload (the shape of a benchmark, longer) under yappi with its CPU clock (each
thread's own CPU time: waiting for a lock, the GIL or a mail costs nothing) across every
thread, after a warm-up, and prints, per unit of work (a run, a mail, a child):

- CPU by thread role: the supervisor's thread, the agents' threads, the caller (main thread),
  the timer, the rest;
- on the supervisor's thread: the inclusive CPU of its main operations (the core's decisions,
  ``SupervisorCore.*``; the effects applied after a commit, ``_apply_one``, and inside them
  starting actors, telling them, publishing events; the store; the timer service);
- on the agents' threads: their main operations;
- the functions with the most CPU of their own, all threads; and the ``isinstance`` calls per
  unit.

yappi slows Python code down ~2-3x, builtins counted more: read shares and call counts, not
absolute times (the benchmarks give those: ``cpu_us_per_msg``, ``cpu_us_per_run``,
``cpu_ms_per_child``).

Workloads (MemoryStore, but ``pingpong_sqlite``):
- ``spawn``: 3,000 trivial function-agent runs one after another (``rt.run``);
- ``pingpong``: per-mail ping-pong, 3,000 mails;
- ``pingpong_sqlite``: the same on a ``SQLiteStore`` (in a temporary folder): what a durable
  mail costs beyond it (the sender's record, the supervisor's group commit, the checkpoints);
- ``fanout``: 1,000 children x 50 ms, 100 at a time (an LLM agent on the offline model);
- ``fanout_async``: the same children as function agents awaiting ``ctx.sleep(0.05)`` (waiting
  runs lend their slots: parking).

    .venv/bin/python benchmarks/profile_hot_paths.py --shape pingpong
    .venv/bin/python benchmarks/profile_hot_paths.py --shape all --json > profile.json

Needs the ``bench`` extra (yappi). Not part of ``run_all.py``: it profiles, it does not
benchmark.
"""

from __future__ import annotations

import argparse
import collections
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

SHAPES = ("spawn", "pingpong", "pingpong_sqlite", "fanout", "fanout_async")
UNITS = {
    "spawn": ("run", 3000),
    "pingpong": ("mail", 3000),
    "pingpong_sqlite": ("mail", 3000),
    "fanout": ("child", 1000),
    "fanout_async": ("child", 1000),
}

# Inclusive CPU of these (when they run on the thread of that role), per unit.
SUPERVISOR_OPS = (
    "SupervisorActor._receive",
    "SupervisorActor._handle",
    "SupervisorActor._commit_group",
    "SupervisorActor._apply",
    "SupervisorActor._apply_one",
    "SupervisorActor._start",
    "Actor.start",
    "ActorRef.tell",
    "Runtime._publish",
    "TimerService.schedule",
    "TimerService.cancel",
    "coalesce",
)
AGENT_OPS = (
    "AgentActor.on_start",
    "AgentActor.on_receive",
    "AgentActor._settle",
    "AgentActor.flush_reports",
    "AgentActor._stop",
    "FunctionBehaviour.start",
    "FunctionBehaviour.on_message",
    "LLMBehaviour.start",
    "ActorRef.tell",
    "Actor._actor_loop",
)


def _workload(shape: str, count: int) -> tuple[Callable[[], None], Callable[[], None]]:
    """(warm-up, the measured work: ``count`` units) of ``shape``."""
    import fanout
    import mail
    import spawn
    from subagents.runtime import Runtime
    from subagents.store.memory import MemoryStore

    if shape == "spawn":
        rt = Runtime([spawn.trivial])

        def runs(n: int) -> None:
            for i in range(n):
                rt.run("trivial", str(i), wait=30)

        def work() -> None:
            try:
                runs(count)
            finally:
                rt.close()

        return lambda: runs(min(200, count)), work
    if shape == "pingpong":
        return (
            lambda: mail.runtime_rate("pingpong", MemoryStore(), min(200, count)),
            lambda: mail.runtime_rate("pingpong", MemoryStore(), count),
        )
    if shape == "pingpong_sqlite":
        folder = Path(tempfile.mkdtemp(prefix="profile-pingpong-"))

        def durable() -> None:
            try:
                mail.runtime_rate("pingpong", mail._store("sqlite", folder, 1), count)
            finally:
                shutil.rmtree(folder, ignore_errors=True)

        def warm() -> None:
            mail.runtime_rate("pingpong", mail._store("sqlite", folder, 0), min(200, count))

        return warm, durable
    async_workers = shape == "fanout_async"
    return (
        lambda: fanout.runtime(min(100, count), 100, 0.01, fanout._Gauge(), async_workers),
        lambda: fanout.runtime(count, 100, 0.05, fanout._Gauge(), async_workers),
    )


AREAS = (  # (where a function's own CPU is counted, a test on "module name")
    ("queue hand-offs (SimpleQueue get/put)", lambda m, n: "SimpleQueue" in n),
    ("isinstance", lambda m, n: n == "isinstance"),
    ("supervision/ (the core's decisions)", lambda m, n: "subagents/supervision/" in m),
    ("actors/supervisor.py (dispatch, group commit, effects)", lambda m, n: "supervisor.py" in m),
    ("actors/agent.py", lambda m, n: "subagents/actors/agent.py" in m),
    ("actors/ (timer, pool, inbox, registry)", lambda m, n: "subagents/actors/" in m),
    ("behaviour/", lambda m, n: "subagents/behaviour/" in m),
    ("store/", lambda m, n: "subagents/store/" in m),
    ("models/", lambda m, n: "subagents/models/" in m),
    ("runtime/ (events out, outcomes)", lambda m, n: "subagents/runtime/" in m),
    ("messages/", lambda m, n: "subagents/messages/" in m),
    ("pykka", lambda m, n: "/pykka/" in m),
    ("threading, queue, contextlib", lambda m, n: m.endswith(("threading.py", "queue.py"))),
    ("threading, queue, contextlib", lambda m, n: m.endswith("contextlib.py")),
    ("structlog", lambda m, n: "/structlog/" in m),
)


def _area(module: str, name: str) -> str:
    for area, test in AREAS:
        if test(module, name):
            return area
    return "other builtins" if not module or "/" not in module else "other Python"


def _role(names: set[str], thread_name: str) -> str:
    if any(n.startswith("SupervisorActor.") for n in names):
        return "supervisor"
    if any(n.startswith(("AgentActor.", "Dispatcher.")) for n in names):
        return "agents"  # an agent's own thread, or a dispatcher thread (pooled agents)
    if thread_name == "_MainThread" or thread_name == "MainThread":
        return "caller (main thread)"
    if any(n.startswith("TimerService.") for n in names):
        return "timer"
    return "other"


def profile(shape: str, count: int | None = None) -> dict[str, Any]:
    import yappi

    from _common import quiet_logs

    quiet_logs()
    unit, default = UNITS[shape]
    count = count or default
    warm_up, work = _workload(shape, count)
    warm_up()
    yappi.clear_stats()
    yappi.set_clock_type("cpu")
    yappi.start(builtins=True, profile_threads=True)
    started = time.perf_counter()
    work()
    wall = time.perf_counter() - started
    yappi.stop()

    role_cpu: collections.Counter[str] = collections.Counter()
    inclusive: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    own: collections.Counter[str] = collections.Counter()
    areas: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    calls: collections.Counter[str] = collections.Counter()
    for thread in yappi.get_thread_stats():
        stats = list(yappi.get_func_stats(filter={"ctx_id": thread.id}))
        for s in stats:  # a pooled agent's methods count as the agent's
            s.name = s.name.removeprefix("Pooled")
        names = {s.name for s in stats}
        role = _role(names, thread.name)
        role_cpu[role] += thread.ttot
        for s in stats:
            inclusive[role][s.name] = max(inclusive[role][s.name], 0) + s.ttot
            own[f"{s.name} ({Path(s.module).name})"] += s.tsub
            areas[role][_area(s.module, s.name)] += s.tsub
            calls[s.name] += s.ncall
    yappi.clear_stats()
    total = sum(role_cpu.values()) or 1.0

    def per_unit(seconds: float) -> float:
        return round(seconds / count * 1e6, 1)

    return {
        "unit": unit,
        "units": count,
        "wall_s": round(wall, 2),
        "profiled_cpu_us_per_unit": per_unit(total),
        "cpu_us_per_unit_by_role": {k: per_unit(v) for k, v in role_cpu.most_common()},
        "percent_by_role": {k: round(v / total * 100, 1) for k, v in role_cpu.most_common()},
        "supervisor_own_us_per_unit_by_area": {
            area: per_unit(seconds) for area, seconds in areas["supervisor"].most_common()
        },
        "agents_own_us_per_unit_by_area": {
            area: per_unit(seconds) for area, seconds in areas["agents"].most_common()
        },
        "supervisor_us_per_unit": {
            op: per_unit(inclusive["supervisor"][op])
            for op in SUPERVISOR_OPS
            if inclusive["supervisor"][op]
        },
        "supervisor_core_us_per_unit": {
            name: per_unit(seconds)
            for name, seconds in inclusive["supervisor"].most_common()
            if name.startswith("SupervisorCore.") and seconds / total > 0.005
        },
        "agents_us_per_unit": {
            op: per_unit(inclusive["agents"][op]) for op in AGENT_OPS if inclusive["agents"][op]
        },
        "top_own_percent": {
            name: round(seconds / total * 100, 1) for name, seconds in own.most_common(20)
        },
        "isinstance_calls_per_unit": round(calls["isinstance"] / count, 1),
    }


def _print(shape: str, p: dict[str, Any]) -> None:
    unit = p["unit"]
    print(
        f"== {shape}: {p['units']:,} {unit}s in {p['wall_s']} s under yappi;"
        f" {p['profiled_cpu_us_per_unit']} us CPU per {unit} (profiled: ~2-3x the real),"
        f" {p['isinstance_calls_per_unit']} isinstance calls per {unit}"
    )
    for key in (
        "percent_by_role",
        "cpu_us_per_unit_by_role",
        "supervisor_own_us_per_unit_by_area",
        "agents_own_us_per_unit_by_area",
        "supervisor_us_per_unit",
        "supervisor_core_us_per_unit",
        "agents_us_per_unit",
        "top_own_percent",
    ):
        print(f"  {key}:")
        for name, value in p[key].items():
            print(f"    {value:8}  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shape", choices=(*SHAPES, "all"), default="all")
    parser.add_argument("--json", action="store_true", help="print JSON, not a summary")
    parser.add_argument("--units", type=int, default=None, help="runs / mails / children")
    args = parser.parse_args()
    try:
        import yappi  # noqa: F401
    except ImportError:
        raise SystemExit("yappi is not installed: pip install -e '.[bench]'") from None
    shapes = SHAPES if args.shape == "all" else (args.shape,)
    report = {shape: profile(shape, args.units) for shape in shapes}
    if args.json:
        sys.stdout.write(msgspec.json.format(msgspec.json.encode(report)).decode() + "\n")
        return
    for shape, p in report.items():
        _print(shape, p)


if __name__ == "__main__":
    main()
