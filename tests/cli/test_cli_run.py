"""`subagents run`: exit codes, JSON and human output, model choice, logging options."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest
from clikit import SGR, Cli, finish, on_terminal

CODES = {"completed": 0, "failed": 1, "timed_out": 3, "cancelled": 4, "budget_exceeded": 5}


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


def test_exit_codes_tell_the_outcome(cli: Cli) -> None:
    cases = {
        "completed": ("quick", "hello"),
        "failed": ("failer", "x"),
        "timed_out": ("slow", "x", "--timeout", "0.5"),
        "budget_exceeded": ("spender", "x", "--budget", "1000"),
    }
    procs = {
        status: cli.run_team(*args, "--state", str(cli.state.parent / f"{status}.sqlite3"))
        for status, args in cases.items()
    }
    results = {}
    for status, proc in procs.items():
        code, out, err = finish(proc)
        assert code == CODES[status], (status, err)
        data = msgspec.json.decode(out)
        assert data["outcome"]["status"] == status
        assert [r["status"] for r in data["runs"]] == [status]
        results[status] = data["outcome"]
    assert results["completed"]["result"] == "quick answer to hello"
    assert results["failed"]["error"] == "scripted failure"
    assert results["timed_out"]["error_kind"] == "timeout"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("nobody", "x"), "unknown agent 'nobody'"),
        (("quick", "x", "--timeout", "-1"), "--timeout must be in"),
        (("quick", "x", "--timeout", "7200"), "--timeout must be in"),
        (("quick", "x", "--budget", "0"), "--budget must be a positive"),
        (("quick", "x", "--max-depth", "-1"), "--max-depth must be >= 0"),
        (("quick", "x", "--max-concurrency", "0"), "--max-concurrency must be a positive"),
        (("quick", "x", "--queue-bound", "0"), "--queue-bound must be a positive"),
        (("quick", "x", "--max-runs-per-tree", "0"), "--max-runs-per-tree must be a positive"),
        (("quick", "   "), "TASK is empty"),
        (("quick", "x", "--timeout", "soon"), "invalid float value: 'soon'"),
    ],
)
def test_usage_errors_exit_2_with_a_clear_message(
    cli: Cli, args: tuple[str, ...], message: str
) -> None:
    proc = cli("run", *args, "--agents", str(cli.agents))
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert proc.stdout == ""


def test_agents_folder_that_is_missing_is_a_usage_error(cli: Cli, tmp_path: Path) -> None:
    proc = cli("run", "quick", "x", "--agents", str(tmp_path / "nowhere"))
    assert proc.returncode == 2
    assert f"--agents {tmp_path / 'nowhere'}: not a directory" in proc.stderr


def test_json_result_model_and_offline_note(cli: Cli) -> None:
    proc = cli(
        "run", "quick", "the question", "--agents", str(cli.agents), "--json", "--model", "haiku"
    )
    assert proc.returncode == 0, proc.stderr
    data = msgspec.json.decode(proc.stdout)
    assert data["outcome"]["result"] == "quick answer to the question"
    assert data["outcome"]["usage"]["input_tokens"] == 10
    (record,) = data["runs"]
    assert record["model"] == "haiku"  # what it asked for, kept for a resume with a key
    assert record["answered_by"] == "scripted"  # and what answered it
    shown = cli("info", record["run_id"]).stdout
    assert re.search(r"^model +haiku \(answered offline by the scripted model\)$", shown, re.M)
    (row,) = cli.json("ps", "--all")
    assert (row["model"], row["answered_by"]) == ("haiku", "scripted")
    assert record["task"] == "the question"
    assert "ANTHROPIC_API_KEY is not set: using the offline scripted model" in proc.stderr
    assert record["run_id"] in proc.stderr  # the run id is announced for other terminals


def test_offline_flag_wins_over_a_key(cli: Cli) -> None:
    proc = cli(
        "run",
        "quick",
        "q",
        "--agents",
        str(cli.agents),
        "--offline",
        "--json",
        env={"ANTHROPIC_API_KEY": "sk-test-not-used", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"},
    )
    assert proc.returncode == 0, proc.stderr
    assert msgspec.json.decode(proc.stdout)["outcome"]["result"] == "quick answer to q"
    assert "--offline: using the offline scripted model" in proc.stderr


def test_task_from_stdin(cli: Cli) -> None:
    proc = cli("run", "quick", "-", "--agents", str(cli.agents), "--json", stdin="from a pipe\n")
    assert proc.returncode == 0, proc.stderr
    assert "quick answer to from a pipe" in msgspec.json.decode(proc.stdout)["outcome"]["result"]


def test_human_output_ends_with_the_result_and_one_line_per_run(cli: Cli) -> None:
    proc = cli("run", "boss", "t", "--agents", str(cli.agents), "--timeout", "0.8")
    assert proc.returncode == 3, proc.stderr
    out = proc.stdout
    assert "\x1b[" not in out  # a pipe: no ANSI codes
    assert "started" in out  # the journal of transitions, one line each
    assert "Result (timed_out):" in out
    runs = out.split("Runs:", 1)[1]
    assert "boss" in runs and "slow" in runs and "cancelled" in runs


def test_live_tree_on_a_terminal_is_coloured_unless_no_color(cli: Cli) -> None:
    args = ("run", "quick", "x", "--agents", str(cli.agents))
    code, coloured = on_terminal(cli, *args)
    assert code == 0
    assert SGR.search(coloured), coloured
    code, plain = on_terminal(cli, *args, env={"NO_COLOR": "1"})
    assert code == 0
    assert "Result (completed):" in plain
    assert not SGR.search(plain), plain


def test_logs_are_json_lines_with_the_flag_or_the_environment(cli: Cli) -> None:
    for how, extra, env in (
        ("flag", ("--log-json", "--log-level", "debug"), {}),
        ("env", (), {"SUBAGENTS_LOG_JSON": "1", "SUBAGENTS_LOG_LEVEL": "debug"}),
    ):
        proc = cli("run", "quick", "x", "--agents", str(cli.agents), "--json", *extra, env=env)
        assert proc.returncode == 0, proc.stderr
        logs = [line for line in proc.stderr.splitlines() if line.startswith("{")]
        assert logs, (how, proc.stderr)
        events = [msgspec.json.decode(line) for line in logs]
        assert all("event" in e and "level" in e for e in events), how
        assert any(e.get("event") == "completed" for e in events), how


def test_logs_are_readable_text_by_default_and_quiet_below_warning(cli: Cli) -> None:
    proc = cli("--log-level", "info", "run", "quick", "x", "--agents", str(cli.agents), "--json")
    assert proc.returncode == 0, proc.stderr
    assert not any(line.startswith("{") for line in proc.stderr.splitlines())
    quiet = cli("run", "quick", "x", "--agents", str(cli.agents), "--json")
    assert "[debug" not in quiet.stderr and "[info" not in quiet.stderr


@pytest.mark.parametrize("bad", ["loud", "15"])  # (15: a number no standard level has)
def test_a_bad_log_level_is_a_usage_error(cli: Cli, bad: str) -> None:
    for extra, env in ((("--log-level", bad), {}), ((), {"SUBAGENTS_LOG_LEVEL": bad})):
        proc = cli(*extra, "ps", env=env)
        assert proc.returncode == 2, proc.stderr
        assert f"unknown log level '{bad}'" in proc.stderr


def test_cleanup_is_chosen_on_the_command_line(cli: Cli) -> None:
    kept = cli.json("run", "quick", "one", "--agents", str(cli.agents))
    cleaned = cli.json("run", "quick", "two", "--agents", str(cli.agents), "--cleanup", "delete")
    assert [r["cleanup"] for r in kept["runs"]] == ["keep"]
    assert [r["cleanup"] for r in cleaned["runs"]] == ["delete"]
    bad = cli("run", "quick", "x", "--agents", str(cli.agents), "--cleanup", "purge")
    assert bad.returncode == 2 and "invalid choice: 'purge'" in bad.stderr
