"""What the sandbox launcher adds to Landlock: no capabilities, and a seccomp filter.

Why: Landlock rules cover the file system's data and names (writing, creating, removing,
linking) and TCP; a trial of hostile shells in a ``plan`` mode run (read-only, network off)
found what they leave open, all of it on the real kernel:

- a file's *metadata*: ``chmod``, ``chown``, ``touch -d``, ``setfattr``, ``chattr +A``
  changed files the run could not write (Landlock does not handle these system calls);
- the network beyond TCP: a UDP datagram and a connection to a named unix socket (a Docker
  daemon's, a database's) went out of a run whose network is off;
- other processes of the same user: ``renice``, ``ionice``, ``prlimit --pid``, ``taskset``
  changed the runtime's priority and limits (Landlock scopes signals and ptrace only);
- as root (containers, CI), every capability: raw sockets (any packet, around the TCP rule),
  ``unshare``, ``ip link``, ``hostname``, the clock.

So the launcher, after Landlock and before ``exec``, drops every capability but the file
ones (``KEPT_CAPABILITIES``: what root needs to own and read files in its workspace) from
the bounding, inheritable and ambient sets, so no program it runs gets them back, and installs
a seccomp filter: always, the calls that change *another* process's priority, limits or CPUs
fail (``EPERM``), and so do those that change the mount tree, enter another namespace or
``unshare`` one (``MOUNT_CALLS``: nothing may uncover the machine's ``/dev/shm`` under the
command's own), and ``open_by_handle_at`` (``BY_HANDLE_CALLS``: it opens a file by its
inode, under the run store's cover); in a read-only run, the calls that change a file's
mode, owner, times, extended attributes or inode flags fail (``EPERM``), and so does
System V and POSIX IPC (queues, semaphores, shared memory: objects of the whole machine);
with the network off, ``socket()`` fails (``EACCES``) for every family but netlink (``ip
addr`` reads through it; changing anything there needs a capability that is gone).
``socketpair`` (pipes between a program's own parts) is not affected. In either case
``io_uring`` is off (``RING_CALLS``): its requests are no system calls the filter sees.
Both bind the command and all it starts, irrevocably.

The filter knows the system call numbers of x86_64 and aarch64; elsewhere it is not installed
(``filter_program`` returns None; the capabilities are still dropped). A call from another
ABI of the same machine (32-bit ``int 0x80``) kills the process: its numbers differ, and a
32-bit program whose every call failed would crash without saying why ("Bad system call"
says it). An x32 number (``__X32_SYSCALL_BIT`` set), or one past every table (``syscall(-1)``,
how programs probe), fails with ``ENOSYS`` as an unknown number does: never reaching the
rules, which compare 64-bit numbers, and killing nothing.
Standard library only: the launcher loads this file by path (``python -I -S``).
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct

EPERM = errno.EPERM
EACCES = errno.EACCES
ENOSYS = errno.ENOSYS

KEPT_CAPABILITIES = frozenset(range(8))
"""CHOWN, DAC_OVERRIDE, DAC_READ_SEARCH, FOWNER, FSETID, KILL, SETGID, SETUID: what a root
user's ``tar x``, ``cp -p`` and reads of others' files need, and nothing that reaches past
the file system rules (the read-only filter still denies chown/chmod in a ``plan`` run)."""

PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
CAPABILITY_VERSION_3 = 0x20080522

AF_NETLINK = 16
FS_IOC_SETFLAGS = (0x40086602, 0x40046602)  # 64- and 32-bit argument forms (chattr)
FS_IOC_FSSETXATTR = 0x401C5820  # xfs_io chattr, project ids
FS_IOC_SETVERSION = (0x40087602, 0x40047602)  # chattr -v: an ext2/3/4 inode's generation
TERMINAL_INPUT = (0x5412, 0x541C)
"""``TIOCSTI`` and ``TIOCLINUX``: put characters in a terminal's input (``TIOCLINUX``'s
paste), which the user's shell reads and runs once the runtime exits, outside every
sandbox. A process with the runtime's terminal as its own could (``legacy_tiocsti`` on, as
on most kernels): the runtime's commands start in sessions without one, and the filter
denies both in every run too (session 26: the runtime's own git once shared its terminal)."""

# seccomp_data: nr (u32), arch (u32), instruction_pointer (u64), args[6] (u64, little-endian)
_NR, _ARCH = 0, 4


def _arg(index: int) -> int:
    """The offset of an argument's low 32 bits (what an ``int``/``pid_t`` argument is)."""
    return 16 + 8 * index


_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
RET_ALLOW = 0x7FFF0000
RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000


# name -> (AUDIT_ARCH value, system call numbers). The names are the kernel's; a call this
# architecture does not have (aarch64 has no chmod, only fchmodat) is simply absent.
_ARCHES: dict[str, tuple[int, dict[str, int]]] = {
    "x86_64": (
        0xC000003E,
        {
            "chmod": 90, "fchmod": 91, "chown": 92, "fchown": 93, "lchown": 94,
            "utime": 132, "utimes": 235, "futimesat": 261, "utimensat": 280,
            "fchownat": 260, "fchmodat": 268,
            "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190,
            "removexattr": 197, "lremovexattr": 198, "fremovexattr": 199,
            "ioctl": 16, "socket": 41, "setpriority": 141, "ioprio_set": 251,
            "prlimit64": 302, "sched_setaffinity": 203, "sched_setscheduler": 144,
            "sched_setparam": 142, "sched_setattr": 314,
            "shmget": 29, "shmat": 30, "shmctl": 31, "semget": 64, "semop": 65, "semctl": 66,
            "msgget": 68, "msgsnd": 69, "msgrcv": 70, "msgctl": 71, "semtimedop": 220,
            "mq_open": 240, "mq_unlink": 241, "mq_timedsend": 242, "mq_timedreceive": 243,
            "mq_notify": 244, "mq_getsetattr": 245,
            "add_key": 248, "request_key": 249, "keyctl": 250,
            "mount": 165, "umount2": 166, "pivot_root": 155, "unshare": 272, "setns": 308,
            "open_by_handle_at": 304,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            "fchmod": 52, "fchmodat": 53, "fchownat": 54, "fchown": 55, "utimensat": 88,
            "setxattr": 5, "lsetxattr": 6, "fsetxattr": 7,
            "removexattr": 14, "lremovexattr": 15, "fremovexattr": 16,
            "ioctl": 29, "socket": 198, "setpriority": 140, "ioprio_set": 30,
            "prlimit64": 261, "sched_setaffinity": 122, "sched_setscheduler": 119,
            "sched_setparam": 118, "sched_setattr": 274,
            "shmget": 194, "shmat": 196, "shmctl": 195, "semget": 190, "semop": 193,
            "semctl": 191, "msgget": 186, "msgsnd": 189, "msgrcv": 188, "msgctl": 187,
            "semtimedop": 192, "mq_open": 180, "mq_unlink": 181, "mq_timedsend": 182,
            "mq_timedreceive": 183, "mq_notify": 184, "mq_getsetattr": 185,
            "add_key": 217, "request_key": 218, "keyctl": 219,
            "mount": 40, "umount2": 39, "pivot_root": 41, "unshare": 97, "setns": 268,
            "open_by_handle_at": 265,
        },
    ),
}  # fmt: skip
_COMMON = {
    "fchmodat2": 452, "setxattrat": 463, "removexattrat": 466, "file_setattr": 469,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
    "fspick": 433, "mount_setattr": 442, "open_tree_attr": 467,
}  # fmt: skip
"""Numbered alike on every architecture (the tables were unified before they came)."""
_X32_BIT = 0x40000000

METADATA_CALLS = (
    "chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat",
    "utime", "utimes", "futimesat", "utimensat", "setxattr", "lsetxattr", "fsetxattr",
    "setxattrat", "removexattr", "lremovexattr", "fremovexattr", "removexattrat",
    "file_setattr",
)  # fmt: skip
"""Denied in a read-only run: what changes a file without writing it."""
IPC_CALLS = (
    "shmget", "shmat", "shmctl", "semget", "semop", "semctl", "semtimedop", "msgget",
    "msgsnd", "msgrcv", "msgctl", "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive",
    "mq_notify", "mq_getsetattr", "add_key", "request_key",
)  # fmt: skip
"""Denied in a read-only run: System V and POSIX message queues, semaphores and shared
memory are objects of the whole machine (``ipcmk`` made one that outlived the run; ids are
small numbers, so another program's can be sent to, drained or removed). So is the user's
keyring (``keyctl add ... @u`` left a key there; ``request_key`` may start a helper
outside): ``keyctl`` only reads (``KEYCTL_READS``)."""
KEYCTL_READS = (0, 6, 10, 11, 17)
"""GET_KEYRING_ID, DESCRIBE, SEARCH, READ, GET_SECURITY: what ``keyctl show``/``print``
do; every other operation (update, link, unlink, revoke, set a timeout...) changes keys."""
RING_CALLS = ("io_uring_setup", "io_uring_enter", "io_uring_register")
"""Denied wherever the filter denies anything the ring can do: an io_uring request is no
system call the filter sees (a plan run's ring made a unix socket with ``IORING_OP_SOCKET``
and connected it to a daemon outside, and set an extended attribute with
``IORING_OP_SETXATTR``). ``EPERM``, as ``kernel.io_uring_disabled`` answers: libuv and
others then do their I/O with plain calls."""
MOUNT_CALLS = (
    "mount", "umount2", "pivot_root", "setns", "open_tree", "move_mount", "fsopen",
    "fsconfig", "fsmount", "fspick", "mount_setattr", "open_tree_attr",
)  # fmt: skip
"""Denied in every run: what changes the mount tree or enters another namespace. The
command's private ``/dev/shm`` (``sandbox_shm``) is a mount over the machine's; Landlock
already forbids a restricted process to change mounts, and the capabilities are gone; this
says so once more, at the door."""
BY_HANDLE_CALLS = ("open_by_handle_at",)
"""Denied in every run: it opens a file by its inode number, not by a path, so the cover
of the run store in the command's namespace (``sandbox_shm.hide``) is no obstacle (root
keeps ``CAP_DAC_READ_SEARCH``, which the call needs; the inode is what the store's
directory lists, and ext4 checks no generation of 0: a sandboxed root read the store so).
Only file servers (NFS, fanotify tools) use it."""
NAMESPACE_FLAGS = 0x7E020080
"""``CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET|NEWTIME``: ``unshare`` with
any of them is denied (``unshare(CLONE_FILES)`` and the like are not). ``clone`` and
``clone3`` are not filtered (``clone3``'s flags are in memory the filter cannot read): a
namespace made that way is nested in the sandbox's, where the private ``/dev/shm`` is a
locked mount and Landlock still forbids mounting (Chromium's own sandbox makes one)."""
PRIO_PROCESS, IOPRIO_WHO_PROCESS = 0, 1
OTHER_PROCESS_CALLS: dict[str, tuple[tuple[int, int], ...]] = {
    "setpriority": ((0, PRIO_PROCESS), (1, 0)),
    "ioprio_set": ((0, IOPRIO_WHO_PROCESS), (1, 0)),
    "prlimit64": ((0, 0),),
    "sched_setaffinity": ((0, 0),),
    "sched_setscheduler": ((0, 0),),
    "sched_setparam": ((0, 0),),
    "sched_setattr": ((0, 0),),
}
"""Allowed only with these (argument, value) pairs, which name the caller itself (process
0): the ``nice``, ``ionice``, ``taskset``, ``chrt`` and ``prlimit`` that wrap a command do
so; a pid, a process group or a user (all the user's processes, the runtime's too) is
denied."""


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def _deny(nr: int, action: int) -> list[bytes]:
    return [_insn(_JEQ_K, nr, 0, 1), _insn(_RET_K, action)]


def _on_argument(
    nr: int, arg: int, values: tuple[int, ...], matched: int, otherwise: int
) -> list[bytes]:
    """``nr`` returns ``matched`` when its argument ``arg`` is one of ``values``, else
    ``otherwise``; other calls go on to the next check (the number reloaded)."""
    count = len(values)
    block = [_insn(_JEQ_K, nr, 0, count + 3), _insn(_LD_W_ABS, _arg(arg))]
    block += [_insn(_JEQ_K, v, count - i, 0) for i, v in enumerate(values)]
    block += [_insn(_RET_K, otherwise), _insn(_RET_K, matched), _insn(_LD_W_ABS, _NR)]
    return block


def _deny_bits(nr: int, arg: int, mask: int, action: int) -> list[bytes]:
    """``nr`` returns ``action`` when its argument ``arg`` has any bit of ``mask`` set;
    other calls go on to the next check (the number reloaded)."""
    block = [_insn(_JEQ_K, nr, 0, 4), _insn(_LD_W_ABS, _arg(arg))]
    return [*block, _insn(_JSET_K, mask, 0, 1), _insn(_RET_K, action), _insn(_LD_W_ABS, _NR)]


def _only_when(nr: int, pairs: tuple[tuple[int, int], ...], otherwise: int) -> list[bytes]:
    """``nr`` is allowed when every (argument, value) of ``pairs`` holds, else ``otherwise``."""
    last = 2 * len(pairs) + 2  # the index of ``otherwise``'s return
    block = [_insn(_JEQ_K, nr, 0, last)]
    for arg, value in pairs:
        block.append(_insn(_LD_W_ABS, _arg(arg)))
        block.append(_insn(_JEQ_K, value, 0, last - len(block) - 1))
    block += [_insn(_RET_K, RET_ALLOW), _insn(_RET_K, otherwise), _insn(_LD_W_ABS, _NR)]
    return block


def filter_program(*, read_only: bool, network: bool, machine: str | None = None) -> bytes | None:
    """The BPF program (``struct sock_filter`` array) for this machine, or None where its
    system call numbers are not known."""
    known = _ARCHES.get(machine or os.uname().machine)
    if known is None:
        return None
    arch, calls = known
    calls = {**calls, **_COMMON}
    deny = RET_ERRNO | EPERM
    code = [_insn(_LD_W_ABS, _ARCH), _insn(_JEQ_K, arch, 1, 0), _insn(_RET_K, RET_KILL_PROCESS)]
    unknown = RET_ERRNO | ENOSYS  # an x32 call, or a number past every table (-1: a probe)
    code += [_insn(_LD_W_ABS, _NR), _insn(_JGE_K, _X32_BIT, 0, 1), _insn(_RET_K, unknown)]
    for name, pairs in OTHER_PROCESS_CALLS.items():
        code += _only_when(calls[name], pairs, deny)
    for name in (*MOUNT_CALLS, *BY_HANDLE_CALLS):
        code += _deny(calls[name], deny)
    code += _deny_bits(calls["unshare"], 0, NAMESPACE_FLAGS, deny)
    if read_only or not network:
        for name in RING_CALLS:
            code += _deny(calls[name], deny)
    ioctls: tuple[int, ...] = TERMINAL_INPUT
    if read_only:
        ioctls += (*FS_IOC_SETFLAGS, FS_IOC_FSSETXATTR, *FS_IOC_SETVERSION)
    code += _on_argument(calls["ioctl"], 1, ioctls, deny, RET_ALLOW)
    if read_only:
        for name in (*METADATA_CALLS, *IPC_CALLS):
            if name in calls:
                code += _deny(calls[name], deny)
        code += _on_argument(calls["keyctl"], 0, KEYCTL_READS, RET_ALLOW, deny)
    if not network:
        code += _on_argument(calls["socket"], 0, (AF_NETLINK,), RET_ALLOW, RET_ERRNO | EACCES)
    code.append(_insn(_RET_K, RET_ALLOW))
    return b"".join(code)


class _FProg(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_char_p))


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapData(ctypes.Structure):
    _fields_ = (
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    )


