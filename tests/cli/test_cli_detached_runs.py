"""Detached runs from the command line: `ps` shows a detached run with who started it,
`stop --turn` stops a run and leaves its detached child going, and `run` hosts the child
until it ends (closing its runtime at the root's end would cancel it)."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import msgspec
import pytest
from clikit import Cli, by_agent, finish

DLEAD = """---
name: dlead
description: Starts a worker that outlives it, then waits for mail.
tools: spawn_subagent, wait_for_message
script:
  - tool_calls:
      - name: spawn_subagent
        input: {agent: worker, task: "carry on with {task}", detach: true}
  - tool_calls:
      - name: wait_for_message
        input: {timeout: 60}
  - text: "dlead heard: {mail_content}"
---
You lead, hands off.
"""


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    cli = Cli(tmp_path)
    (cli.agents / "dlead.md").write_text(DLEAD, encoding="utf-8")
    return cli


def _both_waiting(rows: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    lead, worker = by_agent(rows, "dlead", "waiting"), by_agent(rows, "worker", "waiting")
    return (lead, worker) if lead is not None and worker is not None else None


def test_stop_turn_leaves_the_detached_child_which_ps_shows_with_its_starter(cli: Cli) -> None:
    proc = cli.run_team("dlead", "the plan")
    lead, worker = cli.wait_runs(_both_waiting, "the lead and its detached worker waiting", proc)
    assert worker["detached"] and worker["parent_run_id"] == lead["run_id"]

    both = cli("stop", lead["run_id"], "--turn", "--tree")
    assert both.returncode == 2 and "not allowed with argument" in both.stderr
    stopped = cli("stop", lead["run_id"], "--turn", "--wait", "60")
    assert stopped.returncode == 0, stopped.stderr
    assert "its detached children go on" in stopped.stdout

    (row,) = cli.json("ps")  # the lead is cancelled; the worker goes on
    assert (row["agent"], row["status"], row["detached"]) == ("worker", "waiting", True)
    assert row["started_by"] == f"dlead {lead['run_id']}"
    table = cli("ps")
    assert table.returncode == 0 and "det " in table.stdout and "detached run" in table.stderr

    assert cli("send", worker["run_id"], "finish it").returncode == 0
    code, out, err = finish(proc)
    assert code == 4, err  # the root was cancelled; the process hosted the worker to its end
    runs = {r["agent"]: r for r in msgspec.json.decode(out)["runs"]}
    assert runs["dlead"]["status"] == "cancelled"
    assert runs["worker"]["status"] == "completed"
    assert runs["worker"]["outcome"]["result"] == "worker heard: finish it"


def test_a_detached_run_outliving_its_killed_host_is_resumed_and_ends_once(cli: Cli) -> None:
    proc = cli.run_team("dlead", "the crash")
    lead, worker = cli.wait_runs(_both_waiting, "the lead and its detached worker waiting", proc)
    assert cli("stop", lead["run_id"], "--turn", "--wait", "60").returncode == 0
    proc.send_signal(signal.SIGKILL)  # the host dies while the detached worker waits
    proc.communicate()
    (row,) = cli.json("ps")
    assert (row["run_id"], row["orphaned"]) == (worker["run_id"], True)
    assert cli("send", worker["run_id"], "resumed").returncode == 0  # waits for the resume
    resumed = cli("resume", "--agents", str(cli.agents), "--json")
    assert resumed.returncode == 0, resumed.stderr
    runs = {r["agent"]: r for r in cli.runs()}
    assert runs["dlead"]["status"] == "cancelled"
    assert runs["worker"]["status"] == "completed"  # hosted by `resume` until it ended
    info = cli.json("info", worker["run_id"])
    assert info["run"]["outcome"]["result"] == "worker heard: resumed"
    log = cli.json("log", worker["run_id"])
    assert [e["kind"] for e in log["entries"]].count("completed") == 1
