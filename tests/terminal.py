"""A command run with a pseudo-terminal of its own, and what it showed there: for the tests
that a run's programs cannot type into the user's terminal (TIOCSTI; session 26)."""

from __future__ import annotations

import os
import pty
import select


def in_a_terminal(argv: list[str], wait: float) -> str:
    """What ``argv`` shows, run as a session leader with a new pseudo-terminal as its own
    (``wait``: a hang guard between two reads, not a timing)."""
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child execs at once
        os.execv(argv[0], argv)
    shown = b""
    try:
        while select.select([fd], [], [], wait)[0]:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the child ended: the terminal is gone
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(fd)
        os.waitpid(pid, 0)
    return shown.decode(errors="replace")
