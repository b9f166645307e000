"""ray_costs: what Ray costs on this machine, the figures the cluster backend's design rests on.

Measured on a local 2-node cluster (``ray.cluster_utils.Cluster``, a head and a worker with
custom resources, as the tests start it), each figure next to the single-process figure it
replaces where there is one:

- ``import_ray_s``: ``import ray`` in a fresh interpreter (against ``python -c pass``);
- ``cluster_start_s``: the 2-node cluster up, this process joined as a driver; ``cluster_rss_mb``:
  the resident memory of every Ray process then;
- ``driver_join_s``: a fresh interpreter joining the running cluster (what ``subagents ps
  --ray`` pays), and ``ps`` itself on the cluster's store against ``ps --state`` on the file;
- ``actor_start_s`` / ``actor_rss_mb``: one Ray actor (a process) started and answering, and
  its memory: why a subagent is a pykka actor inside a node's host, not a Ray actor;
- ``call_p50_ms``: a call answered by an actor on the same node and on the other node;
- ``mail_per_s``: items sent from an actor on the worker node to one on the head, one per
  call and in batches of 100 (the cross-node mail path's ceiling);
- ``store_records_per_s``: ``save_run`` + ``append_event`` through ``ClusterStore``, one per
  call and in batches of 100, against ``SQLiteStore`` in this process;
- ``host_loss_s``: a node host SIGKILLed until the head reports it lost, and until its
  restarted process has joined again.

No targets: these are costs to design around (docs/cluster.md), not goals. ``--quick``
shrinks every count (the cluster still starts: ~20 s).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import (
    RAY_ENV,
    emit,
    median,
    parse_args,
    percentile,
    quiet_logs,
    ratio,
    rounded,
    stdout_to_stderr,
)


def _fresh(code: str, env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=env, capture_output=True)
    return time.perf_counter() - start


def _rss_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status", encoding="ascii") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def _ray_pids(root: str) -> list[int]:
    """The processes of the cluster under ``root`` (their command lines name its temp dir),
    and the Ray workers (default_worker.py) they started."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().decode(errors="replace")
        except OSError:
            continue
        if root in cmd or "default_worker.py" in cmd or "ray::" in cmd:
            pids.append(int(entry))
    return pids


class Sink:
    def __init__(self) -> None:
        self.count = 0

    def take(self, items: list[Any]) -> int:
        self.count += len(items)
        return self.count

    def ping(self) -> int:
        return os.getpid()


