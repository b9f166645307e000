"""A private ``/dev/shm`` for one sandboxed command: a mount namespace with its own tmpfs.

Why: glibc's ``sem_open`` and ``shm_open`` make files in ``/dev/shm``, so Python's
``multiprocessing`` (``Pool``, ``Lock``, ``Queue``, ``ProcessPoolExecutor``), ``pytest -n``
and every program using POSIX semaphores or shared memory fail where ``/dev/shm`` cannot be
written. Letting a run write the machine's ``/dev/shm`` would let it read and change other
programs' shared memory (PostgreSQL's dynamic shared memory, Chromium's): out of the
workspace. So the launcher, before Landlock, moves the command into a new mount namespace
(as a user other than root, inside a new user namespace that maps the user's uid and gid to
themselves, so the files it makes stay the user's) and mounts a fresh tmpfs there
(bounded, ``nosuid``, ``nodev``), which Landlock then lets the command write. The
machine's ``/dev/shm`` is hidden under it; the mount does not propagate back (the tree is
made a slave first), and it goes away with the namespace's last process.

No network or IPC namespace; a new PID namespace where the launcher holds the command
(``pid``: ``reaper_ns``, whose init the reaper is, a fresh ``/proc`` mounted). The command
cannot undo the mount: Landlock denies a restricted process every change of the mount
tree, the seccomp filter denies ``mount``, ``unshare`` and ``setns``
(``sandbox_syscalls``), and the capabilities it would need are dropped.

The same namespace keeps the run store from the command (``hide``): reads are not
restricted in the sandbox, so each of the store's files is covered there by an empty one
the command may not read, which the runtime and every other process never see. It keeps
other runs' command output from it too (``keep_own``, sessions 26-27): the user's home of
scratch directories (every run's ``TMPDIR``, where its commands' output files are, of every
runtime, and every stdio MCP server's) is covered with an empty tmpfs there, and only the
process's own directory is bound back.

Where the kernel or the container forbids it (user namespaces off, Ubuntu's AppArmor
restriction, no ``CAP_SYS_ADMIN``), ``enter`` says why and the launcher goes on as before:
``/dev/shm`` stays unwritable. The runtime asks once (``probe``) and warns.
Standard library only: the launcher loads this file by path (``python -I -S``).
"""

from __future__ import annotations

import ctypes
import errno
import os

SHM = "/dev/shm"
SIZE = 256 * 2**20
"""The tmpfs's bound in bytes unless the owner sets another (``Sandbox(shm_size=...)``):
tmpfs takes memory only as files fill it, but every sandboxed command has one, so what N
commands may hold is N times this (a percentage of the machine's memory each, as before,
let a few commands fill it). A write past it fails with ``ENOSPC``."""
INODES = 16384
"""The tmpfs's bound on files: an empty file costs memory too (its inode), which ``size``
does not count."""
CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MS_SLAVE = 2, 4, 1 << 12, 1 << 14, 1 << 19
COVER = f"{SHM}/.hidden"
"""The empty file (mode 000) mounted over each hidden file: in the private tmpfs, so it is
the command's own and goes away with it."""
ENABLE = (
    "allow unprivileged user namespaces (sysctl user.max_user_namespaces > 0;"
    " kernel.unprivileged_userns_clone=1 on Debian's older kernels;"
    " kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor profile on Ubuntu),"
    " or, in a container, let it create user namespaces or give it CAP_SYS_ADMIN"
)
"""What to enable, said in the runtime's warning when ``enter`` fails."""


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)  # no buffered file: 3 calls, not 8
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _fail(step: str) -> str:
    code = ctypes.get_errno()
    return f"{step} failed: {os.strerror(code)} ({errno.errorcode.get(code, code)})"


