"""Leases across real processes: a killed host's runs are orphaned, `log -f` ends on them,
`send` says its mail waits, `resume` takes exactly them (and refuses a live host's by name);
a stalled host's lease lapses and comes back when it renews."""

from __future__ import annotations

import os
import signal
from typing import Any

import msgspec
import pytest
from clikit import Cli, by_agent, finish, write_lock_held

from pgserver import stop_outside_a_transaction


@pytest.fixture
def cli(tmp_path: Any) -> Cli:
    return Cli(tmp_path)


def _worker_waiting(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    return by_agent(rows, "worker", "waiting")


def _all_orphaned(rows: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The rows, once every unfinished one is orphaned."""
    live = [r for r in rows if r["status"] in ("queued", "running", "waiting")]
    return rows if live and all(r["orphaned"] for r in live) else None


def test_a_killed_hosts_runs_are_orphaned_followed_to_the_end_and_resumed(cli: Cli) -> None:
    proc = cli.run_team("lead", "survive a kill")
    worker = cli.wait_runs(_worker_waiting, "the worker waiting for mail", proc)
    lead = next(r for r in cli.runs() if r["agent"] == "lead")
    assert not worker["orphaned"] and f"pid {proc.pid}" in worker["host"]

    # alive: resume refuses its tree by naming the host, and lists nothing to take
    refused = cli("resume", lead["run_id"], "--agents", str(cli.agents))
    assert refused.returncode == 1
    assert "is not orphaned" in refused.stderr and f"pid {proc.pid}" in refused.stderr
    listed = cli.json("resume", "--list")
    assert listed["unfinished"] == [] and len(listed["hosted"]) == 2

    follower = cli.start("log", "-f", worker["run_id"])
    proc.send_signal(signal.SIGKILL)
    proc.wait()

    rows = cli.wait_runs(_all_orphaned, "the runs orphaned")
    assert {r["agent"] for r in rows if r["orphaned"]} == {"lead", "worker"}
    table = cli("ps").stdout
    assert "orphaned" in table and "running" not in table and "waiting" not in table
    info = cli("info", worker["run_id"])
    assert "orphaned" in info.stdout and "subagents resume" in info.stdout
    assert cli.json("info", worker["run_id"])["orphaned"] is True
    tree = cli.json("tree", lead["run_id"])
    assert tree["orphaned"] and tree["children"][0]["orphaned"]

    code, _out, err = finish(follower)
    assert code == 6, err  # log -f ends: nothing more will be written until a resume
    assert "is orphaned" in err and "subagents resume" in err

    sent = cli("send", worker["run_id"], "after the crash")
    assert sent.returncode == 0, sent.stderr
    assert "waits until `subagents resume`" in sent.stdout

    listed = cli.json("resume", "--list")
    assert {r["agent"] for r in listed["unfinished"]} == {"lead", "worker"}
    assert listed["hosted"] == []
    resumed = cli.start("resume", "--agents", str(cli.agents), "--json")
    code, out, err = finish(resumed)
    assert code == 0, err
    data = msgspec.json.decode(out)
    assert worker["run_id"] in data["resumed"]
    results = {r["agent"]: r["outcome"]["result"] for r in data["runs"]}
    assert results["worker"] == "worker heard: after the crash"  # the mail waited for it
    assert results["lead"] == "lead got: worker heard: after the crash"
    assert cli.json("ps") == []


def test_a_stalled_hosts_lease_lapses_and_comes_back_when_it_renews(cli: Cli) -> None:
    proc = cli.start(
        "run", "lead", "stall", "--agents", str(cli.agents), "--json",
        env={"SUBAGENTS_LEASE_S": "1"},
    )  # fmt: skip
    try:
        cli.wait_runs(_worker_waiting, "the worker waiting for mail", proc)
        os.kill(proc.pid, signal.SIGSTOP)  # alive, but renewing nothing
        rows = cli.wait_runs(_all_orphaned, "the lease lapsing")
        worker = next(r for r in rows if r["agent"] == "worker")
        assert "whose lease lapsed" in cli.json("info", worker["run_id"])["host"]
        os.kill(proc.pid, signal.SIGCONT)
        cli.wait_runs(
            lambda rows: all(not r["orphaned"] for r in rows) and _worker_waiting(rows),
            "the host renewing its lease",
            proc,
        )
        assert cli("send", worker["run_id"], "go on").returncode == 0
        code, out, err = finish(proc)
        assert code == 0, err
        assert "worker heard: go on" in out
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
            proc.wait()


def test_a_resume_against_a_write_lock_a_stalled_host_holds_says_so_in_one_line(
    cli: Cli,
) -> None:
    """A host stopped inside a write (SIGSTOP between its BEGIN and COMMIT) holds the
    SQLite file's write lock: a `resume` then cannot take its lease, and fails after its
    busy timeout (it waits no longer). It printed a traceback; now one error line, naming
    the likely holder (a host whose lease lapsed while its process lives), and takes
    nothing: woken, the host renews its lease and its runs go on. The lock is held by the
    test, as the stopped host would hold it: stopping a host inside one of its few
    transactions is a race."""
    proc = cli.start(
        "run", "lead", "stall", "--agents", str(cli.agents), "--json",
        env={"SUBAGENTS_LEASE_S": "1"},
    )  # fmt: skip
    try:
        cli.wait_runs(_worker_waiting, "the worker waiting for mail", proc)
        stop_outside_a_transaction(cli.state, proc.pid)  # alive, renewing nothing
        rows = cli.wait_runs(_all_orphaned, "the lease lapsing")
        with write_lock_held(cli.state):
            resumed = cli("resume", "--agents", str(cli.agents))
        assert resumed.returncode == 1, resumed.stderr
        assert "Traceback" not in resumed.stderr, resumed.stderr
        [error] = [line for line in resumed.stderr.splitlines() if line.startswith(ERROR)]
        assert "busy" in error and f"pid {proc.pid}" in error and "kill -CONT" in error
        os.kill(proc.pid, signal.SIGCONT)  # its lease was taken by nobody: it renews it
        worker = next(r for r in rows if r["agent"] == "worker")
        cli.wait_runs(
            lambda rows: all(not r["orphaned"] for r in rows) and _worker_waiting(rows),
            "the host renewing its lease",
            proc,
        )
        assert cli("send", worker["run_id"], "go on").returncode == 0
        code, out, err = finish(proc)
        assert code == 0, err
        assert "worker heard: go on" in out
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
            proc.wait()


ERROR = "subagents resume: error: "


def test_a_bad_lease_setting_is_a_usage_error(cli: Cli) -> None:
    proc = cli("run", "quick", "x", "--agents", str(cli.agents), env={"SUBAGENTS_LEASE_S": "-1"})
    assert proc.returncode == 2, proc.stderr
    assert "SUBAGENTS_LEASE_S must be a positive number of seconds, got -1.0" in proc.stderr
