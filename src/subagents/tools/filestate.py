"""What Write and Edit check before they change a file, and how they write it.

As in Claude Code, an existing file may be changed only after the model has read it in this
run, and not if it changed on disk since (a person, a linter or another agent wrote it):
the model would otherwise overwrite what it never saw. Files are read and written without
newline translation, so a file's CRLF line endings survive an edit.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

from subagents.tools.base import ToolError
from subagents.tools.context import RunSession


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


def write_text(path: Path, text: str, shown: str) -> None:
    """Write atomically (a temporary file renamed over the target), keeping an existing
    file's mode; a new file gets the mode the process umask gives (0644 under umask 022),
    as ``open()`` would: ``mkstemp`` alone would leave it 0600."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        mode = path.stat().st_mode if path.exists() else None
        fd, tmp = _temporary(path)
        try:
            with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape", newline="") as f:
                f.write(text)
            if mode is not None:
                os.chmod(tmp, mode)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as exc:
        raise ToolError(f"cannot write {shown}: {exc.strerror or exc}") from None


def _temporary(path: Path) -> tuple[int, str]:
    """A new file beside ``path``, created with mode 0666 so the kernel applies the umask
    (reading the umask would mean setting it, which races with other threads)."""
    for _ in range(100):
        tmp = str(path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path}")