def _mirror_helper() -> tuple[int, int]:
    """A child that stays in this user namespace and, once this process has made a new
    one, maps every id of this namespace to itself there (``_mirrored``). Why: root
    without ``CAP_SYS_ADMIN`` (a container that allows user namespaces) mapped to itself
    alone would lose ``CAP_DAC_OVERRIDE`` and the like over every file of another owner
    in its workspace (the kernel grants a namespace's capabilities only over ids mapped
    in it); a process cannot write more than its own id in its own new map: the writer
    needs ``CAP_SETUID``/``CAP_SETGID`` where the map's ids live."""
    go, wait = os.pipe()
    pid = os.fork()
    if pid:
        os.close(go)
        return pid, wait
    os.close(wait)
    done = 1
    try:
        if os.read(go, 1) == b"1":
            for kind in ("uid_map", "gid_map"):
                with open(f"/proc/self/{kind}", encoding="ascii") as own:
                    ranges = [line.split() for line in own.read().splitlines()]
                _write(
                    f"/proc/{os.getppid()}/{kind}",
                    "".join(f"{r[0]} {r[0]} {r[2]}\n" for r in ranges),
                )
            done = 0
    finally:
        os._exit(done)


def _mirrored(helper: tuple[int, int], *, go: bool) -> bool:
    """Whether ``helper`` (``_mirror_helper``) mapped every id in this process's new user
    namespace; told not to (``go`` false), it only ends."""
    pid, wait = helper
    os.write(wait, b"1" if go else b"0")
    os.close(wait)
    return os.waitpid(pid, 0)[1] == 0 and go


def _map_own_ids(uid: int, gid: int) -> None:
    """Map the user's own ids to themselves in this process's new user namespace, so what
    the command makes belongs to the user (``OSError`` when the kernel refuses)."""
    try:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    except OSError as exc:
        raise OSError(exc.errno, f"mapping the user's ids in a user namespace: {exc}") from None


def enter(libc: ctypes.CDLL, size: int = SIZE, *, pid: bool = False) -> str | None:
    """Move this (single-threaded) process into a mount namespace whose ``/dev/shm`` is a
    fresh tmpfs of at most ``size`` bytes. None when done, else why not: the process then
    sees the same files as before (at worst from namespaces of its own). ``OSError`` when
    the user's ids could not be mapped in the new user namespace: a command there could
    write nothing, so the launcher must not run it. With ``pid``, a new PID namespace too
    (``reaper_ns``: this process's next child is its init)."""
    if not os.path.isdir(SHM):
        return f"{SHM} is not a directory here"
    uid, gid = os.getuid(), os.getgid()
    more = CLONE_NEWPID if pid else 0
    if libc.unshare(CLONE_NEWNS | more) != 0:  # root (CAP_SYS_ADMIN) needs no user namespace
        helper = _mirror_helper() if uid == 0 else None  # root: it may keep every id
        entered = libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | more) == 0
        why = None if entered else _fail("unshare(CLONE_NEWUSER|CLONE_NEWNS)")
        mirrored = helper is not None and _mirrored(helper, go=entered)
        if why:
            return why
        if not mirrored:
            _map_own_ids(uid, gid)
    if libc.mount(None, b"/", None, MS_REC | MS_SLAVE, None) != 0:
        return _fail("making the mounts slaves")
    options = f"mode=1777,size={size},nr_inodes={INODES}".encode()
    if libc.mount(b"tmpfs", SHM.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options) != 0:
        return _fail(f"mounting a tmpfs on {SHM}")
    return None


def hide(libc: ctypes.CDLL, files: list[str]) -> None:
    """Cover each of ``files`` (the run store's; a directory: another scratch home,
    ``scratch.siblings``) with an empty file (an empty tmpfs) nobody but root may read, in
    this process's mount namespace (after ``enter``): the command and all it starts read
    nothing of them, while every other process sees them as they are. A file
    that does not exist now has nothing to cover, nor has one this process cannot reach
    (a directory on its path it may not search: nor may the command); ``OSError`` when
    one could not be covered otherwise (the launcher then runs nothing). Each is covered
    wherever its file system is mounted again (``_other_names``)."""
    if not files:
        return
    os.close(os.open(COVER, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0))
    mounts = _mount_table()
    names = [name for file in files for name in (file, *_other_names(file, mounts))]
    for path in names:
        if os.path.isdir(path):  # (a directory: an empty tmpfs nobody but root may enter)
            options = b"mode=0000,size=4096,nr_inodes=4"
            done = libc.mount(b"tmpfs", path.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options)
        else:
            done = libc.mount(COVER.encode(), path.encode(), None, MS_BIND, None)
        if done != 0:
            code = ctypes.get_errno()
            if code not in (errno.ENOENT, errno.ENOTDIR, errno.EACCES):
                raise OSError(code, f"covering {path}: {os.strerror(code)}")


