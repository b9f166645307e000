"""Another local user makes ``<tmp>/subagents-<uid>`` first (session 28): session 27 refused
such a home, so any user of the machine could block a victim's Bash, hooks and MCP servers
by making one directory. Now the process takes a home of its own that nobody can pre-empt
(``tools/scratch.py``: ``mkdtemp``, 0700, ours, never a symlink), the same for all its
runtimes, and each sandboxed process's namespace covers it as it covered the home. The
squat is made by a real second uid (the tests run as root; skipped otherwise) in a shared,
sticky temporary directory, as ``/tmp`` is."""

from __future__ import annotations

import fcntl
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from subagents.messages import RunStatus
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.tools import sandbox_report
from subagents.tools.held_dirs import MARK
from subagents.tools.permissions import Permissions
from subagents.tools.scratch import MCP_DIR, ScratchHomeError, home_name, make_dir, scratch_home

from .conftest import WAIT
from .test_sandbox_runs import TRUSTING_BASH, agent, landlock, results, use
from .test_sandbox_scratch import namespaces

STRANGER = 4242
SECRET = "another-servers-secret-91c2"
as_root = pytest.mark.skipif(os.getuid() != 0, reason="a second uid needs root")


@pytest.fixture
def shared() -> Iterator[Path]:
    """A temporary directory as ``/tmp`` is (1777: anyone makes names, no one removes
    another's), which the stranger can reach."""
    made = Path(tempfile.mkdtemp(prefix="s28-shared-", dir="/tmp"))
    made.chmod(0o1777)
    yield made
    shutil.rmtree(made, ignore_errors=True)


def as_stranger(*argv: str) -> None:
    """Run ``argv`` as the other user (a real process with its uid)."""
    subprocess.run(argv, user=STRANGER, group=STRANGER, check=True, timeout=60)


def squat(shared: Path, how: str) -> Path:
    """The victim's home name in ``shared``, made first by the stranger: a directory of
    theirs, open to all, or a symlink to one."""
    name = shared / home_name()
    if how == "directory":
        as_stranger("mkdir", "-m", "0777", str(name))
    else:
        as_stranger("mkdir", "-m", "0777", str(shared / "theirs"))
        as_stranger("ln", "-s", str(shared / "theirs"), str(name))
    assert name.lstat().st_uid == STRANGER
    return name


def _private_and_ours(home: Path) -> None:
    found = home.lstat()
    assert stat.S_ISDIR(found.st_mode), home
    assert (found.st_uid, stat.S_IMODE(found.st_mode)) == (os.getuid(), 0o700), home


@as_root
@pytest.mark.parametrize("how", ["directory", "symlink"])
def test_a_squatted_home_gives_the_process_a_private_one_chosen_once(
    shared: Path, how: str
) -> None:
    """Every directory goes to one fallback home beside the squat, ours and private; the
    stranger's directory gets nothing; a fallback removed under the process (a temp
    cleaner) is made anew, never the squatted name."""
    squatted = squat(shared, how)
    first, second = make_dir(MCP_DIR, shared), make_dir("shells-", shared)
    home = first.parent
    assert second.parent == home == scratch_home(shared)
    assert home.parent == shared and home.name.startswith(f"{home_name()}-"), home
    _private_and_ours(home)
    assert list(squatted.resolve().iterdir()) == []
    shutil.rmtree(home)
    again = scratch_home(shared)
    assert again != squatted and again.name.startswith(f"{home_name()}-"), again
    _private_and_ours(again)


def test_no_home_at_all_is_refused_with_what_to_do(tmp_path: Path) -> None:
    """A temporary directory that is not one (a file) leaves nowhere to fall back to: the
    error names the path and what to do."""
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    with pytest.raises(ScratchHomeError, match=r"no other could be made.*set TMPDIR"):
        make_dir(MCP_DIR, not_a_dir)


def _bash_result(workspace: Path, command: str) -> Any:
    """The result of one sandboxed Bash ``command`` a worker ran in ``workspace`` (its run
    completed)."""
    model = ScriptedModel({"worker": [{"tool_calls": [use("Bash", command=command)]}, "done"]})
    with Runtime(
        [agent("worker")],
        model=model,
        workspace=workspace,
        permissions=Permissions(mode="default", allow=("Bash",)),
        tools=[TRUSTING_BASH],
    ) as rt:
        assert rt.run("worker", "run it", wait=WAIT).status is RunStatus.COMPLETED
    (result,) = results(model, "worker")
    return result


