"""No sandboxed command types into a terminal (session 26, e-adv26).

``TIOCSTI`` pushes characters into a terminal's input queue: what the user's shell reads
and runs once the runtime exits, outside every sandbox (Linux keeps it for a process whose
own terminal it is while ``dev.tty.legacy_tiocsti`` is 1, as here). The runtime starts its
commands in sessions with no terminal; the filter denies it in every run as well, so a
process that does have one (a launcher started from a terminal) is held too."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from subagents.tools.sandbox import Sandbox
from terminal import in_a_terminal

from .conftest import WAIT
from .test_sandbox_runs import landlock

TYPE = (
    "import fcntl, os, sys, termios\n"
    "try:\n"
    "    for c in b'echo TYPED\\n': fcntl.ioctl(0, termios.TIOCSTI, bytes([c]))\n"
    "    print('pushed')\n"
    "except OSError as exc:\n"
    "    print('refused:', os.strerror(exc.errno))\n"
    "fcntl.fcntl(0, fcntl.F_SETFL, fcntl.fcntl(0, fcntl.F_GETFL) | os.O_NONBLOCK)\n"
    "try:\n"
    "    print('typed:', os.read(0, 100))\n"
    "except BlockingIOError:\n"
    "    print('typed:', b'')\n"
)


@landlock
@pytest.mark.parametrize("read_only", [False, True])
def test_a_sandboxed_command_with_a_terminal_cannot_type_into_it(
    tmp_path: Path, read_only: bool
) -> None:
    run = Sandbox().resolve().for_run(workspace=tmp_path, read_only=read_only, network=True)
    shown = in_a_terminal(run.argv([sys.executable, "-c", TYPE], tmp_path), WAIT)
    assert "refused: Operation not permitted" in shown, shown
    assert "typed: b''" in shown and "TYPED" not in shown, shown
