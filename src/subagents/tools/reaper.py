"""The reaper: run a command as a child of this process, which holds every process the command
ever starts, and kill them all when the command is over.

    python -I -S .../reaper.py [--linger] [--detach] (--status-fd N | --status-path P) -- CMD...

Why: a command's daemons leave its process group (``setsid``, a double fork, ``nohup``) and
may clear their environment (``env -i``), so neither a group kill nor a mark in the
environment reaches them all. The kernel does: this process calls
``prctl(PR_SET_CHILD_SUBREAPER)`` (Linux 3.4+, no privilege) before it forks the command, so
every orphan the command leaves, however it was made, is re-parented to this process instead
of to init. What is left is killed by what only a parent can do without a race: list its own
children (``/proc/self/task/*/children``), SIGKILL them (a child's pid is not reused before
its parent reaps it), reap, and again (their orphans come next) until the kernel says there
is no child left (``ECHILD``). No privilege, no namespace, no cgroup: what an unprivileged
user's machine allows.

In the sandbox (``sandbox_exec``, where the system allows: ``reaper_ns``), this process is
the init of a PID namespace of the command's own instead (``run``'s ``init``): the orphans
come to it without a subreaper, and one ``kill(-1, SIGKILL)`` ends them all at once, which
no list-and-kill does against a fork bomb whose processes fork and end; its own end, however
it comes, ends them too (the kernel's). Never outside the sandbox (this file's ``main``): an
unsandboxed command may do what its user's own shell may, ``kill`` or ``ps`` an earlier Bash
call's server included, and a namespace would refuse that for no security (such a command
can undo its launcher other ways).

When: when the command's shell ends (its daemons end with it), or, with ``--linger`` (a
background shell), when every process it left has ended by itself or the runtime sends
SIGTERM (KillShell, the run's end, the runtime's close). The shell leads a process group of
its own (as without the reaper); a SIGTERM (SIGINT, SIGHUP) to this process is passed on to
that group, which gets ``GRACE_S`` to end; then all is killed. The runtime's end, however
it ended (SIGKILL included), is such a stop too (``_hold_lifeline``): nothing of a command
outlives the runtime that started it. Its host's lease line passing unrenewed (the host
stalled past its lease: ``tools.lease_line``) kills all at once, without the shell's grace.

What the runtime is told, on ``--status-fd``: ``stopped`` when a stop came while the shell
ran, ``exit N`` (the shell's exit code, ``-SIG``
when a signal ended it, as ``subprocess`` says) when the shell ends, and ``reaped`` once
nothing it started runs; this process then ends as its shell did (the same code or signal).
A launcher that ends without ``reaped`` was killed itself: the runtime then falls back to the
environment mark (``strays.kill_strays``). With ``--detach`` this process first forks and
its first process ends (``detach``: not the runtime's child, out of reach of a kill of the
runtime's children), and ``pid N`` comes before all (``tools.detached``). The command may not
signal this process (``scope_signals``: a Landlock scope, ABI 6).

The command runs with no signal blocked and SIGPIPE and SIGXFSZ at their defaults: Python
ignores both at start, and an ignored signal stays ignored across ``exec`` (a ``yes`` past the
output cap would get EPIPE for ever instead of SIGPIPE).

Standard library only, run with ``-I -S`` (no ``site``), imported (``python -c``: its
compiled form cached, unlike a script's) by ``processes``; the sandbox launcher
(``sandbox_exec``) loads it by path and calls ``run`` after restricting itself, so a sandboxed
command costs no second interpreter.

Its siblings: this file, ``reaper_ns``, ``sandbox_exec``, ``sandbox_shm`` and
``sandbox_syscalls`` run standalone under ``python -I -S``, where the package cannot be
imported. Their folder is put at the end of ``sys.path`` once, by what starts them
(``processes.REAPER``'s command line; ``__main__`` here and in ``sandbox_exec``), and each
loads another by name (``__import__``: nothing there can shadow the standard library, and
nothing more is imported to do it). Three helpers each did both until session 27.
"""

from __future__ import annotations

import _ctypes
import fcntl  # C modules, as ``_signal``: cheap to import
import os
import select
import sys
import time

TYPE_CHECKING = False  # ``typing`` not imported: every import here costs every command
if TYPE_CHECKING:
    import signal
else:  # the C module, the same names: ``signal`` would import ``enum`` (~20M instructions)
    import _signal as signal

