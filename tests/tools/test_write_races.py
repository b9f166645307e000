"""The file tools run in the runtime's process, outside the sandbox: a path they checked can
change before they write. A trial's background Bash (``renameat2(RENAME_EXCHANGE)`` of a
workspace directory and a symlink to elsewhere, in a loop) made Write calls of an
``acceptEdits`` run land outside the workspace, with the runtime's rights. These tests put
the file system in the state the race produces (the path checked, then a symlink swapped in)
and write."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from subagents.tools.errors import ToolError
from subagents.tools.filestate import write_text
from subagents.tools.workspace import Workspace


@pytest.fixture
def places(tmp_path: Path) -> tuple[Workspace, Path]:
    (tmp_path / "ws" / "d").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "victim").write_text("keep me")
    return Workspace(tmp_path / "ws"), tmp_path / "outside"


@pytest.mark.parametrize("target", ["d/victim", "d/new", "d/deeper/new"])
def test_a_symlink_swapped_in_after_the_check_is_not_followed(
    places: tuple[Workspace, Path], target: str
) -> None:
    ws, outside = places
    path = ws.resolve(target)  # checked while d is a directory of the workspace
    (ws.root / "d").rename(ws.root / "d.real")
    (ws.root / "d").symlink_to(outside)  # then swapped
    with pytest.raises(ToolError, match="symlink"):
        write_text(path, "pwned", target, root=ws.root)
    assert sorted(os.listdir(outside)) == ["victim"]
    assert (outside / "victim").read_text() == "keep me"


def test_a_write_still_makes_missing_directories_and_keeps_the_mode(
    places: tuple[Workspace, Path],
) -> None:
    ws, _ = places
    path = ws.resolve("a/b/c.sh")
    write_text(path, "one", "a/b/c.sh", root=ws.root)
    path.chmod(0o750)
    write_text(path, "two", "a/b/c.sh", root=ws.root)
    assert path.read_text() == "two" and path.stat().st_mode & 0o777 == 0o750
    assert [p.name for p in path.parent.iterdir()] == ["c.sh"]  # no temporary left


SETUID_WRITE = """
import os, sys
from pathlib import Path
from subagents.tools.filestate import write_text
from subagents.tools.workspace import Workspace
ws = Workspace(sys.argv[1])
path = ws.resolve("tool.sh")
write_text(path, "#!/bin/sh\\necho two\\n", "tool.sh", root=ws.root)
print(oct(os.stat(path).st_mode & 0o7777))
"""


@pytest.fixture
def nobodys() -> Iterator[Path]:
    """A directory of the user ``nobody`` that ``nobody`` can reach (pytest's are root's 0700)."""
    made = Path(tempfile.mkdtemp(prefix="subagents-nobody-"))
    made.chmod(0o755)
    os.chown(made, 65534, 65534)
    yield made
    shutil.rmtree(made)


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root's setpriv")
def test_a_rewrite_keeps_the_setuid_and_setgid_bits_of_a_user_without_cap_fsetid(
    nobodys: Path,
) -> None:
    """The kernel clears S_ISUID (and S_ISGID with group execute) on a write by a process
    without ``CAP_FSETID``: the mode is set once the text is written, as before the write
    walked from the root. Run as ``nobody`` (root keeps the bits whatever the order)."""
    ws = nobodys
    script = ws / "tool.sh"
    script.write_text("#!/bin/sh\necho one\n")
    os.chown(script, 65534, 65534)
    script.chmod(0o6755)
    user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": src}
    reach = subprocess.run([*user, sys.executable, "-c", "import subagents"], env=env, check=False)
    if reach.returncode != 0:
        pytest.skip("nobody cannot run this checkout's Python (a home directory of 0700?)")
    done = subprocess.run(
        [*user, sys.executable, "-c", SETUID_WRITE, str(ws)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.stdout.strip() == "0o6755", done.stderr
    assert script.read_text() == "#!/bin/sh\necho two\n"
