"""The lease line (tools/lease_line.py): a command's reaper (a Bash command's, a hook's) kills
all its command started once its host's published deadline passes without a renewal, by
itself (the host may be stopped); a line renewed keeps it; a line read during a write is
read again, never taken for a deadline; the lease keeper's line is earlier than its lease's
lapse.

The runtime's end to end case (a host SIGSTOPped past its lease) is
tests/cli/test_cli_lease_line.py."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pykka
import pytest
import structlog

from lease_renewal import LEAD_S, renewing
from ns_pids import NS
from subagents import AgentSpec, Runtime, ScriptedModel
from subagents.cluster.node_lease import NodeLease
from subagents.runtime._lease_keeper import LeaseKeeper
from subagents.store.memory import MemoryStore
from subagents.store.sqlite import SQLiteStore
from subagents.tools.context import ToolContext
from subagents.tools.hooks import Hooks, run_hooks
from subagents.tools.lease_line import LeaseLine, clock
from subagents.tools.processes import ProcessGroups

from .conftest import WAIT, wait_until
from .test_bash_escapes import alive, pid_in
from .test_bash_reaper import hidden
from .test_sandbox import landlock, sandboxed

LOG = structlog.get_logger("test")


@pytest.fixture
def line(tmp_path: Path, processes: ProcessGroups) -> Iterator[LeaseLine]:
    held = LeaseLine(str(tmp_path))
    held.publish(clock() + 3600)
    processes.lease_env = held.environment
    yield held
    held.close()


@pytest.mark.parametrize("sandbox", [False, pytest.param(True, marks=landlock)])
def test_a_background_shells_daemon_dies_when_the_line_passes_unrenewed(
    sandbox: bool, context: ToolContext, repo: Path, processes: ProcessGroups, line: LeaseLine
) -> None:
    ctx = sandboxed(repo, processes, read_only=False) if sandbox else context
    pidfile = repo / "pid"
    line.publish(clock() + LEAD_S)
    stop, thread = renewing(line)
    try:
        process = processes.start(
            hidden(pidfile), cwd=repo, run_id="r1", sandbox=ctx.sandbox, background=True
        )
        daemon = pid_in(pidfile)
        assert alive(daemon)  # held while the line is renewed
    finally:
        stop.set()
        thread.join()
    wait_until(lambda: not alive(daemon), what="the daemon killed at the line")
    assert process in processes.of_run("r1")  # by its reaper, not by the runtime


def test_a_line_read_during_a_write_is_read_again(
    repo: Path, processes: ProcessGroups, line: LeaseLine
) -> None:
    assert line._fd is not None  # half of 0 (long past), half of a far future
    os.pwrite(line._fd, bytes(8) + round((clock() + 3600) * 1e9).to_bytes(8, "little"), 0)
    go, started = repo / "go", repo / "started"
    command = f"echo $$ {NS} > {started}; while [ ! -e {go} ]; do sleep 0.05; done"
    process = processes.start(command, cwd=repo, run_id="r1")
    pid_in(started)
    line.publish(clock() + 3600)
    go.write_text("")
    assert process.popen.wait(timeout=60) == 0  # not killed: the torn line was not a deadline


def test_the_keepers_line_comes_before_its_lease_lapses(tmp_path: Path) -> None:
    line = LeaseLine(str(tmp_path))
    store = SQLiteStore(tmp_path / "runs.sqlite3")
    lost = threading.Event()
    keeper = LeaseKeeper(store, "me", 0.3, on_lost=lambda _: lost.set(), line=line)
    try:
        first = os.pread(line.reader, 16, 0)

        def renewed() -> bool:
            return os.pread(line.reader, 16, 0) != first

        wait_until(renewed, what="a renewal published")
        data = os.pread(line.reader, 16, 0)
        (lease,) = store.leases()
    finally:
        keeper.close()
        store.close()
    assert data[:8] == data[8:]
    published = int.from_bytes(data[:8], "little") / 1e9
    assert lease.expires_boot > 0
    # a quarter of the lease before its lapse on the boot clock, or earlier (taken before)
    assert published <= lease.expires_boot - 0.3 / 4
    assert not lost.is_set()
    with pytest.raises(OSError):  # let go with the lease (its descriptors closed)
        os.fstat(line.reader)


def test_a_hook_under_way_dies_when_the_line_passes_unrenewed(repo: Path, line: LeaseLine) -> None:
    started = repo / "started"
    entry = {"hooks": [{"command": f"echo $$ > {started}; exec sleep 600", "timeout": 900}]}
    hooks = Hooks.parse({"PreToolUse": [entry]}, "test")
    line.publish(clock() + LEAD_S)
    stop, renewer = renewing(line)
    ran = threading.Thread(
        target=run_hooks,
        args=(hooks, "PreToolUse", {}),
        kwargs={"tool": "Bash", "cwd": repo, "cancel": threading.Event(), "log": LOG,
                "temp_dir": repo, "lease_env": line.environment},
        daemon=True,
    )  # fmt: skip
    ran.start()
    try:
        wait_until(lambda: started.exists() and started.read_text().strip() != "", what="hook")
    finally:
        stop.set()
        renewer.join()
    ran.join(WAIT)  # a hang guard: its own timeout (900 s) is far beyond
    assert not ran.is_alive()  # the hook was killed at the line


@pytest.mark.parametrize("durable", [False, True])
def test_only_a_store_another_process_can_take_over_gets_a_line(
    durable: bool, tmp_path: Path
) -> None:
    """A ``MemoryStore``'s runs are taken by no other process: a line could only kill the
    commands of a host stopped (Ctrl-Z) or suspended that goes on, taken over by nobody."""
    store = SQLiteStore(tmp_path / "runs.sqlite3") if durable else MemoryStore()
    with Runtime(
        [AgentSpec(name="a", description="a")], model=ScriptedModel({}), store=store
    ) as rt:
        given = rt._hosting.processes
        assert given is not None
        assert bool(given.lease_env) is durable
    store.close()


def test_a_line_that_cannot_be_written_stops_no_renewal(tmp_path: Path) -> None:
    line = LeaseLine(str(tmp_path))
    store = SQLiteStore(tmp_path / "runs.sqlite3")
    keeper = LeaseKeeper(store, "me", 0.3, on_lost=lambda _: None, line=line)
    writable = line._fd
    line._fd = os.dup(line.reader)  # read-only: its writes fail (EBADF), as a full disk's
    try:
        (first,) = store.leases()

        def renewed() -> bool:
            (lease,) = store.leases()
            return lease.renewed_at > first.renewed_at + 0.6

        wait_until(renewed, what="renewals after a line not written")
        assert keeper.thread.is_alive()
    finally:
        assert writable is not None and line._fd is not None
        os.close(line._fd)
        line._fd = writable
        keeper.close()
        store.close()


def test_the_line_has_no_name_and_reaches_no_command(
    tmp_path: Path, repo: Path, processes: ProcessGroups, line: LeaseLine
) -> None:
    """The line is a file with no name (nothing to find and rewrite by a run whose sandbox may
    write the temp directory, nothing left by a host killed with SIGKILL: last read of session
    27), and the descriptor a launcher inherits is not its command's."""
    assert not list(tmp_path.glob("subagents-lease-*"))
    out = repo / "fds"
    number = line.environment["SUBAGENTS_LEASE_LINE"]
    command = f"ls -l /proc/$$/fd > {out}; echo ${{SUBAGENTS_LEASE_LINE:-none}} >> {out}"
    process = processes.start(command, cwd=repo, run_id="r1")
    assert process.popen.wait(timeout=60) == 0
    seen = out.read_text()
    assert "subagents-lease" not in seen, seen  # the command holds no descriptor of it
    assert seen.splitlines()[-1] == "none", number  # nor its number


