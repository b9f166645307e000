"""Leases: which runtimes sharing a store are alive, so that their runs are never taken twice.

Each Runtime writes a lease (``messages.Lease``) for itself in the store when it starts,
renews it every ``lease_s / 3`` seconds, and deletes it when it closes. Its runs carry its id
(``RunRecord.owner``). A lease is alive until its ``expires_at`` (set by the host, ``lease_s``
after each renewal); an unfinished run whose owner holds no live lease is **orphaned**: the
process hosting it is gone (killed, crashed, its machine lost, or stalled past its lease).
Orphans are what ``subagents resume`` (and a Runtime started with ``restore=True``) take up;
the runs of a live lease are left to their host.

One shortcut, never a guess: on the machine that wrote a lease (same kernel boot and pid
namespace, ``machine_id``), a lease whose process no longer exists is dead at once, without
waiting for it to expire (a ``kill -9`` is seen by the next ``ps``). Elsewhere only time
tells: a host on another machine counts as alive until its lease expires. Clocks of hosts
sharing a store are assumed to agree to well within ``lease_s``.

Which clock: the wall clock (``time.time``) is the only one hosts on several machines share,
and it steps (NTP, a person, a VM's clock set again after a pause). A step forward by more
than what is left of a lease made every live host's lease look lapsed until its next renewal,
and a runtime starting then (``restore=True``, the default) took the runs of live processes
over (their hosts, fenced, failed them all); a step back kept a stalled host's lease looking
alive that much longer. So a lease also carries its deadline on ``CLOCK_BOOTTIME``
(``expires_boot``), one clock for every process of a kernel boot that no step moves (and
that counts a suspend); a reader on the lease's own machine (``machine_id``: the boot, the
pid and time namespaces) decides by it. Across machines the wall clock is all there is.

This module is the one place that looks at hosts and processes; the supervisor is handed the
set of live owners as data.
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import socket
import time
from collections.abc import Callable, Iterable

from subagents.messages import Lease, RunRecord

DEFAULT_LEASE_S = 15.0
"""Seconds a lease lasts without renewal: a dead host's runs are orphaned within this."""

LEASE_ENV = "SUBAGENTS_LEASE_S"


def lease_seconds(given: float | None = None) -> float:
    """The lease duration: ``given``, else ``$SUBAGENTS_LEASE_S``, else 15 s. ``ValueError``
    naming the source for anything but a positive, finite number of seconds."""
    source = "lease_s"
    value: object = given
    if value is None:
        raw = os.environ.get(LEASE_ENV, "").strip()
        if not raw:
            return DEFAULT_LEASE_S
        source = LEASE_ENV
        try:
            value = float(raw)
        except ValueError:
            raise ValueError(f"{LEASE_ENV} must be a number of seconds, got {raw!r}") from None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 < value < float("inf")
    ):
        raise ValueError(f"{source} must be a positive number of seconds, got {value!r}")
    return float(value)


def machine_id() -> str:
    """Where a pid and the boot clock mean something: the kernel boot, the pid namespace and
    the time namespace (which offsets ``CLOCK_BOOTTIME``; Linux), else the host name. Two
    containers with one host name but their own pid namespaces differ."""
    return _machine()[0]


@functools.cache
def _machine() -> tuple[str, bool]:
    """``machine_id``, and whether it names the kernel boot: only then does a boot-clock
    reading mean the same to its writer and its reader (a reboot restarts the clock at 0, and
    a machine known by its host name alone is the same one after a reboot)."""
    parts = [socket.gethostname()]
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            boot = f.read().strip()
        parts += [boot, os.readlink("/proc/self/ns/pid")]
    except OSError:
        return "|".join(parts), False
    with contextlib.suppress(OSError):  # a kernel before 5.6 has no time namespaces
        time_ns = os.readlink("/proc/self/ns/time")
        if time_ns != _INITIAL_TIME_NS:  # the initial one (no offsets) goes unsaid: the id
            parts.append(time_ns)  # is then an older version's, which it did not name
    return "|".join(parts), bool(boot)


_INITIAL_TIME_NS = "time:[4026531834]"
"""The time namespace every process is in unless put in another (``PROC_TIME_INIT_INO``)."""


def boot_clock() -> float:
    """Seconds on this machine's ``CLOCK_BOOTTIME``: since its boot, suspend included, the
    same for every process of one ``machine_id``, never stepped; 0.0 where there is none, or
    where the boot is not known (``machine_id`` without it: a reading from before a reboot
    would pass for one of this boot)."""
    return time.clock_gettime(_BOOTTIME) if _BOOTTIME is not None and _machine()[1] else 0.0


