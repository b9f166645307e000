"""cluster: the runtime on a local 2-node Ray cluster against the same runtime in one process.

Each figure is measured on the cluster (``Runtime(cluster=address)``: the supervisor in this
process, the runs' agents in one node host per node, the store in-process here so that both
sides pay the same store) and, in the same run, on the single-node runtime, so the ratio says
what hosting the runs on nodes costs:

- ``fanout``: a parent spawns 1,000 ``worker`` children at once, each one 50 ms model call
  (the offline scripted model's ``delay``), 100 at a time (``per_agent=100``). Ideal makespan
  1,000 / 100 x 50 ms = 0.5 s. Children go on the parent's node while it has slots (100 a
  node) and spill over to the other one, so both nodes work. Goal (issue 16): <= 1.2x ideal.
- ``cross_node_mail``: a sender pinned to the head node makes n ``ctx.send`` calls in one step
  to a receiver pinned to the worker node, which ``receive``s all n; mails per second from
  the first send to the last receive. Every mail crosses twice (node -> supervisor -> node),
  in batches. Goal: >= 10,000 mails/s.
- ``spawn_to_result``: a parent pinned to the head node spawns a trivial child pinned to the
  worker node and awaits its outcome, one at a time; the p50 of spawn -> result. Goal: <= 3 ms.
- ``same_node_mail`` (issue 26: "mail between runs on the same node does not cross to the
  driver"): a pinger and a ponger both pinned to the worker node exchange n mails by run id,
  one at a time (round trips per second, each two mails), and a sender there makes n sends
  in one step to a receiver there (mails per second), once per store: ``MemoryStore`` (the
  supervisor records mail after: it goes straight on the node), a SQLite file the driver
  writes (senders record: the record crosses to the driver and back before the mail is
  handed over), and the cluster's own store (``ClusterStore``: mail goes by the supervisor,
  node -> driver -> node). Against the same ping-pong in one process (``MemoryStore``).
  ``--only same_node`` takes these figures alone.
- ``--only fanout`` takes the fan-out alone, beside its one-process figure.
- ``--only fanout_cpu`` (session 31): where a cluster fan-out child's CPU goes, per process,
  the judge of this goal on a loaded machine (a makespan is not one there). One runtime, a
  warm-up fan-out of 100, then ``--rounds`` fan-outs of 1,000; per round the CPU per child of
  the driver (this process: its supervisor, the link's threads, Ray's own threads in it) and
  of each node host (``/proc/PID/stat``: its runs' agents, its link, Ray's threads in it),
  and the makespan (loaded: not a result); medians over the rounds.

The cluster (``ray.cluster_utils.Cluster``, a head and a worker, custom resources
``bench-head`` / ``bench-worker``) is started here and stopped at the end; ``--quick``
shrinks the counts (the cluster still starts: ~20 s).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Callable
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
from subagents.behaviour.function import AgentContext, FunctionAgent
from subagents.definitions.spec import AgentSpec
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.store.memory import MemoryStore
from subagents.supervision.limits import Limits

HEAD, WORKER = "bench-head", "bench-worker"
TARGETS = {"fanout_ideal_ratio": 1.2, "cross_node_mail_per_s": 10_000, "spawn_p50_ms": 3.0}
WAIT_S = 600.0

# ---- the agents (module level: a node imports them by value) ---------------------------------


async def fan_parent(ctx: AgentContext) -> str:
    n = int(ctx.task)
    outcomes = await ctx.gather(*[ctx.spawn("worker", f"part {i}") for i in range(n)])
    return str(sum(1 for o in outcomes if o.status == "completed"))


async def mail_sender(ctx: AgentContext) -> str:
    n = int(ctx.task)
    receiver: str = await ctx.spawn("mail_receiver", str(n), background=True)
    started = time.perf_counter()
    sends = [ctx.send(receiver, f"mail {i}") for i in range(n)]
    await ctx.gather(*sends)
    mail = await ctx.receive(timeout=WAIT_S)  # the receiver's "got them all"
    assert mail is not None
    return str(time.perf_counter() - started)


async def mail_receiver(ctx: AgentContext) -> str:
    n = int(ctx.task)
    sender = ""
    for _ in range(n):
        mail = await ctx.receive(timeout=WAIT_S)
        assert mail is not None
        sender = mail.sender
    await ctx.send(sender, "all")
    return "done"


async def spawner(ctx: AgentContext) -> str:
    times = []
    for i in range(int(ctx.task)):
        t0 = time.perf_counter()
        outcome = await ctx.spawn("child", str(i))
        times.append(time.perf_counter() - t0)
        assert outcome.result == str(i), outcome
    return ",".join(f"{t:.6f}" for t in times)


def child(ctx: AgentContext) -> str:
    return ctx.task


async def ping_root(ctx: AgentContext) -> str:
    ponger: str = await ctx.spawn("pong", ctx.task, background=True)
    out = await ctx.spawn("ping", f"{ctx.task} {ponger}")
    return str(out.result)


async def ping(ctx: AgentContext) -> str:
    rounds, ponger = ctx.task.split()
    started = time.perf_counter()
    for i in range(int(rounds)):
        ctx.send(ponger, str(i))
        mail = await ctx.receive(timeout=WAIT_S)
        assert mail is not None
    return str(time.perf_counter() - started)


async def pong(ctx: AgentContext) -> str:
    for _ in range(int(ctx.task)):
        mail = await ctx.receive(timeout=WAIT_S)
        assert mail is not None
        ctx.send(mail.sender, mail.content)
    return "ponged"


def pinned(name: str, fn: Callable[..., Any], resource: str | None) -> FunctionAgent:
    metadata = {"resources": {resource: 1}} if resource else {}
    return FunctionAgent.create(name, fn, metadata=metadata)


# ---- the measures ------------------------------------------------------------------------------


def fanout(cluster: str | None, children: int, limit: int, delay: float) -> float:
    worker = AgentSpec(name="worker", description="One model call.", tools=())
    model = ScriptedModel({"worker": [{"text": "done", "delay": delay}]})
    limits = Limits(
        max_concurrency=limit + 1,
        per_agent=limit,
        max_children=children,
        queue_bound=children + 10,
        timeout_s=WAIT_S,
    )
    agents = [pinned("parent", fan_parent, HEAD if cluster else None), worker]
    with Runtime(agents, model=model, limits=limits, store=MemoryStore(), cluster=cluster) as rt:
        started = time.perf_counter()
        outcome = rt.run("parent", str(children), wait=WAIT_S)
        elapsed = time.perf_counter() - started
    if outcome.result != str(children):
        raise RuntimeError(f"fanout: expected {children} completed children, got {outcome!r}")
    return elapsed


def _cpu_s(pid: int) -> float:
    """Seconds of CPU process ``pid`` has used, all its threads, ended ones too (``stat``'s
    user + system ticks, 10 ms: 10 us per child of a 1,000-child fan-out, hence the rounds;
    ``schedstat`` counts only the main thread)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def fanout_cpu(cluster: str, children: int, limit: int, delay: float, rounds: int) -> Any:
    """``--only fanout_cpu`` (see the module): per round, the CPU per child (us) of the driver
    and of each node host (by the first 6 characters of its node's id), and the makespan."""
    import ray

    from subagents.cluster.node_host import runtime_host_name

    worker = AgentSpec(name="worker", description="One model call.", tools=())
    model = ScriptedModel({"worker": [{"text": "done", "delay": delay}]})
    limits = Limits(
        max_concurrency=limit + 1,
        per_agent=limit,
        max_children=children * (rounds + 1),
        queue_bound=children + 10,
        timeout_s=WAIT_S,
    )
    agents = [pinned("parent", fan_parent, HEAD), worker]
    rows: list[dict[str, Any]] = []
    with Runtime(agents, model=model, limits=limits, store=MemoryStore(), cluster=cluster) as rt:
        pids: dict[str, int] = {}
        for node in ray.nodes():
            if node.get("Alive"):
                host = ray.get_actor(runtime_host_name(rt.owner, node["NodeID"]))
                pids[node["NodeID"][:6]] = ray.get(host.describe.remote(), timeout=WAIT_S)["pid"]
        rt.run("parent", str(limit), wait=WAIT_S)  # warm: imports, threads, the first wave
        for _ in range(rounds):
            hosts = {node: _cpu_s(pid) for node, pid in pids.items()}
            driver = time.process_time()
            started = time.perf_counter()
            outcome = rt.run("parent", str(children), wait=WAIT_S)
            elapsed = time.perf_counter() - started
            driver = time.process_time() - driver
            if outcome.result != str(children):
                raise RuntimeError(f"fanout_cpu: expected {children} children, got {outcome!r}")
            row = {
                f"host_{n}_us": (_cpu_s(pid) - hosts[n]) / children * 1e6 for n, pid in pids.items()
            }
            rows.append({"driver_us": driver / children * 1e6, **row, "makespan_s": elapsed})
    return {
        key: rounded(median([row[key] for row in rows]), 1 if key.endswith("us") else 3)
        for key in rows[0]
    } | {
        "rounds": [
            {k: rounded(v, 1 if k.endswith("us") else 3) for k, v in row.items()} for row in rows
        ]
    }


