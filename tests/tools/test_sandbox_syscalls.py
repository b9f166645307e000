"""Hostile shells against what Landlock alone leaves open, through the real tool path: a
scripted run's Bash in the real sandbox, on the real kernel. Each probe here got through
before the launcher dropped capabilities and installed its seccomp filter
(``subagents.tools.sandbox_syscalls``)."""

from __future__ import annotations

import errno
import os
import resource
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from subagents.messages import RunStatus, ToolResultBlock
from subagents.runtime import Runtime
from subagents.tools.permissions import Permissions
from subagents.tools.sandbox_syscalls import EPERM, filter_program

from .conftest import WAIT
from .test_sandbox_runs import TRUSTING_BASH, agent, bash_run, landlock, results

PY = sys.executable


def run_bash(repo: Path, commands: list[str], permissions: str | Permissions) -> list[str]:
    """Run ``commands`` as one agent's Bash calls; what the model was shown for each. In
    ``plan`` mode the Bash is one that calls every line read-only: the kernel must hold."""
    model = bash_run(commands)
    tools = [TRUSTING_BASH] if permissions == "plan" else []
    with Runtime(
        [agent("worker")], model=model, workspace=repo, permissions=permissions, tools=tools
    ) as rt:
        assert rt.run("worker", "probe", wait=WAIT).status is RunStatus.COMPLETED
    shown: list[ToolResultBlock] = results(model, "worker")
    assert len(shown) == len(commands)
    return [r.content for r in shown]


def metadata(path: Path) -> tuple[object, ...]:
    st = os.lstat(path)
    flags = subprocess.run(["lsattr", str(path)], capture_output=True, text=True).stdout
    return st.st_mode, st.st_uid, st.st_gid, st.st_mtime_ns, sorted(os.listxattr(path)), flags


@landlock
def test_a_plan_mode_run_changes_no_files_metadata(repo: Path, tmp_path: Path) -> None:
    """Landlock does not handle chmod, chown, utimes, xattrs or inode flags: the filter of a
    read-only run denies them, in the workspace and outside it."""
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    targets = [repo / "src" / "calc.py", outside]
    before = [metadata(p) for p in targets]
    commands = []
    for path in targets:
        commands += [
            f"chmod 600 {path}",
            f"chown 1:1 {path}",
            f"touch -d 2000-01-01 {path}",
            f"{PY} -c \"import os; os.setxattr('{path}', 'user.x', b'1')\"",
        ]
        if shutil.which("chattr"):
            commands.append(f"chattr +A {path}")
    shown = run_bash(repo, commands, "plan")
    assert [metadata(p) for p in targets] == before, shown
    assert all("not permitted" in out or "Permission denied" in out for out in shown), shown


@pytest.fixture
def listeners(tmp_path: Path) -> Iterator[tuple[socket.socket, socket.socket]]:
    """A UDP socket and a unix stream socket listening outside the sandbox."""
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(str(tmp_path / "daemon.sock"))
    unix.listen(4)
    yield udp, unix
    udp.close()
    unix.close()


@landlock
def test_network_off_sends_no_datagram_and_reaches_no_unix_socket(
    repo: Path, tmp_path: Path, listeners: tuple[socket.socket, socket.socket]
) -> None:
    """A ``plan`` run's network is off: not only TCP. Both sends are synchronous (a local
    datagram is queued, a unix connection is pending, when the call returns), so once the
    run is over, empty queues mean nothing was sent."""
    udp, unix = listeners
    port = udp.getsockname()[1]
    udp_socket = "socket.socket(socket.AF_INET, socket.SOCK_DGRAM)"
    send = f"import socket; {udp_socket}.sendto(b'x', ('127.0.0.1', {port}))"
    connect = f"import socket; socket.socket(socket.AF_UNIX).connect('{tmp_path / 'daemon.sock'}')"
    shown = run_bash(repo, [f'{PY} -c "{send}"', f'{PY} -c "{connect}"'], "plan")
    udp.setblocking(False)
    unix.setblocking(False)
    with pytest.raises(BlockingIOError):
        udp.recv(16)
    with pytest.raises(BlockingIOError):
        unix.accept()
    assert all("PermissionError" in out for out in shown), shown


