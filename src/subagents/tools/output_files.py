"""Reading a command's output file (``processes``' relay writes it): safely, since the run's
own commands write in the directory it lies in, and cheaply, however much was printed."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO


def open_regular(path: Path) -> BinaryIO:
    """``path`` opened for reading if it is a regular file: not through a symlink, never
    blocking on a fifo (``OSError`` otherwise). The run's directory is written by its own
    commands, which could put a link to ``/dev/zero`` or a fifo where the runtime reads."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{path} is not a regular file")
    return open(fd, "rb")


def read_output(path: Path, *, offset: int = 0, limit_chars: int) -> tuple[str, int, int]:
    """Output from byte ``offset``: (text cut to ``limit_chars``, bytes left out, the byte
    offset reached: the end of what is written now). At most ~4 bytes per character are
    read, so a command that printed gigabytes costs no more than one that printed the cap.
    Invalid UTF-8 is replaced, never an error."""
    budget = limit_chars * 4
    try:
        with open_regular(path) as f:
            size = os.fstat(f.fileno()).st_size
            f.seek(offset)
            data = f.read(min(max(0, size - offset), budget))
    except OSError:
        return "", 0, offset
    text = data.decode("utf-8", errors="replace")
    shown = text[:limit_chars]
    omitted = size - offset - len(shown.encode("utf-8", errors="replace"))
    return shown, max(0, omitted), max(offset, size)