def cross_node_mail(cluster: str | None, n: int, store: Any = None, sender_on: str = HEAD) -> float:
    agents = [
        pinned("mail_sender", mail_sender, sender_on if cluster else None),
        pinned("mail_receiver", mail_receiver, WORKER if cluster else None),
    ]
    limits = Limits(queue_bound=n + 10, timeout_s=WAIT_S)
    store = MemoryStore() if store is None else store
    with Runtime(agents, limits=limits, store=store, cluster=cluster) as rt:
        outcome = rt.run("mail_sender", str(n), wait=WAIT_S)
    if outcome.status != "completed":
        raise RuntimeError(f"mail: {outcome!r}")
    return n / float(outcome.result or "inf")


def spawn_to_result(cluster: str | None, n: int) -> list[float]:
    agents = [
        pinned("spawner", spawner, HEAD if cluster else None),
        pinned("child", child, WORKER if cluster else None),
    ]
    limits = Limits(max_children=n + 1, timeout_s=WAIT_S)
    with Runtime(agents, limits=limits, store=MemoryStore(), cluster=cluster) as rt:
        outcome = rt.run("spawner", str(n), wait=WAIT_S)
    if outcome.status != "completed":
        raise RuntimeError(f"spawn: {outcome!r}")
    return [float(t) * 1000 for t in (outcome.result or "").split(",")]