@pytest.fixture
def bystander() -> Iterator[int]:
    """A process of the same user outside the sandbox (as the runtime is)."""
    proc = subprocess.Popen(["sleep", "600"])
    yield proc.pid
    proc.kill()
    proc.wait()


@landlock
@pytest.mark.parametrize("mode", ["plan", "bypassPermissions"])
def test_no_run_changes_another_processes_priority_or_limits(
    repo: Path, bystander: int, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The seccomp filter's refusal, where the command sees the bystander: without a PID
    namespace of its own (in one, another process is not even in sight: ``No such
    process``)."""
    monkeypatch.setenv("SUBAGENTS_PID_NAMESPACE", "0")
    limit = resource.prlimit(bystander, resource.RLIMIT_NOFILE)
    priority = os.getpriority(os.PRIO_PROCESS, bystander)  # the tests' own (nice -n 10 pytest)
    affinity = os.sched_getaffinity(bystander)
    shown = run_bash(
        repo,
        [
            f"renice -n 7 -p {bystander}",
            f"prlimit --pid {bystander} --nofile=64:64",
            f"ionice -c 3 -p {bystander}",
            f"taskset -p 1 {bystander}",
            "nice -n 3 ionice -c 3 taskset -c 0 prlimit --nofile=64:64 echo wrapped",
        ],
        mode,
    )
    assert os.getpriority(os.PRIO_PROCESS, bystander) == priority
    assert resource.prlimit(bystander, resource.RLIMIT_NOFILE) == limit
    assert os.sched_getaffinity(bystander) == affinity
    assert all("not permitted" in out for out in shown[:4]), shown
    assert shown[4] == "wrapped"  # what wraps a command (process 0, itself) still works


@landlock
@pytest.mark.skipif(os.geteuid() != 0, reason="capabilities are root's")
def test_root_in_the_sandbox_keeps_only_the_file_capabilities(repo: Path) -> None:
    """As root (containers, CI) a raw socket sends any packet around the TCP rule, and
    ``unshare``, ``ip link``, ``hostname`` or the clock reach the whole machine."""
    raw = "import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)"
    shown = run_bash(
        repo,
        [
            f'{PY} -c "{raw}" && echo raw-socket',
            "unshare -n true && echo unshared",
            "grep CapBnd /proc/self/status",
            "echo x > owned && chown 1:1 owned && stat -c %u owned",
        ],
        "bypassPermissions",
    )
    assert "raw-socket" not in shown[0] and "PermissionError" in shown[0], shown
    assert "unshared" not in shown[1] and "not permitted" in shown[1], shown
    assert shown[2].split() == ["CapBnd:", "00000000000000ff"]
    assert shown[3] == "1"  # root still owns files in its workspace


def test_the_filter_is_made_only_where_the_system_call_numbers_are_known() -> None:
    assert filter_program(read_only=True, network=False, machine="riscv64") is None
    for machine in ("x86_64", "aarch64"):
        wide = filter_program(read_only=False, network=True, machine=machine)
        narrow = filter_program(read_only=True, network=False, machine=machine)
        assert wide is not None and narrow is not None and len(narrow) > len(wide)


@landlock
@pytest.mark.skipif(not shutil.which("ipcmk"), reason="util-linux's ipcmk is not installed")
def test_a_plan_mode_run_makes_no_ipc_object_of_the_machine(repo: Path) -> None:
    """A System V segment or queue outlives the run (``ipcrm`` removes it, by id)."""
    shown = run_bash(repo, ["ipcmk -M 4096", "ipcmk -Q", "ipcmk -S 1"], "plan")
    kinds = {"Shared memory": "-m", "Message queue": "-q", "Semaphore": "-s"}
    made = [line.split(" id: ") for out in shown for line in out.splitlines() if " id: " in line]
    for kind, ident in made:  # what a failing run left
        subprocess.run(["ipcrm", kinds[kind], ident], check=False)
    assert made == [], shown
    assert all("not permitted" in out for out in shown), shown


PROBE = Path(__file__).resolve().parent / "io_uring_probe.py"


@landlock
def test_no_io_uring_request_goes_around_the_filter(
    repo: Path, tmp_path: Path, listeners: tuple[socket.socket, socket.socket]
) -> None:
    """An io_uring request is no system call the filter sees: a plan run's ring made a unix
    socket (then connected to a daemon outside) and set an extended attribute, both of
    which the filter denies as calls. So where the filter denies anything the ring could
    do instead (a read-only run, the network off), ``io_uring_setup`` fails."""
    _, unix = listeners
    target = repo / "src" / "calc.py"
    before = metadata(target)
    shown = run_bash(
        repo,
        [
            f"{PY} {PROBE} connect {tmp_path / 'daemon.sock'}",
            f"{PY} {PROBE} setxattr {target} user.x 1",
        ],
        "plan",
    )
    unix.setblocking(False)
    with pytest.raises(BlockingIOError):
        unix.accept()
    assert metadata(target) == before, shown
    assert shown[0].endswith(f"ring socket: errno {EPERM}"), shown
    assert shown[1].endswith(f"ring setxattr: errno {EPERM}"), shown


@landlock
def test_a_system_call_number_past_the_table_fails_as_unknown_and_kills_nothing(
    repo: Path,
) -> None:
    """``syscall(-1)`` (how a program probes) and an x32 number (``__X32_SYSCALL_BIT``,
    which must not reach the rules' numbers either) fail with ``ENOSYS``, as an unknown
    number does without a filter: the program goes on, the x32 ``chmod`` changes nothing."""
    target = repo / "src" / "calc.py"
    before = metadata(target)
    call = "import ctypes; c = ctypes.CDLL(None, use_errno=True)"
    probe = "print(c.syscall(-1), ctypes.get_errno(), end=' ')"
    x32_chmod = f"print(c.syscall(0x40000000 | 90, b'{target}', 0o600), ctypes.get_errno())"
    shown = run_bash(repo, [f'{PY} -c "{call}; {probe}; {x32_chmod}"'], "plan")
    assert shown == [f"-1 {errno.ENOSYS} -1 {errno.ENOSYS}"], shown
    assert metadata(target) == before


def inode_version(path: Path) -> str:
    return subprocess.run(["lsattr", "-v", str(path)], capture_output=True, text=True).stdout


@landlock
@pytest.mark.skipif(not shutil.which("lsattr"), reason="e2fsprogs' lsattr is not installed")
def test_a_plan_mode_run_sets_no_inode_version(repo: Path) -> None:
    """``FS_IOC_SETVERSION`` (``chattr -v``) changes an ext2/3/4 inode's generation through a
    descriptor opened for reading, as ``FS_IOC_SETFLAGS`` does its flags."""
    target = repo / "src" / "calc.py"
    before = inode_version(target)
    if "Operation not supported" in before or not before:
        pytest.skip("this file system keeps no inode version")
    ioctl = f"fcntl.ioctl(os.open('{target}', os.O_RDONLY), 0x40087602, struct.pack('l', 4242))"
    shown = run_bash(repo, [f'{PY} -c "import fcntl, os, struct; {ioctl}"'], "plan")
    assert inode_version(target) == before, shown
    assert "not permitted" in shown[0], shown


@landlock
def test_a_plan_mode_run_adds_no_key_to_the_users_keyring(repo: Path) -> None:
    """The user's keyring (``keyctl add user NAME DATA @u``) outlives the run and is the
    user's everywhere; a plan run may still read it (``KEYCTL_GET_KEYRING_ID``)."""
    name = f"subagents-plan-{os.getpid()}"
    libc = "import ctypes; c = ctypes.CDLL(None, use_errno=True); c.syscall.restype = ctypes.c_long"
    add = f"print(c.syscall(248, b'user', b'{name}', b'v', 1, -4), ctypes.get_errno(), end=' ')"
    read = "print(c.syscall(250, 0, -4, 0) > 0)"  # KEYCTL_GET_KEYRING_ID of @u
    shown = run_bash(repo, [f'{PY} -c "{libc}; {add}; {read}"'], "plan")
    keys = Path("/proc/keys").read_text() if Path("/proc/keys").exists() else ""
    assert f" {name}:" not in keys, shown
    assert shown == [f"-1 {EPERM} True"], shown
