"""Daemons found by a mark in their command line, not by a pid they report.

Why: a pid a command reads for itself (``$$``) is not its pid outside when the command runs in
a PID namespace of its own, and a pid read from a file may be 0 or negative (``kill(-1)`` as
root kills every process on the machine). A daemon here runs ``sleep MARK`` (a number no
other process uses) and is looked for in ``/proc`` by that mark, which the shell that
``exec``s it carries too: so it is seen from its start, before and after its ``exec``.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
from pathlib import Path


def new_mark() -> str:
    """A ``sleep`` duration no other process's command line holds (~300 s)."""
    return f"300.{secrets.randbelow(10**9):09d}"


def hidden_daemon(mark: str, ready: Path) -> str:
    """A shell line starting a daemon in a session of its own, with an empty environment,
    that writes ``ready`` and becomes ``sleep MARK``."""
    return f"setsid env -i sh -c 'echo ready > {ready}; exec sleep {mark}' > /dev/null 2>&1 &"


def until_ready(ready: Path) -> str:
    """A shell line waiting for ``ready`` to be written."""
    return f"while [ ! -s {ready} ]; do :; done;"


def marked(mark: str, *, exactly: bool = False) -> list[int]:
    """The live (not zombie) processes whose command line holds ``mark`` (``exactly``: is
    ``sleep MARK``, the daemon itself once it has ``exec``ed)."""
    found = []
    needle = mark.encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            if cmdline != b"sleep\0" + needle + b"\0" if exactly else needle not in cmdline:
                continue
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if stat[stat.rindex(")") + 2] not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def kill_marked(mark: str) -> None:
    """SIGKILL what holds ``mark`` (a test's cleanup when the code under test left it)."""
    for pid in marked(mark):
        if pid > 0:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
