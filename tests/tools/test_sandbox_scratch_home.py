"""No sandboxed process reads another's temporary files anywhere in the user's home of
scratch directories (session 27, ``tools/scratch.py``): a stdio MCP server a run starts saw
every run's scratch files (``$TMPDIR/../run-*`` was covered for Bash commands and hooks
only), and another runtime's scratch directory (a second scratch directory of the same
user) was covered for no one. Every runtime's scratch directory and every MCP server's
temporary one now lie in ``<tmp>/subagents-<uid>``, which the process's mount namespace
covers whole but for its own directory. Through the real runtime, its MCP hub, and the
kernel; the other runtime's and the other server's directories are made by the same parts
a second runtime uses (``ProcessGroups``, ``scratch.make_dir``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from subagents.messages import RunStatus
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.tools.permissions import Permissions
from subagents.tools.processes import ProcessGroups
from subagents.tools.scratch import MCP_DIR, make_dir, scratch_home

from .conftest import WAIT
from .test_sandbox_runs import TRUSTING_BASH, agent, landlock, results, use
from .test_sandbox_scratch import namespaces

SERVER = Path(__file__).resolve().parent / "scratch_look_server.py"
SECRET = "a-secret-of-another-7f3e"
# (its own output file, ``*.out``, holds what it printed so far: not read into itself)
LOOK = (
    'cd "$TMPDIR/../.." && pwd && find . -type d'
    ' && find . -type f ! -name "*.out" -exec cat {} + 2>&1; true'
)


@pytest.fixture
def others() -> list[Path]:
    """A run of another runtime (its scratch directory, as a second runtime makes it) and
    another stdio MCP server, each with a secret file in its own directory."""
    groups = ProcessGroups()
    mcp = make_dir(MCP_DIR)
    mine = [groups.run_dir("other-runtimes-run") / "out", mcp / "server-file"]
    for path in mine:
        path.write_text(SECRET)
    yield mine
    groups.kill_all()
    for path in mine:
        path.unlink(missing_ok=True)
    mcp.rmdir()


@landlock
@namespaces
@pytest.mark.parametrize("mode", ["plan", "default"])
def test_an_mcp_server_and_a_command_read_nothing_of_the_users_other_scratch_files(
    repo: Path, others: list[Path], mode: str
) -> None:
    """The run writes a secret of its own in its ``TMPDIR``; its MCP server, then its Bash
    command, look through the whole home: each finds its own directory alone (the server
    none of the run's files, the command its own file), nothing of the other runtime's run
    nor of the other server."""
    steps = [
        {"tool_calls": [use("Bash", command=f'echo {SECRET}-own > "$TMPDIR/mine"')]},
        {"tool_calls": [use("mcp__look__look")]},
        {"tool_calls": [use("Bash", command=LOOK)]},
        "done",
    ]
    model = ScriptedModel({"worker": steps})
    config = {"command": sys.executable, "args": [str(SERVER)]}
    with Runtime(
        [agent("worker", permission_mode=mode)],
        model=model,
        workspace=repo,
        permissions=Permissions(mode="default", allow=("Bash", "mcp__look__look")),
        tools=[TRUSTING_BASH],
        mcp_servers={"look": config},
    ) as rt:
        assert rt.run("worker", "look", wait=WAIT).status is RunStatus.COMPLETED
    _, server, command = results(model, "worker")
    assert not server.is_error, server
    assert SECRET not in server.content, server.content  # neither the run's nor the others'
    dirs = [line for line in server.content.splitlines() if line.startswith("dir ")]
    assert len(dirs) == 1, server.content  # its own directory alone
    assert dirs[0].startswith(f"dir {scratch_home() / MCP_DIR}"), server.content
    assert dirs[0] != f"dir {others[1].parent}", server.content
    assert server.content.splitlines()[0] == f"home {scratch_home()}", server.content
    assert not command.is_error, command
    assert command.content.count(SECRET) == 1, command.content  # its own file alone
    assert f"{SECRET}-own" in command.content, command.content
    found = {line for line in command.content.splitlines() if line.startswith("./")}
    assert len(found) == 2, command.content  # ./shells-X, ./shells-X/run-Y
    assert all(others_file.read_text() == SECRET for others_file in others)  # (still there)


def test_a_home_that_is_a_symlink_or_another_users_is_never_used(tmp_path: Path) -> None:
    """In a shared ``/tmp`` another user may have made ``subagents-<uid>`` first, or left a
    symlink there: runs' temporary files must not go where someone else reads them. Since
    session 28 the process falls back to a private home of its own (tested with a real
    second uid in ``test_sandbox_scratch_squat.py``); a home of ours left open is made
    private."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    root = tmp_path / "tmp"
    root.mkdir()
    (root / f"subagents-{os.getuid()}").symlink_to(elsewhere)
    made = make_dir(MCP_DIR, root)
    assert made.parent.parent == root and not made.parent.is_symlink(), made
    assert made.parent.name.startswith(f"subagents-{os.getuid()}-"), made
    assert list(elsewhere.iterdir()) == []
    if os.getuid() == 0:  # (root may make one another user's: as a stranger would)
        strangers = tmp_path / "strangers"
        made_first = strangers / f"subagents-{os.getuid()}"
        made_first.mkdir(parents=True, mode=0o700)
        os.chown(made_first, 4242, 4242)
        fallback = make_dir(MCP_DIR, strangers).parent
        assert fallback != made_first and fallback.stat().st_uid == os.getuid(), fallback
        assert list(made_first.iterdir()) == []
    opened = tmp_path / "opened"
    home = opened / f"subagents-{os.getuid()}"
    home.mkdir(parents=True, mode=0o777)
    home.chmod(0o777)
    made = make_dir(MCP_DIR, opened)
    assert (made.parent, home.stat().st_mode & 0o777) == (home, 0o700)  # ours: made private


def test_a_refused_home_leaves_a_runs_stop_hooks_not_run_and_the_run_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No home the runtime can make (here a temporary directory that is a file: since
    session 28 a squatted home is fallen back from, ``test_sandbox_scratch_squat.py``)
    makes a Stop hook's temporary directory fail: the hooks are not run (logged), as a hook
    that cannot start, and the run ends as its model said (last read of session 27: it
    crashed, "agent crashed ... ScratchHomeError", sandboxed or not); a tool call's hooks
    still fail closed."""
    root = tmp_path / "tmp"
    root.write_text("")  # (not a directory: no home and no fallback can be made in it)
    monkeypatch.setattr("tempfile.tempdir", str(root))  # (as TMPDIR at the process's start)
    mark = tmp_path / "stop-hook-ran"
    stop = "hooks:\n  Stop:\n    - hooks:\n        - type: command\n"
    stop += f"          command: touch {mark}\n"
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "a.md").write_text(f"---\nname: a\ndescription: An agent.\n{stop}---\nAct.\n")
    model = ScriptedModel({"a": ["done"]})
    with Runtime(model=model, workspace=tmp_path, agent_dirs=[agents], allow_hooks=True) as rt:
        outcome = rt.run("a", "go", wait=WAIT)
    assert (outcome.status, outcome.result) == (RunStatus.COMPLETED, "done"), outcome
    assert not mark.exists()
