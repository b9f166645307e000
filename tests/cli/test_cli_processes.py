"""A run started by one `subagents` process is listed, logged, mailed and stopped from others.

The run's process and the inspecting processes share nothing but the store (a SQLite file,
or a PostgreSQL database named by ``$SUBAGENTS_STATE``); every wait polls `subagents ps
--json` (or the process) against a deadline.
"""

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


def test_listed_logged_mailed_from_other_processes(cli: Cli) -> None:
    proc = cli.run_team("lead", "the plan")
    worker = cli.wait_runs(_worker_waiting, "the worker waiting for mail", proc)

    # listed: both runs, live, with the tree's shape
    live = cli.json("ps")
    assert {(r["agent"], r["status"]) for r in live} == {("lead", "waiting"), ("worker", "waiting")}
    lead = next(r for r in live if r["agent"] == "lead")
    assert worker["parent_run_id"] == lead["run_id"] and worker["depth"] == 1
    table = cli("ps")
    assert table.returncode == 0
    assert "worker" in table.stdout and "waiting" in table.stdout

    # logged: the transcript so far, in order
    log = cli.json("log", worker["run_id"])
    kinds = [e["kind"] for e in log["entries"]]
    assert kinds[:2] == ["spawned", "started"]
    assert kinds.index("user") < kinds.index("assistant") < kinds.index("tool_use")
    assert log["entries"][kinds.index("user")]["text"] == "work on the plan"

    # mailed, by a unique prefix of the worker's id
    prefix = worker["run_id"][:-4]
    sent = cli("send", prefix, "use the blue one")
    assert sent.returncode == 0, sent.stderr
    assert f"posted mail for worker {worker['run_id']}" in sent.stdout

    code, out, err = finish(proc)
    assert code == 0, err
    outcome = msgspec.json.decode(out)["outcome"]
    assert outcome["status"] == "completed"
    assert "worker heard: use the blue one" in outcome["result"]

    # the mail is in the worker's transcript, between its two turns
    entries = cli.json("log", worker["run_id"])["entries"]
    kinds = [e["kind"] for e in entries]
    mail = entries[kinds.index("mail_in")]
    assert mail["text"] == "from external: use the blue one"
    assert kinds.index("tool_use") < kinds.index("mail_in") < len(kinds) - 1
    assert kinds[-1] == "completed"
    human = cli("log", worker["run_id"])
    assert "mail_in      from external: use the blue one" in human.stdout
    assert "\x1b[" not in human.stdout


def test_stopped_from_another_process_by_row_number(cli: Cli) -> None:
    proc = cli.run_team("lead", "to be stopped")
    cli.wait_runs(_worker_waiting, "the worker waiting for mail", proc)
    rows = cli.json("ps")
    assert cli("ps").returncode == 0  # a plain listing remembers the rows for #N
    lead_row = next(r for r in rows if r["agent"] == "lead")

    stopped = cli("stop", f"#{lead_row['row']}", "--wait", "60")
    assert stopped.returncode == 0, stopped.stderr
    assert f"posted stop for lead {lead_row['run_id']}" in stopped.stdout

    code, out, err = finish(proc)
    assert code == 4, err  # cancelled
    runs = {r["agent"]: r for r in msgspec.json.decode(out)["runs"]}
    assert runs["lead"]["status"] == "cancelled" and runs["worker"]["status"] == "cancelled"
    assert cli.json("ps") == []  # nothing live any more

    again = cli("stop", lead_row["run_id"])
    assert again.returncode == 1
    assert "has already ended (cancelled)" in again.stderr
    mail = cli("send", lead_row["run_id"], "too late")
    assert mail.returncode == 1
    assert "has already ended (cancelled)" in mail.stderr


def test_stop_all_posts_a_stop_for_every_live_root(cli: Cli) -> None:
    # One `run` process per store here: with two, the first to poll takes every command
    # (see the report: SupervisorCore.take_commands claims commands for runs it does not host).
    proc = cli.run_team("lead", "one")
    cli.wait_runs(_worker_waiting, "the worker waiting for mail", proc)
    posted = cli.json("stop", "--all")
    assert [p["agent"] for p in posted] == ["lead"]  # roots only: the worker goes with it
    assert all(p["kind"] == "stop" for p in posted)
    assert finish(proc)[0] == 4
    nothing = cli("stop", "--all")
    assert nothing.returncode == 0 and "no live runs to stop" in nothing.stdout
    usage = cli("stop")
    assert usage.returncode == 2 and "give either RUN, --all or --requester RUN" in usage.stderr