@as_root
@landlock
@namespaces
def test_a_victims_bash_runs_beside_a_squat_and_its_namespace_covers_the_fallback(
    shared: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stranger squats the victim's home in the temporary directory; the victim's run's
    Bash command runs (it was refused), with its ``TMPDIR`` in the fallback home, and looks
    through that home: its own directory alone, nothing of an MCP server's directory the
    same process made there before it."""
    squatted = squat(shared, "directory")
    monkeypatch.setattr("tempfile.tempdir", str(shared))  # (as TMPDIR at the process's start)
    other = make_dir(MCP_DIR)
    (other / "file").write_text(SECRET)
    look = (
        'echo own-7d > "$TMPDIR/mine" && cd "$TMPDIR/../.." && pwd'
        ' && find . -type f ! -name "*.out" -exec cat {} +'
    )
    looked = _bash_result(shared, look)
    assert not looked.is_error, looked.content
    assert looked.content.splitlines()[0] == str(other.parent), looked.content
    assert "own-7d" in looked.content and SECRET not in looked.content, looked.content
    _private_and_ours(other.parent)
    assert list(squatted.iterdir()) == []


@as_root
def test_doctor_says_the_squat_and_the_fallback(
    shared: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``subagents doctor``'s finding names the squatted home and this process's fallback,
    and its verdict is ``weak`` (another process's scratch is not under the cover)."""
    squatted = squat(shared, "directory")
    monkeypatch.setattr("tempfile.tempdir", str(shared))
    machine = sandbox_report.found()
    assert (machine.squatted, machine.home_error) == (str(squatted), None)
    assert Path(machine.home).parent == shared and Path(machine.home) != squatted
    (scratch,) = [c for c in sandbox_report.checks(machine) if c.name == "scratch"]
    assert scratch.state == "weak" and machine.home in scratch.says, scratch


LEAVER = """
import os, sys, tempfile
from subagents.tools.scratch import MCP_DIR, make_dir
tempfile.tempdir = sys.argv[1]
home = make_dir(MCP_DIR).parent
child = os.fork()
if child == 0:
    sys.exit(0)  # (a forked child's exit runs the parent's atexit handlers)
os.waitpid(child, 0)
print(home, home.is_dir(), flush=True)
"""


_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
"""A child Python's: this test's imports (the tree under test first)."""


def _python(script: str, shared: Path) -> subprocess.CompletedProcess[str]:
    """``script`` run by a child Python with ``shared`` as its argument; it must succeed."""
    return subprocess.run(
        [sys.executable, "-c", script, str(shared)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env=_ENV,
    )


@as_root
def test_the_fallback_goes_with_the_process_that_made_it(shared: Path) -> None:
    """Removed at that process's exit, all in it; not at the exit of a child it forked."""
    squat(shared, "directory")
    done = _python(LEAVER, shared)
    home, kept = done.stdout.split()
    assert Path(home).parent == shared and kept == "True", done.stdout
    assert not Path(home).exists()


def leaked(shared: Path, name: str) -> Path:
    """A fallback home another process of the victim's left (as one ended by SIGKILL
    leaves it: nothing removed it), holding a secret."""
    home = shared / f"{home_name()}-{name}"
    home.mkdir(mode=0o700)
    (home / "mcp-x").mkdir()
    (home / "mcp-x" / "secret").write_text(SECRET)
    return home


@as_root
@landlock
@namespaces
def test_another_fallback_beside_the_own_is_covered_from_a_sandboxed_bash(
    shared: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another fallback home of the victim's (a live process's: its lock is held, so it
    is not swept) is covered in the Bash command's namespace as the own home is: the
    command reads nothing of it (it read the secret: only its own home was covered)."""
    squat(shared, "directory")
    other = leaked(shared, "alive123")
    held = os.open(other, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(held, fcntl.LOCK_EX)  # (its maker lives)
    try:
        monkeypatch.setattr("tempfile.tempdir", str(shared))
        looked = _bash_result(shared, f"cat {other}/mcp-x/secret; ls -a {other}; echo looked")
    finally:
        os.close(held)
    assert "looked" in looked.content and SECRET not in looked.content, looked.content
    assert "mcp-x" not in looked.content.splitlines(), looked.content
    assert (other / "mcp-x" / "secret").read_text() == SECRET  # (covered, not removed)


SWEEPER = """
import sys, tempfile
from subagents.tools.scratch import MCP_DIR, make_dir
tempfile.tempdir = sys.argv[1]
print(make_dir(MCP_DIR).parent, flush=True)
"""


@as_root
def test_a_fallback_whose_maker_is_gone_is_swept_by_the_next(shared: Path) -> None:
    """A process that falls back removes the fallback homes whose lock it can take (their
    maker ended without removing its own); a live one's (lock held) stays; so does one a
    SIGKILLed maker left, until the next process falls back; and so does one without the
    mark of a held home (an older version's: it holds no lock, and may be live)."""
    squat(shared, "directory")
    dead, alive = leaked(shared, f"dead4567{MARK}"), leaked(shared, f"alive890{MARK}")
    older = leaked(shared, "older123")  # (an older version's: no lock, maybe live: session 29)
    held = os.open(alive, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(held, fcntl.LOCK_EX)
    try:
        killed = subprocess.Popen(
            [sys.executable, "-c", SWEEPER + "import time; time.sleep(600)", str(shared)],
            stdout=subprocess.PIPE,
            text=True,
            env=_ENV,
        )
        assert killed.stdout is not None
        left = Path(killed.stdout.readline().strip())
        assert not dead.exists() and alive.is_dir() and left.is_dir()
        _python(SWEEPER, shared)  # (another falls back while the first lives: its home is kept)
        assert left.is_dir()
        assert killed.pid > 0
        killed.kill()
        killed.wait(timeout=60)
        assert left.is_dir()  # (SIGKILL: its atexit did not run)
        done = _python(SWEEPER, shared)
    finally:
        os.close(held)
    assert not left.exists() and alive.is_dir(), done.stdout
    assert (older / "mcp-x" / "secret").read_text() == SECRET
    assert not Path(done.stdout.strip()).exists()  # (its own: removed at its exit)