def keep_own(libc: ctypes.CDLL, scratch: str, own: str) -> None:
    """Cover ``scratch`` (the user's home of scratch directories, ``tools/scratch.py``: every
    runtime's directory of its runs' temporary ones, where their commands' output files are,
    and every stdio MCP server's) with an empty tmpfs in this process's mount namespace
    (after ``enter``), wherever its file system shows it (``_other_names``), and bind ``own``
    (the process's own directory, anywhere below it) back at its place: the command reads
    and writes its own files as before and sees no other run's, runtime's or server's (a
    ``plan`` run read a sibling's background shell output there: session 26; an MCP server
    and a second runtime's commands still could: session 27). Directories made there after
    the cover are made in the real directory, under it: out of reach too. ``OSError`` when
    that could not be done (the launcher then runs nothing)."""
    top, below = scratch.rstrip("/"), own.rstrip("/")
    if not below.startswith(top + "/") or ".." in below[len(top) :].split("/"):
        raise OSError(errno.EINVAL, f"{own} is not a directory in {scratch}")
    fd = os.open(own, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)  # reached before covered
    try:
        options = b"mode=0700,size=65536,nr_inodes=16"
        for path in (scratch, *_other_names(scratch, _mount_table())):
            if libc.mount(b"tmpfs", path.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options) != 0:
                raise OSError(ctypes.get_errno(), _fail(f"covering {path}"))
        os.makedirs(below, 0o700)
        if libc.mount(f"/proc/self/fd/{fd}".encode(), below.encode(), None, MS_BIND, None) != 0:
            raise OSError(ctypes.get_errno(), _fail(f"binding {own} back"))
    finally:
        os.close(fd)


def _unescape(field: str) -> str:
    """A path of ``/proc/self/mountinfo`` (space, tab, newline, backslash written octal)."""
    for code in ("\\040", "\\011", "\\012", "\\134"):
        field = field.replace(code, chr(int(code[1:], 8)))
    return field


def _mount_table() -> list[tuple[str, str, str]]:
    """This namespace's mounts: (device, root in its file system, mount point)."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as table:
            lines = [line.split() for line in table]
    except OSError:
        return []
    return [(m[2], _unescape(m[3]), _unescape(m[4])) for m in lines if len(m) > 4]


def _other_names(path: str, mounts: list[tuple[str, str, str]]) -> list[str]:
    """The paths of the file at ``path`` through the other mounts of its file system (a
    bind mount of a directory above it, a container's volume mounted twice): a cover on
    ``path`` alone left it readable there (seen). Found in this namespace's mount table,
    each checked to be that very file (device and inode) before anything is covered (a
    mount over a path of it shows another file there: not covered). ``path`` is resolved
    first: the mount table names no symlink, so a scratch directory reached through one (a
    ``TMPDIR`` that is a symlink) left its other names uncovered (review, session 26)."""
    given, path = path, os.path.realpath(path)
    try:
        real = os.stat(path)
    except OSError:
        return []  # (a file that does not exist has nothing to cover)
    device = f"{os.major(real.st_dev)}:{os.minor(real.st_dev)}"
    same = [(root, at) for dev, root, at in mounts if dev == device]
    inside = [
        (root, at) for root, at in same if path == at or path.startswith(at.rstrip("/") + "/")
    ]
    if not inside:
        return []
    root, at = max(inside, key=lambda mount: len(mount[1]))  # the mount path is reached in
    within = root.rstrip("/") + path[len(at.rstrip("/")) :]  # its path in the file system
    names = []
    for root, at in same:
        if within.startswith(root.rstrip("/") + "/"):
            name = at.rstrip("/") + within[len(root.rstrip("/")) :]
            if name not in (path, given) and _is(name, real):
                names.append(name)
    return names


def _is(name: str, real: os.stat_result) -> bool:
    try:
        found = os.stat(name)
    except OSError:
        return False
    return (found.st_dev, found.st_ino) == (real.st_dev, real.st_ino)
