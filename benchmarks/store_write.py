"""store_write: records per second for save_run + append_event, SQLite vs MemoryStore.

One record = one ``save_run`` and one ``append_event`` (what a run's transition costs the
supervisor). Measured without batching (each write its own transaction: two commits per
record) and with group commit (``batch()`` around 100 records), on a fresh SQLite file and on
MemoryStore in the same run. The median of several rounds is reported. Prints one JSON object.

    python benchmarks/store_write.py [--quick] [--records N]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _common import emit, median, parse_args, quiet_logs, ratio, settle
from subagents.messages import Event, EventKind, RunRecord, RunStatus
from subagents.store.base import RunStore
from subagents.store.memory import MemoryStore
from subagents.store.sqlite import SQLiteStore

BATCH = 100
ROUNDS = 3


def records(n: int, prefix: str) -> list[tuple[RunRecord, Event]]:
    out = []
    for i in range(n):
        run_id = f"{prefix}{i:07d}"
        record = RunRecord(
            run_id=run_id,
            agent="worker",
            task="summarise the file and report the three main risks",
            root_run_id=f"{prefix}root",
            parent_run_id=f"{prefix}root",
            depth=1,
            status=RunStatus.RUNNING,
            created_at=1_700_000_000.0 + i,
        )
        event = Event(
            kind=EventKind.STARTED,
            run_id=run_id,
            agent="worker",
            root_run_id=f"{prefix}root",
            data={"step": i},
        )
        out.append((record, event))
    return out


def write(store: RunStore, items: list[tuple[RunRecord, Event]], batch: int | None) -> float:
    """Records per second writing ``items`` into ``store``."""
    start = time.perf_counter()
    if batch is None:
        for record, event in items:
            store.save_run(record)
            store.append_event(event)
    else:
        for lo in range(0, len(items), batch):
            with store.batch():
                for record, event in items[lo : lo + batch]:
                    store.save_run(record)
                    store.append_event(event)
    return len(items) / (time.perf_counter() - start)


def measure(make: Callable[[], RunStore], n: int, batch: int | None, rounds: int) -> float:
    rates = []
    for r in range(rounds):
        store = make()
        try:
            rates.append(write(store, records(n, f"r{r}-"), batch))
        finally:
            store.close()
        settle()
    return median(rates)


def main() -> None:
    def extra(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--records", type=int, default=5000, help="records per round")

    args = parse_args(__doc__.splitlines()[0], extra)
    quiet_logs()
    n = 100 if args.quick else args.records
    rounds = 1 if args.quick else ROUNDS
    figures: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        files = iter(range(1_000_000))
        stores: dict[str, Callable[[], RunStore]] = {
            "sqlite": lambda: SQLiteStore(Path(tmp) / f"bench{next(files)}.sqlite3"),
            "memory": MemoryStore,
        }
        rates: dict[str, float] = {}
        for name, make in stores.items():
            for mode, batch in (("unbatched", None), ("batched", BATCH)):
                rates[f"{name}_{mode}"] = measure(make, n, batch, rounds)
                figures[f"{name}_{mode}_records_per_s"] = round(rates[f"{name}_{mode}"])
    figures["sqlite_batching_speedup"] = ratio(rates["sqlite_batched"], rates["sqlite_unbatched"])
    figures["sqlite_batched_vs_memory"] = ratio(rates["sqlite_batched"], rates["memory_batched"])
    emit(
        "store_write",
        {
            "figures": figures,
            "baseline": "MemoryStore, same run",
            "target": None,
            "ratio": figures["sqlite_batched_vs_memory"],
            "pass": None,
            "sizes": {
                "records": n,
                "rounds": rounds,
                "record": "save_run + append_event",
                "batch_size": BATCH,
            },
        },
    )


if __name__ == "__main__":
    main()