def test_a_line_variable_the_runtime_inherited_reaches_no_launcher(
    repo: Path, processes: ProcessGroups, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A runtime with no line of its own (a memory store) whose own environment names one
    (a stale export, or the runtime started by a command of another): its launchers must not
    take that for a descriptor of theirs (a pipe's, or none: nothing started)."""
    monkeypatch.setenv("SUBAGENTS_LEASE_LINE", "not a descriptor")
    process = processes.start("echo ran", cwd=repo, run_id="r1")
    assert process.popen.wait(timeout=60) == 0


def test_a_node_hosts_command_dies_at_its_line_once_the_driver_is_silent(
    context: ToolContext, repo: Path, processes: ProcessGroups
) -> None:
    """A node host keeps its driver's line (``cluster/node_lease.py``, asked of the driver
    again and again) and gives it to its commands: while the driver answers, the command
    lives; once it is silent (stalled), the command dies at the line last published, by its
    reaper (it lived on: node hosts' commands had no line, session 28)."""
    answering, given = threading.Event(), threading.Event()
    answering.set()

    def ask(timeout: float) -> float:
        if not answering.is_set():
            raise pykka.Timeout(f"no answer from the supervisor within {timeout} s")
        return LEAD_S

    def take(held: LeaseLine) -> None:
        processes.lease_env = held.environment
        given.set()

    lease = NodeLease(ask, take).start()
    try:
        assert given.wait(WAIT)
        pidfile = repo / "pid"
        process = processes.start(
            hidden(pidfile), cwd=repo, run_id="r1", sandbox=context.sandbox, background=True
        )
        daemon = pid_in(pidfile)
        assert alive(daemon)  # held while the driver answers
        answering.clear()
        wait_until(lambda: not alive(daemon), what="the daemon killed at the node's line")
        assert process in processes.of_run("r1")  # by its reaper, not by the runtime
    finally:
        lease.close()
