"""Scratch directories a killed process left are swept by the next (session 29,
``tools/held_dirs.py``): every runtime's scratch directory (``shells-*``), every stdio MCP
server's (``mcp-*``) and every sandboxed git call's (``git-*``) is locked for its maker's
life; a process ended by SIGKILL could not remove its own, and nothing else did (200 in
``/tmp/subagents-0`` after a day of tests). Real processes, killed for real, in a home of
their own (``make_dir``'s ``root``)."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from subagents.tools import held_dirs
from subagents.tools.scratch import GIT_DIR, MCP_DIR, SCRATCH, home_name, make_dir, remove_dir

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
"""A child Python's: this test's imports (the tree under test first)."""

MAKER = """
import sys, time
from pathlib import Path
from subagents.tools.scratch import GIT_DIR, MCP_DIR, SCRATCH, make_dir
root = Path(sys.argv[1])
for prefix in (SCRATCH, MCP_DIR, GIT_DIR):
    made = make_dir(prefix, root)
    (made / "output").write_text("left")
    print(made, flush=True)
time.sleep(600)
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture
def maker(root: Path) -> Iterator[tuple[subprocess.Popen[str], list[Path]]]:
    """A live process that made a scratch, an MCP and a git directory in ``root``'s home."""
    child = subprocess.Popen(
        [sys.executable, "-c", MAKER, str(root)], stdout=subprocess.PIPE, text=True, env=ENV
    )
    assert child.stdout is not None
    made = [Path(child.stdout.readline().strip()) for _ in range(3)]
    yield child, made
    assert child.pid > 0
    child.kill()
    child.wait(timeout=60)


def test_a_killed_makers_directories_are_swept_by_the_next_maker(
    root: Path, maker: tuple[subprocess.Popen[str], list[Path]]
) -> None:
    """While their maker lives they stay, whoever else makes one; once it is killed
    (SIGKILL: it removed nothing), the next process that makes one removes them all."""
    child, made = maker
    assert [p.parent for p in made] == [root / home_name()] * 3 and all(p.is_dir() for p in made)
    mine = make_dir(MCP_DIR, root)  # (the first of this process in that home: it sweeps)
    try:
        assert all((p / "output").read_text() == "left" for p in made)
        assert child.pid > 0
        child.kill()
        child.wait(timeout=60)
        assert all(p.is_dir() for p in made)  # (SIGKILL: nothing removed them)
        done = subprocess.run(
            [sys.executable, "-c", MAKER.replace("time.sleep(600)", ""), str(root)],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
            env=ENV,
        )
        assert not any(p.exists() for p in made), sorted(os.listdir(root / home_name()))
        assert mine.is_dir()  # (a live maker's: this process's)
        assert len(done.stdout.split()) == 3
    finally:
        remove_dir(mine)
    assert not mine.exists()


def test_what_is_no_held_directory_of_a_gone_maker_is_left(root: Path) -> None:
    """An unmarked directory (an older version's, which holds no lock: it may be live), a
    symlink with the mark (never followed: what it names keeps its files), a marked file or
    FIFO (not waited on), and a prefix that is none of ours stay; a marked one whose lock
    is free goes, a symlink inside it removed, not followed."""
    home = root / home_name()
    home.mkdir(mode=0o700)
    older = home / f"{MCP_DIR}abcd1234"
    older.mkdir()
    (older / "kept").write_text("x")
    target = root / "elsewhere"
    target.mkdir()
    (target / "kept").write_text("x")
    (home / f"{SCRATCH}link1234{held_dirs.MARK}").symlink_to(target)
    (home / f"{GIT_DIR}file1234{held_dirs.MARK}").write_text("x")
    (home / f"other-abcd1234{held_dirs.MARK}").mkdir()
    os.mkfifo(home / f"{MCP_DIR}fifo1234{held_dirs.MARK}")  # (opened, it would block)
    gone = home / f"{GIT_DIR}gone1234{held_dirs.MARK}"
    (gone / "deep").mkdir(parents=True)
    (gone / "deep" / "file").write_text("x")
    os.symlink(target, gone / "deep" / "link")
    removed = held_dirs.sweep(home, (SCRATCH, MCP_DIR, GIT_DIR))
    assert removed == [gone] and not gone.exists()
    assert (older / "kept").exists() and (target / "kept").exists()
    assert sorted(p.name for p in home.iterdir()) == sorted(
        [
            older.name,
            f"{SCRATCH}link1234{held_dirs.MARK}",
            f"{GIT_DIR}file1234{held_dirs.MARK}",
            f"other-abcd1234{held_dirs.MARK}",
            f"{MCP_DIR}fifo1234{held_dirs.MARK}",
        ]
    )


@pytest.mark.skipif(os.getuid() != 0, reason="another uid's directory needs root")
def test_another_users_marked_directory_is_not_swept(root: Path) -> None:
    """Its lock is free, but it is not ours: it stays, with what is in it."""
    home = root / home_name()
    home.mkdir(mode=0o700)
    theirs = home / f"{MCP_DIR}them1234{held_dirs.MARK}"
    theirs.mkdir()
    (theirs / "kept").write_text("x")
    os.chown(theirs, 4242, 4242)
    assert held_dirs.sweep(home, (MCP_DIR,)) == []
    assert (theirs / "kept").exists()
    shutil.rmtree(theirs)


@pytest.mark.parametrize("when", ["before it is opened", "before it is locked"])
def test_a_directory_swept_before_its_maker_locked_it_is_made_again(
    root: Path, monkeypatch: pytest.MonkeyPatch, when: str
) -> None:
    """``make`` checks that the directory it locked is still the one at its name: a sweeper
    that took the lock first removed it (here a sweep runs right after ``mkdtemp``, or
    right before ``make``'s own ``flock``): it makes another."""
    names: list[str] = []
    swept: list[Path] = []
    mkdtemp, flock = tempfile.mkdtemp, fcntl.flock

    def made_then_swept(*args: Any, **kwargs: Any) -> str:
        made: str = mkdtemp(*args, **kwargs)
        names.append(made)
        if when == "before it is opened" and not swept:
            swept.extend(held_dirs.sweep(root, (MCP_DIR,)))
        return made

    def swept_then_locked(fd: int, operation: int) -> None:
        if when == "before it is locked" and operation == fcntl.LOCK_EX and not swept:
            swept.extend(held_dirs.sweep(root, (MCP_DIR,)))
        flock(fd, operation)

    monkeypatch.setattr("tempfile.mkdtemp", made_then_swept)
    monkeypatch.setattr("fcntl.flock", swept_then_locked)
    made, fd = held_dirs.make(root, MCP_DIR)
    monkeypatch.undo()
    try:
        assert swept == [Path(names[0])] and not swept[0].exists()
        assert len(names) == 2 and str(made) == names[1] and made.is_dir()
        assert held_dirs.sweep(root, (MCP_DIR,)) == []  # (held now)
    finally:
        held_dirs.release(made, fd)
    assert not made.exists()
