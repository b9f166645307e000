"""What a lease's machine and clocks say to a reader: which readings of this machine it may
trust (the boot clock only where the boot is known), which process it names (a pid reused
by a process started after the lease's last renewal is not its host), and how long ago it
lapsed (by the clock that decided it lapsed)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import msgspec
import pytest

from subagents.messages import Lease, RunRecord, RunStatus
from subagents.store.leases import Liveness, alive, lease_for, machine_id, stalled

SRC = str(Path(__file__).resolve().parents[2] / "src")
HIDDEN_BOOT = ["unshare", "-Urm", "sh", "-c", 'mount -t tmpfs none /proc/sys/kernel/random && "$@"']


def _boot_id_can_be_hidden() -> bool:
    """Whether this machine lets a process hide the boot id from itself (an unprivileged user
    and mount namespace: a tmpfs over /proc/sys/kernel/random)."""
    if shutil.which("unshare") is None:
        return False
    done = subprocess.run([*HIDDEN_BOOT, "-", "true"], capture_output=True)
    return done.returncode == 0


def test_without_the_boot_id_a_lease_from_before_a_reboot_is_timed_by_the_wall_clock() -> None:
    """Where the boot id cannot be read (no /proc, a masked one), ``machine_id`` is the host
    name alone: the same before and after a reboot, while the boot clock restarts at 0. A
    lease written before the reboot, lapsed by the wall clock long ago, carries a boot
    deadline far ahead of the new boot's clock: compared on that clock it looked alive for
    as long as the old boot had lasted (its pid, reused after the reboot, exists). Where the
    boot is not known, neither a lease written nor one read is timed by the boot clock."""
    if not _boot_id_can_be_hidden():
        pytest.skip("no unprivileged user namespace here to hide the boot id in")
    probe = textwrap.dedent(
        """
        import os, socket, time
        from subagents.messages import Lease
        from subagents.store.leases import alive, lease_for, machine_id
        assert "|" not in machine_id(), machine_id()  # the host name alone
        now = time.time()
        assert lease_for("me", 15.0, started_at=now).expires_boot == 0.0
        before_reboot = Lease(
            owner="h:1:a", host=socket.gethostname(), pid=os.getppid(), machine=machine_id(),
            renewed_at=now - 75, expires_at=now - 60,
            expires_boot=time.clock_gettime(time.CLOCK_BOOTTIME) + 86400,
        )
        print(alive(before_reboot))
        """
    )
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run(
        [*HIDDEN_BOOT, "-", sys.executable, "-c", probe], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_a_stalled_lease_names_no_process_started_after_its_renewal() -> None:
    """``stalled`` (what a busy store's error names, with ``kill -CONT PID``): a host killed
    leaves its lease; its pid, reused by a process started later, exists, and was named as
    the stopped host holding the store. A process started after the lease's last renewal
    cannot be the one that renewed it."""
    earlier = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                               stdin=subprocess.PIPE)  # fmt: skip
    try:
        held = msgspec.structs.replace(
            lease_for("h:1:a", 1.0, started_at=time.time()), pid=earlier.pid
        )  # renewed after its process started: a host stopped since
        assert stalled(held, time.time() + 10)
        renewed_long_ago = lease_for("h:2:b", 1.0, started_at=0.0, now=time.time() - 60)
        later = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                                 stdin=subprocess.PIPE)  # fmt: skip
        try:
            reused = msgspec.structs.replace(renewed_long_ago, pid=later.pid)
            assert not stalled(reused, time.time() + 10)  # its pid, another's now
        finally:
            later.communicate()
    finally:
        earlier.communicate()


def test_how_long_ago_a_lease_lapsed_is_said_by_the_clock_that_decided_it() -> None:
    """A lease of this machine lapses by the boot clock; after a step of the wall clock (2 h
    forward here: the lease's wall-clock times are 2 h behind) ``describe`` said "lapsed 2h
    ago" of a lease 5 min overdue, and "renewed 2h ago" of one renewed 10 min ago."""
    step = 7200.0

    def written_before_the_step(owner: str, lease_s: float, ago: float) -> Lease:
        lease = lease_for(owner, lease_s, started_at=0.0, now=time.time() - ago)
        return msgspec.structs.replace(
            lease, renewed_at=lease.renewed_at - step, expires_at=lease.expires_at - step
        )

    def record(owner: str) -> RunRecord:
        return RunRecord(
            run_id="r", agent="a", task="t", root_run_id="r", owner=owner,
            status=RunStatus.RUNNING,
        )  # fmt: skip

    overdue = written_before_the_step("h:1:a", 15.0, ago=315)  # 5 min past its deadline
    renewed = written_before_the_step("h:2:b", 3600.0, ago=600)  # alive, renewed 10 min ago
    view = Liveness([overdue, renewed])
    assert view.describe(record("h:1:a")).endswith("whose lease lapsed 5m ago")
    assert view.describe(record("h:2:b")).endswith("lease renewed 10m ago")


def test_a_lease_naming_no_possible_pid_names_no_process() -> None:
    """A lease row whose pid is 0 or negative (damaged, or written by a stranger) named no
    process but passed for a live one: ``os.kill(0, 0)`` signals one's own process group,
    ``os.kill(-1, 0)`` every process one may signal, and both succeed. Such a lease counted
    alive until it lapsed, and a busy store's error then advised ``kill -CONT -1`` (which
    wakes every stopped process of the user)."""
    now = time.time()
    for pid in (0, -1):
        lease = msgspec.structs.replace(lease_for("h:1:a", 60.0, started_at=now), pid=pid)
        assert not alive(lease)  # on this machine a pid no process has is a dead host
        assert not stalled(lease, now + 120)


def test_a_lease_an_older_version_wrote_on_this_machine_is_of_this_machine() -> None:
    """An older version named its machine by host name, boot and pid namespace; naming the
    time namespace too made every lease it wrote (and every lease this one writes, to it)
    another machine's: during an upgrade a killed host's runs waited for its lease to lapse
    instead of being taken at once. The initial time namespace (no clock offsets) goes
    unsaid, so the two versions agree wherever it is the one in use."""
    if os.readlink("/proc/self/ns/time") != "time:[4026531834]":
        pytest.skip("this process is in a time namespace of its own")
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    older = f"{socket.gethostname()}|{boot}|{os.readlink('/proc/self/ns/pid')}"
    assert machine_id() == older
    now = time.time()
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           check=True, capture_output=True, text=True)  # fmt: skip
    killed = Lease(owner="h:1:a", host="h", pid=int(ended.stdout), machine=older,
                   renewed_at=now, expires_at=now + 15)  # fmt: skip
    assert not alive(killed)  # its process gone: dead at once, as the older version said