class Pump:
    """On the worker node: sends ``n`` items to a sink, ``per_call`` a call, pipelined."""

    def send(self, sink: Any, n: int, per_call: int) -> float:
        import ray

        item = {"mail_id": "m" * 20, "content": "x" * 100}
        start = time.perf_counter()
        refs = [sink.take.remote([item] * per_call) for _ in range(n // per_call)]
        ray.get(refs)
        return time.perf_counter() - start

    def ping_p50_ms(self, sink: Any, n: int) -> float:
        import ray

        times = []
        for _ in range(n):
            start = time.perf_counter()
            ray.get(sink.ping.remote())
            times.append((time.perf_counter() - start) * 1000)
        return median(times)


def main() -> None:
    args = parse_args(__doc__ or "")
    stdout_to_stderr()  # Ray prints to file descriptor 1: only the JSON may go there
    quiet_logs()
    quick = args.quick
    calls = 50 if quick else 500
    mails = 2_000 if quick else 20_000
    records = 200 if quick else 2_000
    actors = 1 if quick else 3

    root = tempfile.mkdtemp(prefix="sa-rb-", dir="/tmp")
    env = {**os.environ, **RAY_ENV, "RAY_TMPDIR": root}
    os.environ.update({**RAY_ENV, "RAY_TMPDIR": root})
    figures: dict[str, Any] = {}
    baseline: dict[str, Any] = {}
    ratios: dict[str, Any] = {}

    bare = median([_fresh("pass", env) for _ in range(3)])
    figures["import_ray_s"] = rounded(median([_fresh("import ray", env) for _ in range(3)]))
    baseline["python_start_s"] = rounded(bare)

    import ray
    from ray.cluster_utils import Cluster
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    cluster = None
    try:
        start = time.perf_counter()
        cluster = Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": 1,
                "resources": {"head": 1000},
                "temp_dir": f"{root}/ray",
                "include_dashboard": False,
            },
        )
        cluster.add_node(num_cpus=1, resources={"worker": 1000}, temp_dir=f"{root}/ray")
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, namespace="subagents", log_to_driver=False)
        figures["cluster_start_s"] = rounded(time.perf_counter() - start)
        figures["cluster_rss_mb"] = rounded(_rss_mb(_ray_pids(root)), 1)

        join = f"import ray; ray.init(address={cluster.address!r}, log_to_driver=False)"
        figures["driver_join_s"] = rounded(median([_fresh(join, env) for _ in range(2)]))

        nodes = {n["NodeID"]: n["Resources"] for n in ray.nodes() if n["Alive"]}
        head_id = next(k for k, v in nodes.items() if "head" in v)
        worker_id = next(k for k, v in nodes.items() if "worker" in v)

        def on(node: str) -> dict[str, Any]:
            return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node, soft=False)}

        times = []
        started = []
        pids = []
        for _ in range(actors):  # (Ray may hand the first one a worker it had started idle)
            t0 = time.perf_counter()
            actor = ray.remote(Sink).options(num_cpus=0, **on(head_id)).remote()
            pids.append(ray.get(actor.ping.remote()))
            times.append(time.perf_counter() - t0)
            started.append(actor)
        figures["actor_start_s"] = rounded(median(times))
        figures["actor_rss_mb"] = rounded(_rss_mb(pids) / len(pids), 1)

        sink = started[0]
        local = []
        for _ in range(calls):
            t0 = time.perf_counter()
            ray.get(sink.ping.remote())
            local.append((time.perf_counter() - t0) * 1000)
        pump = ray.remote(Pump).options(num_cpus=0, **on(worker_id)).remote()
        figures["call_p50_ms"] = {
            "driver_to_actor_same_node": rounded(median(local)),
            "driver_to_actor_p99": rounded(percentile(local, 99)),
            "actor_to_actor_cross_node": rounded(ray.get(pump.ping_p50_ms.remote(sink, calls))),
        }

        one = ray.get(pump.send.remote(sink, mails // 10, 1))
        batched = ray.get(pump.send.remote(sink, mails, 100))
        figures["mail_per_s"] = {
            "cross_node_one_per_call": round((mails // 10) / one),
            "cross_node_batches_of_100": round(mails / batched),
        }
        ratios["mail_batched_vs_one"] = ratio(mails / batched, (mails // 10) / one)

        figures["store_records_per_s"], baseline["sqlite_records_per_s"] = _store(root, records)
        ratios["store_batched_vs_local_batched"] = ratio(
            figures["store_records_per_s"]["batches_of_100"],
            baseline["sqlite_records_per_s"]["batches_of_100"],
        )
        figures["ps_s"], baseline["ps_local_s"] = _ps(root, cluster.address, env)
        figures["host_loss_s"] = _host_loss(root)
    finally:
        if ray.is_initialized():
            ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
        shutil.rmtree(root, ignore_errors=True)

    emit(
        "ray_costs",
        {
            "figures": figures,
            "baseline": baseline,
            "target": None,
            "ratio": ratios,
            "pass": None,
            "ray": ray.__version__,
        },
    )


def _records(n: int, prefix: str) -> list[tuple[Any, Any]]:
    from subagents.messages import Event, EventKind, RunRecord

    out = []
    for i in range(n):
        run_id = f"{prefix}{i}"
        record = RunRecord(run_id=run_id, agent="worker", task="t", root_run_id=run_id)
        out.append(
            (
                record,
                Event(
                    kind=EventKind.STEP, run_id=run_id, agent="worker", root_run_id=run_id, ts=1.0
                ),
            )
        )
    return out


def _write(store: Any, rows: list[tuple[Any, Any]], per_batch: int) -> float:
    start = time.perf_counter()
    for i in range(0, len(rows), per_batch):
        if per_batch == 1:
            store.save_run(rows[i][0])
            store.append_event(rows[i][1])
            continue
        with store.batch():
            for record, event in rows[i : i + per_batch]:
                store.save_run(record)
                store.append_event(event)
    return time.perf_counter() - start


def _store(root: str, n: int) -> tuple[dict[str, int], dict[str, int]]:
    import ray

    from subagents.cluster.head import head_actor
    from subagents.cluster.remote_store import ClusterStore
    from subagents.store.sqlite import SQLiteStore

    head = head_actor(name="bench-head", path=f"{root}/cluster.sqlite3")
    store = ClusterStore(head, name="bench-head")
    remote = {
        "one_per_call": round(n // 10 / _write(store, _records(n // 10, "a"), 1)),
        "batches_of_100": round(n / _write(store, _records(n, "b"), 100)),
    }
    ray.kill(head)
    local_store = SQLiteStore(Path(root) / "local.sqlite3")
    local = {
        "one_per_call": round(n // 10 / _write(local_store, _records(n // 10, "a"), 1)),
        "batches_of_100": round(n / _write(local_store, _records(n, "b"), 100)),
    }
    local_store.close()
    return remote, local


def _ps(root: str, address: str, env: dict[str, str]) -> tuple[float, float]:
    """`subagents ps --all --json` on the cluster's store, and on the same file locally."""
    import ray

    from subagents.cluster.head import head_actor
    from subagents.cluster.store_service import PROTOCOL

    path = f"{root}/ps.sqlite3"
    head = head_actor(path=path)  # the default name: what `ps --ray` looks for
    ray.get(head.info.remote(PROTOCOL))
    command = [sys.executable, "-m", "subagents.cli.main", "ps", "--all", "--json"]
    timings = []
    for extra in (["--ray", address], ["--state", path]):
        t0 = time.perf_counter()
        subprocess.run([*command, *extra], check=True, env=env, capture_output=True)
        timings.append(rounded(time.perf_counter() - t0))
    ray.kill(head)
    return timings[0], timings[1]


def _host_loss(root: str) -> dict[str, float]:
    import ray

    from subagents.cluster.connect import NAMESPACE
    from subagents.cluster.head import head_actor
    from subagents.cluster.node_host import host_name, start_node_hosts

    head = head_actor(name="loss-head", path=f"{root}/loss.sqlite3")
    hosts = start_node_hosts(head="loss-head")
    while len(ray.get(head.members.remote())) < len(hosts):
        time.sleep(0.05)
    worker = next(n for n in hosts if n != ray.get_runtime_context().get_node_id())
    host = ray.get_actor(host_name("loss-head", worker), namespace=NAMESPACE)
    described = ray.get(host.describe.remote())
    t0 = time.perf_counter()
    os.kill(described["pid"], signal.SIGKILL)
    while not ray.get(head.losses.remote()):
        time.sleep(0.01)
    lost = time.perf_counter() - t0
    while not any(
        m.info.node == worker and m.incarnation != described["incarnation"]
        for m in ray.get(head.members.remote())
    ):
        time.sleep(0.05)
    rejoined = time.perf_counter() - t0
    for handle in hosts.values():
        ray.kill(handle)
    ray.kill(head)
    return {"reported_lost": rounded(lost), "rejoined": rounded(rejoined)}


if __name__ == "__main__":
    main()
