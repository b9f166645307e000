"""Daemons found by a mark in their command line, not by a pid they report.

Why: a pid a command reads for itself (``$$``) is not its pid outside when the command runs in
a PID namespace of its own, and a pid read from a file may be 0 or negative (``kill(-1)`` as
root kills every process on the machine). A daemon here runs ``sleep MARK`` (a number no
other process uses) and is looked for in ``/proc`` by that mark, which the shell that
``exec``s it carries too: so it is seen from its start, before and after its ``exec``, and
inside it (``command_line``).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
from pathlib import Path

import polling


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
        cmdline = command_line(entry)
        if cmdline is None or (
            cmdline != b"sleep\0" + needle + b"\0" if exactly else needle not in cmdline
        ):
            continue
        if _state(entry) not in ("", "Z", "X"):
            found.append(int(entry.name))
    return found


PF_EXITING = 0x4
PF_KTHREAD = 0x200000
"""``/proc/PID/stat``'s flags: a process ending, a kernel thread (no command line, ever)."""


def command_line(entry: Path) -> bytes | None:
    """The command line of the process ``entry`` (``/proc/PID``); None when it has none: it
    is gone, a zombie, ending, or a kernel thread.

    Why it may wait: a process inside an ``exec`` shows an empty command line from the
    point of no return (where ``Popen`` returns: its close-on-exec pipe closed) until the
    kernel has set up its new arguments. On a loaded machine it may wait that long for a
    core, and a test that looked for it right after starting it (a background Bash call
    answered) did not find it (``test_attempt_processes``, session 30): such a process is
    read again until its command line is there, or it ends (``polling.HANG_GUARD_S``)."""
    cmdline = b""

    def shown() -> bool:
        nonlocal cmdline
        try:
            cmdline = (entry / "cmdline").read_bytes()
            if cmdline:
                return True
            stat = (entry / "stat").read_text()
        except OSError:
            return True  # gone
        fields = stat[stat.rindex(")") + 2 :].split()
        ended = fields[0] in ("Z", "X") or int(fields[6]) & (PF_EXITING | PF_KTHREAD)
        return bool(ended)

    polling.wait_until(shown, f"{entry}'s command line after its exec")
    return cmdline or None


def _state(entry: Path) -> str:
    """The state letter of the process ``entry`` (``/proc/PID``); empty when it is gone."""
    try:
        stat = (entry / "stat").read_text()
    except OSError:
        return ""
    return stat[stat.rindex(")") + 2]


def kill_marked(mark: str) -> None:
    """SIGKILL what holds ``mark`` (a test's cleanup when the code under test left it)."""
    for pid in marked(mark):
        if pid > 0:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def children_of(pid: int) -> list[int]:
    """``pid``'s children now (every thread's: the runtime starts commands from several)."""
    found: list[int] = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(FileNotFoundError):
            found += [int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
    return found


def lose_node(host: subprocess.Popen[bytes], wait_s: float) -> None:
    """End ``host`` as Ray ends a lost driver's node host: its children SIGKILLed, then it."""
    for child in children_of(host.pid):
        if child > 0:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
    host.kill()
    host.wait(wait_s)


def host_leaves_nothing(argv: list[str], mark: str, wait_s: float, *, lost: bool) -> None:
    """Start a host (``argv``: a runtime in a process of its own, whose held command or
    server starts a daemon ``sleep MARK``), wait until the daemon runs, then SIGKILL the host
    (``lost``: as a lost node host, ``lose_node``), and wait until every process holding
    ``mark`` has ended: the reaper's lifeline (the host's death) ended them all."""
    host = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        polling.wait_until(lambda: bool(marked(mark, exactly=True)), "the daemon", wait_s)
        if lost:
            lose_node(host, wait_s)
        host.kill()
        host.wait(wait_s)
        polling.wait_until(lambda: marked(mark) == [], "every marked process ended", wait_s)
    finally:
        host.kill()
        host.wait(wait_s)
        kill_marked(mark)
