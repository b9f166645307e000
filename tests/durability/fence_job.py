"""A host for test_fencing: runs of a function agent that wait for a gate file, on a SQLite
store (or a PostgreSQL one: DB a postgresql:// URL) with a short lease. The test stops this
process (SIGSTOP) past its lease, has another runtime take the runs over and finish them,
then lets it go on (SIGCONT).

Each run, once past the gate, touches GATE.PID.TASK. Usage: fence_job.py DB GATE N [LEASE_S
[HOLD]] (the lease, 1 s unless given; test_lease_clock's host renews it while it waits).
Prints "ready" once its N runs have started, then each run's outcome (status, error) as one
JSON line once they have all ended here.

HOLD, a file: while it exists, the answer of each of the lease keeper's renewals is held
from the keeper until this host's runs have all ended. A keeper thread that wakes after the
others (descheduled, swapped out) hears nothing until then, so that only the fence in the
supervisor's write transactions (``store.fencing``) can keep their ends out of the store.
The answer is held, not the renewal: one under way when the test stopped the process comes
back held too.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
import time
from pathlib import Path

import msgspec

from subagents import FunctionAgent, Runtime, ScriptedModel, SQLiteStore
from subagents.behaviour.function import AgentContext
from subagents.logs import configure
from subagents.messages import Lease
from subagents.store.base import RunStore
from subagents.store.opening import open_location

HANG_GUARD_S = 120.0


def gated_agent(gate: Path) -> FunctionAgent:
    def gated(ctx: AgentContext) -> str:
        until = time.monotonic() + HANG_GUARD_S
        while not gate.exists():
            if time.monotonic() > until:
                raise TimeoutError(f"{gate} never appeared")
            time.sleep(0.005)
        Path(f"{gate}.{os.getpid()}.{ctx.task}").touch()  # says which process got past it
        return f"done {ctx.task}"

    return FunctionAgent.create("gated", gated)


def held_renewals(store: RunStore, hold: Path, released: threading.Event) -> None:
    """``store``'s lease renewals answer their keeper only once ``released`` is set, while
    ``hold`` exists (see the module docstring)."""
    renew = store.renew_lease

    def renew_held(lease: Lease) -> bool:
        held = renew(lease)
        until = time.monotonic() + HANG_GUARD_S
        while hold.exists() and not released.wait(0.005) and time.monotonic() < until:
            pass
        return held

    store.renew_lease = renew_held  # type: ignore[method-assign]


def main(db: str, gate: str, n: int, lease_s: float = 1.0, hold: str | None = None) -> None:
    configure(level="warning", stream=sys.stderr)
    faulthandler.register(signal.SIGUSR1)  # a hang shows its threads
    started: set[str] = set()
    all_started = threading.Event()

    def on_event(event: object) -> None:
        if getattr(event, "kind", None) == "started":
            started.add(getattr(event, "run_id", ""))
            if len(started) >= n:
                all_started.set()

    store: RunStore = (  # the test may hold the write lock
        open_location(db)
        if db.startswith("postgresql://")
        else SQLiteStore(db, busy_timeout=HANG_GUARD_S)
    )
    released = threading.Event()
    if hold is not None:
        held_renewals(store, Path(hold), released)
    rt = Runtime([gated_agent(Path(gate))], model=ScriptedModel(), store=store, lease_s=lease_s)
    rt.subscribe(on_event)
    handles = [rt.spawn("gated", f"t{i}") for i in range(n)]
    assert all_started.wait(HANG_GUARD_S), "the runs never started"
    print("ready", flush=True)
    outcomes = [h.result(timeout=HANG_GUARD_S) for h in handles]
    released.set()
    rt.close()
    print(msgspec.json.encode([(str(o.status), o.error) for o in outcomes]).decode(), flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    lease = float(args[3]) if len(args) > 3 else 1.0
    main(args[0], args[1], int(args[2]), lease, args[4] if len(args) > 4 else None)
