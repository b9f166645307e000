"""Where the temporary directories of sandboxed processes live: one directory per user,
``<tmp>/subagents-<uid>``, holding every runtime's scratch directory (``shells-*``: each
run's ``TMPDIR``, its commands' and hooks' output files) and every stdio MCP server's
temporary one (``mcp-*``), and the runtime's sandboxed git calls' (``git-*``: a hook a run
planted may run there).

Why one home (session 27): a sandboxed command's mount namespace covers its scratch with an
empty tmpfs and binds the run's own directory back (``sandbox_shm.keep_own``). Covering one
runtime's scratch directory left the others of the same user readable (a second runtime, an
MCP server's directory beside it), and a directory made after the command started would not
be covered whatever list it was given. Covering the home covers all of them, those made
later included: they are made in the real directory, under the command's cover.

The home is made private (0700) and must be the user's own directory, not a symlink. In a
shared ``/tmp`` another user can make ``subagents-<uid>`` first (or leave a symlink there):
session 27 refused it, and so any local user could block a victim's Bash, hooks and MCP
servers. Now the process falls back: where the user has a private runtime directory
(``$XDG_RUNTIME_DIR``), to one home there shared by every process of the user
(``shared_fallback``, session 29), covered whole as the home in ``/tmp`` is; else to a home
of its own that nobody can pre-empt, ``<tmp>/subagents-<uid>-XXXXXXXX-h``
(``tempfile.mkdtemp``: made by this call or not at all, 0700, a random name), chosen once
per temporary directory for the life of the process and removed at its exit; either with a
warning naming the squatted path. A process ended by SIGTERM or SIGKILL cannot remove its
own: each is locked (``flock``) for its maker's life, and the next process that falls back
removes those whose lock it can take (their maker is gone; ``tools/held_dirs.py``: since
session 29 only those whose name carries the mark of a held one: an older version's holds
no lock and may be live, and was swept); until then, and for a live process's, every
sandboxed process's namespace covers the other fallback homes beside its own too
(``siblings``: they were readable, session 28). The directories in a home are held the same
way (session 29): a runtime's scratch directory, an MCP server's, a git call's, each locked
by the process that made it until it removes it (``remove_dir``), and those a killed
process left are removed by the next process's first ``make_dir`` there. Every runtime of
the process keeps its scratch in its one home, so one home is still covered in each
sandboxed process's namespace (``covered_home`` knows it); what a ``mkdtemp`` fallback
loses is another *process's* scratch made after a command started (a second runtime of the
user elsewhere, which falls back to a home of its own): not under this one's cover (why no
sound fix without a private directory: docs/tools.md). ``ScratchHomeError`` only when no
home can be made at all (a temporary directory
that is not a writable directory).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import stat
import tempfile
import threading
from pathlib import Path

from subagents.logs import get_logger
from subagents.tools import held_dirs
from subagents.tools.errors import ToolError

log = get_logger("subagents.scratch")

SCRATCH = "shells-"
"""The prefix of a runtime's scratch directory (``ProcessGroups.scratch``), which holds every
run's own temporary one (named ``RUN_DIR`` + the run's id): its commands' output. Short, as
is ``MCP_DIR``: a ``TMPDIR`` is where programs make their unix sockets, whose paths may not
pass 107 bytes (``multiprocessing.Manager``'s is ``$TMPDIR/pymp-*/listener-*``: 101 bytes
with ``subagents-shells-`` here and a one-digit uid; 91 with the home, 93 with the held mark
since session 29, 98 in a shared fallback ``/run/user/<uid>/subagents``)."""
RUN_DIR = "run-"
MCP_DIR = "mcp-"
"""The prefix of a stdio MCP server's temporary directory (its ``TMPDIR``)."""
GIT_DIR = "git-"
"""The prefix of the temporary directory of a git call the runtime makes in the runs'
sandbox (``isolation/git.py``: a hook a run planted may run there)."""


class ScratchHomeError(ToolError):
    """No home of scratch directories this user alone owns can be made (neither
    ``subagents-<uid>`` nor a fallback: the temporary directory is not a writable
    directory): a tool error, the Bash call or the MCP server's start answered with it
    (nothing starts)."""


def home_name() -> str:
    """``subagents-<uid>``: the name of this user's home of scratch directories."""
    return f"subagents-{os.getuid()}"


