"""owed_reads: how long a recovery owed to the store takes to find the runs the store keeps
ended (``actors.owed.still_owed``), for N runs, in each store.

Why: a recovery's write of unknown fate (``UnsureWrite``) may have been committed; before it
is written again, every run it ended that the store does not list unfinished is read, to
leave out those the store keeps ended. The worst case is the common one after a lost
answer: the write was committed, so all N runs are read. Session 25 read them one
``get_run`` each (on a cluster one call to the head each: a 100,000-run cluster took up to
a minute); session 26 reads a slice of ``READ_SLICE`` ids a statement (``get_runs``).

The same script runs against any checkout's code (it calls ``still_owed`` and the stores
only): the before figure is taken with ``PYTHONPATH=<main>/src``, the after with the
branch's. Each store gets N ended runs (committed in batches), then ``still_owed`` of a
recovery ending them all (``failed_unheld``'s writes for each) is timed, best of
``--repeat``. Stores: ``sqlite`` (a file), ``postgres`` (a throwaway server of this run,
tests/pgserver.py's; skipped where none can start), ``cluster`` (the head's SQLite store
behind a Ray actor on a local one-node Ray; only with ``--cluster``). Prints one JSON
object. Wall-clock times: under load they move; the count of reads (``reads``) does not.

    python benchmarks/owed_reads.py [--n 100000] [--cluster] [--cluster-n 10000]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _common import emit, rounded
from subagents.actors.owed import still_owed
from subagents.messages import RunRecord, RunStatus
from subagents.store.base import RunStore
from subagents.store.sqlite import SQLiteStore
from subagents.store.writes import Write
from subagents.supervision.closing import failed_unheld
from subagents.supervision.effects import Decision

TESTS = Path(__file__).resolve().parent.parent / "tests"


def _record(run_id: str) -> RunRecord:
    return RunRecord(
        run_id=run_id,
        agent="echo",
        task="t",
        root_run_id=run_id,
        status=RunStatus.FAILED,
        ended_at=1.0,
    )


def _fill(store: RunStore, n: int) -> Decision:
    """N runs the store keeps ended, and a recovery ending them all (as written before)."""
    ids = [f"r{i:07d}" for i in range(n)]
    for at in range(0, n, 1000):
        with store.batch():
            for run_id in ids[at : at + 1000]:
                store.save_run(_record(run_id))
    writes: list[Write] = []
    for run_id in ids:
        live = RunRecord(run_id=run_id, agent="echo", task="t", root_run_id=run_id)
        writes += failed_unheld(live, "lost", 2.0)
    return Decision(tuple(ids), writes, [])


class _Counted:
    """``store`` with its reads by id counted (``get_run``, ``get_runs``): the figure load
    does not move."""

    def __init__(self, store: RunStore) -> None:
        self.store, self.reads = store, 0

    def get_run(self, run_id: str) -> RunRecord | None:
        self.reads += 1
        return self.store.get_run(run_id)

    def get_runs(self, run_ids: Any) -> Any:
        self.reads += 1
        return self.store.get_runs(run_ids)


def _measure(store: RunStore, n: int, repeat: int) -> dict[str, Any]:
    decision = _fill(store, n)
    best = float("inf")
    reads = 0
    for _ in range(repeat):
        counted = _Counted(store)
        started = time.perf_counter()
        owed = still_owed(decision, counted, set())  # type: ignore[arg-type]
        best = min(best, time.perf_counter() - started)
        reads = counted.reads
        assert owed.writes == [], "every run is kept ended: nothing is owed"
    return {
        "n": n,
        "best_s": rounded(best),
        "per_run_us": rounded(best / n * 1e6, 2),
        "reads": reads,
    }


@contextlib.contextmanager
def _postgres() -> Iterator[str | None]:
    sys.path.insert(0, str(TESTS))
    from pgserver import PgServer, _binaries, _free_port, unavailable

    if unavailable() is not None:
        yield None
        return
    bindir = _binaries()
    assert bindir is not None
    root = Path(tempfile.mkdtemp(prefix="subagents-bench-owed-"))
    root.chmod(0o755)
    server = PgServer(bindir=bindir, root=root, port=_free_port())
    server.init()
    server.start()
    try:
        yield server.new_database()
    finally:
        with contextlib.suppress(RuntimeError):
            server.stop("immediate")
        import shutil

        shutil.rmtree(root, ignore_errors=True)


def _cluster(folder: Path, n: int, repeat: int) -> dict[str, Any]:
    import ray

    from subagents.cluster.head import head_actor
    from subagents.cluster.remote_store import ClusterStore

    ray.init(num_cpus=1, namespace="subagents-owed", log_to_driver=False, include_dashboard=False)
    try:
        actor = head_actor(name="owed-bench", path=str(folder / "head.sqlite3"))
        store = ClusterStore(actor, name="owed-bench")
        try:
            return _measure(store, n, repeat)
        finally:
            store.close()
            ray.kill(actor)
    finally:
        ray.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cluster", action="store_true")
    parser.add_argument("--cluster-n", type=int, default=10_000)
    args = parser.parse_args()
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="owed-reads-") as tmp:
        folder = Path(tmp)
        sqlite = SQLiteStore(folder / "runs.sqlite3")
        try:
            figures["sqlite"] = _measure(sqlite, args.n, args.repeat)
        finally:
            sqlite.close()
        with _postgres() as url:
            if url is not None:
                from subagents.store.postgres import PostgresStore

                pg = PostgresStore(url)
                try:
                    figures["postgres"] = _measure(pg, args.n, args.repeat)
                finally:
                    pg.close()
        if args.cluster:
            figures["cluster"] = _cluster(folder, args.cluster_n, args.repeat)
    emit("owed_reads", {"figures": figures})


if __name__ == "__main__":
    main()
