"""pg_prepare: what psycopg's prepared statements save the PostgreSQL store (session 26).

A failed pipeline left psycopg believing in a statement the server never prepared (every
``COMMIT`` after it failed: tests/store/test_store_postgres_prepared.py). One cure was to
prepare nothing (``prepare_threshold=None``); the store instead rolls back with psycopg's
``Connection.rollback()``, which forgets them (store/postgres_tx.py), and keeps preparing.
This prices the cure not taken: the same writes (store_write.py's records: ``save_run`` +
``append_event``, one commit each and in batches of 100) on a connection that prepares
(psycopg's default, threshold 5) and on one that does not, alternated so that the
machine's load hits both alike. Measured as CPU, not time: the client's (this process,
``time.process_time``) and the server's (the connection's backend process, from
``/proc/PID/stat``, in clock ticks of 10 ms: give ``--n`` in thousands), in microseconds
per record; the server runs on this machine (tests/pgserver.py's, started here).

    python benchmarks/pg_prepare.py [--n 2000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

from store_postgres import throwaway_server
from store_write import records, write
from subagents.store.postgres import PostgresStore

_TICK_US = 1e6 / os.sysconf("SC_CLK_TCK")


def _backend_cpu_us(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * _TICK_US  # utime + stime


def _once(
    url: str, threshold: int | None, n: int, batch: int | None, tag: str
) -> tuple[float, float]:
    store = PostgresStore(url)
    try:
        conn = store._tx.connection()  # the store's one connection (benchmark only)
        conn.prepare_threshold = threshold
        (pid,) = conn.execute("SELECT pg_backend_pid()").fetchone() or (0,)
        if pid <= 0:
            raise SystemExit("pg_prepare: no backend pid")
        items = records(n, tag)
        server0, client0 = _backend_cpu_us(pid), time.process_time()
        write(store, items, batch)
        client = (time.process_time() - client0) * 1e6 / n
        return client, (_backend_cpu_us(pid) - server0) / n
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    out: dict[str, Any] = {"n": args.n, "rounds": args.rounds, "load": os.getloadavg()[0]}
    with throwaway_server() as database:
        for batch, label in ((None, "one_commit_each"), (100, "batches_of_100")):
            seen: dict[str, list[tuple[float, float]]] = {"prepared": [], "unprepared": []}
            for r in range(args.rounds):
                for name, threshold in (("prepared", 5), ("unprepared", None)):
                    seen[name].append(_once(database(), threshold, args.n, batch, f"{name}{r}-"))
            out[label] = {
                name: {
                    "client_us_per_record": round(statistics.median(c for c, _ in v), 1),
                    "server_us_per_record": round(statistics.median(s for _, s in v), 1),
                }
                for name, v in seen.items()
            }
    print(out)


if __name__ == "__main__":
    main()
