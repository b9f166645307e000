"""`subagents send --wait`: the mail's poster hears what became of it once the run's host
took it (delivered, or refused with the host's reason: exit 1), or that no host took it in
time (exit 124, the mail still posted). Real processes on a SQLite file or PostgreSQL."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import msgspec
import pytest
from clikit import Cli, by_agent, finish


@pytest.fixture(params=["sqlite", "postgres"])
def cli(tmp_path: Path, request: pytest.FixtureRequest) -> Cli:
    """The commands on a SQLite file, or on a PostgreSQL database (``$SUBAGENTS_STATE``)."""
    if request.param == "postgres":
        return Cli(tmp_path, database=request.getfixturevalue("pg_url"))
    return Cli(tmp_path)


def _worker_waiting(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    return by_agent(rows, "worker", "waiting")


def _orphaned(rows: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    live = [r for r in rows if r["status"] in ("queued", "running", "waiting")]
    return rows if live and all(r["orphaned"] for r in live) else None


def test_send_wait_says_a_refused_mail_with_its_reason_and_a_delivered_one(cli: Cli) -> None:
    proc = cli.run_team("lead", "the plan")
    worker = cli.wait_runs(_worker_waiting, "the worker waiting for mail", proc)
    run_id = worker["run_id"]

    # over the host's cap on text (Limits.max_text_chars, 1,000,000): the host refuses it
    big = "x" * 1_000_001
    refused = cli("send", run_id, "-", "--wait", "--json", stdin=big)
    assert refused.returncode == 1, refused.stderr
    outcome = msgspec.json.decode(refused.stdout)["outcome"]
    assert outcome["state"] == "refused" and "over the cap" in outcome["error"]
    assert outcome["mail_id"] is None

    # the worker still waits (the refused mail never reached it); this one is delivered
    sent = cli("send", run_id, "use the blue one", "--wait", "--timeout", "80")  # (< cli's 90 s)
    assert sent.returncode == 0, sent.stderr
    assert sent.stdout.startswith("delivered mail m") and f"to worker {run_id}" in sent.stdout

    code, out, err = finish(proc)
    assert code == 0, err
    assert "worker heard: use the blue one" in msgspec.json.decode(out)["outcome"]["result"]
    kept = [e for e in cli.json("log", run_id)["entries"] if e["kind"] == "mail_in"]
    assert [e["text"] for e in kept] == ["from external: use the blue one"]


def test_send_wait_gives_up_on_a_host_that_is_gone_and_the_mail_stays_posted(cli: Cli) -> None:
    proc = cli.run_team("lead", "survive a kill")
    worker = cli.wait_runs(_worker_waiting, "the worker waiting for mail", proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    cli.wait_runs(_orphaned, "the runs orphaned")

    late = cli("send", worker["run_id"], "finish now", "--wait", "--timeout", "0.5")
    assert late.returncode == 124, late.stderr
    assert f"no runtime took the mail for run {worker['run_id']} within 0.5 s" in late.stderr
    assert "orphaned" in late.stderr and late.stdout == ""

    # still posted: the resumed tree's host takes it, and the worker hears it
    resumed = cli.start("resume", "--agents", str(cli.agents), "--json")
    code, out, err = finish(resumed)
    assert code == 0, err
    statuses = {r["agent"]: r["status"] for r in msgspec.json.decode(out)["runs"]}
    assert statuses == {"lead": "completed", "worker": "completed"}
    kept = [e for e in cli.json("log", worker["run_id"])["entries"] if e["kind"] == "mail_in"]
    assert [e["text"] for e in kept] == ["from external: finish now"]


def test_send_timeout_without_wait_is_a_usage_error(cli: Cli) -> None:
    proc = cli.run_team("lead", "usage")
    worker = cli.wait_runs(_worker_waiting, "the worker waiting for mail", proc)
    usage = cli("send", worker["run_id"], "hi", "--timeout", "5")
    assert usage.returncode == 2 and "--timeout is for --wait" in usage.stderr
    negative = cli("send", worker["run_id"], "hi", "--wait", "--timeout", "-1")
    assert negative.returncode == 2 and "--timeout must be >= 0" in negative.stderr
    assert cli("send", worker["run_id"], "done", "--wait").returncode == 0
    assert finish(proc)[0] == 0