def test_stop_requester_stops_the_runs_a_run_requested_not_the_run(cli: Cli) -> None:
    proc = cli.run_team("lead", "delegated")
    worker = cli.wait_runs(_worker_waiting, "the worker waiting for mail", proc)
    lead = worker["parent_run_id"]
    posted = cli.json("stop", "--requester", lead, "--wait", "60")
    assert [(p["agent"], p["run_id"]) for p in posted] == [("worker", worker["run_id"])]
    _code, out, err = finish(proc)
    runs = {r["agent"]: r for r in msgspec.json.decode(out)["runs"]}
    assert runs["worker"]["status"] == "cancelled"
    assert runs["lead"]["status"] != "cancelled", err  # it heard, and went on
    nothing = cli("stop", "--requester", lead)
    assert nothing.returncode == 0 and "no live runs to stop" in nothing.stdout
    both = cli("stop", lead, "--requester", lead)
    assert both.returncode == 2 and "give either RUN, --all or --requester RUN" in both.stderr


def test_log_follow_prints_until_the_run_ends(cli: Cli) -> None:
    proc = cli.run_team("lead", "followed")
    worker = cli.wait_runs(_worker_waiting, "the worker waiting for mail", proc)
    follower = cli.start("log", worker["run_id"], "--follow", "--json")
    assert cli("send", worker["run_id"], "finish now").returncode == 0
    code, out, err = finish(follower)
    assert code == 0, err
    entries = [msgspec.json.decode(line) for line in out.splitlines()]
    kinds = [e["kind"] for e in entries]
    assert kinds[:2] == ["spawned", "started"]
    assert "mail_in" in kinds and kinds[-1] == "completed"
    assert entries[-1]["text"] == "worker heard: finish now"
    assert len(kinds) == len(set(map(str, entries)))  # nothing printed twice
    assert finish(proc)[0] == 0


def test_resume_continues_a_run_whose_process_was_killed(cli: Cli) -> None:
    proc = cli.run_team("boss", "survive")
    slow = cli.wait_runs(lambda rows: by_agent(rows, "slow", "running"), "slow running", proc)
    proc.kill()
    proc.wait()
    listed = cli.json("resume", "--list")["unfinished"]
    assert {r["agent"] for r in listed} == {"boss", "slow"}
    resumed = cli.start("resume", "--agents", str(cli.agents), "--json")
    cli.wait_runs(
        lambda rows: (r := by_agent(rows, "slow", "running")) and r["host"] != slow["host"],
        "slow resumed",
        resumed,
    )
    # its start is its first one: `info` counts its whole life, not the time since the resume
    assert cli.json("info", slow["run_id"])["run"]["started_at"] == slow["started_at"]
    # the resumed tree obeys commands from other processes too
    assert cli("stop", slow["run_id"]).returncode == 0
    code, out, err = finish(resumed)
    assert "1 root run(s)" in err
    data = msgspec.json.decode(out)
    assert data["resumed"] and slow["run_id"] in data["resumed"]
    statuses = {r["agent"]: r["status"] for r in data["runs"]}
    assert statuses["slow"] == "cancelled"
    # the boss hears of its child's cancellation as a tool error and finishes its own turn
    assert statuses["boss"] == "completed"
    assert data["outcomes"][0]["status"] == "completed"
    assert code == 0, err
    assert cli.json("resume", "--list")["unfinished"] == []
    done = cli("resume")
    assert done.returncode == 0 and "nothing to resume" in done.stdout


def test_ctrl_c_cancels_the_tree_and_exits_130(cli: Cli) -> None:
    proc = cli.run_team("lead", "interrupted")
    cli.wait_runs(_worker_waiting, "the worker waiting for mail", proc)
    proc.send_signal(signal.SIGINT)
    code, _out, err = finish(proc)
    assert code == 130, err
    assert "interrupted: cancelling the runs" in err
    statuses = {r["agent"]: r["status"] for r in cli.runs()}
    assert statuses == {"lead": "cancelled", "worker": "cancelled"}


def test_send_reads_the_text_from_stdin(cli: Cli) -> None:
    proc = cli.run_team("lead", "piped mail")
    worker = cli.wait_runs(_worker_waiting, "the worker waiting for mail", proc)
    empty = cli("send", worker["run_id"], "-", stdin="  \n")
    assert empty.returncode == 2 and "TEXT is empty" in empty.stderr
    posted = cli("send", worker["run_id"], "-", "--json", stdin="line one\nline two\n")
    assert posted.returncode == 0, posted.stderr
    # one trailing newline (echo's) dropped; the ones inside kept
    assert msgspec.json.decode(posted.stdout)["content"] == "line one\nline two"
    code, out, err = finish(proc)
    assert code == 0, err
    assert "worker heard: line one\\nline two" in out
