"""A sandboxed Bash command runs in a PID namespace of its own, its reaper the init
(``tools/reaper_ns.py``): what it starts cannot outrun the reaper's kill, nor outlive the
reaper, and ``ps`` inside sees the command's processes alone. Where the namespace is refused
(``SUBAGENTS_PID_NAMESPACE=0`` here), the reaper alone holds the command, as before; and
outside the sandbox always (the lead's call, session 25): a later call may see and kill what
an earlier one started, as its user's own shell may. Read from /proc out here.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ns_pids import NS
from subagents.tools import reaper_ns
from subagents.tools.bash import run_bash
from subagents.tools.processes import ProcessGroups
from subagents.tools.sandbox import RunSandbox, Sandbox

from .conftest import make_context, wait_until
from .test_bash_escapes import alive, pid_in
from .test_sandbox import landlock, sandboxed

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 and not Path("/proc/self/ns/user").exists(),
    reason="no way to a PID namespace here",
)

BOMB = (
    "import os\n"
    "while True:\n"
    "    try:\n"
    "        if os.fork() and os.fork():\n"
    "            os._exit(0)\n"
    "    except OSError:\n"
    "        pass\n"
)
"""A wandering fork bomb (e-adv24, session 24): each process forks two children, then
ends, so no list of its pids is ever current; a fork refused (the cgroup full) is tried
again."""
PIDS_MAX = 300
V1 = Path("/sys/fs/cgroup/pids")
V2 = Path("/sys/fs/cgroup")


def _sandbox(kind: str, root: Path, *writable: Path) -> RunSandbox | None:
    if kind == "plain":
        return None
    settings = Sandbox(writable=tuple(str(path) for path in writable))
    return Sandbox.coerce(settings).for_run(workspace=root, read_only=False, network=True)


KINDS = [pytest.param("sandboxed", marks=landlock)]
"""Where a command gets a namespace: in the sandbox only."""


def _run(
    processes: ProcessGroups, command: str, root: Path, kind: str, timeout: float = 120
) -> tuple[int, str]:
    process = processes.start(command, cwd=root, run_id="r1", sandbox=_sandbox(kind, root))
    waited = processes.wait(
        process, timeout=timeout, cancel=threading.Event(), deadline=time.monotonic() + 600
    )
    return waited.exit_code or 0, process.output.read_text()


def _pids_parent() -> Path | None:
    """Where a pids cgroup of this test's own can be made (v1 or v2), or None."""
    if os.geteuid() != 0:
        return None
    if (V1 / "cgroup.procs").is_file():
        return V1
    control = V2 / "cgroup.subtree_control"
    if control.is_file() and "pids" in control.read_text().split():
        return V2
    return None


def _members(group: Path) -> list[int]:
    return [int(pid) for pid in (group / "cgroup.procs").read_text().split()]


def _empty(group: Path) -> None:
    """SIGKILL whatever runs in ``group`` until nothing does (a wandering bomb needs rounds:
    every kill frees a pid the others fork into)."""
    deadline = time.monotonic() + 60
    while (members := _members(group)) and time.monotonic() < deadline:
        for pid in members:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def bounded() -> Iterator[Path]:
    """A pids cgroup of ``PIDS_MAX`` processes (the bomb's bound, should it escape: the
    machine's pids are everyone's), emptied and removed at the end."""
    parent = _pids_parent()
    if parent is None:
        pytest.skip("needs root and a pids cgroup controller to write")
    group = parent / f"subagents-test-bomb-{os.getpid()}-{threading.get_ident()}"
    group.mkdir()
    try:
        (group / "pids.max").write_text(str(PIDS_MAX))
        yield group
    finally:
        _empty(group)
        for _ in range(100):  # (a process killed a moment ago may still be leaving it)
            try:
                group.rmdir()
                break
            except OSError:
                _empty(group)
                time.sleep(0.05)  # the pace of the retries, not what is waited for


