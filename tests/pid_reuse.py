"""What the pid-reuse tests share: whether a test may make a PID namespace of its own (where
it can hand a number to the process of its choosing: ``ns_last_pid``), and whether a process
was killed. Their scripts run in that namespace (``unshare -fp``), so ``killed`` is given to
them as source (``KILLED``), put before the script's own lines."""

from __future__ import annotations

import inspect
import os
import shutil
import subprocess


def namespaces() -> bool:
    """Whether this process may run a command in a PID namespace of its own (root, unshare)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-fp", "--mount-proc", "true"], capture_output=True)
    return probe.returncode == 0


def killed(pid: int) -> bool:
    """Dead, or a SIGKILL sent and not yet taken (a signal lands a moment after its send)."""
    try:
        with open(f"/proc/{pid}/status") as handle:
            status = handle.read()
        with open(f"/proc/{pid}/stat") as handle:
            stat = handle.read()
    except OSError:
        return True
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    pending = int(fields["ShdPnd"], 16) | int(fields["SigPnd"], 16)
    exiting = int(stat[stat.rindex(")") + 2 :].split()[6]) & 0x4  # PF_EXITING
    return fields["State"].split()[0] in ("Z", "X") or bool(pending & (1 << 8) or exiting)


KILLED = "import os\n" + inspect.getsource(killed) + "\n"
"""``killed`` as source, for a script run in its own namespace."""
