"""`subagents stop` of an orphaned run: ended in the store at once, nothing resumed; the rest
of its tree stays orphaned and a later `resume` goes on from there; a stalled host that wakes
after such a stop writes nothing over it. Real processes, SIGKILL/SIGSTOP, a SQLite store and
a PostgreSQL database."""

from __future__ import annotations

import os
import signal
from typing import Any

import msgspec
import pytest
from clikit import Cli, by_agent, finish

from pgserver import stop_outside_a_transaction


@pytest.fixture(params=["sqlite", "postgres"])
def cli(tmp_path: Any, request: pytest.FixtureRequest) -> Cli:
    """The commands on a SQLite file, or on a PostgreSQL database (``$SUBAGENTS_STATE``)."""
    if request.param == "postgres":
        return Cli(tmp_path, database=request.getfixturevalue("pg_url"))
    return Cli(tmp_path)


def _orphaned(agent: str) -> Any:
    def found(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
        row = next((r for r in rows if r["agent"] == agent), None)
        return row if row is not None and row["orphaned"] else None

    return found


def test_stopping_an_orphaned_child_ends_it_now_and_resume_goes_on_without_it(cli: Cli) -> None:
    proc = cli.run_team("boss", "abandoned")
    cli.wait_runs(lambda rows: by_agent(rows, "slow", "running"), "slow running", proc)
    proc.kill()
    proc.wait()
    slow = cli.wait_runs(_orphaned("slow"), "slow orphaned")
    stopped = cli.json("stop", slow["run_id"])
    assert stopped[0]["command_id"] is None and stopped[0]["ended"] == [slow["run_id"]]
    info = cli.json("info", slow["run_id"])
    assert info["run"]["status"] == "cancelled" and not info["orphaned"]
    assert "while orphaned" in info["run"]["outcome"]["error"]
    kinds = [e["event"]["kind"] for e in _events(cli, slow["run_id"])]
    assert kinds[-1] == "cancelled"
    # the boss is still orphaned, untouched; resume takes it up and it hears of its child
    boss = next(r for r in cli.json("ps", "--all") if r["agent"] == "boss")
    assert boss["orphaned"] and boss["status"] in ("running", "waiting")
    resumed = cli("resume", "--agents", str(cli.agents), "--json")
    assert resumed.returncode == 0, resumed.stderr
    statuses = {r["agent"]: r["status"] for r in msgspec.json.decode(resumed.stdout)["runs"]}
    assert statuses == {"boss": "completed", "slow": "cancelled"}
    assert cli.json("info", slow["run_id"])["run"]["started_at"] == slow["started_at"]


def test_stopping_an_orphaned_root_ends_its_whole_tree_and_leaves_nothing_to_resume(
    cli: Cli,
) -> None:
    proc = cli.run_team("boss", "abandoned")
    cli.wait_runs(lambda rows: by_agent(rows, "slow", "running"), "slow running", proc)
    proc.kill()
    proc.wait()
    boss = cli.wait_runs(_orphaned("boss"), "boss orphaned")
    done = cli("stop", boss["run_id"], "--wait", "5")
    assert done.returncode == 0, done.stderr
    assert "and 1 run(s) under it" in done.stdout and "without resuming them" in done.stdout
    rows = cli.json("ps", "--all")
    assert {r["status"] for r in rows} == {"cancelled"} and not any(r["orphaned"] for r in rows)
    assert cli.json("resume", "--list")["unfinished"] == []
    again = cli("stop", boss["run_id"])
    assert again.returncode == 1 and "has already ended (cancelled)" in again.stderr


def test_a_stalled_host_that_wakes_after_the_stop_writes_nothing_over_it(cli: Cli) -> None:
    proc = cli.start(
        "run", "lead", "stall", "--agents", str(cli.agents), "--json",
        env={"SUBAGENTS_LEASE_S": "1"},
    )  # fmt: skip
    try:
        worker = cli.wait_runs(
            lambda rows: by_agent(rows, "worker", "waiting"), "the worker waiting", proc
        )
        # alive, renewing nothing: its lease lapses (stopped between writes: on PostgreSQL a
        # host stopped inside a transaction holds its lease row, and the stop left its runs
        # to it: ended [] under load)
        stop_outside_a_transaction(cli.database or cli.state, proc.pid)
        lead = cli.wait_runs(_orphaned("lead"), "the lease lapsing")
        stopped = cli.json("stop", lead["run_id"])
        assert sorted(stopped[0]["ended"]) == sorted([lead["run_id"], worker["run_id"]])
        os.kill(proc.pid, signal.SIGCONT)
        code, _out, err = finish(proc)  # it finds itself fenced, and stops
        assert code != 0, err
        for run_id in (lead["run_id"], worker["run_id"]):
            info = cli.json("info", run_id)
            assert info["run"]["status"] == "cancelled", info
            assert "while orphaned" in info["run"]["outcome"]["error"]
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
            proc.wait()


def _events(cli: Cli, run_id: str) -> list[dict[str, Any]]:
    proc = cli("events", "--since", "1h", "--no-follow", "--json", "--run", run_id)
    assert proc.returncode == 0, proc.stderr
    return [msgspec.json.decode(line) for line in proc.stdout.splitlines()]