@pytest.mark.parametrize("kind", KINDS)
def test_a_wandering_fork_bomb_ends_with_its_command(
    tmp_path: Path, processes: ProcessGroups, bounded: Path, kind: str
) -> None:
    """The reaper's list-and-kill lost this race 4 runs in 6 (session 24); the namespace's
    init kills all at once (``kill(-1)``), and its end would (the kernel's)."""
    bomb = tmp_path / "bomb.py"
    bomb.write_text(BOMB)
    command = (  # the shell joins the cgroup before it forks the bomb, or runs nothing
        f"echo $$ > {bounded / 'cgroup.procs'} || exit 1\n"
        f"env -i {shlex.quote(sys.executable)} -I -S {bomb} & sleep 1"
    )
    sandbox = _sandbox(kind, tmp_path, bounded)  # (it may write the cgroup's pids)
    process = processes.start(command, cwd=tmp_path, run_id="r1", sandbox=sandbox)
    waited = processes.wait(
        process, timeout=10, cancel=threading.Event(), deadline=time.monotonic() + 600
    )
    # (ended or timed out and killed: the shell shares the full cgroup, and its own forks
    # may be refused and retried for seconds: not what this guards)
    left = [pid for pid in _members(bounded) if alive(pid)]
    assert not left, (waited, process.said, len(left))
    assert process.contained(), process.said


@pytest.mark.parametrize("kind", KINDS)
def test_a_daemon_dies_with_its_reapers_sigkill(
    tmp_path: Path, processes: ProcessGroups, kind: str
) -> None:
    """A SIGKILL of the reaper (Ray ending a node host's children, the runtime's last
    resort) ends the namespace: nothing of the command outlives it, ``env -i`` included."""
    pidfile = tmp_path / "daemon"
    daemon = f"setsid env -i sh -c 'echo $$ {NS} > {pidfile}; exec sleep 300' >/dev/null 2>&1 &"
    command = f"{daemon} while [ ! -s {pidfile} ]; do sleep 0.01; done; sleep 300"
    process = processes.start(command, cwd=tmp_path, run_id="r1", sandbox=_sandbox(kind, tmp_path))
    wait_until(lambda: pidfile.is_file() and pidfile.read_text().strip() != "", what="daemon")
    pid = pid_in(pidfile)
    assert alive(pid)
    process.signal_reaper(signal.SIGKILL)
    wait_until(lambda: not alive(pid), what="the daemon killed with its reaper")


@pytest.mark.parametrize("kind", KINDS)
def test_ps_inside_sees_the_commands_own_processes(
    tmp_path: Path, processes: ProcessGroups, kind: str
) -> None:
    code, out = _run(processes, "echo $$; sleep 30 & ps -e -o pid=; kill $!", tmp_path, kind)
    shell, *listed = [int(word) for word in out.split()]
    assert code == 0, out
    assert shell in listed and 1 in listed, out  # the reaper: the namespace's init
    assert len(listed) <= 4, out  # the reaper, the shell, its sleep, ps: nothing else


