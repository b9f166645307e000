"""The in-process command (``in_process.run_main``, what ``Cli(...)`` uses for the commands
that only read or answer the store) answers as the command in a subprocess answers, and leaves
this process as it found it: its environment, working directory, logging, signal handlers."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
import structlog
from clikit import IN_PROCESS, Cli
from in_process import run_main

from subagents import logs
from subagents.messages import Lease, RunRecord, RunStatus
from subagents.store.leases import machine_id
from subagents.store.sqlite import SQLiteStore

SAME = [
    ["ps", "--all"],  # no store yet: a hint on stderr, exit 0
    ["info", "r-no-such"],  # an unknown run: exit 1 naming it
    ["approve", "  "],  # an empty id: bad usage, exit 2
    ["stop"],  # RUN or --all missing: bad usage
    ["ps", "--bogus"],  # argparse's own usage error (SystemExit(2))
    ["completion", "bash"],
    ["ps", "--log-level", "loud"],  # a bad level refused before the command
    ["agents", "--json"],
    ["ps", "--all", "--agent", "caf\udce9"],  # argv bytes not UTF-8, as Python decodes them
]


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


@pytest.mark.parametrize("args", SAME, ids=[" ".join(a) for a in SAME])
def test_a_command_here_answers_as_in_a_subprocess(cli: Cli, args: list[str]) -> None:
    here = cli(*args)
    there = cli.process(*args)
    assert (here.returncode, here.stdout, here.stderr) == (
        there.returncode,
        there.stdout,
        there.stderr,
    )


def test_every_command_run_here_is_one_a_test_could_run_twice(cli: Cli) -> None:
    """A second call sees nothing of the first (the command keeps no module state)."""
    for command in sorted(IN_PROCESS):
        first, second = cli(command, "--help"), cli(command, "--help")
        assert first.returncode == 0, first.stderr
        assert (first.stdout, first.stderr) == (second.stdout, second.stderr), command


def test_the_process_is_left_as_it_was(cli: Cli, tmp_path: Path) -> None:
    env, cwd = dict(os.environ), os.getcwd()
    config = structlog.get_config()
    handlers = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    pending = logs._pending
    proc = run_main(
        ["-vv", "--log-json", "ps", "--all"],
        env={**cli.env, "SUBAGENTS_LOG_LEVEL": "debug", "NO_COLOR": "1"},
        cwd=tmp_path,
    )
    assert proc.returncode == 1 and "no run store at" in proc.stderr, proc  # (none made yet)
    assert dict(os.environ) == env and os.getcwd() == cwd
    assert structlog.get_config() == config and logs._pending == pending
    assert {n: signal.getsignal(n) for n in handlers} == handlers


def test_the_command_sees_its_own_environment_and_directory(cli: Cli) -> None:
    """``--state`` relative to the command's directory, ``$SUBAGENTS_STATE`` from its
    environment: neither is this process's."""
    (cli.root / "here.sqlite3").touch()  # an empty file: an empty store
    named = cli("ps", "--all", "--state", "here.sqlite3")
    assert (named.returncode, named.stderr) == (0, "no runs\n"), named
    missing = cli.root / "there" / "x.db"
    elsewhere = cli("ps", "--all", env={"SUBAGENTS_STATE": str(missing)})
    assert elsewhere.returncode == 1 and f"no run store at {missing}" in elsewhere.stderr


class _Deadline(BaseException):
    """What a hang guard raises in the test's thread: pytest-timeout's ``Failed`` from its
    SIGALRM handler is a ``BaseException``, as every pytest outcome is."""


def test_a_hang_guard_ends_a_command_that_does_not_end(cli: Cli) -> None:
    """``wait`` on a run whose host lives (its lease held, by this process) does not end: the
    guard's exception ends the test, not swallowed as the command's exit code 1 (the test
    would then go on with no guard left: a worker hung until CI's own limit)."""
    live, owner, now = "r1a2000000000livelivel", "host:1:n0nce", time.time()
    cli.state.parent.mkdir(parents=True, exist_ok=True)
    with SQLiteStore(cli.state) as store:
        store.save_run(
            RunRecord(
                run_id=live, agent="worker", task="t", root_run_id=live,
                status=RunStatus.RUNNING, created_at=now, owner=owner,
            )
        )  # fmt: skip
        store.acquire_lease(
            Lease(
                owner=owner, host="h", pid=os.getpid(), machine=machine_id(),
                renewed_at=now, expires_at=now + 3600,
            )
        )  # fmt: skip

    def guard(_signo: int, _frame: object) -> None:
        raise _Deadline

    previous = signal.signal(signal.SIGALRM, guard)
    pytest_timeout, _interval = signal.setitimer(signal.ITIMER_REAL, 1.0)  # (its, given back)
    try:
        with pytest.raises(_Deadline):
            cli("wait", live)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if pytest_timeout:
            signal.setitimer(signal.ITIMER_REAL, max(pytest_timeout - 1.0, 0.01))


def test_a_command_given_its_own_stdio_encoding_writes_in_it(cli: Cli) -> None:
    """``$PYTHONIOENCODING`` (like the locale) is read as an interpreter starts: a command
    given its own runs where it is read, and writes what a person's shell would get."""
    cli.state.parent.mkdir(parents=True, exist_ok=True)
    cli.state.touch()  # an empty file: an empty store
    proc = cli.raw("info", "r-caf\xe9", env={"PYTHONIOENCODING": "latin-1"})
    assert proc.returncode == 1 and b"r-caf\xe9" in proc.stderr, proc.stderr


def test_a_completion_request_is_answered_by_a_process_of_its_own(cli: Cli, tmp_path: Path) -> None:
    """argcomplete ends the process that answers (``os._exit``): here, that would be the
    test run's."""
    out = tmp_path / "completions.txt"
    asked = {"_ARGCOMPLETE": "1", "_ARGCOMPLETE_STDOUT_FILENAME": str(out)}
    proc = cli("ps", env={**asked, "COMP_LINE": "subagents ps --wa", "COMP_POINT": "17"})
    assert proc.returncode == 0, proc.stderr
    assert out.read_text().split() == ["--watch"]
