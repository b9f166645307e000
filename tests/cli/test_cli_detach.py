"""`run --detach`, `attach` and `wait` across real processes: the tree lives in a background
host in a session of its own, any terminal watches it, `wait` exits with its status code."""

from __future__ import annotations

import os
import select
import shlex
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from clikit import DEADLINE_S, Cli, by_agent, finish, on_terminal

from polling import wait_until


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    """The command; afterwards, no background host of this test is left running."""
    cli = Cli(tmp_path)
    yield cli
    for row in cli.runs():  # a host still holding a live lease on an unfinished run
        live = row["status"] in ("queued", "running", "waiting") and not row["orphaned"]
        if live and _host_pid(row) != os.getpid() and not _gone(_host_pid(row)):
            os.kill(_host_pid(row), signal.SIGKILL)


def _host_pid(row: dict[str, Any]) -> int:
    return int(row["host"].rsplit("pid ", 1)[1])


def _detach(cli: Cli, *args: str) -> tuple[str, int, Path]:
    proc = cli("run", "--detach", *args, "--agents", str(cli.agents), "--json")
    assert proc.returncode == 0, proc.stderr
    data = msgspec.json.decode(proc.stdout)
    return data["run_id"], data["pid"], Path(data["log"])


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_detached_tree_is_watched_mailed_and_waited_for_from_other_processes(cli: Cli) -> None:
    plain = cli("run", "--detach", "lead", "in the background", "--agents", str(cli.agents))
    assert plain.returncode == 0, plain.stderr
    run_id = plain.stdout.strip()  # stdout: the id alone, for RUN=$(subagents run --detach ...)
    assert run_id.startswith("r") and "attach" in plain.stderr
    worker = cli.wait_runs(lambda rows: by_agent(rows, "worker", "waiting"), "the worker waiting")
    lead = next(r for r in cli.runs() if r["run_id"] == run_id)
    host = _host_pid(lead)
    assert host != os.getpid() and not lead["orphaned"]
    assert os.getsid(host) == host != os.getsid(0)  # a session of its own: no hang-up reaches it

    attach = cli.start("attach", run_id)  # a pipe: one line per change, then the result
    waiter = cli.start("wait", run_id)
    assert cli("send", worker["run_id"], "you can stop waiting").returncode == 0
    code, out, err = finish(attach)
    assert code == 0, err
    assert "worker" in out and "completed" in out
    assert "lead got: worker heard: you can stop waiting" in out.split("Result (completed):")[1]
    code, out, err = finish(waiter)
    assert code == 0, err
    assert out.startswith(f"{run_id} completed: lead got: worker heard")
    log = cli.state.parent / "hosts" / f"{run_id}.log"
    assert log.stat().st_mode & 0o777 == 0o600 and "Result (completed):" in log.read_text()
    _wait_gone(host)


def _wait_gone(pid: int) -> None:
    """Until the host ``pid`` exited (it does once its root has ended)."""
    wait_until(lambda: _gone(pid), f"the host {pid} gone", DEADLINE_S, pace=0.05)


@pytest.mark.parametrize(
    ("agent", "extra", "code"),
    [("failer", (), 1), ("slow", ("--timeout", "0.5"), 3), ("quick", (), 0)],
)
def test_wait_exits_with_the_runs_status_code(
    cli: Cli, agent: str, extra: tuple[str, ...], code: int
) -> None:
    run_id, pid, _log = _detach(cli, agent, "x", *extra)
    waited = cli("wait", run_id)
    assert waited.returncode == code, waited.stdout + waited.stderr
    status = waited.stdout.split()[1].rstrip(":")
    assert f"{status}: {status}:" not in waited.stdout, waited.stdout  # the kind said once
    as_json = cli("wait", run_id, "--json")
    assert msgspec.json.decode(as_json.stdout)["status"] in ("failed", "timed_out", "completed")
    _wait_gone(pid)


def test_wait_gives_up_after_its_timeout_and_sees_an_orphan(cli: Cli) -> None:
    run_id, pid, _log = _detach(cli, "slow", "y")
    late = cli("wait", run_id, "--timeout", "0.2")
    assert late.returncode == 124 and "still running" in late.stderr
    # only the wait ended: the message says the run goes on, and what reaches it
    assert f"it goes on (only the wait ended): `subagents attach {run_id}`" in late.stderr
    assert f"`subagents stop {run_id}` ends it" in late.stderr
    # given --state (here a path a shell must quote), the commands it names read that store
    spaced = cli.root / "my state"
    spaced.symlink_to(cli.state.parent)
    given = str(spaced / cli.state.name)
    named = cli("wait", run_id, "--timeout", "0.2", "--state", given)
    assert named.returncode == 124, named.stderr
    run = f"{run_id} --state {shlex.quote(given)}"
    assert f"`subagents attach {run}` watches it, `subagents stop {run}` ends it" in named.stderr
    os.kill(pid, signal.SIGKILL)
    orphan = cli("wait", run_id)
    assert orphan.returncode == 6 and "orphaned" in orphan.stderr
    attach = cli("attach", run_id)
    assert attach.returncode == 6 and "subagents resume" in attach.stderr


def test_ctrl_c_detaches_attach_and_the_run_goes_on(cli: Cli) -> None:
    run_id, pid, _log = _detach(cli, "slow", "z")
    attach = cli.start("attach", run_id)
    cli.wait_runs(lambda rows: by_agent(rows, "slow", "running"), "slow running")
    # Ctrl-C once attach is watching (its first line is out), not while it is still starting
    first = _first_line(attach)
    assert "slow" in first and "running" in first, first
    attach.send_signal(signal.SIGINT)
    code, _out, err = finish(attach)
    assert code == 0 and "detached from" in err
    assert by_agent(cli.runs(), "slow", "running")  # still working
    assert cli("stop", run_id, "--wait", "60").returncode == 0
    assert cli("wait", run_id).returncode == 4  # cancelled
    _wait_gone(pid)


def test_attach_on_a_terminal_draws_the_tree_and_the_result(cli: Cli) -> None:
    run_id, pid, _log = _detach(cli, "pair", "both")
    code, shown = on_terminal(cli, "attach", run_id)
    assert code == 0, shown
    assert "Result (completed):" in shown and "joined: quick answer to first both" in shown
    _wait_gone(pid)


def test_a_refused_detached_run_reports_the_hosts_error(cli: Cli) -> None:
    proc = cli("run", "--detach", "nobody", "x", "--agents", str(cli.agents))
    assert proc.returncode == 2
    assert "unknown agent 'nobody'" in proc.stderr
    assert proc.stdout == ""
    # its log relayed, then removed with the folder made for it, and the new store it made
    assert not (cli.state.parent / "hosts").exists() and not cli.state.exists()


def _first_line(proc: subprocess.Popen[str], timeout: float = DEADLINE_S) -> str:
    """The first line ``proc`` writes on stdout, read without blocking past ``timeout``."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, f"no output within {timeout} s"
    return proc.stdout.readline()
