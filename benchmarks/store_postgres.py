"""store_postgres: the runtime on PostgreSQL beside SQLite, in the same run.

Five figures, each for a SQLite file and a PostgreSQL database (and, where it means
anything, MemoryStore), interleaved so that the machine's load hits them alike:

Two PostgreSQL contenders: ``postgres`` (the server's defaults: a commit waits for the WAL's
flush to disk, more than SQLite's ``synchronous=NORMAL`` promises) and ``postgres_async``
(``synchronous_commit=off`` set in the URL: about SQLite's promise, ``ASYNC``).

- ``records``: records/s of ``save_run`` + ``append_event``, one commit each and in batches
  of 100 (store_write.py's measure);
- ``pingpong``: per-mail ping-pong through the runtime (mail.py's shape: every mail its own
  step, committed before it is acknowledged);
- ``spawn``: ``rt.run()`` of a trivial function agent, one after another: p50 (spawn.py's);
- ``live``: 10,000 live runs waiting for mail (``spawn_many`` in batches of 1,000): seconds
  until all wait, then seconds to close the runtime (which cancels them all);
- ``command``: a mail posted by another process (``post_command``) until the waiting run has
  it: SQLite's runtime finds it at its next poll (``command_poll_s`` 0.5 s), PostgreSQL's is
  told at once (``LISTEN``/``NOTIFY``, store/postgres_listen.py); p50 of 20.

The database is a throwaway PostgreSQL server started by this script (tests/pgserver.py's,
as the postgres user when run as root), with the server's own defaults (``fsync`` on);
``--url`` measures an existing database instead
(its schema ``subagents`` is created if missing). Prints one JSON object.

    python benchmarks/store_postgres.py [--quick] [--url postgresql://...]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from _common import emit, parse_args, quiet_logs, rounded, settle
from mail import runtime_rate
from spawn import _Sample, runtime_block, trivial
from store_write import records, write
from subagents.behaviour.function import AgentContext
from subagents.messages import Event, EventKind
from subagents.runtime import Runtime
from subagents.store.base import RunStore
from subagents.store.sqlite import SQLiteStore
from subagents.supervision.limits import Limits

TESTS = Path(__file__).resolve().parents[1] / "tests"
KINDS = ("sqlite", "postgres", "postgres_async")
ASYNC = "options=-c%20synchronous_commit%3Doff"
"""``synchronous_commit=off`` for the connection, from its URL: a commit returns before the
WAL is flushed (the server flushes within 3 x 200 ms); the runtime's death loses nothing,
the server's (or the machine's) may lose the last commits: about SQLite's promise."""
WAIT = 300.0


@contextlib.contextmanager
def throwaway_server() -> Iterator[Callable[[], str]]:
    """A PostgreSQL server of this run (the tests' starter, with the server's defaults):
    yields a function giving a fresh database's URL."""
    sys.path.insert(0, str(TESTS))
    from pgserver import PgServer, _binaries, _free_port, unavailable

    why = unavailable()
    if why is not None:
        raise SystemExit(f"store_postgres: {why}")
    bindir = _binaries()
    assert bindir is not None
    root = Path(tempfile.mkdtemp(prefix="subagents-bench-pg-"))
    root.chmod(0o755)
    server = PgServer(bindir=bindir, root=root, port=_free_port(), durable=True)
    server.init()
    server.start()
    try:
        yield server.new_database
    finally:
        with contextlib.suppress(RuntimeError):
            server.stop("immediate")
        import shutil

        shutil.rmtree(root, ignore_errors=True)


class Stores:
    """A fresh store of each kind, per measurement."""

    def __init__(self, folder: Path, database: Callable[[], str]) -> None:
        self.folder, self.database, self.count = folder, database, 0

    def __call__(self, kind: str) -> RunStore:
        self.count += 1
        if kind == "sqlite":
            return SQLiteStore(self.folder / f"s{self.count}.db")
        from subagents.store.postgres import PostgresStore

        url = self.database()
        if kind == "postgres_async":  # libpq's URL option: no wait for the WAL's flush
            url += ("&" if "?" in url else "?") + ASYNC
        return PostgresStore(url)


