"""The inspecting commands against a Ray cluster's store (``--ray ADDRESS``,
``SUBAGENTS_RAY_ADDRESS``): each shows what the same command shows on the local file, and
`stop` / `send` post their commands through the cluster's store actor."""

from __future__ import annotations

import shlex
import time
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from clikit import DEADLINE_S, Cli

from raycluster import LocalCluster
from subagents.messages import Lease, RunRecord, RunStatus

pytestmark = pytest.mark.ray

LIVE = RunRecord(
    run_id="r-live-on-a-node",
    agent="worker",
    task="keep going",
    root_run_id="r-live-on-a-node",
    status=RunStatus.RUNNING,
    created_at=time.time(),
    owner="node-b:4242:abc",
)
"""A run hosted elsewhere in the cluster, under a live lease."""


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory, ray_cluster: LocalCluster) -> Cli:
    """Finished trees written by a local `subagents run` into a file the cluster will serve
    (the cluster first: the commands inherit its environment, RAY_AUTH_MODE...)."""
    cli = Cli(tmp_path_factory.mktemp("cluster-cli"))
    for agent, task in (("pair", "alpha"), ("failer", "gamma")):
        proc = cli("run", agent, task, "--agents", str(cli.agents), "--json")
        assert proc.returncode in (0, 1), proc.stderr
    return cli


@pytest.fixture(scope="module")
def served(cli: Cli, ray_cluster: LocalCluster) -> Iterator[Any]:
    """The cluster's default store actor serving that file, with one live run added."""
    import ray

    from subagents.cluster.head import head_actor
    from subagents.cluster.remote_store import ClusterStore

    actor = head_actor(path=str(cli.state))
    store = ClusterStore(actor)
    far = time.time() + 3600
    store.acquire_lease(
        Lease(owner=LIVE.owner or "", host="node-b", pid=4242, renewed_at=far, expires_at=far)
    )
    store.save_run(LIVE)
    yield store
    ray.kill(actor)


def test_ps_tree_info_and_log_show_the_same_as_on_the_local_file(
    cli: Cli, served: Any, ray_cluster: LocalCluster
) -> None:
    local = cli.json("ps", "--all")
    remote = cli.json("ps", "--all", "--ray", ray_cluster.address)
    assert [r["run_id"] for r in remote] == [r["run_id"] for r in local]
    assert remote == local
    assert LIVE.run_id in [r["run_id"] for r in remote]
    root = next(r["run_id"] for r in local if r["agent"] == "pair")
    for command in (("tree", root), ("info", root), ("log", root)):
        assert cli.json(*command, "--ray", ray_cluster.address) == cli.json(*command)


def test_the_address_may_come_from_the_environment_and_rows_resolve(
    cli: Cli, served: Any, ray_cluster: LocalCluster
) -> None:
    env = {**cli.env, "SUBAGENTS_RAY_ADDRESS": ray_cluster.address}
    listed = cli("ps", "--all", env=env)
    assert listed.returncode == 0, listed.stderr
    assert "worker" in listed.stdout
    first = cli("info", "#1", "--json", env=env)  # the listing kept for this cluster store
    assert first.returncode == 0, first.stderr


def test_stop_and_send_post_through_the_clusters_store(
    cli: Cli, served: Any, ray_cluster: LocalCluster
) -> None:
    address = ray_cluster.address
    sent = cli("send", LIVE.run_id, "hello from the CLI", "--ray", address)
    assert sent.returncode == 0, sent.stderr
    assert "the process hosting it delivers it" in sent.stdout  # its lease is live: not orphaned
    stopped = cli("stop", LIVE.run_id, "--ray", address, "--json")
    assert stopped.returncode == 0, stopped.stderr
    taken = served.take_commands([LIVE.run_id])
    assert [(c.kind, c.content) for c in taken] == [
        ("send", "hello from the CLI"),
        ("stop", None),
    ]


