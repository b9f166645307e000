"""The sandbox launcher: restrict this process with Linux Landlock, then exec a command.

    python -I -S .../sandbox_exec.py [--abi N] [--write DIR]... [--read PATH]... [--no-network]
        [--read-only] [--private-shm [--shm-size BYTES] [--hide FILE]... [--own-scratch DIR]]
        [(--status-fd N | --status-path P) [--linger] [--detach] [--no-pid-namespace]]
        -- CMD ARGS...
    python -I -S .../sandbox_exec.py --probe-private-shm

Why a launcher and not ``preexec_fn``: the runtime is full of threads, and Python's docs say
``preexec_fn`` is not safe there (a fork of a threaded process may deadlock in the child).
This small program restricts itself (``prctl(PR_SET_NO_NEW_PRIVS)``, then Landlock's three
syscalls through ``ctypes``) and ``exec``s the command: the restriction binds the command and
every process it ever starts (``setsid``, double forks, git's external programs), and cannot
be lifted. It is run by path with ``-I -S`` (no ``site``, no ``PYTHON*`` variables, no
package import): it must import nothing but the standard library, so starting it costs one
bare interpreter (``benchmarks/sandbox.py`` measures it).

What is restricted: every *write* right of the file system (writing, truncating, creating,
removing, renaming, linking, making sockets, fifos and symlinks) is denied outside the
``--write`` directories (and a few device files everyone writes, such as ``/dev/null``);
making a device node is denied everywhere (as root it would reach the disk under the rules).
Reading and executing are not restricted, unless ``--read`` paths are given: then only under
those and the ``--write`` directories. ``--no-network`` denies outgoing TCP connections
(Landlock ABI 4+) and connections to abstract unix sockets outside (ABI 6+). From ABI 6 the
command may not signal processes outside its sandbox (the runtime, other runs).

What Landlock does not cover, ``sandbox_syscalls`` adds (loaded by path, standard library
only): capabilities beyond the file ones are dropped; a seccomp filter denies changing other
processes' priority and limits, with ``--no-network`` every ``socket()`` but netlink (UDP,
named unix sockets), and with ``--read-only`` (a ``plan`` run) the calls that change a file's
mode, owner, times, extended attributes or flags, which Landlock lets through.

``--private-shm`` first gives the command a ``/dev/shm`` of its own (``sandbox_shm``: a mount
namespace with a fresh tmpfs there, of ``--shm-size`` bytes at most), which it may then
write, in every mode: POSIX
semaphores and shared memory (``multiprocessing``) work without reaching the machine's.
``--hide`` files (the run store's) are then covered, in that namespace only, with an empty
file the command cannot read (``sandbox_shm.hide``): reads are not restricted otherwise.
``--own-scratch`` DIR (the user's home of scratch directories, ``tools/scratch.py``; the last
``--write`` directory is the process's own, below it) is covered there with an empty tmpfs
but for the process's own directory (``sandbox_shm.keep_own``): no other run's, runtime's or
MCP server's temporary files are in reach.
Where that is not allowed, the command runs as without the flag, but with ``--hide``
(the runtime's probe made a namespace, so this launch should have) it does not run.
``--probe-private-shm`` prints ``ok`` or why not (how the runtime asks once).

Why ``ctypes`` over the three syscalls rather than the ``landlock`` package on PyPI: that
package is a pre-release (1.0.0.dev5) and importing a third-party package here would need
``site`` and the environment's paths in a process that must start fast and depend on nothing
the sandboxed command's environment could change; the three syscalls and two structs are
small, stable kernel ABI (``include/uapi/linux/landlock.h``).

With ``--status-fd`` (every command ``ProcessGroups`` starts) the launcher does not ``exec``
the command but runs it as its child and holds what it starts (``reaper``: made subreaper
before Landlock, which may forbid reading ``/proc``, and run after), in this one interpreter;
with ``--detach`` in a child of this process, which ends at once (``reaper.detach``).
Where it may, the launcher first makes a new PID namespace (with ``--private-shm``'s, else
as root) and the reaper is its init (``reaper_ns``: nothing of the command outlives it).

If Landlock cannot be applied, the launcher prints why and exits with ``FAILED_EXIT``: it
never runs the command unrestricted. Deciding what to do on a kernel without Landlock (refuse,
or warn and run unsandboxed) is the runtime's (``subagents.tools.sandbox``), which asks
``landlock_abi()`` first.
"""