PR_SET_CHILD_SUBREAPER = 36
PR_SET_DUMPABLE = 4
PR_SET_PDEATHSIG = 1
SYS_LANDLOCK_CREATE_RULESET = 444
SYS_LANDLOCK_RESTRICT_SELF = 446
"""Landlock's syscalls (the same numbers on every architecture)."""
SIGNAL_SCOPE = (0).to_bytes(16, "little") + (2).to_bytes(8, "little")
"""A ruleset that handles no file or network right and scopes signals
(``LANDLOCK_SCOPE_SIGNAL``, ABI 6): ``struct landlock_ruleset_attr`` as the kernel reads it."""
ABI_VARIABLE = "SUBAGENTS_LANDLOCK_ABI"
"""``sandbox_exec.ABI_VARIABLE``: below 6, the command is given no signal scope (how tests
see a kernel without it)."""
GRACE_S = 0.5
"""How long the shell gets to end after a SIGTERM before everything is killed."""
SETTLE_S = 0.05
"""How long a kill round waits for a child's end before listing the children again."""
STOPS = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
LIFELINE = signal.SIGIO
"""Sent by the kernel to this process when the status pipe's last reader (the runtime) is
gone (``_hold_lifeline``)."""
WATCHED = STOPS | {signal.SIGCHLD, LIFELINE}
FAILED_EXIT = 125
STOPPED = "stopped"
"""Said when a stop reaches this process while its shell runs (before its ``exit N``): the
shell's end is then the stop's, not its own (``held.how_it_ended``)."""
LEASE_VARIABLE = "SUBAGENTS_LEASE_LINE"
"""Names the host's lease line (``tools.lease_line``): this process kills all its command
started when the deadline there passes (``lease_left``); taken out of the command's
environment."""
LEASE_CLOCK: int = getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC)
_lease = -1
"""The lease line, opened by ``hold_lease`` (before the sandbox restricts this process)."""


