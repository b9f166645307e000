"""A detached reaper is stopped where a seccomp filter refuses ``pidfd_send_signal`` but
allows ``pidfd_open`` (``DetachedReaper.send``: by its number, checked, as
``group_leader`` falls back).

Why: ``send`` let the refusal (``EPERM``) out, so a node host under such a filter (some
container runtimes' default profiles answer calls they do not know so) could stop none of
its detached commands. The refusal is real here: a child process installs a filter that
answers ``pidfd_send_signal`` with ``EPERM`` (or ``ENOSYS``), then holds a process by its pidfd
as a node host holds its reaper, and stops it."""

from __future__ import annotations

import errno
import os
import subprocess
import sys

import pytest

from .conftest import WAIT

REFUSED = """
import ctypes, errno, os, signal, subprocess, sys
from subagents.tools import sandbox_syscalls as sc
from subagents.tools.detached import DetachedReaper

PIDFD_SEND_SIGNAL = 424  # (x86_64 and aarch64 alike: the calls numbered after 402 are shared)
code = [
    sc._insn(sc._LD_W_ABS, sc._NR),
    *sc._deny(PIDFD_SEND_SIGNAL, sc.RET_ERRNO | int(sys.argv[1])),
    sc._insn(sc._RET_K, sc.RET_ALLOW),
]
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS
sc.install_filter(libc, b"".join(code))

# (our child here, so its number stays its own; its output not ours: a run that fails
# is not held open by it)
held = subprocess.Popen(["sleep", "300"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    reaper = DetachedReaper(held.pid, os.pidfd_open(held.pid))
    try:
        signal.pidfd_send_signal(os.pidfd_open(held.pid), signal.SIGTERM)
    except OSError as exc:
        print("refused", exc.errno, flush=True)
    reaper.send(signal.SIGTERM)
    print("ended", reaper.wait(float(sys.argv[2])), held.wait(), flush=True)
    reaper.send(signal.SIGTERM)  # (ended: nothing sent, nothing raised)
    print("again", flush=True)
finally:
    held.kill()
"""


@pytest.mark.skipif(
    os.uname().machine not in ("x86_64", "aarch64") or not hasattr(os, "pidfd_open"),
    reason="the filter's call number is known on x86_64 and aarch64; needs pidfd_open",
)
@pytest.mark.parametrize("refusal", [errno.EPERM, errno.ENOSYS])
def test_a_detached_reaper_is_stopped_where_pidfd_send_signal_is_refused(refusal: int) -> None:
    """Failed before the fix: ``send`` raised ``PermissionError`` (the child's traceback)."""
    done = subprocess.run(
        [sys.executable, "-c", REFUSED, str(refusal), str(WAIT)],
        capture_output=True,
        text=True,
        timeout=WAIT * 2,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"refused {refusal}", done.stdout  # the filter is in force
    assert lines[1] == f"ended True {-15}", done.stdout  # stopped by SIGTERM
    assert lines[2] == "again", done.stdout
