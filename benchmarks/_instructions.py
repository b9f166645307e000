"""Instructions per unit of work (a mail, a run, an LLM run), counted by valgrind's callgrind:
the judge of a cut when the machine is loaded.

Calls counted by a profile hook are load-independent but are not CPU (session 18 cut 30 calls
per mail and the CPU per mail did not move: the calls removed were cheap builtins); CPU time
is CPU but moves with the machine's load (shared caches, frequency, other processes).
Instructions executed in user space are both: what the work costs.

Load-proof (session 20): threads that a clock wakes (the dispatcher's watch every 50 ms, the
log's checkpoint thread every 50 ms while something is written, the lease keeper, the timer's
thread firing lingers and ticks) work per second of wall time or per wake-up, not per unit,
and valgrind's wall time stretches with the machine's load: counted with the rest, a figure
taken at load 25-34 moved by -8% to +20% between two pairs of the same trees (e-spawn11,
session 19). Each of those threads now runs inside a C function of its role
(``_clock_threads``: compiled at run time with ``cc``), whose inclusive cost callgrind
records; ``per_unit`` is every thread's count less theirs, and what it leaves out is printed
beside it (``roles``), with ``all_threads`` (the figure as it was before). Measured, the same
tree with a core of its own (nice -15) against load ~20: ``all_threads`` moved +7% to +25%,
``per_unit`` 0% to +8% (the durable ping-pong's the most: its supervisor's smaller groups of
commits, work that stays in the figure; ``benchmarks/README.md``, "the judge"). Without a C
compiler the figure is every thread's, and says so (``split``).

What that leaves open: work a change moves onto a left-out thread (a timer callback that does
the work, more arms and cancels, which the timer's thread takes in, a thread per unit named
like a clock's) is out of ``per_unit`` too, and looks like a cut. So a verdict reads
``all_threads`` and ``roles`` beside it, or ``--compare A.json B.json`` (``compare``), which
flags such a pair.

Each shape runs in a fresh process under ``valgrind --tool=callgrind`` twice, ``n`` and ``2n``
units, with the same ``PYTHONHASHSEED`` (a dict's layout, so the interpreter's work, depends
on the seed), each after an uncounted warm-up of the same shape in the same process; the
difference divided by ``n`` is per unit: imports, the runtime's start and close cancel out.

What it does not see: the kernel's work (futex wake-ups, the log's writes) and waiting.
valgrind runs one thread at a time, ~50x slower, so timers fire after fewer units than
natively (the supervisor's 5 ms linger takes fewer mails per group): a figure is a
consistent judge between two trees, not the native instruction count. Compare trees with
the same ``n`` and seed. The raw anchors (``raw_ask``: two raw pykka actors asking each
other, per message; ``raw_spawn``: a raw actor's start, ask and stop) run in the same way,
so each figure comes with its anchor's.

    PYTHONPATH=src python benchmarks/_instructions.py --shapes pingpong raw_ask --n 2000
    python benchmarks/_instructions.py --compare main.json branch.json

JSON out: ``{shape: {"per_unit": instructions, "n": n, "all_threads": instructions,
"roles": {role: instructions}, "threads_started": {role: threads}, "collector":
instructions}, "seed": seed}``, each per unit (``threads_started``: threads started per unit,
``work`` the others: a dispatcher thread replaced as blocked shows there; ``collector``: the
cyclic collector's part of ``all_threads``, not left out of ``per_unit``). Why the collector
is printed: in ``waiting_many`` (live runs grow with n) two runs of the same tree read
514.0k and 468.8k per run (``all_threads``), the collector 97.8k and 57.4k of them: 40.4k of
the 45.2k between them was which passes the GC pacing made when (``actors/gc_pacing.py``),
not the code. Read ``all_threads - collector`` beside ``per_unit`` there, not ``per_unit -
collector``: a pass can fall on a thread a clock wakes, its cost then in that role's, left
out of ``per_unit`` already, and taken off twice (a run of ``waiting_many`` read its timer
57.2k per run against 15k in the others: ``per_unit - collector`` 353k against ~393k,
``all_threads - collector`` 414k against ~416k; ``benchmarks/README.md``, "Session 23
(e-many12)"). Needs valgrind (``apt-get install valgrind``); about 20 s of a quiet core for
the imports of each process, plus ~3 ms of a core per mail.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import msgspec

import _clock_threads

HERE = Path(__file__).resolve().parent
_REFS = re.compile(r"(?:I\s+refs|Collected)\s*:\s*([\d,]+)")
_STARTED_MARK = "judge-threads-started: "
_STARTED = re.compile(re.escape(_STARTED_MARK) + r"(\{.*\})")


def _pingpong(kind: str) -> Callable[[int], None]:
    def work(n: int) -> None:
        import mail

        with tempfile.TemporaryDirectory() as folder:
            store = mail._store(kind, Path(folder), n)
            mail.runtime_rate("pingpong", store, n)

    return work


def _raw_ask(n: int) -> None:
    import mail

    mail.raw_ask_pingpong(n)


def _spawn(n: int) -> None:
    import spawn
    from subagents import MemoryStore, Runtime

    with Runtime({"trivial": spawn.trivial}, store=MemoryStore()) as rt:
        spawn.runtime_block(rt, n, spawn._Sample())


def _raw_spawn(n: int) -> None:
    import spawn

    spawn.raw_block(spawn._Trivial, n, spawn._Sample())


def _llm_run(n: int) -> None:
    from subagents import AgentSpec, Runtime, ScriptedModel

    spec = AgentSpec(name="worker", description="One model turn.", tools=())
    model = ScriptedModel({"worker": [{"text": "done"}]})
    with Runtime({"worker": spec}, model=model) as rt:
        for i in range(n):
            if rt.run("worker", f"part {i}", wait=60).status != "completed":
                raise RuntimeError(f"LLM run {i} did not complete")


def _fanout_child(n: int) -> None:
    """A small fan-out per child (``fanout.py``'s shape, smaller): a function parent spawns n
    LLM workers on the scripted model, 20 at once, each one 5 ms model call, and gathers them;
    per child, every part of it: its spawn, queueing, admission into a freed slot, its actor's
    start, its turn and blocking model call, its report and the parent's resume."""
    import fanout

    fanout.runtime(n, 20, 0.005, fanout._Gauge())


def _waiting(spawn: str) -> Callable[[int], None]:
    """n runs waiting for mail (``scale.py``'s), started with one ``spawn`` each (``one``) or
    ``spawn_many`` in batches of 1,000 (``many``), then the runtime closed: per run, its start
    and its end at the close. Compared at two n, what grows with n shows (the collector
    walking live runs, a structure that grows)."""

    def work(n: int) -> None:
        from subagents import Runtime
        from subagents.behaviour.function import AgentContext
        from subagents.messages import Event, EventKind
        from subagents.supervision.limits import Limits

        async def idle(ctx: AgentContext) -> str:
            mail = await ctx.receive(timeout=3000)
            return "mail" if mail is not None else "no mail"

        limits = Limits(
            max_concurrency=n, per_agent=n, queue_bound=n, timeout_s=3000.0, max_timeout_s=3000.0
        )
        waiting, counting, all_waiting = [0], threading.Lock(), threading.Event()

        def on_event(event: Event) -> None:
            if event.kind == EventKind.WAITING:
                with counting:
                    waiting[0] += 1
                    if waiting[0] == n:
                        all_waiting.set()

        with Runtime([idle], limits=limits, agent_threads="shared") as rt:
            rt.subscribe(on_event)
            for first in range(0, n, 1000 if spawn == "many" else 1):
                if spawn == "one":
                    rt.spawn("idle", str(first))
                    continue
                jobs = [("idle", str(i)) for i in range(first, min(n, first + 1000))]
                if any(isinstance(item, Exception) for item in rt.spawn_many(jobs)):
                    raise RuntimeError("a waiting run was refused")
            if not all_waiting.wait(3600):
                raise RuntimeError(f"only {waiting[0]} of {n} runs waiting")

    return work


def _decisions_many(n: int) -> None:
    """The supervisor's decisions of ``waiting_many``'s n runs alone, on one thread
    (``_least_waiting.decisions_alone``: ``SupervisorCore.spawn_many`` per batch of 1,000
    root requests filed as checked, as the runtime's caller files them; each run's first
    report decided in ``settled`` calls of 100; the writes into a ``MemoryStore``; the GC
    paced as the runtime's). No thread, no actor, no effect carried out: a cut of the
    admission or the settling is judged here without the interleaving of threads, whose
    timers and collector passes move ``waiting_many`` by several per cent by themselves
    (about a third of ``waiting_many``'s instructions outside the collector are these)."""
    import _least_waiting

    _least_waiting.decisions_alone(n, 1000)


SHAPES: dict[str, Callable[[int], None]] = {
    "pingpong": _pingpong("memory"),
    "pingpong_sqlite": _pingpong("sqlite"),
    "raw_ask": _raw_ask,
    "spawn": _spawn,
    "raw_spawn": _raw_spawn,
    "llm_run": _llm_run,
    "fanout_child": _fanout_child,
    "waiting_spawn": _waiting("one"),
    "waiting_many": _waiting("many"),
    "decisions_many": _decisions_many,
}


def _child(shape: str, n: int) -> None:
    sys.path.insert(0, str(HERE))
    from _common import quiet_logs

    quiet_logs()
    started: Counter[str] = Counter()
    library = os.environ.get(_clock_threads.LIBRARY_ENV)
    if library:
        _clock_threads.install(Path(library), started)
    work = SHAPES[shape]
    work(max(2, n // 10))  # uncounted below only in the difference: paid in both processes
    work(n)
    print(_STARTED_MARK + msgspec.json.encode(started).decode(), file=sys.stderr)


def _environment(seed: int) -> dict[str, str]:
    """The hash seed fixed; bytecode written (``PYTHONDONTWRITEBYTECODE`` dropped), so that the
    native run before the pair compiles the package once and both counted runs read it: else
    whichever of the two ran first might write what the other reads (an asymmetry the
    difference would count as per-unit work), or both compile ~1.9G instructions each."""
    env = {**os.environ, "PYTHONHASHSEED": str(seed)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _child_command(shape: str, n: int) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--child", shape, "--n", str(n)]


COLLECTOR = "gc_collect_main"
"""CPython's cyclic collector, every pass of it (young, middle, full): its inclusive cost."""


def collector_cost(lines: Iterable[str]) -> int:
    """The instructions run inside the cyclic collector (``COLLECTOR``, inclusive: its walks and
    what it frees; not the ``gc.callbacks``, which CPython 3.11 runs around it: the GC
    pacing's freeze and thaw), every thread's, from a callgrind output file
    (``_clock_threads.callee_costs``). Every thread's: a pass made on a thread a clock wakes
    is in its role's cost too, left out of ``per_unit`` already: ``per_unit - collector``
    takes it off twice (read ``all_threads - collector``: the module's docstring)."""
    return _clock_threads.callee_costs(lines, _is_collector)[COLLECTOR]


def _is_collector(name: str) -> str | None:
    return COLLECTOR if name == COLLECTOR else None


class Count(msgspec.Struct, frozen=True):
    """One counted run: every thread's instructions, those of each role's threads (empty: not
    split), the threads started by role (``work``: the others), and the instructions inside
    the cyclic collector (``collector_cost``)."""

    total: int
    roles: dict[str, int]
    started: dict[str, int]
    collector: int = 0

    @property
    def counted(self) -> int:
        """The figure's part: every thread but those a clock wakes (``ROLES``)."""
        return self.total - sum(self.roles.values())


def _instructions(shape: str, n: int, seed: int, folder: Path, library: Path | None) -> Count:
    out = folder / f"callgrind.{shape}.{n}"
    command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
    command += ["--dump-line=no", "--compress-pos=no"]
    env = _environment(seed)
    if library is not None:
        env[_clock_threads.LIBRARY_ENV] = str(library)
    done = subprocess.run(
        command + _child_command(shape, n), capture_output=True, text=True, env=env, check=False
    )
    found = _REFS.findall(done.stderr)
    if done.returncode != 0 or not found:
        raise RuntimeError(f"callgrind run of {shape} (n={n}) failed: {done.stderr[-1500:]}")
    roles: dict[str, int] = {}
    if library is not None:
        with out.open() as lines:
            roles = _clock_threads.clock_costs(lines)
    collector = 0
    if out.exists():
        with out.open() as lines:
            collector = collector_cost(lines)
    out.unlink(missing_ok=True)
    marks = _STARTED.findall(done.stderr)
    started = msgspec.json.decode(marks[-1], type=dict[str, int]) if marks else {}
    return Count(int(found[-1].replace(",", "")), roles, started, collector)


class Figure(msgspec.Struct, frozen=True):
    """Per unit (a run of 2n less a run of n, over n): ``per_unit`` the judge's figure (every
    thread but the clock's), ``all_threads`` every thread (the figure before session 20),
    ``roles`` each role's threads (left out of ``per_unit``), ``threads_started`` threads
    started per unit by role; ``split`` empty, or why the roles are not split;
    ``collector`` the cyclic collector's share of ``all_threads`` (``collector_cost``: not
    left out; printed beside, for shapes whose live objects grow with n, where which pass
    the collector makes when moves the figure by itself)."""

    per_unit: float
    all_threads: float
    roles: dict[str, float]
    threads_started: dict[str, float]
    split: str
    collector: float = 0.0


def figure(shape: str, n: int, seed: int) -> Figure:
    """Count ``shape`` at n and 2n units, and take the difference over n."""
    subprocess.run(  # natively, uncounted: the bytecode both counted runs read
        _child_command(shape, 2), capture_output=True, env=_environment(seed), check=False
    )
    with tempfile.TemporaryDirectory(prefix="judge-") as name:
        folder = Path(name)
        library, why_not = _clock_threads.build(folder)
        long, short = (_instructions(shape, k, seed, folder, library) for k in (2 * n, n))

    def per(key: str, of: dict[str, int], minus: dict[str, int]) -> float:
        return (of.get(key, 0) - minus.get(key, 0)) / n

    return Figure(
        per_unit=(long.counted - short.counted) / n,
        all_threads=(long.total - short.total) / n,
        roles={role: per(role, long.roles, short.roles) for role in long.roles},
        threads_started={k: per(k, long.started, short.started) for k in long.started},
        split=why_not,
        collector=(long.collector - short.collector) / n,
    )


def per_unit(shape: str, n: int, seed: int) -> float:
    """Instructions per unit of ``shape``, the threads a clock wakes left out (``figure``)."""
    return figure(shape, n, seed).per_unit


def compare(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two judge outputs (A, then B) side by side, per shape in both: ``per_unit``,
    ``all_threads`` and ``left_out`` (the roles' sum) as ``[A, B]``, and a ``flag`` where
    B's ``per_unit`` cut may be work moved out of view, not work removed: onto a thread the
    figure leaves out (the timer's runs every callback and takes in every arm and cancel),
    or a thread started per unit with a clock's name. Flagged: the roles not split alike
    (``split``, or other roles), a role's threads started per unit changed, or the left-out
    work grew by half of what ``per_unit`` fell or more. Under load the left-out work grows
    by itself (the lingers' wake-ups), so a flag asks for the pair again with a core of its
    own (``nice -n -15``, ``benchmarks/README.md``, "the judge"), not for a verdict."""
    out: dict[str, Any] = {}
    for shape in [name for name in a if name in b and isinstance(a[name], dict)]:
        old, new = a[shape], b[shape]
        left_out = [sum(old.get("roles", {}).values()), sum(new.get("roles", {}).values())]
        why = []
        if set(old.get("roles", {})) != set(new.get("roles", {})) or "split" in {**old, **new}:
            why.append("the roles are not split alike, or not at all: compare all_threads")
        started = [old.get("threads_started", {}), new.get("threads_started", {})]
        for role in sorted((set(started[0]) | set(started[1])) - {"work"}):
            if started[0].get(role, 0) != started[1].get(role, 0):
                why.append(f"{role} threads started per unit changed")
        cut = old["per_unit"] - new["per_unit"]
        grew = left_out[1] - left_out[0]
        if cut > 0 and grew >= cut / 2:
            why.append(f"per_unit fell {cut:.0f} and the left-out work grew {grew:.0f}")
        out[shape] = {
            "per_unit": [old["per_unit"], new["per_unit"]],
            "all_threads": [old.get("all_threads"), new.get("all_threads")],
            "left_out": left_out,
            "collector": [old.get("collector"), new.get("collector")],
            "flag": "; ".join(why),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", choices=sorted(SHAPES), default=["pingpong"])
    parser.add_argument("--n", type=int, default=2000, help="units of the shorter run")
    parser.add_argument("--seed", type=int, default=0, help="PYTHONHASHSEED of both runs")
    parser.add_argument("--child", choices=sorted(SHAPES), help=argparse.SUPPRESS)
    parser.add_argument(
        "--compare", nargs=2, metavar=("A", "B"), help="two outputs: side by side, flagged"
    )
    args = parser.parse_args()
    if args.compare:
        a, b = (msgspec.json.decode(Path(name).read_bytes()) for name in args.compare)
        print(msgspec.json.encode(compare(a, b)).decode())
        return
    if args.child:
        _child(args.child, args.n)
        return
    out: dict[str, Any] = {}
    for shape in args.shapes:
        got = figure(shape, args.n, args.seed)
        out[shape] = {
            "per_unit": round(got.per_unit),
            "n": args.n,
            "all_threads": round(got.all_threads),
            "roles": {role: round(count) for role, count in got.roles.items()},
            "threads_started": {role: round(k, 3) for role, k in got.threads_started.items()},
            "collector": round(got.collector),
        }
        if got.split:
            out[shape]["split"] = got.split
    out["seed"] = args.seed
    print(msgspec.json.encode(out).decode())


if __name__ == "__main__":
    main()
