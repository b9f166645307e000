"""peer: the mail and fan-out benchmarks on autogen-core's SingleThreadedAgentRuntime.

autogen-core (the optional ``bench`` extra: ``pip install -e '.[bench]'``) runs agents as
asyncio handlers on one event loop, with no persistence. The same shapes as ``mail.py`` and
``fanout.py``, measured here in the same process as this runtime (MemoryStore and SQLite):

- ``pingpong``: one agent ``send_message``s the other and awaits its answer, n / 2 rounds
  (2 messages per round);
- ``stream``: one agent ``publish_message``s n messages to the other without waiting;
- ``fanout``: 1,000 agents, each awaiting a 50 ms ``asyncio.sleep`` (the simulated model call),
  at most 100 at once (an ``asyncio.Semaphore`` in the parent).

Ratios are this runtime / autogen-core: above 1 means this runtime is faster (for makespans the
ratio is autogen's makespan / ours, so above 1 still means faster). There is no target: the
peer is a reference point.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import fanout
import mail
from _common import emit, median, parse_args, quiet_logs, ratio, rounded, settle
from subagents.store.memory import MemoryStore
from subagents.store.sqlite import SQLiteStore


def _autogen_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("autogen-core")
    except Exception:
        return None


# ---- this runtime ----------------------------------------------------------------------------


def _ours(kind: str, folder: Path, shape: str, n: int, index: int) -> float:
    store = MemoryStore() if kind == "memory" else SQLiteStore(folder / f"peer-{index}.db")
    return mail.runtime_rate(shape, store, n)


def _extra(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n", type=int, default=None, help="messages per trial")
    parser.add_argument("--repeats", type=int, default=None)


def main() -> None:
    args = parse_args(__doc__ or "", _extra)
    quiet_logs()
    n = args.n or (200 if args.quick else 3000)
    repeats = args.repeats or (1 if args.quick else 3)
    children, limit, delay = (100, 20, 0.01) if args.quick else (1000, 100, 0.05)
    version = _autogen_version()
    if version is None:
        emit(
            "peer",
            {
                "available": False,
                "reason": "autogen-core is not installed (pip install -e '.[bench]')",
                "figures": {},
                "baseline": "autogen-core SingleThreadedAgentRuntime",
                "target": None,
                "ratio": None,
                "pass": None,
            },
        )
        return
    from _autogen_peer import measure

    peer_runs = [measure(n // 2, n, children, limit, delay) for _ in range(repeats)]
    peer = {key: median([run[key] for run in peer_runs]) for key in peer_runs[0]}
    settle()
    ours: dict[str, Any] = {}
    index = 0
    with tempfile.TemporaryDirectory(prefix="subagents-bench-") as tmp:
        for shape in ("pingpong", "stream"):
            for kind in ("memory", "sqlite"):
                rates = []
                for _ in range(repeats):
                    index += 1
                    rates.append(_ours(kind, Path(tmp), shape, n, index))
                    settle()
                ours[f"{shape}_{kind}"] = median(rates)
    makespans = []
    for _ in range(repeats):
        makespans.append(fanout.runtime(children, limit, delay))
        settle()
    ours["fanout_s"] = median(makespans)
    ratios = {
        f"{shape}_{kind}": ratio(ours[f"{shape}_{kind}"], peer[shape])
        for shape in ("pingpong", "stream")
        for kind in ("memory", "sqlite")
    }
    ratios["fanout"] = ratio(peer["fanout_s"], ours["fanout_s"])
    emit(
        "peer",
        {
            "available": True,
            "autogen_core": version,
            "figures": {
                "autogen": {
                    "pingpong_msgs_per_s": round(peer["pingpong"]),
                    "stream_msgs_per_s": round(peer["stream"]),
                    "fanout_makespan_s": rounded(peer["fanout_s"]),
                },
                "subagents": {
                    **{f"{k}_msgs_per_s": round(v) for k, v in ours.items() if k != "fanout_s"},
                    "fanout_makespan_s": rounded(ours["fanout_s"]),
                },
            },
            "baseline": "autogen-core SingleThreadedAgentRuntime, same run",
            "target": None,
            "ratio": ratios,
            "pass": None,
            "sizes": {
                "messages": n,
                "fanout": {"children": children, "limit": limit, "delay_s": delay},
                "repeats": repeats,
            },
            "seconds": rounded(time.perf_counter() - START, 2),
        },
    )


START = time.perf_counter()

if __name__ == "__main__":
    main()
