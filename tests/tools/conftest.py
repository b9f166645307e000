"""Helpers for tool tests: real temp git repos, a real context, and process-group checks."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import structlog

import polling
from subagents.tools.context import RunSession, ToolContext
from subagents.tools.processes import ProcessGroups
from subagents.tools.workspace import Workspace

# A hang guard, not a timing: a passing wait returns as soon as its condition holds, so the
# bound only decides how long a broken test hangs, and 20 s was reachable on a loaded machine.
WAIT = 120.0


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
             "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"},
    )  # fmt: skip
    return done.stdout


def make_repo(root: Path) -> Path:
    """A small Python project with a failing test, committed in a fresh git repository."""
    repo = root / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "calc.py").write_text(
        "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
    )
    (repo / "test_calc.py").write_text(
        "import sys\nsys.path.insert(0, 'src')\nfrom calc import add, mul\n\n\n"
        "def test_add():\n    assert add(2, 3) == 5\n\n\n"
        "def test_mul():\n    assert mul(2, 3) == 6\n"
    )
    (repo / ".gitignore").write_text("build/\n")
    (repo / "build").mkdir()
    (repo / "build" / "calc.py").write_text("def add(a, b):\n    return 'generated'\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "init")
    return repo


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path)


@pytest.fixture
def processes() -> Iterator[ProcessGroups]:
    groups = ProcessGroups()
    yield groups
    groups.kill_all()


@pytest.fixture
def context(repo: Path, processes: ProcessGroups) -> ToolContext:
    return make_context(repo, processes)


def make_context(
    root: Path, processes: ProcessGroups, *, cancel: threading.Event | None = None
) -> ToolContext:
    workspace = Workspace(root)
    return ToolContext(
        workspace=workspace,
        run_id="r-test",
        agent="tester",
        cancel=cancel or threading.Event(),
        deadline=time.monotonic() + 300,
        log=structlog.get_logger("test"),
        processes=processes,
        session=RunSession(cwd=workspace.root),
        tool_use_id="toolu_1",
    )


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes whose process group is ``pgid``, from /proc."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        state, pgrp = fields[0], int(fields[2])
        if pgrp == pgid and state not in ("Z", "X"):
            members.append(int(entry.name))
    return members


def wait_until(predicate: Callable[[], bool], timeout: float = WAIT, what: str = "") -> None:
    """Poll ``predicate`` until true (a condition outside our threads: a file, /proc)."""
    polling.wait_until(predicate, what, timeout)
