"""A private /dev/shm per sandboxed command (``subagents.tools.sandbox_shm``), on the real
kernel: ``multiprocessing`` works in a run's Bash in every mode, the machine's /dev/shm
stays out of reach, and where the system forbids the namespace the launcher and the runtime
fall back to an unwritable /dev/shm and say so."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from subagents.tools import sandbox_exec, sandbox_shm
from subagents.tools.sandbox import LAUNCHER, Sandbox, private_shm_refusal

from .test_sandbox_runs import landlock, tree
from .test_sandbox_syscalls import run_bash

PY = sys.executable
SYSTEM_PYTHON = "/usr/bin/python3"
TOOLS = Path(LAUNCHER).parent
WORK = """
import concurrent.futures, multiprocessing
lock = multiprocessing.Lock()
with lock:
    queue = multiprocessing.Queue()
    queue.put("queued")
with multiprocessing.Pool(2) as pool:
    squares = pool.map(abs, [-1, -4, -9])
with concurrent.futures.ProcessPoolExecutor(2) as ex:
    more = list(ex.map(abs, [-16]))
print("pool", squares, more, queue.get())
"""
ESCAPE = """
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
tries = {"unshare": lambda: libc.unshare(0x10000000),
         "umount": lambda: libc.umount2(b"/dev/shm", 2),
         "unshare-files": lambda: libc.unshare(0x400)}  # CLONE_FILES: no namespace
for name, call in tries.items():
    print(name, "done" if call() == 0 else errno.errorcode[ctypes.get_errno()], flush=True)
clone = {"x86_64": 56, "aarch64": 220}[os.uname().machine]  # not filtered: nest one
pid = libc.syscall(clone, 0x10000000 | 0x20000 | 17, 0, 0, 0, 0)  # NEWUSER|NEWNS, SIGCHLD
if pid == 0:  # with every capability in the nested namespaces
    for name in ("umount", "mount"):
        done = (libc.umount2(b"/dev/shm", 2) if name == "umount"
                else libc.mount(b"none", b"/dev/shm", b"tmpfs", 0, None))
        print("nested", name, "done" if done == 0 else errno.errorcode[ctypes.get_errno()],
              flush=True)
    os._exit(0)
print("nested", os.waitpid(pid, 0)[1] if pid > 0 else errno.errorcode[ctypes.get_errno()])
"""


@pytest.fixture
def machine_shm() -> Iterator[tuple[Path, Path]]:
    """A file in the machine's /dev/shm that anyone could write (as another program's),
    and the name of one a command may try to make there (removed if it did)."""
    path, new = (Path("/dev/shm") / f"subagents-test-{uuid.uuid4().hex}" for _ in "ab")
    path.write_text("host")
    path.chmod(0o666)
    try:
        yield path, new
    finally:
        path.unlink()
        new.unlink(missing_ok=True)


@landlock
@pytest.mark.parametrize("mode", ["plan", "bypassPermissions"])
def test_multiprocessing_works_and_the_machines_shm_stays_out_of_reach(
    repo: Path, tmp_path: Path, machine_shm: tuple[Path, Path], mode: str
) -> None:
    """Before: ``multiprocessing.Lock()`` failed with ``Permission denied`` (sem_open in
    /dev/shm) in every mode. Now each command has a /dev/shm of its own; a file the test
    made in the machine's is neither seen nor changed, and a plan run writes nothing of
    the user's (its private /dev/shm goes away with the command)."""
    (script := tmp_path / "work.py").write_text(WORK)
    (escape := tmp_path / "escape.py").write_text(ESCAPE)
    theirs, dropped = machine_shm
    before = tree(tmp_path)
    shown = run_bash(
        repo,
        [
            f"{PY} {script}",
            "ls -a /dev/shm",
            f"echo changed > {theirs} && echo > {dropped} && cat {theirs}",
            f"cat {theirs}",
            f"{PY} {escape}",
        ],
        mode,
    )
    assert shown[0] == "pool [1, 4, 9] [16] queued", shown
    assert theirs.name not in shown[1], shown
    assert shown[2] == "changed"  # in the command's own /dev/shm, gone with it
    assert "No such file" in shown[3], shown
    assert theirs.read_text() == "host" and not dropped.exists()
    assert shown[4].splitlines() == [
        "unshare EPERM", "umount EPERM", "unshare-files done", "nested umount EPERM",
        "nested mount EPERM", "nested 0",
    ]  # fmt: skip
    if mode == "plan":
        assert tree(tmp_path) == before


@pytest.fixture
def launcher_copy(tmp_path: Path) -> Iterator[Path]:
    """The launcher's five files where another user can read them (tmp_path is root's)."""
    folder = Path(tmp_path.anchor, "tmp") / f"subagents-launcher-{uuid.uuid4().hex}"
    folder.mkdir(mode=0o755)
    names = ("sandbox_exec.py", "sandbox_shm.py", "sandbox_syscalls.py", "reaper.py")
    for name in (*names, "reaper_ns.py"):
        shutil.copy(TOOLS / name, folder / name)
    try:
        yield folder
    finally:
        shutil.rmtree(folder)