_BOOTTIME: int | None = getattr(time, "CLOCK_BOOTTIME", None)


def new_owner() -> str:
    """A fresh owner id for a runtime of this process: ``host:pid:nonce``."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


def lease_for(owner: str, lease_s: float, *, started_at: float, now: float | None = None) -> Lease:
    """The lease a runtime of this process writes (or renews) at ``now`` (a wall-clock time:
    its boot-clock deadline is as far from the boot clock's reading as ``now`` is from the
    wall clock's, so a ``now`` given by a test moves both)."""
    wall = time.time()
    now = wall if now is None else now
    boot = boot_clock()
    return Lease(
        owner=owner,
        host=socket.gethostname(),
        pid=os.getpid(),
        machine=machine_id(),
        started_at=started_at,
        renewed_at=now,
        expires_at=now + lease_s,
        expires_boot=boot + (now - wall) + lease_s if boot else 0.0,
    )


def _process_exists(pid: int) -> bool:
    if pid <= 0:  # no process: os.kill would signal a process group, or every process
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    except OSError:
        return True  # cannot tell: let the lease's time decide
    return True


def overdue(lease: Lease, now: float | None = None) -> float:
    """Seconds since ``lease``'s deadline at ``now`` (a wall-clock time; negative: before
    it): on its own machine by the boot clock, which no step of the wall clock moves (the
    reading offset as ``now`` is from the wall clock), elsewhere (or for a lease without a
    boot deadline) by the wall clock."""
    wall = time.time()
    now = wall if now is None else now
    if lease.expires_boot and lease.machine == machine_id():
        boot = boot_clock()
        if boot:
            return boot + (now - wall) - lease.expires_boot
    return now - lease.expires_at


def lapsed(lease: Lease, now: float | None = None) -> bool:
    """Whether ``lease`` went unrenewed past its deadline at ``now`` (``overdue``)."""
    return overdue(lease, now) >= 0


def alive(lease: Lease, now: float | None = None) -> bool:
    """Whether ``lease``'s runtime may still be hosting its runs."""
    if lapsed(lease, now):
        return False
    if lease.machine and lease.machine == machine_id() and lease.pid != os.getpid():
        return _process_exists(lease.pid)  # on this machine a dead process is seen at once
    return True


def stalled(lease: Lease, now: float | None = None) -> bool:
    """Whether ``lease`` lapsed while its process still exists on this machine: stopped
    (SIGSTOP), hung or swapped out, not dead. Such a host, stopped inside a write, holds a
    SQLite store's write lock until it goes on or dies."""
    return (
        lapsed(lease, now)
        and lease.machine == machine_id()
        and lease.pid != os.getpid()
        and _process_exists(lease.pid)
        and not _started_after_renewal(lease)
    )


def ended_here(lease: Lease, now: float | None = None) -> bool:
    """Whether ``lease``'s runtime has surely ended, so that its row may go: lapsed at ``now``
    and written on this machine by another process that no longer exists, or whose pid a
    process started since its last renewal has taken. Never a live owner's (not lapsed), nor
    one a stalled owner may still renew into (its process exists: ``stalled``), nor the
    lease of another machine (only time tells there, and it cannot tell a host that died from
    one that stalled), nor one of this process (another runtime of it may be late to renew)."""
    return (
        lapsed(lease, now)
        and bool(lease.machine)
        and lease.machine == machine_id()
        and lease.pid != os.getpid()
        and (not _process_exists(lease.pid) or _started_after_renewal(lease))
    )


def _started_after_renewal(lease: Lease) -> bool:
    """Whether the process of ``lease.pid`` on this machine started after the lease was last
    renewed: a pid reused since its host died, not its host. Told by the start time Linux
    gives in ``/proc/PID/stat`` (clock ticks on the boot clock, the lease's own); False
    where that cannot be read or the lease has no boot deadline."""
    if not lease.expires_boot:
        return False
    try:
        with open(f"/proc/{lease.pid}/stat", "rb") as f:
            stat = f.read()
        ticks = int(stat[stat.rindex(b")") + 2 :].split()[19])  # field 22, starttime
    except (OSError, ValueError, IndexError):
        return False
    renewed = lease.expires_boot - (lease.expires_at - lease.renewed_at)
    return ticks / os.sysconf("SC_CLK_TCK") > renewed


def live_owners(leases: Iterable[Lease], now: float | None = None) -> frozenset[str]:
    """The owners whose leases are alive at ``now``."""
    now = time.time() if now is None else now
    return frozenset(lease.owner for lease in leases if alive(lease, now))


def restartable_host(owner: str | None) -> str | None:
    """The name of the host that an owner id ``host:pid:nonce:NAME`` names after its
    process: a host started again in a new process when its process dies (a detached tree's
    Ray actor, ``runtime._detached_trees``), whose new process takes its runs up. None for the
    owner id of a plain process (``host:pid:nonce``)."""
    parts = (owner or "").split(":", 3)
    return parts[3] if len(parts) == 4 and parts[3] else None


def restarting_owners(
    owners: Iterable[str | None], live: frozenset[str], listed: Callable[[str], bool] | None
) -> frozenset[str]:
    """Of ``owners``, those whose lease is not alive but whose restartable host
    (``restartable_host``) is still ``listed`` where it runs: being started again, so its
    runs are its new process's to take up. Empty when nobody can tell (``listed`` None);
    each host name is asked once."""
    if listed is None:
        return frozenset()
    asked: dict[str, bool] = {}
    found: set[str] = set()
    for owner in owners:
        name = restartable_host(owner)
        if owner is None or name is None or owner in live:
            continue
        if name not in asked:
            asked[name] = listed(name)
        if asked[name]:
            found.add(owner)
    return frozenset(found)


class Liveness:
    """The leases of a store read once, to say of many runs whether their host is alive.

    ``listed(name)``: whether a restartable host of that name (``restartable_host``) still
    exists where it runs (a cluster asked: Ray lists the actor, alive or being restarted);
    None when nobody can tell (a local store). A run whose lease is gone but whose host is
    listed is ``restarting``, not orphaned: its host's new process takes it up."""

    def __init__(
        self,
        leases: Iterable[Lease],
        now: float | None = None,
        *,
        listed: Callable[[str], bool] | None = None,
    ) -> None:
        self.now = time.time() if now is None else now
        self.by_owner = {lease.owner: lease for lease in leases}
        self.live = live_owners(self.by_owner.values(), self.now)
        self._listed = listed
        self._asked: dict[str, bool] = {}

    def restarting(self, record: RunRecord) -> bool:
        """An unfinished run whose host holds no live lease, but is a restartable host still
        listed: being started again (asked once per host name)."""
        if record.status.terminal or record.owner in self.live or self._listed is None:
            return False
        name = restartable_host(record.owner)
        if name is None:
            return False
        if name not in self._asked:
            self._asked[name] = self._listed(name)
        return self._asked[name]

    def orphaned(self, record: RunRecord) -> bool:
        """An unfinished run whose host holds no live lease (and is not being restarted)."""
        return (
            not record.status.terminal
            and record.owner not in self.live
            and not self.restarting(record)
        )

    def host(self, record: RunRecord) -> str:
        """Who hosts (or hosted) ``record``, for people: ``host pid N``."""
        lease = self.by_owner.get(record.owner or "")
        if lease is not None:
            return f"{lease.host} pid {lease.pid}"
        return describe_owner(record.owner)

    def describe(self, record: RunRecord) -> str:
        """The host and its lease, for people: alive (renewed when) or gone (since when)."""
        lease = self.by_owner.get(record.owner or "")
        if self.restarting(record):
            return f"{describe_owner(record.owner)}, gone; its host is being started again"
        if lease is None:
            return f"{describe_owner(record.owner)}, no lease (its runtime has ended)"
        # by the clock that decides (a step of the wall clock moves none of this machine's)
        late = overdue(lease, self.now)
        if lease.owner in self.live:
            renewed = late + (lease.expires_at - lease.renewed_at)
            return f"{lease.host} pid {lease.pid}, lease renewed {_ago(renewed)}"
        if late < 0:
            return f"{lease.host} pid {lease.pid}, whose process is gone"
        return f"{lease.host} pid {lease.pid}, whose lease lapsed {_ago(late)}"


def describe_owner(owner: str | None) -> str:
    """An owner id (``host:pid:nonce``) as ``host pid N``."""
    if not owner:
        return "no host"
    parts = owner.split(":", 3)
    if len(parts) >= 3 and parts[1].isdigit():
        return f"{parts[0]} pid {parts[1]}" + (f" ({parts[3]})" if len(parts) == 4 else "")
    return owner


def _ago(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f}s ago"
    if seconds < 5400:
        return f"{seconds / 60:.0f}m ago"
    return f"{seconds / 3600:.0f}h ago"
