"""Instructions per unit of work (a mail, a run, an LLM run), counted by valgrind's callgrind:
the judge of a cut when the machine is loaded.

Calls counted by a profile hook are load-independent but are not CPU (session 18 cut 30 calls
per mail and the CPU per mail did not move: the calls removed were cheap builtins); CPU time
is CPU but moves with the machine's load (shared caches, frequency, other processes).
Instructions executed in user space are both, on a quiet machine: what the work costs.
Not under heavy load: threads that wake by the clock (the dispatcher's watch every 50 ms, the
timer, the log's checkpoints) do work per second of wall time, and valgrind's wall time
stretches with the load, so a count taken at load 25-34 moved by -8% to +20% between two
pairs of the same trees (e-spawn11, session 19): take the judge's pairs quiet (load < 2),
the two trees side by side. Each
shape runs in a fresh process under ``valgrind --tool=callgrind`` twice, ``n`` and ``2n``
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

JSON out: ``{shape: {"per_unit": instructions, "n": n, "seed": seed}}``. Needs valgrind
(``apt-get install valgrind``); about 20 s of a quiet core for the imports of each process,
plus ~3 ms of a core per mail.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

import msgspec

HERE = Path(__file__).resolve().parent
_REFS = re.compile(r"(?:I\s+refs|Collected)\s*:\s*([\d,]+)")


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


SHAPES: dict[str, Callable[[int], None]] = {
    "pingpong": _pingpong("memory"),
    "pingpong_sqlite": _pingpong("sqlite"),
    "raw_ask": _raw_ask,
    "spawn": _spawn,
    "raw_spawn": _raw_spawn,
    "llm_run": _llm_run,
    "waiting_spawn": _waiting("one"),
    "waiting_many": _waiting("many"),
}


def _child(shape: str, n: int) -> None:
    sys.path.insert(0, str(HERE))
    from _common import quiet_logs

    quiet_logs()
    work = SHAPES[shape]
    work(max(2, n // 10))  # uncounted below only in the difference: paid in both processes
    work(n)


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


def _instructions(shape: str, n: int, seed: int) -> int:
    command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
    command += _child_command(shape, n)
    done = subprocess.run(
        command, capture_output=True, text=True, env=_environment(seed), check=False
    )
    found = _REFS.findall(done.stderr)
    if done.returncode != 0 or not found:
        raise RuntimeError(f"callgrind run of {shape} (n={n}) failed: {done.stderr[-1500:]}")
    return int(found[-1].replace(",", ""))


def per_unit(shape: str, n: int, seed: int) -> float:
    """Instructions per unit of ``shape``: a run of 2n less a run of n, over n."""
    subprocess.run(  # natively, uncounted: the bytecode both counted runs read
        _child_command(shape, 2), capture_output=True, env=_environment(seed), check=False
    )
    return (_instructions(shape, 2 * n, seed) - _instructions(shape, n, seed)) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", choices=sorted(SHAPES), default=["pingpong"])
    parser.add_argument("--n", type=int, default=2000, help="units of the shorter run")
    parser.add_argument("--seed", type=int, default=0, help="PYTHONHASHSEED of both runs")
    parser.add_argument("--child", choices=sorted(SHAPES), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.n)
        return
    out = {
        shape: {"per_unit": round(per_unit(shape, args.n, args.seed)), "n": args.n}
        for shape in args.shapes
    }
    out["seed"] = args.seed  # type: ignore[assignment]
    print(msgspec.json.encode(out).decode())


if __name__ == "__main__":
    main()