def test_run_on_the_cluster_hosts_the_tree_on_its_nodes_and_records_it_in_its_store(
    cli: Cli, served: Any, ray_cluster: LocalCluster
) -> None:
    """`subagents run --ray`: an LLM agent (the offline scripted model) spawning two children,
    its runs in the cluster's node hosts, recorded in the store the cluster serves (here the
    module's file: ``ps --state`` on it shows the tree)."""
    address = ray_cluster.address
    done = cli("run", "pair", "delta", "--agents", str(cli.agents), "--ray", address, "--json")
    assert done.returncode == 0, done.stderr
    runs = [r for r in cli.json("ps", "--all") if "delta" in r["task"]]
    assert sorted((r["agent"], r["status"]) for r in runs) == [
        ("pair", "completed"),
        ("quick", "completed"),
        ("quick", "completed"),
    ]
    # which node each run was on: its record (`ps --json`, `info`) and its events (`log`)
    nodes = {ray_cluster.head_node_id, ray_cluster.worker_node_id}
    remote = [r for r in cli.json("ps", "--all", "--ray", address) if "delta" in r["task"]]
    assert all(r["node"] in nodes for r in remote), remote
    root = next(r for r in remote if r["agent"] == "pair")
    listed = cli("ps", "--all", "--ray", address)
    assert listed.returncode == 0, listed.stderr
    assert "NODE" in listed.stdout.splitlines()[0]
    assert root["node"][:12] in listed.stdout
    info = cli("info", root["run_id"], "--ray", address)
    assert info.returncode == 0, info.stderr
    assert ["node", root["node"]] in [line.split() for line in info.stdout.splitlines()]
    placed = [
        e for e in cli.json("log", root["run_id"], "--ray", address)["entries"]
        if e["kind"] == "placed"
    ]  # fmt: skip
    assert [(e["data"]["node"], e["data"]["attempt"]) for e in placed] == [(root["node"], 1)]
    local = cli("ps", "--all", "--agent", "failer").stdout  # runs of one machine only
    assert "NODE" not in local.splitlines()[0]
    both = cli("run", "pair", "x", "--state", str(cli.state), "--ray", address)
    assert both.returncode == 2
    assert "--state and --ray name two stores: give one" in both.stderr


def test_a_bad_address_and_two_stores_at_once_are_usage_errors(cli: Cli) -> None:
    env = {**cli.env, "SUBAGENTS_RAY_ADDRESS": "not an address"}
    bad = cli("ps", env=env)
    assert bad.returncode == 2
    assert "Ray address 'not an address': contains whitespace" in bad.stderr
    both = cli("ps", "--state", str(cli.state), "--ray", "auto")
    assert both.returncode == 2
    assert "--state and --ray name two stores: give one" in both.stderr