from __future__ import annotations

import ctypes
import os
import sys
from types import ModuleType

SYS_CREATE_RULESET = 444
SYS_ADD_RULE = 445
SYS_RESTRICT_SELF = 446
"""The same numbers on every architecture (the syscalls came after the tables were unified)."""
CREATE_RULESET_VERSION = 1
PR_SET_NO_NEW_PRIVS = 38
RULE_PATH_BENEATH = 1
RULE_NET_PORT = 2

FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13  # ABI 2
FS_TRUNCATE = 1 << 14  # ABI 3
NET_CONNECT_TCP = 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1  # ABI 6
KNOWN_ABI = 7
"""The newest ABI this module knows; a newer kernel is used at this level."""

WRITE_RIGHTS_V1 = (
    FS_WRITE_FILE
    | FS_REMOVE_DIR
    | FS_REMOVE_FILE
    | FS_MAKE_CHAR
    | FS_MAKE_DIR
    | FS_MAKE_REG
    | FS_MAKE_SOCK
    | FS_MAKE_FIFO
    | FS_MAKE_BLOCK
    | FS_MAKE_SYM
)
READ_RIGHTS = FS_READ_FILE | FS_READ_DIR | FS_EXECUTE
"""What ``--read`` grants (and, given any, what is denied elsewhere)."""
DEVICE_FILES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty")
"""Written by everyday commands (``> /dev/null``); a rule on a file may carry file rights only."""
NO_NAMESPACE = "--no-pid-namespace"
"""The command gets no PID namespace of its own (``reaper_ns``): given by ``RunSandbox.argv``
where the runtime's environment has ``PID_NAMESPACE_VARIABLE=0``."""
PID_NAMESPACE_VARIABLE = "SUBAGENTS_PID_NAMESPACE"
"""Set to ``0`` in the runtime's environment: sandboxed commands get no PID namespace (the
reaper alone: how tests see a system that refuses one)."""
FAILED_EXIT = 125
"""The launcher's exit code when it could not restrict itself (the command did not run)."""
ABI_VARIABLE = "SUBAGENTS_LANDLOCK_ABI"
"""Set to a number (``0``: no Landlock) to make ``landlock_abi`` report it instead of asking
the kernel: how tests see what happens on a kernel without Landlock (or an older one)."""


class LandlockError(OSError):
    """Landlock could not be applied; says which step and why."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # __attribute__((packed)) in the kernel's header: 12 bytes
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def kernel_abi() -> int:
    """The Landlock ABI the kernel offers (0: none: not built in, not enabled, not Linux)."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        libc = _libc()
    except OSError:
        return 0
    version = libc.syscall(
        ctypes.c_long(SYS_CREATE_RULESET),
        ctypes.c_void_p(None),
        ctypes.c_size_t(0),
        ctypes.c_uint32(CREATE_RULESET_VERSION),
    )
    return max(0, int(version))


def landlock_abi(environ: dict[str, str] | None = None) -> int:
    """The ABI to use: ``$SUBAGENTS_LANDLOCK_ABI`` when set (ValueError naming it when it is
    not a number >= 0), else what the kernel offers."""
    env = os.environ if environ is None else environ
    forced = env.get(ABI_VARIABLE)
    if forced is not None and forced.strip():
        try:
            value = int(forced)
        except ValueError:
            value = -1
        if value < 0:
            raise ValueError(f"{ABI_VARIABLE}={forced!r} is not a Landlock ABI number (0, 1...)")
        return min(value, kernel_abi())
    return kernel_abi()


def write_rights(abi: int) -> int:
    rights = WRITE_RIGHTS_V1
    if abi >= 2:
        rights |= FS_REFER
    if abi >= 3:
        rights |= FS_TRUNCATE
    return rights


