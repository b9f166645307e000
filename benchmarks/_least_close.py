"""_least_close: the least closing n waiting runs of this design must do.

The floor of ``scale.py``'s close row (labelled ``least_close`` in its JSON), measured on
``_least_waiting.py``'s runs in the runtime side's process after the runtime closed: the
same n, every run waiting (an agent actor on the dispatcher, its coroutine parked). Timed:
one ask to the serial "supervisor" thread, which ends every run in one pass (its record
replaced by an ended one, as the store keeps records; one end and one end event kept per
run, small structs in lists, as the store keeps a run's outcome and its ``cancelled`` event;
a stop message told to its actor) and answers once; then the dispatcher closed,
as the runtime's close closes it: its threads end once every stop in line was handled (each
actor's ``on_stop`` closes its coroutine). The close ends when the dispatcher has closed.

Left out, as a close of any design of this kind need not pay them per run: no event
published (kept only), no caller's waiter told, no store transaction, no dead letters, no
subscriptions, no deadline or timer. So the runtime's close over this is the cost of
those and of how it does the rest; if this alone were over the goal, the goal would need
another design (no actor per run to stop).
"""

from __future__ import annotations

import queue
import time
from typing import Any

from _least_waiting import _LeastSupervisor
from subagents.actors.pooled import Dispatcher


def least_close(
    supervisor: _LeastSupervisor, dispatcher: Dispatcher, n: int, timeout: float
) -> dict[str, Any]:
    """Close ``n`` waiting least runs of ``supervisor`` (``least_waiting(close=...)``):
    seconds and CPU seconds of the process until the dispatcher has closed."""
    reply: queue.SimpleQueue[int] = queue.SimpleQueue()
    cpu, started = time.process_time(), time.perf_counter()
    supervisor.inbox.put(("close", reply))
    ended = reply.get(timeout=timeout)
    alive = dispatcher.close(timeout)
    seconds, cpu_s = time.perf_counter() - started, time.process_time() - cpu
    if ended != n or alive:
        raise RuntimeError(f"the least close ended {ended} of {n}; threads alive: {alive}")
    return {
        "what": "the least closing of waiting runs does (benchmarks/_least_close.py)",
        "n": n,
        "close_s": round(seconds, 3),
        "close_cpu_s": round(cpu_s, 3),
        "cpu_us_per_run": round(cpu_s / n * 1e6, 1),
    }
