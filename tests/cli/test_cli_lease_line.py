"""The lease line through the real CLI (tools/lease_line.py): a host stalled (SIGSTOP) past
its lease while a Bash command of its run is under way has that command killed by its own
reaper, while the host is still stopped and before `subagents resume` takes the run up; a
host that keeps renewing keeps its long command running across many lease periods.

(tests/adversary/test_stalled_host_command.py, e-adv27's, found the defect; the waiting host
is both tests' ``waiting_host.py``; the stop made as tests/durability/test_fencing.py's.)"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from clikit import DEADLINE_S, Cli, finish
from waiting_host import command_pid, gone, waiting_cli

from ns_pids import GONE
from pgserver import stop_outside_a_transaction
from polling import wait_until


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    yield from waiting_cli(tmp_path)


def _stopped(pid: int) -> bool:
    """Whether the process is stopped (state ``T`` in its stat)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2] == "T"


def _orphaned(cli: Cli, run_id: str) -> bool:
    return any(r["run_id"] == run_id and r["orphaned"] for r in cli.runs())


def _stall_past_its_lease(cli: Cli, pid: int, run_id: str) -> None:
    """SIGSTOP the host at a moment it holds no write transaction (every thread of it
    stopped), until its lease lapses."""
    stop_outside_a_transaction(cli.state, pid)
    wait_until(lambda: _orphaned(cli, run_id), "the lease lapsing", DEADLINE_S, pace=0.2)


def _started(cli: Cli, lease_s: str) -> tuple[str, int, int]:
    """The waiter run detached under a lease of ``lease_s``, its Bash call approved and
    under way: its run id, its host's pid and its command's."""
    env = {"SUBAGENTS_LEASE_S": lease_s}
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
    return run_id, host, command


def test_a_stalled_hosts_command_dies_before_its_run_is_taken_up(cli: Cli) -> None:
    run_id, host, command = _started(cli, "2")
    try:
        _stall_past_its_lease(cli, host, run_id)
        # the host is stopped: nothing of it kills the command; its reaper does, by itself
        wait_until(lambda: gone(command), "the command killed", DEADLINE_S, pace=0.05)
        assert _stopped(host)
        resumed = cli.start("resume", "--agents", str(cli.agents), "--json")
        code, out, err = finish(resumed)
        assert code == 0, err
        assert run_id in msgspec.json.decode(out)["resumed"], out
    finally:
        os.kill(host, signal.SIGCONT)
    wait_until(lambda: gone(host), "the stalled host fenced and gone", DEADLINE_S, pace=0.05)
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


def test_a_renewing_hosts_long_command_outlives_many_lease_periods(cli: Cli) -> None:
    lease_s = 3.0
    run_id, host, command = _started(cli, str(lease_s))
    with cli.store() as store:
        (first,) = [lease for lease in store.leases() if lease.pid == host]

        def renewed_often() -> bool:
            (lease,) = [lease for lease in store.leases() if lease.pid == host]
            return lease.renewed_at >= first.renewed_at + 4 * lease_s

        wait_until(renewed_often, "four lease periods of renewals", DEADLINE_S, pace=0.2)
    assert not gone(command)  # no false kill: its line moved on with each renewal
    (cli.root / "go").write_text("")
    wait_until(lambda: gone(host), "the run ended and its host gone", DEADLINE_S, pace=0.05)
    assert (cli.root / "log").read_text() == "start\nend\n"
    with cli.store() as store:
        record = store.get_run(run_id)
    assert record is not None and record.status == "completed", record
