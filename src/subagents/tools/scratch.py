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

The home is made private (0700) and must be the user's own directory, not a symlink: in a
shared ``/tmp`` another user could have made it first (then ``ScratchHomeError`` says so and
what to do, rather than handing runs a directory someone else reads).
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from subagents.tools.errors import ToolError

SCRATCH = "shells-"
"""The prefix of a runtime's scratch directory (``ProcessGroups.scratch``), which holds every
run's own temporary one (named ``RUN_DIR`` + the run's id): its commands' output. Short, as
is ``MCP_DIR``: a ``TMPDIR`` is where programs make their unix sockets, whose paths may not
pass 107 bytes (``multiprocessing.Manager``'s is ``$TMPDIR/pymp-*/listener-*``: 101 bytes
with ``subagents-shells-`` here and a one-digit uid; 91 now, two more than before the home)."""
RUN_DIR = "run-"
MCP_DIR = "mcp-"
"""The prefix of a stdio MCP server's temporary directory (its ``TMPDIR``)."""
GIT_DIR = "git-"
"""The prefix of the temporary directory of a git call the runtime makes in the runs'
sandbox (``isolation/git.py``: a hook a run planted may run there)."""


class ScratchHomeError(ToolError):
    """The home of the scratch directories is not one this user alone owns: a tool error,
    the Bash call or the MCP server's start answered with it (nothing starts)."""


def home_name() -> str:
    """``subagents-<uid>``: the name of this user's home of scratch directories."""
    return f"subagents-{os.getuid()}"


def scratch_home(root: Path | None = None) -> Path:
    """This user's home of scratch directories in ``root`` (None: the system's temporary
    directory), made 0700 on first use. ``ScratchHomeError`` when it is a symlink, not a
    directory, or another user's."""
    base = Path(tempfile.gettempdir() if root is None else root)
    home = base / home_name()
    with contextlib.suppress(FileExistsError):
        home.mkdir(mode=0o700)
    try:
        fd = os.open(home, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        why = _unsafe(home, f"is a symlink or not a directory ({exc.strerror})")
        raise ScratchHomeError(why) from None
    try:
        found = os.fstat(fd)
        if found.st_uid != os.getuid():
            raise ScratchHomeError(_unsafe(home, f"belongs to uid {found.st_uid}"))
        if stat.S_IMODE(found.st_mode) & 0o077:
            os.fchmod(fd, 0o700)  # (ours: made open by hand, or by an older umask)
    finally:
        os.close(fd)
    return home


def make_dir(prefix: str, root: Path | None = None) -> Path:
    """A new private directory named ``prefix`` + random in the user's home."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir=scratch_home(root)))


def covered_home(temp_dir: Path) -> Path | None:
    """The home to cover for a process whose temporary directory is ``temp_dir`` (a run's
    directory in a scratch one, or any directory made directly in the home: an MCP server's,
    a git call's), or None for any other."""
    parent = temp_dir.parent
    if temp_dir.name.startswith(RUN_DIR) and parent.name.startswith(SCRATCH):
        parent = parent.parent
    return parent if parent.name == home_name() else None


def _unsafe(home: Path, why: str) -> str:
    return (
        f"the scratch directory {home} {why}: commands' and MCP servers' temporary files"
        " (their output included) cannot be kept there. Remove it (or have its owner remove"
        " it), or set TMPDIR to a directory of your own"
    )