def ping_pong(cluster: str | None, rounds: int, store: Any) -> float:
    """Round trips per second between two runs of the worker node (two mails each)."""
    agents = [
        pinned("ping_root", ping_root, WORKER if cluster else None),
        pinned("ping", ping, WORKER if cluster else None),
        pinned("pong", pong, WORKER if cluster else None),
    ]
    limits = Limits(timeout_s=WAIT_S)
    kwargs = {} if store == "cluster" else {"store": store}  # the cluster's own store
    with Runtime(agents, limits=limits, cluster=cluster, restore=False, **kwargs) as rt:
        outcome = rt.run("ping_root", str(rounds), wait=WAIT_S)
    if outcome.status != "completed":
        raise RuntimeError(f"ping-pong: {outcome!r}")
    return rounds / float(outcome.result or "inf")


def same_node_mail(
    address: str, rounds: int, mails: int, root: str, figures: dict[str, Any]
) -> None:
    """The ``same_node`` figures (see the module), one per store."""
    from subagents.store.sqlite import SQLiteStore

    stores: dict[str, Callable[[], Any]] = {
        "memory": MemoryStore,
        "sqlite": lambda: SQLiteStore(f"{root}/bench-{time.monotonic_ns()}.db"),
        "cluster_store": lambda: "cluster",
    }
    for name, make in stores.items():
        figures[f"same_node_pingpong_{name}_per_s"] = round(ping_pong(address, rounds, make()))
        batch = make()
        if batch == "cluster":
            from subagents.cluster.remote_store import ClusterStore

            batch = ClusterStore.connect(address, create=True)
        figures[f"same_node_mail_{name}_per_s"] = round(
            cross_node_mail(address, mails, batch, sender_on=WORKER)
        )