def _last_capability() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 63


def drop_capabilities(libc: ctypes.CDLL) -> None:
    """Take every capability but ``KEPT_CAPABILITIES`` out of reach of what this process
    will exec: off the bounding set (root's programs get only what is in it), the inheritable
    and the ambient sets. A process without ``CAP_SETPCAP`` has none to drop (not root: its
    programs get none, ``no_new_privs`` keeps file capabilities off)."""
    header = _CapHeader(CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    if libc.capget(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capget failed")
    has_setpcap = bool(data[0].effective & (1 << 8))
    if has_setpcap:
        for cap in sorted(set(range(_last_capability() + 1)) - KEPT_CAPABILITIES):
            dropped = libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0
            if not dropped and ctypes.get_errno() != errno.EINVAL:  # EINVAL: no such number
                raise OSError(ctypes.get_errno(), f"dropping capability {cap} failed")
    kept = sum(1 << c for c in KEPT_CAPABILITIES)
    for word, mask in ((0, kept), (1, 0)):
        data[word].inheritable &= mask
    if libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)  # EINVAL before Linux 4.3


def install_filter(libc: ctypes.CDLL, program: bytes) -> None:
    """Install ``program`` on this process (``no_new_privs`` must be set)."""
    buffer = ctypes.create_string_buffer(program, len(program))
    prog = _FProg(len(program) // 8, ctypes.cast(buffer, ctypes.c_char_p))
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"seccomp filter: {os.strerror(ctypes.get_errno())}")
