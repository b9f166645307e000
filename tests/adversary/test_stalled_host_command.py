"""An outsider's attack on the lease: the host of a run is stalled (SIGSTOP) while an
approved Bash command of that run is under way, past its lease; `subagents resume` takes
the run up. The resumed run must not run the command again (the model is told its effects
are unknown); the stalled host's command is killed by its own launcher at the host's lease
line, before the takeover, the host still stopped; the host, let go on, finds itself fenced;
nothing is recorded twice. (SQLite: the lease and the fence are
the runtime's; tests/cli/test_cli_approvals.py has the stalled host with an ask pending.)"""

from __future__ import annotations

import os
import signal
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))  # clikit

from clikit import DEADLINE_S, Cli, finish
from waiting_host import command_pid, gone, waiting_cli

from ns_pids import GONE
from polling import wait_until


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    yield from waiting_cli(tmp_path)


def _locked(cli: Cli) -> bool:
    """Whether a session holds the SQLite file's write lock (the stopped host's here)."""
    conn = sqlite3.connect(cli.state, timeout=0, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
    except sqlite3.OperationalError:
        return True
    finally:
        conn.close()
    return False


def _orphaned(cli: Cli, run_id: str) -> bool:
    return any(r["run_id"] == run_id and r["orphaned"] for r in cli.runs())


def _stall_past_its_lease(cli: Cli, pid: int, run_id: str) -> None:
    """SIGSTOP the host holding no write lock, until its lease lapses (as
    test_cli_approvals' helper, for SQLite)."""
    for _ in range(20):
        for _ in range(100):
            os.kill(pid, signal.SIGSTOP)
            if not _locked(cli):
                break
            os.kill(pid, signal.SIGCONT)
        else:
            raise AssertionError("the host held the write lock at each of 100 stops")
        wait_until(lambda: _orphaned(cli, run_id), "the lease lapsing", DEADLINE_S, pace=0.2)
        if not _locked(cli):
            return
        os.kill(pid, signal.SIGCONT)
        wait_until(lambda: not _orphaned(cli, run_id), "a renewal", DEADLINE_S, pace=0.2)
    raise AssertionError("the host held the write lock each of 20 times its lease lapsed")


def test_a_stalled_hosts_command_is_not_run_again_and_dies_with_its_fenced_host(
    cli: Cli,
) -> None:
    env = {"SUBAGENTS_LEASE_S": "1"}
    proc = cli("run", "--detach", "waiter", "go", "--agents", str(cli.agents), "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    data = msgspec.json.decode(proc.stdout)
    run_id, host = data["run_id"], data["pid"]
    assert isinstance(host, int) and host > 0
    cli.hosts.append(host)  # type: ignore[attr-defined]
    with cli.store() as store:
        wait_until(lambda: bool(store.list_approvals(run_id=run_id)), "the ask", DEADLINE_S)
        (ask,) = store.list_approvals(run_id=run_id)
    assert cli("approve", ask.approval_id).returncode == 0
    wait_until(lambda: command_pid(cli) is not None, "the command started", DEADLINE_S)
    command = command_pid(cli)
    assert command is not None and command != GONE
    try:
        _stall_past_its_lease(cli, host, run_id)
        resumed = cli.start("resume", "--agents", str(cli.agents), "--json")
        code, out, err = finish(resumed)
        assert code == 0, err
        assert run_id in msgspec.json.decode(out)["resumed"], out
        # its launcher killed it at the host's lease line, the host still stopped
        # (tools/lease_line.py: before session 27's e-lease27 it ran on until its host woke)
        wait_until(lambda: gone(command), "its command killed, its host stopped", DEADLINE_S)
    finally:
        os.kill(host, signal.SIGCONT)
    wait_until(lambda: gone(host), "the stalled host fenced and gone", DEADLINE_S, pace=0.05)
    wait_until(lambda: gone(command), "its command killed", DEADLINE_S, pace=0.05)
    (cli.root / "go").write_text("")
    assert (cli.root / "log").read_text() == "start\n"  # once, and cut
    with cli.store() as store:
        record = store.get_run(run_id)
        kinds = [e.kind for e in store.events(run_id)]
    assert record is not None and record.outcome is not None, record
    assert record.status == "completed"
    assert record.outcome.result is not None
    assert record.outcome.result.startswith("waiter got: This Bash call was interrupted")
    assert kinds.count("completed") == 1
