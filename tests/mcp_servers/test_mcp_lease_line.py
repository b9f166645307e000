"""A stdio MCP server dies at its host's lease line (session 28, ``tools/lease_line.py``):
a stalled host's server went on acting (a tool call in flight, a watcher it started) while
another host took the run over, as a Bash command did before session 27. The mcp SDK that
starts it passes no descriptor, so its reaper is given the line by the ``/proc`` link of the
runtime's read-only descriptor (``LeaseLine.named_environment``); the line passing
unrenewed kills the server and its hidden daemon, by its reaper alone (the hub is not
asked); the server holds neither the line's descriptor nor its variable. A real server
(``mcp_server_app.py --daemon``), with the sandbox and without; the runtime's end to end
path for Bash is tests/cli/test_cli_lease_line.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import polling
from lease_renewal import LEAD_S, renewing
from marked import kill_marked, marked
from ns_pids import outer
from subagents.definitions.spec import AgentSpec
from subagents.mcp import McpHub, parse_servers
from subagents.mcp.connection import McpServerError
from subagents.tools.lease_line import LeaseLine, clock
from subagents.tools.reaper import LEASE_VARIABLE

from .conftest import START_WAIT_S
from .test_mcp_held import WAIT, daemon_server, landlock


def _holds_the_line(pid: int) -> bool:
    """Whether process ``pid`` has the line's variable or a descriptor of its file."""
    if LEASE_VARIABLE.encode() in Path(f"/proc/{pid}/environ").read_bytes():
        return True
    fds = Path(f"/proc/{pid}/fd")
    links = []
    for fd in fds.iterdir():
        try:
            links.append(os.readlink(fd))
        except OSError:
            continue  # (closed since it was listed)
    return any("subagents-lease-" in link for link in links)


@pytest.mark.parametrize("sandboxed", [False, pytest.param(True, marks=landlock)])
def test_a_server_and_its_daemon_die_when_the_line_passes_unrenewed(
    tmp_path: Path, sandboxed: bool
) -> None:
    mark, args, sandbox = daemon_server(tmp_path, sandboxed)
    line = LeaseLine(str(tmp_path))
    line.publish(clock() + LEAD_S)
    stop, renewer = renewing(line)
    hub = McpHub(
        parse_servers({"srv": {"command": sys.executable, "args": args}}),
        cwd=tmp_path,
        start_timeout=START_WAIT_S,
    )
    hub.lease_env = line.named_environment
    assert hub.lease_env, "this process's /proc/PID/fd is its user's"
    try:
        run = hub.tools_for(AgentSpec(name="worker", description="d"), sandbox=sandbox)
        assert hub.call(run, "mcp__srv__add", {"a": 2, "b": 3}).text == "5"
        server = outer(hub.call(run, "mcp__srv__pid", {}).text)
        assert not _holds_the_line(server)  # the reaper's alone, taken out before it ran
        assert len(marked(mark, exactly=True)) == 1  # its daemon, held while the line holds
        stop.set()  # the host stalled: no renewal comes
        renewer.join()
        polling.wait_until(lambda: marked(mark) == [], "the server killed at the line", WAIT)
        with pytest.raises(McpServerError):
            hub.call(run, "mcp__srv__add", {"a": 1, "b": 1})
    finally:
        stop.set()
        hub.close()
        line.close()
        kill_marked(mark)


_NAMED = """
import os
from subagents.tools.lease_line import LeaseLine
line = LeaseLine()
print(os.getpid(), repr(line.named_environment))
line.close()
"""


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None, reason="root and unshare(1)"
)
def test_a_proc_of_another_pid_namespace_names_no_line(tmp_path: Path) -> None:
    """A runtime in a PID namespace of its own under the outer ``/proc`` (``unshare --pid``
    without a ``/proc`` of its own): ``/proc/<its pid>`` is another process, so no link is
    named (review of session 28: it named the outer pid 1's descriptor, root's as the
    runtime is, and every stdio server's reaper failed to open it: none started)."""
    done = subprocess.run(
        ["unshare", "--pid", "--fork", sys.executable, "-c", _NAMED],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        check=False,
    )
    if done.returncode != 0 and "unshare" in done.stderr:
        pytest.skip(f"no PID namespace here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    pid, named = done.stdout.split(" ", 1)
    assert pid == "1", done.stdout  # (its own namespace's first process)
    assert named.strip() == "{}", done.stdout