def main() -> None:
    def options(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--only",
            choices=["same_node", "fanout", "fanout_cpu"],
            help="only these figures (and their baseline)",
        )
        parser.add_argument(
            "--rounds", type=int, default=8, help="fanout_cpu: fan-outs measured (default 8)"
        )

    args = parse_args(__doc__ or "", options)
    stdout_to_stderr()  # Ray prints to file descriptor 1: only the JSON may go there
    quiet_logs()
    quick = args.quick
    children, limit, delay = (200, 20, 0.01) if quick else (1000, 100, 0.05)
    mails = 2_000 if quick else 20_000
    spawns = 50 if quick else 300
    rounds = 100 if quick else 1_000
    ideal = children / limit * delay

    root = tempfile.mkdtemp(prefix="sa-cb-", dir="/tmp")
    # the cluster's own store (``same_node``'s third case) is the head's default one: in this
    # run's temporary directory, never the user's (it wrote ~/.local/state/subagents before)
    os.environ.update({**RAY_ENV, "RAY_TMPDIR": root, "SUBAGENTS_STATE_DIR": f"{root}/state"})
    import ray
    from ray.cluster_utils import Cluster

    figures: dict[str, Any] = {}
    baseline: dict[str, Any] = {}
    cluster = None
    try:
        started = time.perf_counter()
        cluster = Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": 1,
                "resources": {HEAD: 1000},
                "temp_dir": f"{root}/ray",
                "include_dashboard": False,
            },
        )
        cluster.add_node(num_cpus=1, resources={WORKER: 1000}, temp_dir=f"{root}/ray")
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, namespace="subagents", log_to_driver=False)
        figures["cluster_start_s"] = rounded(time.perf_counter() - started)
        address = cluster.address

        if args.only == "fanout_cpu":  # CPU per child, per process: the judge under load
            cpu = fanout_cpu(address, children, limit, delay, args.rounds)
            emit("cluster", {"figures": {**figures, "fanout_cpu": cpu}})
            return
        if args.only == "fanout":  # the fan-out and its one-process baseline alone
            figures["fanout_s"] = rounded(fanout(address, children, limit, delay))
            baseline["fanout_single_node_s"] = rounded(fanout(None, children, limit, delay))
            ratios = {
                "fanout_vs_ideal": ratio(figures["fanout_s"], ideal),
                "fanout_vs_single_node": ratio(
                    figures["fanout_s"], baseline["fanout_single_node_s"]
                ),
            }
            emit("cluster", {"figures": figures, "baseline": baseline, "ratios": ratios})
            return
        same_node_mail(address, rounds, mails, root, figures)
        baseline["single_node_pingpong_per_s"] = round(ping_pong(None, rounds, MemoryStore()))
        if args.only == "same_node":
            emit(
                "cluster",
                {
                    "figures": figures,
                    "baseline": baseline,
                    "sizes": {"rounds": rounds, "mails": mails},
                },
            )
            return

        figures["fanout_s"] = rounded(fanout(address, children, limit, delay))
        baseline["fanout_single_node_s"] = rounded(fanout(None, children, limit, delay))
        figures["fanout_ideal_s"] = rounded(ideal)

        figures["cross_node_mail_per_s"] = round(cross_node_mail(address, mails))
        baseline["single_node_mail_per_s"] = round(cross_node_mail(None, mails))

        remote = spawn_to_result(address, spawns)
        local = spawn_to_result(None, spawns)
        figures["spawn_p50_ms"] = rounded(median(remote), 3)
        figures["spawn_p99_ms"] = rounded(percentile(remote, 99), 3)
        baseline["single_node_spawn_p50_ms"] = rounded(median(local), 3)
    finally:
        if ray.is_initialized():
            ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
        shutil.rmtree(root, ignore_errors=True)

    ratios = {
        "fanout_vs_ideal": ratio(figures["fanout_s"], ideal),
        "fanout_vs_single_node": ratio(figures["fanout_s"], baseline["fanout_single_node_s"]),
        "mail_vs_single_node": ratio(
            figures["cross_node_mail_per_s"], baseline["single_node_mail_per_s"]
        ),
        "spawn_p50_vs_single_node": ratio(
            figures["spawn_p50_ms"], baseline["single_node_spawn_p50_ms"]
        ),
    }
    met = {
        "fanout": ratios["fanout_vs_ideal"] <= TARGETS["fanout_ideal_ratio"],
        "mail": figures["cross_node_mail_per_s"] >= TARGETS["cross_node_mail_per_s"],
        "spawn": figures["spawn_p50_ms"] <= TARGETS["spawn_p50_ms"],
    }
    emit(
        "cluster",
        {
            "figures": figures,
            "baseline": baseline,
            "target": "fanout <= 1.2x ideal; cross-node mail >= 10,000/s; spawn p50 <= 3 ms",
            "ratio": ratios,
            "pass": all(met.values()),
            "met": met,
            "ray": ray.__version__,
            "sizes": {
                "children": children,
                "limit": limit,
                "delay_s": delay,
                "mails": mails,
                "spawns": spawns,
            },
            "seconds": rounded(time.perf_counter() - START, 2),
        },
    )


START = time.perf_counter()

if __name__ == "__main__":
    main()