def test_a_tree_run_detached_on_the_cluster_outlives_its_command_and_is_stopped_from_another(
    cli: Cli, served: Any, ray_cluster: LocalCluster
) -> None:
    """`subagents run --detach --ray`: the command returns once the root is admitted (its
    process ends: the tree is hosted by a detached actor on the head); later commands see
    the tree, stop it and wait for its end."""
    address = ray_cluster.address
    started = cli(
        "run", "--detach", "worker", "keep waiting", "--agents", str(cli.agents), "--ray", address,
        "--json",
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    tree = msgspec.json.decode(started.stdout)
    assert tree["host"].startswith("subagents-tree-")
    assert tree["node"] == ray_cluster.head_node_id
    live = served.get_run(tree["run_id"])  # (`ps --ray` itself: the tests above)
    assert live.agent == "worker" and live.status in (RunStatus.RUNNING, RunStatus.WAITING)
    stopped = cli("stop", tree["run_id"], "--ray", address)
    assert stopped.returncode == 0, stopped.stderr
    waited = cli("wait", tree["run_id"], "--ray", address)
    assert waited.returncode == 4, waited.stderr  # cancelled
    assert served.get_run(tree["run_id"]).status == RunStatus.CANCELLED
    refused = cli(
        "run", "--detach", "nobody", "x", "--agents", str(cli.agents), "--ray", address,
    )  # fmt: skip
    assert refused.returncode == 2
    assert "unknown agent 'nobody'" in refused.stderr  # before any host is started


def test_a_run_whose_host_ray_is_restarting_shows_restarting_and_is_waited_for(
    cli: Cli, served: Any, ray_cluster: LocalCluster
) -> None:
    """A run whose detached tree host's process died (its lease dead) while Ray still lists
    the host (it is starting it again) is `restarting`, not orphaned: `ps`, `info` say so and
    `wait` keeps waiting (here until its --timeout: 124, not 6); once Ray no longer lists the
    host, the run is orphaned (6)."""
    import secrets

    import ray

    from subagents.cluster.connect import NAMESPACE
    from subagents.cluster.tree_hosts import TREE_HOST_PREFIX

    class Parked:  # defined here: it travels to Ray's worker by value
        """Stands for a tree host that Ray lists (alive, or being started again)."""

        def ping(self) -> bool:
            return True

    address = ray_cluster.address
    name = f"{TREE_HOST_PREFIX}test{secrets.token_hex(4)}"
    host = ray.remote(Parked).options(name=name, namespace=NAMESPACE).remote()
    assert ray.get(host.ping.remote(), timeout=60)
    owner = f"head-host:999999:abcd:{name}"
    past = time.time() - 60
    served.acquire_lease(
        Lease(owner=owner, host="head-host", pid=999999, renewed_at=past - 15, expires_at=past)
    )
    run = msgspec.structs.replace(
        LIVE, run_id="r-restarting-host", root_run_id="r-restarting-host", owner=owner
    )
    served.save_run(run)
    try:
        row = next(r for r in cli.json("ps", "--ray", address) if r["run_id"] == run.run_id)
        assert (row["restarting"], row["orphaned"]) == (True, False)
        listed = cli("ps", "--ray", address)
        line = next(line for line in listed.stdout.splitlines() if "ing-host" in line)
        assert "restarting" in line.split() and "orphaned" not in line.split(), line
        assert "restarting: the run's host process died and Ray is starting it" in listed.stderr
        info = cli("info", run.run_id, "--ray", address)
        assert "restarting (running; Ray is starting its host again)" in info.stdout
        assert f"head-host pid 999999 ({name}), gone; its host is being started" in info.stdout
        waited = cli("wait", run.run_id, "--ray", address, "--timeout", "2")
        assert waited.returncode == 124, waited.stderr  # still waiting: not orphaned (6)
        assert "is being started again by Ray" in waited.stderr
        # its hint names the cluster it read (``given_store``), not the terminal's default
        assert f"`subagents stop {run.run_id} --ray {shlex.quote(address)}`" in waited.stderr
        ray.kill(host)  # Ray gave up on it: nothing will take the run up
        gone = cli("wait", run.run_id, "--ray", address, "--timeout", "60")
        assert gone.returncode == 6, gone.stderr
        row = next(r for r in cli.json("ps", "--ray", address) if r["run_id"] == run.run_id)
        assert (row["restarting"], row["orphaned"]) == (False, True)
    finally:
        ray.kill(host)
        ended = msgspec.structs.replace(run, status=RunStatus.CANCELLED, ended_at=time.time())
        served.save_run(ended)
        served.release_lease(owner)


def test_wait_on_a_detached_tree_whose_host_was_killed_waits_for_its_restart(
    cli: Cli, served: Any, ray_cluster: LocalCluster
) -> None:
    """`subagents wait --ray` started right after a tree host's process is SIGKILLed: Ray
    starts the host again and its new process takes the tree up; `wait` waits for that (it
    exited 6, "orphaned", before) and exits with the tree's own status."""
    import os
    import signal

    from polling import wait_until

    address = ray_cluster.address
    started = cli(
        "run", "--detach", "worker", "wait for mail", "--agents", str(cli.agents), "--ray",
        address, "--json",
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    tree = msgspec.json.decode(started.stdout)
    run_id = tree["run_id"]
    wait_until(
        lambda: served.get_run(run_id).status == RunStatus.WAITING, "the worker waits for mail"
    )
    first_owner = served.get_run(run_id).owner
    os.kill(tree["pid"], signal.SIGKILL)
    waiting = cli.start("wait", run_id, "--ray", address)
    sent = cli("send", run_id, "hello after the restart", "--ray", address)
    assert sent.returncode == 0, sent.stderr
    out, err = waiting.communicate(timeout=DEADLINE_S)
    assert waiting.returncode == 0, err
    assert out.strip() == f"{run_id} completed: worker heard: hello after the restart"
    record = served.get_run(run_id)  # taken up by the host's new process
    assert record.owner != first_owner and record.owner.endswith(f":{tree['host']}")


def test_a_tree_detached_on_the_cluster_asks_through_its_store(
    cli: Cli, served: Any, ray_cluster: LocalCluster
) -> None:
    """`run --detach --ray`: no one is at the host's terminal, so a call that needs approval
    waits in the cluster's store; `approvals --ray` lists it, `approve --ray` runs it."""
    from polling import wait_until

    address = ray_cluster.address
    (cli.agents / "appender.md").write_text(
        "---\nname: appender\ndescription: Appends a line.\ntools: Bash\nscript:\n"
        "  - tool_calls:\n      - name: Bash\n        input: {command: 'echo on-ray >> ray.txt'}\n"
        "  - text: 'appended: {result0}'\n---\nYou append.\n",
        encoding="utf-8",
    )
    started = cli(
        "run", "--detach", "appender", "go", "--agents", str(cli.agents), "--ray", address,
        "--json",
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    run_id = msgspec.json.decode(started.stdout)["run_id"]
    wait_until(
        lambda: any(a.run_id == run_id for a in served.list_approvals()),
        "the appender's ask in the cluster's store",
        DEADLINE_S,
        pace=0.1,
    )
    listed = msgspec.json.decode(cli("approvals", "--ray", address, "--json").stdout)
    (row,) = [r for r in listed if r["run_id"] == run_id]
    assert row["tool"] == "Bash" and row["input"] == {"command": "echo on-ray >> ray.txt"}
    approved = cli("approve", row["id"], "--ray", address)
    assert approved.returncode == 0, approved.stderr
    waited = cli("wait", run_id, "--ray", address)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert (cli.root / "ray.txt").read_text() == "on-ray\n"


def test_continue_on_the_cluster_hosts_the_continued_tree_on_its_nodes(
    cli: Cli, served: Any, ray_cluster: LocalCluster
) -> None:
    """`subagents continue --ray`: the ended run is read from the cluster's store and the
    continuation is hosted on the cluster's nodes, as `run --ray` hosts a tree; `--detach`
    there is refused naming why (a detached tree host starts new runs only)."""
    address = ray_cluster.address
    first = cli("run", "quick", "epsilon", "--agents", str(cli.agents), "--ray", address, "--json")
    assert first.returncode == 0, first.stderr
    earlier = msgspec.json.decode(first.stdout)["outcome"]["run_id"]
    more = cli(
        "continue", earlier[-8:], "and zeta", "--agents", str(cli.agents), "--ray", address,
        "--json",
    )  # fmt: skip
    assert more.returncode == 0, more.stderr
    (record,) = msgspec.json.decode(more.stdout)["runs"]
    assert (record["agent"], record["status"], record["continues"]) == (
        "quick",
        "completed",
        earlier,
    )
    assert record["node"] in {ray_cluster.head_node_id, ray_cluster.worker_node_id}
    kept = served.get_run(record["run_id"])  # recorded in the cluster's store
    assert kept is not None and kept.continues == earlier and kept.task == "and zeta"
    detached = cli(
        "continue", "--detach", earlier, "x", "--agents", str(cli.agents), "--ray", address,
    )  # fmt: skip
    assert detached.returncode == 2
    assert "a continued tree cannot be hosted by a detached tree host yet" in detached.stderr
