"""The reaper as the init (PID 1) of a PID namespace of its own: nothing its command starts
can outlive it, nor outrun its kill.

Why: the reaper alone (``reaper``: a subreaper that lists its children, kills them, and
again) loses a race to a wandering fork bomb, whose every process forks two and ends: the
orphans of each round of kills refill the pids it freed, and the bomb lived on under init
(4 runs in 6, session 24). The kernel settles it when the reaper is the init of the
command's PID namespace: (1) the init's ``kill(-1, SIGKILL)`` reaches every other process
of the namespace at once (under the task list's lock, which a fork takes too: a fork that
was under way fails, its parent killed), and when the init ends, however it ends, the
kernel first refuses every new pid in the namespace, then kills all of it
(``zap_pid_ns_processes``); (2) so a SIGKILL of the reaper (Ray ending a lost driver's node
host, the runtime's own last resort) kills every daemon of its command with it; (3) from
inside, the init gets no signal it has no handler for: the command cannot SIGKILL or
SIGSTOP it. A fresh ``/proc`` is mounted in the namespace's mount namespace, so ``$$``,
``kill``, ``ps``, ``pgrep`` and ``/proc/self`` inside agree (they see the command's own
processes only).

How: the sandbox's launcher ``unshare``s ``CLONE_NEWPID`` (with its private ``/dev/shm``:
``sandbox_shm.enter``; without one, ``unshare`` here, only where it may without a user
namespace: as root), and its next fork is the namespace's init (``become_init``), which
runs the reaper (``reaper.run`` with ``init``). The launcher's first process either stays,
the runtime's child, waiting for the init and passing the runtime's stops on to it
(``_wait``: one more small process per command; a SIGKILL of it kills the init,
``PR_SET_PDEATHSIG``), or, detached (``tools.detached``), says the init's pid and ends.

Where not: outside the sandbox (the lead's call, session 25: an unsandboxed command may do
what its user's own shell may, ``kill``, ``pkill`` or ``ps`` a server an earlier Bash call
started, which a namespace of its own would refuse, for no security: such a command can undo
its launcher other ways; and it costs ~17% of a trivial command's CPU), user namespaces
refused (``sandbox_shm.ENABLE``), or the runtime started with ``SUBAGENTS_PID_NAMESPACE=0``
(the launcher's ``--no-pid-namespace``): the reaper alone, as before.

How many processes: since Linux 6.14 ``pid_max`` is the PID namespace's own, set from
inside by its init (root or not): the init sets it to ``RESERVED_PIDS + PROCESSES_MOST``
(``bound_processes``), so a fork bomb in a sandboxed command stops there (its forks fail
with EAGAIN) instead of taking the machine's pid table until the command's timeout. Before
6.14 the file is the machine's and is never written (no bound: a pids cgroup would, where one
is delegated).

Standard library only, loaded by name beside ``reaper`` (its siblings: ``reaper``),
whose helpers it uses (one copy of how a command's end is passed on); the C
calls through the ``libc`` the caller gives (``ctypes.CDLL(None)``, or the reaper's cheaper
``_Libc``).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
    from typing import Any
else:  # the C module, the same names (see ``reaper``)
    import _signal as signal

CLONE_NEWNS = 0x00020000
CLONE_NEWPID = 0x20000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_SLAVE = 2, 4, 8, 1 << 14, 1 << 19
PR_SET_PDEATHSIG = 1
PROCESSES_MOST = 4096
"""The most processes a sandboxed command keeps at once (builds of ``make -j`` or a test
runner's workers stay far under it; a fork bomb stops at it)."""
RESERVED_PIDS = 300
"""Pids the kernel hands out once only (``RESERVED_PIDS``; ``pid_max`` may not be set
below 301): after the cursor wraps, pids ``300 .. pid_max - 1`` are the namespace's."""
OWN_PID_MAX = (6, 14)
"""The first Linux whose ``pid_max`` is each PID namespace's (before it: the machine's)."""


def _waited() -> frozenset[int]:
    """What the init's waiter waits for: the runtime's stops and the init's end."""
    return frozenset(__import__("reaper").STOPS | {signal.SIGCHLD})


def unshare(libc: Any) -> bool:
    """Move this (single-threaded) process's next child into a new PID namespace, with a
    new mount namespace whose mounts do not propagate back (where a fresh ``/proc`` can be
    mounted); whether done. Only where no user namespace is needed (``CAP_SYS_ADMIN``)."""
    if libc.unshare(CLONE_NEWPID | CLONE_NEWNS) != 0:
        return False
    if libc.mount(None, b"/", None, MS_REC | MS_SLAVE, None) != 0:
        raise OSError("making the mounts slaves in a new mount namespace failed")
    return True


def become_init(libc: Any, status_fd: int, *, detached: bool) -> None:
    """Fork the namespace's init (after ``unshare`` or ``sandbox_shm.enter`` with
    ``CLONE_NEWPID``) and return in it, a fresh ``/proc`` mounted; this process never
    returns: detached, it says the init's pid (its pid out here) and ends; else it waits
    for the init and ends as it did (``_wait``). Signals stay blocked in the init: a stop
    that comes before the reaper waits for it is pending, not lost."""
    signal.pthread_sigmask(signal.SIG_BLOCK, _waited())
    # detached: the init says nothing before its pid is said (the pipe's end); else the
    # init tells its waiter how its shell ended (``tell``: an init cannot end by a signal)
    go, said = os.pipe()
    pid = os.fork()
    if pid == 0:
        if detached:
            os.close(said)
            os.read(go, 1)
        else:  # its waiter SIGKILLed (a kill of the runtime's children): the init too
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            _TELL[0] = said
        os.close(go)
        # a failure leaves the parent's /proc (the kill holds all the same: ``ps`` is off)
        libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
        bound_processes()
        return
    if detached:  # its pid said first, then the init may go on (``said`` closed: its EOF)
        try:  # noqa: SIM105 (contextlib: one more import at every start)
            os.write(status_fd, f"pid {pid}\n".encode())
        except OSError:
            pass
        os._exit(0)
    os.close(said)
    os.close(status_fd)  # the init's alone: its end is the runtime's news
    __import__("reaper").quiet_stdio()  # the command's output pipe ends with the command's writers
    _wait(pid, go)


_TELL = [-1]
"""In a waited-for init: the pipe to its waiter (``tell``)."""


def bound_processes(release: str | None = None) -> bool:
    """As the namespace's init: cap its pids at ``RESERVED_PIDS + PROCESSES_MOST``; whether
    done. Never on a kernel older than ``OWN_PID_MAX`` (``release``: ``uname -r``), where
    ``pid_max`` is the machine's and root could write it; a refusal (no such file, not
    allowed) leaves the command unbounded, as before."""
    if os.getpid() != 1 or kernel(release or os.uname().release) < OWN_PID_MAX:
        return False
    try:
        fd = os.open("/proc/sys/kernel/pid_max", os.O_WRONLY)
    except OSError:
        return False
    try:
        os.write(fd, b"%d\n" % (RESERVED_PIDS + PROCESSES_MOST))
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


def kernel(release: str) -> tuple[int, int]:
    """``(major, minor)`` of a ``uname -r`` (``6.18.44-fc-v595`` is ``(6, 18)``); ``(0, 0)``
    when it does not read so (then nothing is written)."""
    head = release.split(".")
    try:
        minor = head[1] if len(head) > 1 else "0"
        digits = ""
        for ch in minor:
            if not ch.isdigit():
                break
            digits += ch
        return int(head[0]), int(digits or "0")
    except ValueError:
        return (0, 0)


def tell(code: int) -> None:
    """In the init, at its end: how its shell ended (``-SIG``: a signal), for its waiter to
    end alike."""
    if _TELL[0] >= 0:
        os.write(_TELL[0], str(code).encode())


def _wait(init: int, told: int) -> None:
    """Pass the runtime's stops on to ``init`` (a signal to this process alone misses it)
    until it ends, then end as its shell did (as it ``told``), or as it did: by
    ``reaper``'s own ``end_as``, so a command ends alike with and without the namespace."""
    waited = _waited()
    while True:
        info = signal.sigwaitinfo(waited)
        if info.si_signo != signal.SIGCHLD:
            try:  # noqa: SIM105
                os.kill(init, info.si_signo)
            except OSError:
                pass  # ended meanwhile
            continue
        try:
            ended, status = os.waitpid(init, os.WNOHANG)
        except ChildProcessError:
            os._exit(125)
        if ended:
            break
    said = os.read(told, 32)
    code = int(said) if said.lstrip(b"-").isdigit() else os.waitstatus_to_exitcode(status)
    os._exit(__import__("reaper").end_as(code))


def kill_all() -> bool:
    """As the namespace's init: SIGKILL every other process in it at once and reap them
    all; whether done (False: this process is no init, nothing was sent)."""
    if os.getpid() != 1:  # kill(-1) elsewhere would reach every process of the user's
        return False
    try:  # noqa: SIM105
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        pass  # none left
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return True