@landlock
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root")
@pytest.mark.skipif(not os.access(SYSTEM_PYTHON, os.X_OK), reason=f"no {SYSTEM_PYTHON}")
def test_as_a_user_files_stay_the_users_and_the_command_can_be_killed(
    launcher_copy: Path,
) -> None:
    """A user who is not root gets the private /dev/shm through a user namespace mapping
    their ids to themselves: what the command makes belongs to them (not to ``nobody``'s
    overflow id), and the user's runtime can still kill the command's process group."""
    workspace = launcher_copy / "workspace"
    workspace.mkdir()
    os.chown(workspace, 65534, 65534)
    script = workspace / "work.py"
    script.write_text(
        WORK + "open('made', 'w').write('x')\nprint(__import__('os').listdir('/dev/shm'))\n"
    )
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    python = SYSTEM_PYTHON  # root's own (the venv's) is not another user's to run
    launch = [python, "-I", "-S", str(launcher_copy / "sandbox_exec.py")]
    launch += ["--write", str(workspace), "--private-shm", "--"]
    done = subprocess.run(
        [*as_nobody, *launch, python, str(script)],
        cwd=workspace, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.stdout.splitlines() == ["pool [1, 4, 9] [16] queued", "[]"], done
    made = (workspace / "made").stat()
    assert (made.st_uid, made.st_gid) == (65534, 65534)
    killer = f"""
import os, signal, subprocess, sys
child = subprocess.Popen({[*launch, "/bin/sh", "-c", "echo ready; exec sleep 600"]!r},
                         stdout=subprocess.PIPE, start_new_session=True, text=True)
assert child.stdout.readline() == "ready\\n"
os.killpg(child.pid, signal.SIGTERM)
print(child.wait(timeout=60))
"""
    killed = subprocess.run(
        [*as_nobody, python, "-I", "-c", killer],
        cwd=workspace, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert killed.stdout.strip() == str(-signal.SIGTERM), killed


@landlock
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root")
@pytest.mark.skipif(not os.access(SYSTEM_PYTHON, os.X_OK), reason=f"no {SYSTEM_PYTHON}")
def test_as_a_user_a_command_held_by_the_reaper_gets_its_private_shm(
    launcher_copy: Path,
) -> None:
    """As the runtime starts every command (``--status-fd``: the reaper in the launcher), a
    user who is not root still gets the private /dev/shm: the launcher writes its own
    ``/proc/self/uid_map``, which a process made undumpable (the reaper's guard of its
    status pipe) may not (its /proc files become root's; seen: ``Permission denied``
    on ``/proc/self/setgroups``, every sandboxed command refused with 125)."""
    workspace = launcher_copy / "workspace"
    workspace.mkdir()
    os.chown(workspace, 65534, 65534)
    status, told = os.pipe()
    launch = [SYSTEM_PYTHON, "-I", "-S", str(launcher_copy / "sandbox_exec.py")]
    launch += ["--status-fd", str(told), "--write", str(workspace), "--private-shm", "--"]
    try:
        done = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *launch,
             "/bin/sh", "-c", "touch /dev/shm/mine && ls /dev/shm"],
            cwd=workspace, capture_output=True, text=True, timeout=120, check=False,
            pass_fds=(told,),
        )  # fmt: skip
    finally:
        os.close(told)
    with os.fdopen(status, "rb") as said:
        assert said.read() == b"exit 0\nreaped\n", done
    assert (done.returncode, done.stdout) == (0, "mine\n"), done


PROBE = """
import json, pathlib, structlog
from subagents.tools import sandbox
with structlog.testing.capture_logs() as logs:
    runs = [sandbox.Sandbox.coerce(True).for_run(workspace=pathlib.Path("/"), read_only=True,
                                                 network=False) for _ in "ab"]
events = [e for e in logs if "/dev/shm" in e["event"]]
print(json.dumps([runs[0].private_shm, runs[1].private_shm, events]))
"""


@landlock
def test_where_namespaces_are_forbidden_it_warns_once_and_shm_stays_unwritable(
    tmp_path: Path,
) -> None:
    """A runtime started inside a sandbox (whose filter denies ``unshare``, as a system
    without user namespaces does): its probe fails, one warning names why and what to
    enable, no command gets the flag, and a launcher given it anyway runs the command with
    /dev/shm unwritable, as before."""
    outer = [PY, "-I", "-S", LAUNCHER, "--write", str(tmp_path), "--"]
    env = {**os.environ, "PYTHONPATH": str(TOOLS.parent.parent)}
    done = subprocess.run(
        [*outer, PY, "-c", PROBE], capture_output=True, text=True, timeout=120, env=env
    )
    first, again, events = json.loads(done.stdout.splitlines()[-1])
    assert (first, again) == (False, False), done
    assert len(events) == 1, events
    assert "unshare" in events[0]["why"] and "not permitted" in events[0]["why"], events
    assert "user namespaces" in events[0]["enable"]
    inner = [PY, "-I", "-S", LAUNCHER, "--private-shm", "--", PY, "-c", WORK]
    fell_back = subprocess.run([*outer, *inner], capture_output=True, text=True, timeout=120)
    assert "PermissionError" in fell_back.stderr and fell_back.returncode == 1, fell_back


