"""`subagents continue RUN TEXT` across real processes and a real SQLite store: a run one
command finished is continued by another (its conversation, then the text), in the
foreground or detached; an unknown run (exit 1) and one still running (exit 2) are refused."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest
from clikit import Cli

from polling import wait_until


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


def _quick(cli: Cli) -> str:
    proc = cli("run", "quick", "the question", "--agents", str(cli.agents), "--json")
    assert proc.returncode == 0, proc.stderr
    run_id: str = msgspec.json.decode(proc.stdout)["outcome"]["run_id"]
    return run_id


def test_a_finished_run_is_continued_by_another_command(cli: Cli) -> None:
    first = _quick(cli)
    proc = cli("continue", first[:12], "and then?", "--agents", str(cli.agents), "--json")
    assert proc.returncode == 0, proc.stderr
    data = msgspec.json.decode(proc.stdout)
    # the quick agent's script has one turn: the second turn of its conversation is the
    # default reply, naming the new run's task (the text)
    assert data["outcome"]["result"] == "quick finished: the question"
    (record,) = data["runs"]
    assert record["continues"] == first and record["agent"] == "quick"
    assert record["run_id"] != first and record["task"] == "and then?"
    info = cli("info", record["run_id"])
    assert info.returncode == 0, info.stderr
    assert re.search(rf"continues\s+{first} ", info.stdout), info.stdout
    rows = {r["run_id"]: r for r in cli.json("ps", "--all")}
    assert rows[record["run_id"]]["continues"] == first and rows[first]["continues"] is None
    table = cli("ps", "--all")
    assert re.search(rf"\bcont {first[-8:]}\b", table.stdout), table.stdout
    earlier = cli.json("info", first)
    assert earlier["run"]["status"] == "completed" and earlier["run"]["continues"] is None


def test_continue_detached_then_wait(cli: Cli) -> None:
    first = _quick(cli)
    proc = cli("continue", "--detach", first, "more", "--agents", str(cli.agents))
    assert proc.returncode == 0, proc.stderr
    new = proc.stdout.strip()
    assert new.startswith("r") and new != first
    waited = cli("wait", new)
    assert waited.returncode == 0, waited.stderr
    rows = {r["run_id"]: r for r in cli.runs()}
    assert rows[new]["status"] == "completed"


def test_an_unknown_run_and_a_running_one_are_refused(cli: Cli) -> None:
    _quick(cli)  # the store exists
    unknown = cli("continue", "r-nope", "hello", "--agents", str(cli.agents))
    assert unknown.returncode == 1  # as every command given a run the store does not have
    assert "subagents continue: error:" in unknown.stderr and "r-nope" in unknown.stderr
    slow = cli("run", "--detach", "slow", "a long job", "--agents", str(cli.agents))
    assert slow.returncode == 0, slow.stderr
    slow_id = slow.stdout.strip()
    try:
        wait_until(
            lambda: any(r["run_id"] == slow_id and r["status"] == "running" for r in cli.runs()),
            "the slow run running",
            90.0,
        )
        busy = cli("continue", slow_id, "too soon", "--agents", str(cli.agents))
        assert busy.returncode == 2
        assert f"run {slow_id} is running: only an ended run can be continued" in busy.stderr
    finally:
        assert cli("stop", slow_id).returncode == 0


def test_a_bad_text_is_bad_usage_said_by_continue_in_its_own_words(cli: Cli) -> None:
    """`continue` runs through `run`'s code: its errors said `subagents run: error: TASK is
    empty`, naming a command and an argument the person did not type."""
    first = _quick(cli)
    for text in ("", "   "):
        proc = cli("continue", first, text, "--agents", str(cli.agents))
        assert proc.returncode == 2
        assert proc.stderr.strip() == "subagents continue: error: TEXT is empty", proc.stderr


def test_an_orphaned_run_is_refused_saying_resume_or_stop_then_continue(cli: Cli) -> None:
    """A run whose host died (SIGKILL) is not waited for (nothing hosts it: `wait` would
    never end) nor told to `stop` alone: the refusal names it orphaned and says what can be
    done, `resume` (then continue it once ended) or `stop` (then continue), which works."""
    import os
    import signal

    slow = cli("run", "--detach", "slow", "a long job", "--agents", str(cli.agents), "--json")
    assert slow.returncode == 0, slow.stderr
    started = msgspec.json.decode(slow.stdout)
    slow_id, pid = started["run_id"], started["pid"]
    wait_until(
        lambda: any(r["run_id"] == slow_id and r["status"] == "running" for r in cli.runs()),
        "the slow run running",
        90.0,
    )
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not Path(f"/proc/{pid}").exists(), "its host gone", 90.0)
    orphaned = cli("continue", slow_id, "go on", "--agents", str(cli.agents))
    assert orphaned.returncode == 2, orphaned.stderr
    said = orphaned.stderr
    assert f"run {slow_id} is orphaned (its host is gone; it was running)" in said, said
    assert f"`subagents resume {slow_id}`" in said and f"`subagents stop {slow_id}`" in said
    assert "subagents wait" not in said
    assert cli("stop", slow_id).returncode == 0  # the advice holds: stopped, it continues
    went_on = cli("continue", "--detach", slow_id, "go on", "--agents", str(cli.agents))
    assert went_on.returncode == 0, went_on.stderr
    assert cli("stop", went_on.stdout.strip()).returncode == 0