def prepare() -> int:
    """Make this process the reaper of every orphan of its descendants, and open the list of
    its children; -1 when either is not to be had (a kernel without
    ``CONFIG_PROC_CHILDREN``, no ``/proc``, a ``prctl`` refused): the command then runs all
    the same, and ``reaped`` is never said (the runtime falls back to the mark). Before the
    sandbox restricts this process: Landlock may then forbid reading ``/proc``; a file
    opened before stays readable."""
    hold_lease()
    if _prctl(PR_SET_CHILD_SUBREAPER, 1) != 0:
        return -1
    try:  # one thread (no library here starts one): the parent of every child and orphan
        return os.open(f"/proc/self/task/{os.getpid()}/children", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return -1


class _Int(_ctypes._SimpleCData):  # type: ignore[type-arg]  # (not subscriptable at run time)
    _type_ = "i"


class _IntCall(_ctypes.CFuncPtr):
    """A C function of this program returning an int, its arguments ints or buffers."""

    _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
    _restype_ = _Int


class _Program:
    """This program and the libraries it loaded (``dlopen(NULL)``), as ``ctypes.CDLL(None)``."""

    _handle = _ctypes.dlopen(None, _ctypes.RTLD_LOCAL)  # type: ignore[arg-type]  # (NULL: allowed)


def _prctl(option: int, arg: int) -> int:
    """libc's ``prctl(option, arg, 0, 0, 0)`` (-1 and errno set on failure) through the C
    ``_ctypes`` module: ``import ctypes`` costs an unsandboxed command's reaper ~15M
    instructions (~35% of its start), ``_ctypes`` ~1M (callgrind)."""
    call = _IntCall(("prctl", _Program()))  # type: ignore[arg-type]  # (what CDLL has: _handle)
    return int(call(option, arg, 0, 0, 0))


def open_status(path: str) -> int:
    """The status pipe named by ``path`` (for a starter that passes no descriptor: the mcp
    SDK, starting an MCP server): the runtime's own write end's ``/proc/PID/fd/N``, or a
    FIFO whose read end the runtime made and holds, then its name removed; opened for
    writing without waiting (no reader, the runtime gone: ``ENXIO``, nothing starts).
    Before the sandbox restricts this process (``tools/held.py``)."""
    fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    if path.startswith("/proc/"):  # the runtime's own write end's link: no name to remove
        return fd
    try:  # noqa: SIM105 (contextlib: one more import at every start)
        os.unlink(path)
    except OSError:
        pass  # the runtime removes it with its directory
    return fd


def detach(status_fd: int) -> None:
    """Fork, and end the first process at once: the rest of the launcher (the reaper) runs
    in the child, re-parented to init, so a kill of the runtime's children (Ray's, ending a
    lost driver's node host) does not reach it and it still ends everything its command
    started. It says its pid first on the status pipe (the runtime holds it by a pidfd,
    ``tools.detached``). Before ``prepare``: a subreaper is not one in its children."""
    if os.fork() != 0:
        os._exit(0)
    _report(status_fd, f"pid {os.getpid()}")


def scope_signals() -> bool:
    """Put this process (the command's shell, before its ``exec``) in a Landlock domain of
    its own that only scopes signals (ABI 6): it and everything it starts may signal each
    other, and not this process's parent, the reaper (nor the runtime, nor anything else
    outside), which still signals them all (a parent domain reaches its nested ones). So a
    command cannot SIGKILL or SIGSTOP what holds it (nor ``ptrace`` it: any domain forbids
    that outward). Whether it was applied: not on a kernel below ABI 6. Called in
    the sandbox only (``run``'s ``sandboxed``, said by ``sandbox_exec``, never inferred from
    ``no_new_privs``: a runtime under Docker, Kubernetes or systemd's ``NoNewPrivileges``
    has it set for every command, sandboxed or not). Not outside the sandbox: a scope there
    would refuse an unsandboxed command what the owner chose to allow it (``kill`` of a
    server an earlier Bash call started, ``strace -p``, ``pkill``), and such a command can
    undo its reaper in other ways anyway (as root, ``/proc/PID/mem``)."""
    forced = os.environ.get(ABI_VARIABLE, "").strip()
    if forced.isdigit() and int(forced) < 6:
        return False
    # ``syscall`` returns a long: an fd, 0 or -1 fit an int (and ints are passed widened)
    call = _IntCall(("syscall", _Program()))  # type: ignore[arg-type]  # (as in _prctl)
    ruleset = int(call(SYS_LANDLOCK_CREATE_RULESET, SIGNAL_SCOPE, len(SIGNAL_SCOPE), 0))
    if ruleset < 0:  # no Landlock, or below ABI 6 (the scope unknown: E2BIG, EINVAL)
        return False
    try:
        return int(call(SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0)) == 0
    finally:
        os.close(ruleset)


def run(
    program: str,
    argv: list[str],
    *,
    listing: int,
    status_fd: int,
    linger: bool = False,
    init: bool = False,
    sandboxed: bool = False,
) -> int:
    """Run ``argv`` (``program`` found already), hold and kill what it starts (see the module's
    docstring; ``listing``: what ``prepare`` opened; ``init``: this process is its PID
    namespace's init, ``reaper_ns``, which kills all at once; ``sandboxed``: the sandbox's
    launcher calls, restricted already: the command may not signal this process,
    ``scope_signals``); ends this process as the
    shell ended, or returns an exit code on failure."""
    # not dumpable: the command may not open this process's files through /proc (its status
    # pipe: a forged ``reaped``); its own ``exec`` makes the command dumpable again. Here, not
    # in ``prepare``: the sandbox launcher writes its own /proc/self/uid_map in between,
    # which an undumpable process's owner may not (its /proc files become root's)
    _prctl(PR_SET_DUMPABLE, 0)
    signal.pthread_sigmask(signal.SIG_BLOCK, WATCHED)  # before the fork: no end missed
    os.set_inheritable(status_fd, False)
    _hold_lifeline(status_fd)
    reaper = os.getpid()
    pid = os.fork()
    if pid == 0:
        _exec(program, argv, reaper, sandboxed)
    _lead_group(pid)  # in both: a stop forwarded at once reaches it
    quiet_stdio()  # the command's output pipe ends when the command's writers are gone
    code = _supervise(pid, status_fd, linger)
    if __import__("reaper_ns").kill_all() if init else kill_all(listing):
        _report(status_fd, "reaped")
    os.close(status_fd)
    if init:  # an init cannot end by a signal: its waiter ends as the shell did
        __import__("reaper_ns").tell(code)
    return end_as(code)


def _exec(program: str, argv: list[str], reaper: int, sandboxed: bool) -> None:
    """In the child: a process group of its own, the signals as a fresh process has them,
    killed with the reaper if it is killed (``PR_SET_PDEATHSIG``: the reaper has one thread;
    Ray, ending a lost driver's node host, SIGKILLs its direct children, which the reaper is:
    its shell would go on under init), in the sandbox unable to signal the reaper
    (``scope_signals``), then the command."""
    try:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != reaper:  # killed before the line above: its end was missed
            os._exit(FAILED_EXIT)
        _lead_group(0)
        if sandboxed:
            scope_signals()
        signal.pthread_sigmask(signal.SIG_SETMASK, ())
        for signo in (signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(signo, signal.SIG_DFL)
        os.execv(program, argv)
    except OSError as exc:
        print(f"subagents: cannot run {argv[0]!r}: {exc}", file=sys.stderr)
        os._exit(127 if isinstance(exc, FileNotFoundError) else 126)
    os._exit(FAILED_EXIT)  # not reached


def _hold_lifeline(status_fd: int) -> None:
    """Be told (``LIFELINE``) when the runtime is gone, however it ended (SIGKILL included):
    the status pipe's read end is the runtime's alone (close-on-exec, never passed to a
    command), so the kernel closes the last one when the runtime dies, and signals the
    write end's owner (``O_ASYNC``: this process's own open file, not shared). Already gone
    (it died before this): the signal is raised here, pending until the loop reads it.
    Not ``PR_SET_PDEATHSIG``: it fires when the thread that forked this process ends, and
    the runtime starts commands from pool threads that may end while it runs on."""
    fcntl.fcntl(status_fd, fcntl.F_SETOWN, os.getpid())
    fcntl.fcntl(status_fd, fcntl.F_SETFL, fcntl.fcntl(status_fd, fcntl.F_GETFL) | os.O_ASYNC)
    if _orphaned(status_fd):
        os.kill(os.getpid(), LIFELINE)


def _orphaned(status_fd: int) -> bool:
    """Whether nobody reads the status pipe (the runtime is gone): a write end with no
    reader polls as an error. ``LIFELINE`` is also what the kernel sends a write end's owner
    when a reader frees room in a full pipe (never: a few short lines), so it is checked."""
    poller = select.poll()
    poller.register(status_fd, select.POLLOUT)
    return any(events & select.POLLERR for _, events in poller.poll(0))


def _lead_group(pid: int) -> None:
    """Make the shell its own process group's leader: what it starts without leaving the
    group shares a stop with it, and ``kill 0`` in the command does not reach this process."""
    try:  # noqa: SIM105 (contextlib: one more import at every start)
        os.setpgid(pid, 0)
    except OSError:
        pass  # the child did it and ran its command already (EACCES), or ended


def quiet_stdio() -> None:
    """This launcher's standard streams to /dev/null (the reaper's, and ``reaper_ns``'s waiter's):
    the command's output pipe ends when the command's own writers are gone."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)


def _supervise(shell: int, status_fd: int, linger: bool) -> int:
    """Wait for the shell's end (with ``linger``, for every process's), or a stop and the
    shell's end within ``GRACE_S``; the shell's code (``-SIG``: a signal; None: still runs)."""
    code: int | None = None
    until: float | None = None  # set by a stop: when the shell's grace is over
    while True:
        if code is not None and (until is not None or not linger):
            return code
        wait = None if until is None else until - time.monotonic()
        left = lease_left()  # the host's lease may lapse: all dies before (``lease_line``)
        if (wait is not None and wait <= 0) or (left is not None and left <= 0):
            return -signal.SIGKILL if code is None else code
        wait = left if wait is None else wait if left is None else min(wait, left)
        info = signal.sigwaitinfo(WATCHED) if wait is None else signal.sigtimedwait(WATCHED, wait)
        if info is None or (info.si_signo == LIFELINE and not _orphaned(status_fd)):
            continue
        if info.si_signo in STOPS or info.si_signo == LIFELINE:  # the runtime's end: a stop
            if code is None and until is None:  # its end, whatever it is, is then a stop's
                _report(status_fd, STOPPED)
            until = until or time.monotonic() + GRACE_S
            if code is None:
                _forward(shell, signal.SIGTERM if info.si_signo == LIFELINE else info.si_signo)
            continue
        ended, none_left = _reap()
        if shell in ended:
            code = ended[shell]
            _report(status_fd, f"exit {code}")
        if none_left and code is not None:
            return code


def hold_lease() -> None:
    """Take the host's lease line, if its environment names one (taken out: not the
    command's): the descriptor this process inherited, or one opened read-only from the
    ``/proc`` link named (a starter that passes no descriptor), made close-on-exec (its
    command does not get it), before the sandbox restricts this process; an ``OSError``
    when it is not open (nothing starts)."""
    global _lease
    if line := os.environ.pop(LEASE_VARIABLE, None):
        # (a path: named by its /proc link, for an MCP server's reaper: lease_line.py)
        fd = os.open(line, os.O_RDONLY | os.O_CLOEXEC) if line.startswith("/") else int(line)
        os.fstat(fd)  # (OSError: not open)
        os.set_inheritable(fd, False)
        _lease = fd


def lease_left() -> float | None:
    """Seconds until the host's lease line (``tools.lease_line``), read again now; None
    without one (a host with no lease)."""
    if _lease < 0:
        return None
    at = _deadline()
    return 0.01 if at is None else at - time.clock_gettime(LEASE_CLOCK)  # torn: again


def _deadline() -> float | None:
    """The line's deadline; None when it was read during a write (its halves differ)."""
    data = os.pread(_lease, 16, 0)
    whole = len(data) == 16 and data[:8] == data[8:]
    return int.from_bytes(data[:8], "little") / 1e9 if whole else None


def _forward(shell: int, signo: int) -> None:
    """A stop to the shell's group (which the runtime's signal to this process's misses)."""
    try:  # noqa: SIM105 (contextlib: one more import at every start)
        os.killpg(shell, signo)
    except OSError:
        pass  # ended meanwhile


def _reap() -> tuple[dict[int, int], bool]:
    """Reap every ended child: their codes by pid, and whether no child is left."""
    ended: dict[int, int] = {}
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return ended, True
        if pid == 0:
            return ended, False
        ended[pid] = os.waitstatus_to_exitcode(status)


def children(listing: int) -> list[int] | None:
    """This process's children now (read again from the start of ``listing``); None when
    it cannot be read."""
    parts: list[bytes] = []
    if listing < 0:  # ``prepare`` had none
        return None
    try:
        offset = 0
        while piece := os.pread(listing, 65536, offset):
            parts.append(piece)
            offset += len(piece)
    except OSError:
        return None
    return [int(pid) for pid in b"".join(parts).split()]


def kill_all(listing: int) -> bool:
    """SIGKILL every descendant: the children, then the orphans they leave, until none;
    False when the children could not be listed (some may be left)."""
    while True:
        pids = children(listing)
        if pids is None:
            return False
        for pid in pids:
            try:  # noqa: SIM105 (contextlib: one more import at every start)
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if _reap()[1]:
            return True
        signal.sigtimedwait({signal.SIGCHLD}, SETTLE_S)  # a child's end, or list again


def _report(status_fd: int, line: str) -> None:
    try:  # noqa: SIM105 (contextlib: one more import at every start)
        os.write(status_fd, f"{line}\n".encode())
    except OSError:
        pass  # the runtime is gone: nothing to tell


def end_as(code: int) -> int:
    """End as the shell did: its exit code, or killed by its signal (no core file)."""
    if code >= 0:
        return code
    import resource  # only here: most commands end by themselves

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if -code not in (signal.SIGKILL, signal.SIGSTOP):  # which have no handler to reset
        signal.signal(-code, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, ())
    os.kill(os.getpid(), -code)
    return 128 - code  # a signal that does not end a process (SIGCHLD...): as a shell says


def main(argv: list[str]) -> int:
    """Parse ``argv`` (see the module's docstring) and run the command."""
    linger = detached = False
    status_fd: int | None = None
    status_path: str | None = None
    i = 0
    while i < len(argv) and argv[i] != "--":
        if argv[i] in ("--linger", "--detach"):
            linger = linger or argv[i] == "--linger"
            detached = detached or argv[i] == "--detach"
            i += 1
        elif argv[i] == "--status-fd" and i + 1 < len(argv) and argv[i + 1].isdigit():
            status_fd = int(argv[i + 1])
            i += 2
        elif argv[i] == "--status-path" and i + 1 < len(argv):
            status_path = argv[i + 1]
            i += 2
        else:
            print(f"subagents reaper: unknown argument {argv[i]!r}", file=sys.stderr)
            return FAILED_EXIT
    command = argv[i + 1 :]
    try:
        if status_path is not None and status_fd is None:
            status_fd = open_status(status_path)
    except OSError as exc:
        print(f"subagents reaper: no status pipe: {exc}", file=sys.stderr)
        return FAILED_EXIT
    if not command or status_fd is None:
        print("subagents reaper: needs --status-fd N (or --status-path P) -- CMD", file=sys.stderr)
        return FAILED_EXIT
    try:
        if detached:
            detach(status_fd)
        listing = prepare()
        return run(command[0], command, listing=listing, status_fd=status_fd, linger=linger)
    except OSError as exc:
        print(f"subagents reaper: {exc}", file=sys.stderr)
        return failed(status_fd, detached)


def failed(status_fd: int, detached: bool) -> int:
    """``FAILED_EXIT``, said on the status pipe too when detached (the runtime cannot
    ``wait`` for this process: what it says is its exit code)."""
    if detached:
        _report(status_fd, f"exit {FAILED_EXIT}")
    return FAILED_EXIT


if __name__ == "__main__":
    sys.path.append(os.path.dirname(os.path.abspath(__file__)))  # (its siblings: see above)
    sys.exit(main(sys.argv[1:]))