def test_the_owner_can_keep_commands_on_the_machines_shm(tmp_path: Path) -> None:
    off = Sandbox.coerce(Sandbox(private_shm=False))
    run = off.for_run(workspace=tmp_path, read_only=False, network=True)
    assert run.private_shm is False and "--private-shm" not in run.argv(["true"], tmp_path)
    if sandbox_exec.kernel_abi() and private_shm_refusal() is None:
        on = Sandbox.coerce(True).for_run(workspace=tmp_path, read_only=True, network=False)
        assert "--private-shm" in on.argv(["true"], tmp_path)


@landlock
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root")
def test_the_private_mount_does_not_propagate_to_a_shared_tree(
    tmp_path: Path, machine_shm: tuple[Path, Path]
) -> None:
    """On a systemd machine ``/`` is a shared mount: a tmpfs mounted on /dev/shm in a copy
    of its namespace would appear in the machine's too, covering its /dev/shm for every
    program (seen without the launcher's ``MS_SLAVE``). Tried in a throwaway namespace of
    the test's own whose tree it makes shared (this machine's is private)."""
    theirs, dropped = machine_shm
    command = [PY, "-c", f"open({str(dropped)!r}, 'w')"]
    launch = [PY, "-I", "-S", LAUNCHER, "--write", str(tmp_path), "--private-shm", "--"]
    script = f"mount --make-rshared / && {shlex.join([*launch, *command])} && ls /dev/shm"
    done = subprocess.run(
        ["unshare", "-m", "--propagation", "unchanged", "sh", "-c", script],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    seen = done.stdout.split()
    assert theirs.name in seen and dropped.name not in seen, done


@landlock
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root")
def test_root_without_cap_sys_admin_keeps_its_reach_over_other_owners_files(
    tmp_path: Path,
) -> None:
    """Root without ``CAP_SYS_ADMIN`` (a container that allows user namespaces) gets the
    private /dev/shm through a user namespace. Mapped to itself alone there, it lost
    ``CAP_DAC_OVERRIDE`` over its workspace's files of other owners, which showed as
    ``nobody`` (seen: ``Permission denied``): every id is mapped to itself."""
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, 12345, 12345)
    command = f"echo root > {theirs}/made && stat -c %u {theirs} && {PY} -c {shlex.quote(WORK)}"
    launch = [PY, "-I", "-S", LAUNCHER, "--write", str(tmp_path), "--private-shm", "--"]
    no_admin = ["setpriv", "--bounding-set", "-sys_admin", "--inh-caps", "-sys_admin"]
    done = subprocess.run(
        [*no_admin, *launch, "/bin/sh", "-c", command],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.stdout.splitlines() == ["12345", "pool [1, 4, 9] [16] queued"], done
    assert (theirs / "made").read_text() == "root\n"


FILL = """
import errno, os
written = made = 0
try:
    with open("/dev/shm/fill", "wb") as out:
        while written < 8 * 2**20:
            written += out.write(bytes(2**16))
            out.flush()
except OSError as exc:
    print(errno.errorcode[exc.errno], written)
else:
    print("wrote", written)
try:
    while made < 100_000:
        os.close(os.open(f"/dev/shm/{made}", os.O_CREAT | os.O_WRONLY))
        made += 1
except OSError as exc:
    print(errno.errorcode[exc.errno], made)
"""


@landlock
def test_a_command_writing_past_its_shm_bound_gets_enospc(tmp_path: Path) -> None:
    """Each command's /dev/shm was a tmpfs of 25% of the machine's memory, with no total: a
    few commands could fill it. It is bounded by ``Sandbox(shm_size=...)`` (bytes): a write
    past the bound fails with ENOSPC, having taken no more than the bound; so does a file
    past its bound on files (empty files take memory too)."""
    if private_shm_refusal() is not None:
        pytest.skip("no private /dev/shm here")
    small = Sandbox.coerce(Sandbox(shm_size=2**20)).for_run(
        workspace=tmp_path, read_only=False, network=True
    )
    argv = small.argv([PY, "-I", "-c", FILL], tmp_path)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    files = sandbox_shm.INODES - 2  # its root directory and the filled file count too
    assert done.stdout.split() == ["ENOSPC", str(2**20), "ENOSPC", str(files)], done


def test_the_shm_bound_is_checked_when_set() -> None:
    for bad in (0, -1, True, "1g", 1.5):
        with pytest.raises(ValueError, match=r"Sandbox\(shm_size=...\): a number of bytes"):
            Sandbox.coerce(Sandbox(shm_size=bad))  # type: ignore[arg-type]