@pytest.mark.parametrize("kind", KINDS)
def test_where_the_namespace_is_refused_the_reaper_alone_holds_the_command(
    tmp_path: Path, processes: ProcessGroups, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``SUBAGENTS_PID_NAMESPACE=0``: the command shares this process's PID namespace (the
    fallback was taken), and its ``env -i`` daemon still ends with it (the subreaper)."""
    monkeypatch.setenv("SUBAGENTS_PID_NAMESPACE", "0")
    pidfile = tmp_path / "daemon"
    daemon = f"setsid env -i sh -c 'echo $$ {NS} > {pidfile}; exec sleep 300' >/dev/null 2>&1 &"
    command = f"{daemon} while [ ! -s {pidfile} ]; do sleep 0.01; done; readlink /proc/$$/ns/pid"
    code, out = _run(processes, command, tmp_path, kind)
    assert code == 0, out
    assert out.strip() == os.readlink("/proc/self/ns/pid"), out
    pid = pid_in(pidfile)
    wait_until(lambda: not alive(pid), what="the daemon killed with its command")


def test_an_unsandboxed_command_sees_and_kills_an_earlier_calls_process(
    tmp_path: Path, processes: ProcessGroups
) -> None:
    """Outside the sandbox no PID namespace: a later call sees an earlier call's server
    (``ps``, ``/proc``) and ``kill``s it by the pid it wrote, as the user's own shell could
    (a namespace of its own hid it: ``No such process``)."""
    pidfile = tmp_path / "server"
    server = processes.start(
        f"sleep 300 & echo $! > {pidfile}", cwd=tmp_path, run_id="r1", background=True
    )
    try:
        wait_until(lambda: pidfile.is_file() and pidfile.read_text().strip() != "", what="pid")
        pid = int(pidfile.read_text())
        assert pid > 0 and alive(pid)
        code, out = _run(
            processes, f"ps -o pid= -p {pid} && kill {pid} && echo killed", tmp_path, "plain"
        )
        assert (code, out.split()) == (0, [str(pid), "killed"]), out
        wait_until(lambda: not alive(pid), what="the earlier call's server killed")
    finally:
        processes.kill(server, "test over")


@pytest.mark.parametrize("kind", KINDS)
def test_a_sandboxed_commands_processes_are_bounded_where_the_kernel_allows(
    tmp_path: Path, processes: ProcessGroups, kind: str
) -> None:
    """Linux >= 6.14: the namespace's own ``pid_max`` is set by its init (a fork bomb stops
    there, not at the machine's table), and the machine's is untouched; before 6.14 it is
    the machine's and left alone."""
    machine = Path("/proc/sys/kernel/pid_max").read_text()
    # the command may not lift its own bound (Landlock: /proc is not its to write)
    knob = "/proc/sys/kernel/pid_max"
    raise_it = f"{{ echo 4000000 > {knob}; }} 2>/dev/null; cat {knob}"
    code, out = _run(processes, raise_it, tmp_path, kind)
    assert code == 0, out
    assert Path("/proc/sys/kernel/pid_max").read_text() == machine
    if reaper_ns.kernel(os.uname().release) >= reaper_ns.OWN_PID_MAX:
        assert int(out) == reaper_ns.RESERVED_PIDS + reaper_ns.PROCESSES_MOST, out
    else:
        assert out == machine, out


def test_the_bound_is_never_written_on_a_kernel_whose_pid_max_is_the_machines() -> None:
    assert reaper_ns.kernel("6.18.44-fc-v595") == (6, 18)
    assert reaper_ns.kernel("6.14.0") == reaper_ns.OWN_PID_MAX
    assert reaper_ns.kernel("5.15.0-91-generic") < reaper_ns.OWN_PID_MAX
    assert reaper_ns.kernel("6.13") < reaper_ns.OWN_PID_MAX
    assert reaper_ns.kernel("weird") == (0, 0)
    machine = Path("/proc/sys/kernel/pid_max").read_text()
    # not an init here: nothing written, whatever the kernel says
    assert reaper_ns.bound_processes("6.18.0") is False
    assert reaper_ns.bound_processes("5.10.0") is False
    assert Path("/proc/sys/kernel/pid_max").read_text() == machine


ENDS = {
    "kill -TERM $$": "Exit code -15",
    "kill -USR1 $$": "Exit code -10",
    "kill -SEGV $$": "Exit code -11",
    "exit 3": "Exit code 3",
}
"""Commands ended by a signal (or an exit code) and what the Bash tool says of each."""


@pytest.mark.parametrize("command", sorted(ENDS))
@landlock
def test_a_command_ended_by_a_signal_reads_alike_with_and_without_the_namespace(
    tmp_path: Path, processes: ProcessGroups, command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The namespace's init cannot end by a signal: it tells its waiter how the shell ended,
    and the waiter ends alike (``reaper.end_as``, the reaper's own way, one copy): the same
    exit code and message as the reaper alone, and as outside the sandbox."""
    said: dict[str, tuple[str, bool]] = {}
    for setting in ("1", "0"):
        monkeypatch.setenv("SUBAGENTS_PID_NAMESPACE", setting)
        ctx = sandboxed(tmp_path, processes, read_only=False)
        result = run_bash({"command": command}, ctx)
        said[f"namespace={setting}"] = (result.content.strip(), result.is_error)
    plain = run_bash({"command": command}, make_context(tmp_path, processes))
    said["plain"] = (plain.content.strip(), plain.is_error)
    assert set(said.values()) == {(ENDS[command], True)}, said