def scratch_home(root: Path | None = None) -> Path:
    """This user's home of scratch directories in ``root`` (None: the system's temporary
    directory), made 0700 on first use; where ``subagents-<uid>`` there is a symlink, not a
    directory or another user's, this process's own fallback home (above), the same one for
    every later call. ``ScratchHomeError`` when neither can be made."""
    base = Path(tempfile.gettempdir() if root is None else root)
    with _CHOOSING:
        fallback = _FALLBACKS.get(base)
        if fallback is not None:
            if _unusable(fallback) is None:
                return fallback
            return _fall_back(base, f"its fallback {fallback} was removed or replaced")
        home = base / home_name()
        with contextlib.suppress(FileExistsError, FileNotFoundError, NotADirectoryError):
            home.mkdir(mode=0o700)
        why = _unusable(home)
        return home if why is None else _fall_back(base, why)


_CHOOSING = threading.Lock()
_FALLBACKS: dict[Path, Path] = {}
"""Temporary directory -> this process's fallback home there (chosen once: every runtime's,
MCP server's and git call's scratch of the process in one home, which each sandboxed
process's namespace covers whole)."""


def _unusable(home: Path) -> str | None:
    """Why ``home`` cannot be a home of scratch directories, or None (then it is private:
    made 0700 when it was ours but open)."""
    try:
        fd = os.open(home, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        return f"is a symlink or not a directory ({exc.strerror})"
    try:
        found = os.fstat(fd)
        if found.st_uid != os.getuid():
            return f"belongs to uid {found.st_uid}"
        if stat.S_IMODE(found.st_mode) & 0o077:
            os.fchmod(fd, 0o700)  # (ours: made open by hand, or by an older umask)
    finally:
        os.close(fd)
    return None


def _fall_back(base: Path, why: str) -> Path:
    """The user's private runtime directory's home (``shared_fallback``), else a new home of
    this process's own in ``base``: ``mkdtemp`` makes it or fails, so no one else's
    directory or symlink can stand in its place (holding ``_CHOOSING``)."""
    squatted = base / home_name()
    shared = shared_fallback()
    if shared is not None:
        _FALLBACKS[base] = shared
        _sweep(base)
        log.warning(
            "the scratch directory of this user cannot be used: this process keeps its"
            " commands' and MCP servers' temporary files in the user's private runtime"
            " directory instead ($XDG_RUNTIME_DIR); remove the first, or have its owner",
            squatted=str(squatted),
            why=why,
            fallback=str(shared),
        )
        return shared
    try:
        made = _make_held(base)
    except OSError as exc:
        why = f"{why}, and no other could be made ({exc})"
        raise ScratchHomeError(_unsafe(squatted, why)) from None
    _FALLBACKS[base] = made
    atexit.register(_remove, made, os.getpid())
    _sweep(base)
    log.warning(
        "the scratch directory of this user cannot be used: this process keeps its commands'"
        " and MCP servers' temporary files in a private one of its own instead (another"
        " process's made after a command started are not hidden from it); remove the first,"
        " or have its owner",
        squatted=str(squatted),
        why=why,
        fallback=str(made),
    )
    return made


RUNTIME_HOME = "subagents"
"""The name of the shared fallback home in ``$XDG_RUNTIME_DIR`` (``shared_fallback``)."""


def shared_fallback() -> Path | None:
    """``$XDG_RUNTIME_DIR/subagents`` (made 0700), where that directory is the user's own,
    private (0700: systemd-logind's ``/run/user/<uid>``) and not a symlink; else None.

    Why (session 29): a ``mkdtemp`` fallback is each process's own, so a fallback another
    process made after a command started lay outside that command's cover (the sibling
    homes are covered as they are at its start). No name in a shared ``/tmp`` can be agreed
    on by the user's processes and not be made first by another user, and no choosing among
    several can be serialised without a lock another user could hold; a directory only the
    user may write can: every falling-back process of the user takes the same home there,
    which each sandboxed process's namespace covers whole, those made later included, as
    the home in ``/tmp`` is covered. Shared, so never removed at a process's exit."""
    given = os.environ.get("XDG_RUNTIME_DIR", "")
    if not given.startswith("/"):
        return None
    try:
        fd = os.open(given, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except (OSError, ValueError):
        return None
    try:
        found = os.fstat(fd)
        if found.st_uid != os.getuid() or stat.S_IMODE(found.st_mode) & 0o077:
            return None
        with contextlib.suppress(FileExistsError):
            os.mkdir(RUNTIME_HOME, 0o700, dir_fd=fd)
    except OSError:
        return None
    finally:
        os.close(fd)
    home = Path(given) / RUNTIME_HOME
    return home if _unusable(home) is None else None


_HELD: list[int] = []
"""The descriptors of this process's fallback homes, each locked (``flock``) for the
process's life: the kernel lets the lock go however the process ends (SIGKILL included),
so a fallback whose lock can be taken is one whose maker is gone (``_sweep``)."""


def _make_held(base: Path) -> Path:
    """A new fallback home in ``base``, locked for this process's life (``held_dirs.make``:
    checked to be still the directory made once locked)."""
    made, fd = held_dirs.make(base, f"{home_name()}-")
    _HELD.append(fd)
    return made


def siblings(home: Path) -> list[Path]:
    """The other fallback homes of this user beside ``home`` (``subagents-<uid>-*``: real
    directories of ours, not symlinks): another live process's, or one left by a process
    that could not remove its own (ended by SIGKILL). A sandboxed process's namespace covers
    each (``RunSandbox.argv``): only its own home was covered, so a leaked one's files were
    readable by every later command (session 28)."""
    prefix, mine = f"{home_name()}-", os.getuid()
    with _CHOOSING:  # (a shared fallback's siblings are in the temporary directory)
        places = {home.parent, *(base for base, made in _FALLBACKS.items() if made == home)}
    found: list[Path] = []
    for place in sorted(places):
        with contextlib.suppress(OSError), os.scandir(place) as entries:
            for entry in entries:
                if not entry.name.startswith(prefix) or Path(entry.path) == home:
                    continue
                with contextlib.suppress(OSError):
                    seen = entry.stat(follow_symlinks=False)
                    if stat.S_ISDIR(seen.st_mode) and seen.st_uid == mine:
                        found.append(Path(entry.path))
    return found


def _sweep(base: Path) -> None:
    """Remove the fallback homes in ``base`` whose maker is gone (``held_dirs.sweep``: their
    lock can be taken), all in them; a live process's stays (its lock refuses), and so does
    an unmarked one (an older version's, which holds no lock: it may be live)."""
    for home in held_dirs.sweep(base, [f"{home_name()}-"]):
        log.info("removed a scratch home its process left", home=str(home))


def _remove(home: Path, maker: int) -> None:
    """At exit, the fallback home and all in it, by the process that made it only (a forked
    child that exits through ``atexit`` must not take its parent's)."""
    if os.getpid() == maker:
        shutil.rmtree(home, ignore_errors=True)


def make_dir(prefix: str, root: Path | None = None) -> Path:
    """A new private directory named ``prefix`` + random in the user's home, held (locked)
    by this process until ``remove_dir``; the first made in a home removes those there whose
    maker is gone (``held_dirs``: a host killed by SIGKILL left its own)."""
    home = scratch_home(root)
    with _CHOOSING:
        swept = home in _SWEPT
        _SWEPT.add(home)
    if not swept:
        for left in held_dirs.sweep(home, (SCRATCH, MCP_DIR, GIT_DIR)):
            log.info("removed a scratch directory its process left", directory=str(left))
    made, fd = held_dirs.make(home, prefix)
    with _CHOOSING:
        _OWNED[made] = fd
    return made


def remove_dir(made: Path) -> None:
    """Remove a directory ``make_dir`` gave, and all in it; its lock goes with it."""
    with _CHOOSING:
        fd = _OWNED.pop(made, None)
    if fd is None:
        shutil.rmtree(made, ignore_errors=True)
    else:
        held_dirs.release(made, fd)


_SWEPT: set[Path] = set()
"""The homes this process has swept already (once each: the next process sweeps again)."""
_OWNED: dict[Path, int] = {}
"""This process's scratch directories -> the descriptor holding each one's lock."""


def covered_home(temp_dir: Path) -> Path | None:
    """The home to cover for a process whose temporary directory is ``temp_dir`` (a run's
    directory in a scratch one, or any directory made directly in the home: an MCP server's,
    a git call's), or None for any other."""
    parent = temp_dir.parent
    if temp_dir.name.startswith(RUN_DIR) and parent.name.startswith(SCRATCH):
        parent = parent.parent
    if parent.name == home_name():
        return parent
    with _CHOOSING:
        return parent if parent in _FALLBACKS.values() else None


def _unsafe(home: Path, why: str) -> str:
    return (
        f"the scratch directory {home} {why}: commands' and MCP servers' temporary files"
        " (their output included) cannot be kept there. Remove it (or have its owner remove"
        " it), or set TMPDIR to a directory of your own"
    )