def restrict(
    writable: list[str], *, network: bool, abi: int, readable: list[str] | None = None
) -> None:
    """Restrict this process (and all it will start) to writing under ``writable``; without
    ``network``, no outgoing TCP connection; given ``readable``, to reading and executing
    only under those and ``writable``. ``LandlockError`` when any step fails."""
    if abi < 1:
        raise LandlockError("the kernel offers no Landlock")
    if not network and abi < 4:
        raise LandlockError(f"turning the network off needs Landlock ABI 4, the kernel has {abi}")
    libc = _libc()
    handled = write_rights(abi)
    if readable is not None:
        handled |= READ_RIGHTS
    attr = _RulesetAttr(handled_access_fs=handled)
    size = 8
    if not network:
        attr.handled_access_net = NET_CONNECT_TCP
        size = 16
    if abi >= 6:
        attr.scoped = SCOPE_SIGNAL | (0 if network else SCOPE_ABSTRACT_UNIX_SOCKET)
        size = 24
    ruleset = libc.syscall(
        ctypes.c_long(SYS_CREATE_RULESET),
        ctypes.byref(attr),
        ctypes.c_size_t(size),
        ctypes.c_uint32(0),
    )
    if ruleset < 0:
        raise _error("landlock_create_ruleset")
    try:
        # never devices: root could make a node of the disk and write around every rule
        granted = handled & ~(FS_MAKE_CHAR | FS_MAKE_BLOCK)
        for path in writable:
            _allow(libc, int(ruleset), path, granted, required=True)
        file_rights = handled & (FS_WRITE_FILE | FS_TRUNCATE | FS_READ_FILE)
        for path in DEVICE_FILES:
            _allow(libc, int(ruleset), path, file_rights, required=False)
        for path in readable or ():
            rights = READ_RIGHTS if os.path.isdir(path) else FS_READ_FILE | FS_EXECUTE
            _allow(libc, int(ruleset), path, rights, required=False)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise _error("prctl(PR_SET_NO_NEW_PRIVS)")
        done = libc.syscall(
            ctypes.c_long(SYS_RESTRICT_SELF), ctypes.c_int(ruleset), ctypes.c_uint32(0)
        )
        if done != 0:
            raise _error("landlock_restrict_self")
    finally:
        os.close(int(ruleset))


def _allow(libc: ctypes.CDLL, ruleset: int, path: str, rights: int, *, required: bool) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError as exc:
        if required:
            raise LandlockError(f"cannot open the writable directory {path}: {exc}") from None
        return
    try:
        rule = _PathBeneathAttr(allowed_access=rights, parent_fd=fd)
        added = libc.syscall(
            ctypes.c_long(SYS_ADD_RULE),
            ctypes.c_int(ruleset),
            ctypes.c_int(RULE_PATH_BENEATH),
            ctypes.byref(rule),
            ctypes.c_uint32(0),
        )
        if added != 0:
            raise _error(f"landlock_add_rule({path})")
    finally:
        os.close(fd)


def _error(step: str) -> LandlockError:
    errno = ctypes.get_errno()
    return LandlockError(errno, f"{step} failed: {os.strerror(errno)}")