def measure_records(stores: Stores, n: int, rounds: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for batch, label in ((None, "one_commit_each"), (100, "batches_of_100")):
        rates: dict[str, list[float]] = {k: [] for k in KINDS}
        for r in range(rounds):
            for kind in rates:
                store = stores(kind)
                rates[kind].append(write(store, records(n, f"{kind}{r}-"), batch))
                store.close()
        out[label] = {k: round(statistics.median(v)) for k, v in rates.items()}
    return out


def measure_pingpong(stores: Stores, n: int, rounds: int) -> dict[str, Any]:
    rates: dict[str, list[float]] = {k: [] for k in KINDS}
    for _ in range(rounds):
        for kind in rates:
            settle()
            rates[kind].append(runtime_rate("pingpong", stores(kind), n).per_s)
    return {k: round(statistics.median(v)) for k, v in rates.items()} | {"unit": "mails/s"}


def measure_spawn(stores: Stores, n: int, rounds: int) -> dict[str, Any]:
    samples = {k: _Sample() for k in KINDS}
    runtimes = {k: Runtime({"trivial": trivial}, store=stores(k)) for k in samples}
    try:
        for _ in range(rounds):
            for kind, rt in runtimes.items():
                runtime_block(rt, n, samples[kind])
    finally:
        for rt in runtimes.values():
            rt.close()
            rt.store.close()
    return {k: s.summary() for k, s in samples.items()}


def measure_live(stores: Stores, n: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind in KINDS:
        settle()
        out[kind] = _live(stores(kind), n)
    return out


def _live(store: RunStore, n: int) -> dict[str, Any]:
    async def idle(ctx: AgentContext) -> str:
        mail = await ctx.receive(timeout=3000)
        return "mail" if mail is not None else "no mail"

    waiting = threading.Semaphore(0)

    def on_event(event: Event) -> None:
        if event.kind == EventKind.WAITING:
            waiting.release()

    limits = Limits(max_concurrency=n, per_agent=n, queue_bound=n, timeout_s=3000.0)
    rt = Runtime([idle], store=store, limits=limits)
    rt.subscribe(on_event)
    start = time.perf_counter()
    for lo in range(0, n, 1000):
        for item in rt.spawn_many([("idle", str(i)) for i in range(lo, min(n, lo + 1000))]):
            if isinstance(item, Exception):
                raise item
    for _ in range(n):
        if not waiting.acquire(timeout=WAIT):
            raise RuntimeError("the live runs did not all come to wait")
    started = time.perf_counter() - start
    start = time.perf_counter()
    rt.close(timeout=WAIT)
    closed = time.perf_counter() - start
    store.close()
    return {"runs": n, "started_s": rounded(started), "closed_s": rounded(closed)}


def measure_command(stores: Stores, sends: int) -> dict[str, Any]:
    """A mail posted from another store until the waiting run has it (ms)."""
    out: dict[str, Any] = {}
    for kind in ("sqlite", "postgres"):
        out[kind] = _command_latency(stores, kind, sends)
    return out


def _command_latency(stores: Stores, kind: str, sends: int) -> dict[str, Any]:
    heard = threading.Semaphore(0)

    async def listener(ctx: AgentContext) -> str:
        for _ in range(sends):
            await ctx.receive(timeout=600)
            heard.release()
        return "done"

    waiting = threading.Event()
    store = stores(kind)
    rt = Runtime({"listener": listener}, store=store, command_poll_s=0.5)
    rt.subscribe(lambda e: waiting.set() if e.kind == EventKind.WAITING else None)
    handle = rt.spawn("listener", "x")
    if not waiting.wait(WAIT):
        raise RuntimeError("the listener never waited")
    poster = SQLiteStore(store.path) if kind == "sqlite" else type(store)(store.url)  # type: ignore
    latencies = []
    for i in range(sends):
        time.sleep(0.05)  # the run is back at its receive (not part of the figure)
        start = time.perf_counter()
        poster.post_command("send", handle.run_id, f"mail {i}")
        if not heard.acquire(timeout=WAIT):
            raise RuntimeError("a posted mail never arrived")
        latencies.append(time.perf_counter() - start)
    poster.close()
    handle.result(timeout=WAIT)
    rt.close()
    store.close()
    return {
        "p50_ms": rounded(statistics.median(latencies) * 1e3),
        "max_ms": rounded(max(latencies) * 1e3),
        "how": "poll every 0.5 s" if kind == "sqlite" else "LISTEN/NOTIFY (poll 0.5 s kept)",
    }


def _extra(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default=None, help="an existing PostgreSQL database")
    parser.add_argument("--live", type=int, default=10_000, help="live runs (default 10,000)")


def main() -> None:
    args = parse_args(__doc__ or "", _extra)
    quiet_logs()
    quick = args.quick
    with contextlib.ExitStack() as stack:
        if args.url is not None:
            database: Callable[[], str] = lambda: args.url  # noqa: E731
        else:
            database = stack.enter_context(throwaway_server())
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        stores = Stores(folder, database)
        figures = {
            "records": measure_records(stores, 200 if quick else 2000, 1 if quick else 3),
            "pingpong": measure_pingpong(stores, 40 if quick else 1000, 1 if quick else 3),
            "spawn": measure_spawn(stores, 20 if quick else 200, 1 if quick else 3),
            "live": measure_live(stores, 200 if quick else args.live),
            "command": measure_command(stores, 3 if quick else 20),
        }
    pingpong = figures["pingpong"]
    result = {
        "figures": figures,
        "baseline": "SQLite (a file, synchronous=NORMAL), same run",
        "target": None,
        "ratio": {
            "pingpong_postgres_vs_sqlite": rounded(pingpong["postgres"] / pingpong["sqlite"]),
            "pingpong_postgres_async_vs_sqlite": rounded(
                pingpong["postgres_async"] / pingpong["sqlite"]
            ),
        },
        "pass": None,
        "postgres_server": "throwaway, defaults (fsync on)" if args.url is None else "--url",
    }
    emit("store_postgres", result)


if __name__ == "__main__":
    main()
