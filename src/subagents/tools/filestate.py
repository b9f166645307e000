"""What Write and Edit check before they change a file, and how they write it.

As in Claude Code, an existing file may be changed only after the model has read it in this
run, and not if it changed on disk since (a person, a linter or another agent wrote it):
the model would otherwise overwrite what it never saw. Files are read and written without
newline translation, so a file's CRLF line endings survive an edit.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path

from subagents.tools.base import ToolError
from subagents.tools.context import RunSession
from subagents.tools.sealed import SealedFiles


def check_fresh(session: RunSession, path: Path, shown: str) -> None:
    """ToolError unless ``path`` was read in this run and has not changed since."""
    seen = session.files_read.get(path)
    if seen is None:
        raise ToolError(f"File has not been read yet. Read it first before writing to it: {shown}")
    try:
        mtime = path.stat().st_mtime
    except OSError:
        return
    if mtime != seen:
        raise ToolError(
            f"File has been modified since read, either by the user or by a linter. Read it"
            f" again before attempting to write it: {shown}"
        )


def read_text(path: Path, shown: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="surrogateescape", newline="") as f:
            return f.read()
    except OSError as exc:
        raise ToolError(f"cannot read {shown}: {exc.strerror or exc}") from None


def write_text(
    path: Path, text: str, shown: str, *, root: Path, sealed: SealedFiles | None = None
) -> None:
    """Write atomically (a temporary file renamed over the target), keeping an existing
    file's mode; a new file gets the mode the process umask gives (0644 under umask 022),
    as ``open()`` would: ``mkstemp`` alone would leave it 0600.

    ``path`` was resolved inside the workspace ``root``, but a process of the run may have
    swapped a directory on its path for a symlink since (a trial's background shell made
    Write land outside the workspace this way, with the runtime's rights): so the parent
    is reached from ``root`` one directory at a time without following any symlink, and
    the file is made and renamed there, relative to that directory. Made there, it is not
    one of the run store's files (``sealed``): checked on that very directory."""
    try:
        parent = open_beneath(root, path.parent)
        try:
            if sealed is not None and sealed.holds_entry(parent, path.name):
                raise ToolError(f"cannot write {shown}: it is a file of the run store")
            _write_in(parent, path.name, text)
        finally:
            os.close(parent)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise ToolError(
                f"cannot write {shown}: a directory on its path is now a symlink or no"
                f" directory (file tools follow no symlink while they write)"
            ) from None
        raise ToolError(f"cannot write {shown}: {exc.strerror or exc}") from None


def open_beneath(root: Path, directory: Path) -> int:
    """A descriptor of ``directory`` (``root`` or below it, made if missing), reached from
    ``root`` without following a symlink: ``ELOOP``/``ENOTDIR`` when one is on the way."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in directory.relative_to(root).parts:
            try:
                step = os.open(name, flags, dir_fd=fd)
            except FileNotFoundError:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, dir_fd=fd)
                step = os.open(name, flags, dir_fd=fd)
            os.close(fd)
            fd = step
    except BaseException:
        os.close(fd)
        raise
    return fd


def _write_in(parent: int, name: str, text: str) -> None:
    try:
        st = os.stat(name, dir_fd=parent, follow_symlinks=False)
        mode = stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else None
    except FileNotFoundError:
        mode = None
    fd, tmp = _temporary(parent, name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape", newline="") as f:
            f.write(text)
            if mode is not None:  # after the write: a write clears S_ISUID without CAP_FSETID
                f.flush()
                os.fchmod(f.fileno(), mode)
        os.replace(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=parent)
        raise


def _temporary(parent: int, name: str) -> tuple[int, str]:
    """A new file beside ``name`` in the directory ``parent``, created with mode 0666 so the
    kernel applies the umask (reading the umask would mean setting it, which races with
    other threads)."""
    for _ in range(100):
        tmp = f".{name}.{secrets.token_hex(4)}.tmp"
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
            return os.open(tmp, flags, 0o666, dir_fd=parent), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {name}")