def _find(name: str) -> str | None:
    """``name`` as ``execvp`` would find it on ``PATH`` (a path with a ``/`` as it is)."""
    if "/" in name:
        return name
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        candidate = os.path.join(folder or ".", name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def private_shm(
    writable: list[str], size: int | None, hidden: list[str], *, pid: bool, scratch: str | None
) -> bool:
    """Give this process a ``/dev/shm`` of its own (of ``size`` bytes at most, None: the
    default) and add it to ``writable``, and cover the ``hidden`` files with an empty one,
    and ``scratch`` but for the run's own directory (the last of ``writable``);
    as before when the system does not allow it (``OSError`` when it broke half-way, or
    a file could not be covered, or there are ``hidden`` files or a ``scratch``: the runtime
    asks for them only where its probe made a namespace, so a launch that could not make one
    now (a user's namespaces used up) must not run the command with them in reach).
    With ``pid``, a new PID namespace too where allowed (``reaper_ns``): whether it was."""
    shm = __import__("sandbox_shm")
    libc = _libc()
    why = shm.enter(libc, size or shm.SIZE, pid=pid)
    entered = pid and why is None
    if why is not None and pid:
        if _own_pid_namespace():  # made, then a mount failed: /proc could not be mounted
            raise OSError(f"could not make the command's namespaces: {why}")  # safely
        why = shm.enter(libc, size or shm.SIZE)  # refused with a PID namespace: without
    if why is None:
        if scratch is not None and writable:
            shm.keep_own(libc, scratch, writable[-1])
        writable.append(shm.SHM)
        shm.hide(libc, hidden)
    elif hidden or scratch is not None:  # the probe made one: nothing runs with them in reach
        what = "the run store" if hidden else "other runs' scratch files"
        raise OSError(f"could not hide {what} from it: {why}")
    return entered


def _own_pid_namespace() -> bool:
    """Whether this process's next child starts in a PID namespace of its own (``unshare``
    made one)."""
    try:
        return os.readlink("/proc/self/ns/pid_for_children") != os.readlink("/proc/self/ns/pid")
    except OSError:
        return False


def probe_private_shm() -> int:
    """Print ``ok`` when this process could get a private ``/dev/shm``, else why not."""
    try:
        why = __import__("sandbox_shm").enter(_libc())
    except OSError as exc:
        why = str(exc)
    print(why or "ok")
    return 0


def limit_syscalls(limits: ModuleType, *, read_only: bool, network: bool) -> None:
    """Drop capabilities and install the seccomp filter (``limits``: ``sandbox_syscalls``,
    loaded before ``restrict``, which may forbid reading it and sets ``no_new_privs``)."""
    libc = _libc()
    limits.drop_capabilities(libc)
    program = limits.filter_program(read_only=read_only, network=network)
    if program is not None:
        limits.install_filter(libc, program)


def _reaper_flags(argv: list[str]) -> tuple[list[str], bool, bool, bool, int | None]:
    """``argv`` without the reaper's flags (before ``--``), ``--linger``, ``--detach``,
    not ``--no-pid-namespace`` and ``--status-fd``'s number, or that of ``--status-path``'s
    FIFO, opened (None: run the command by ``exec``, unheld)."""
    end = argv.index("--") if "--" in argv else len(argv)
    head, rest = argv[:end], argv[end:]
    linger = "--linger" in head
    detached = "--detach" in head
    own_namespace = NO_NAMESPACE not in head
    head = [flag for flag in head if flag not in ("--linger", "--detach", NO_NAMESPACE)]
    status_fd = None
    if "--status-fd" in head:
        at = head.index("--status-fd")
        if at + 1 < len(head) and head[at + 1].isdigit():
            status_fd = int(head[at + 1])
            del head[at : at + 2]
    if "--status-path" in head:  # a FIFO (``reaper.open_status``)
        at = head.index("--status-path")
        if at + 1 < len(head):
            if status_fd is None:  # both given: the fd's (no FIFO opened to leak)
                status_fd = _status_fifo(head[at + 1])
            del head[at : at + 2]
    held = status_fd is not None
    return head + rest, linger, detached and held, own_namespace, status_fd


def _status_fifo(path: str) -> int:
    """The status FIFO at ``path``, opened (``reaper.open_status``); when it cannot be (the
    runtime gone: no reader), this process ends with ``FAILED_EXIT``, nothing started."""
    try:
        return int(__import__("reaper").open_status(path))
    except OSError as exc:
        print(f"subagents sandbox: no status pipe: {exc}", file=sys.stderr)
        raise SystemExit(FAILED_EXIT) from None


_VALUED = ("--write", "--read", "--abi", "--shm-size", "--hide", "--own-scratch")
"""The flags followed by a value."""


def main(argv: list[str]) -> int:
    """Parse ``argv`` (see the module's docstring), restrict, exec; the exit code on failure."""
    writable: list[str] = []
    readable: list[str] | None = None
    network = True
    read_only = False
    abi = KNOWN_ABI
    shm = False
    shm_size: int | None = None
    listed: dict[str, list[str]] = {"--write": writable, "--hide": [], "--own-scratch": []}
    if argv == ["--probe-private-shm"]:
        return probe_private_shm()
    argv, linger, detached, own_namespace, status_fd = _reaper_flags(argv)
    i = 0
    while i < len(argv) and argv[i] != "--":
        flag = argv[i]
        if flag in ("--no-network", "--read-only", "--private-shm"):
            network = network and flag != "--no-network"
            read_only = read_only or flag == "--read-only"
            shm = shm or flag == "--private-shm"
            i += 1
        elif flag in _VALUED and i + 1 < len(argv):
            if flag in listed:
                listed[flag].append(argv[i + 1])
            elif flag == "--read":
                readable = [*(readable or []), argv[i + 1]]
            elif flag == "--shm-size":
                shm_size = int(argv[i + 1])
            else:
                abi = int(argv[i + 1])
            i += 2
        else:
            print(f"subagents sandbox: unknown argument {flag!r}", file=sys.stderr)
            return FAILED_EXIT
    command = argv[i + 1 :]
    if not command:
        print("subagents sandbox: no command after --", file=sys.stderr)
        return FAILED_EXIT
    program = _find(command[0])  # before: after it, PATH may hold unreadable places
    if program is None:
        print(f"subagents sandbox: command not found: {command[0]!r}", file=sys.stderr)
        return 127
    reaper = __import__("reaper") if status_fd is not None else None
    try:
        abi = min(abi, KNOWN_ABI, kernel_abi())
        limits = __import__("sandbox_syscalls")
        own_pid = reaper is not None and own_namespace
        pid = _namespaces(writable, shm, shm_size, listed, pid=own_pid)
        listing = _hold(reaper, status_fd, detached, pid)  # before Landlock: /proc
        restrict(writable, network=network, abi=abi, readable=readable)
        limit_syscalls(limits, read_only=read_only, network=network)
    except (LandlockError, OSError) as exc:
        print(f"subagents sandbox: could not restrict the command: {exc}", file=sys.stderr)
        if reaper is not None and status_fd is not None:  # detached: said, not waited for
            return int(reaper.failed(status_fd, detached))
        return FAILED_EXIT
    if reaper is not None and status_fd is not None:  # the command as its child, held
        held = {"listing": listing, "status_fd": status_fd, "linger": linger, "init": pid}
        return int(reaper.run(program, command, **held, sandboxed=True))
    return _exec(program, command)


def _namespaces(
    writable: list[str], shm: bool, size: int | None, listed: dict[str, list[str]], *, pid: bool
) -> bool:
    """The command's namespaces, made before Landlock (which forbids mounting): its private
    ``/dev/shm``'s (``private_shm``, with the ``--hide`` files and the ``--own-scratch``
    directory of ``listed``, with a PID namespace where ``pid``), or with ``pid``
    a PID namespace alone where no user namespace is needed (root: ``reaper_ns.unshare``);
    whether a PID namespace was made."""
    if shm:
        scratch = listed["--own-scratch"][-1] if listed["--own-scratch"] else None
        return private_shm(writable, size, listed["--hide"], pid=pid, scratch=scratch)
    return pid and bool(__import__("reaper_ns").unshare(_libc()))


def _hold(reaper: ModuleType | None, status_fd: int | None, detached: bool, init: bool) -> int:
    """Become the reaper (``reaper.detach``d first when ``detached``) and open the list of
    its children (-1: none, or not held: no ``reaper``); with ``init`` (a new PID namespace
    entered), as its init (``reaper_ns.become_init``), which needs no list."""
    if reaper is None or status_fd is None:
        return -1
    reaper.hold_lease()  # its line (``tools.lease_line``), before Landlock
    if init:
        __import__("reaper_ns").become_init(_libc(), status_fd, detached=detached)
        return -1
    if detached:
        reaper.detach(status_fd)
    return int(reaper.prepare())


def _exec(program: str, command: list[str]) -> int:
    """Become ``command``; the exit code when it cannot start."""
    try:
        os.execv(program, command)
    except OSError as exc:
        print(f"subagents sandbox: cannot run {command[0]!r}: {exc}", file=sys.stderr)
        return 127 if isinstance(exc, FileNotFoundError) else 126
    return FAILED_EXIT  # not reached: exec replaced this process


if __name__ == "__main__":
    sys.path.append(os.path.dirname(os.path.abspath(__file__)))  # (its siblings: ``reaper``)
    sys.exit(main(sys.argv[1:]))
