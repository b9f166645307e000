"""Nothing a run does reads the run store's files: the file tools (``tools.sealed``): Grep's
walk skips them wherever they are and however they are named; Glob lists their names (no
content), and reading one is refused; and its sandboxed commands (``sandbox_shm.hide``).
A real SQLite store, real ripgrep, real Bash in the real sandbox."""

from __future__ import annotations

import dataclasses
import os
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from subagents.definitions.spec import AgentSpec
from subagents.messages import RunStatus, ToolResultBlock
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.store.sqlite import SQLiteStore
from subagents.tools.builtin import builtin_tools
from subagents.tools.context import ToolContext
from subagents.tools.errors import ToolError
from subagents.tools.permissions import Permissions
from subagents.tools.processes import ProcessGroups
from subagents.tools.sandbox import private_shm_refusal
from subagents.tools.sealed import SealedFiles
from subagents.tools.workspace import Workspace

from .conftest import WAIT, make_context
from .test_sandbox_runs import landlock

TOOLS = builtin_tools()


def call(ctx: ToolContext, name: str, **arguments: object) -> str:
    return TOOLS[name].run(arguments, ctx)


@pytest.fixture
def open_store(tmp_path: Path) -> Iterator[Path]:
    """A SQLite store in the workspace, open (its ``-wal`` and ``-shm`` beside it)."""
    path = tmp_path / "state" / "runs.sqlite3"
    path.parent.mkdir()
    store = SQLiteStore(path)
    try:
        yield path
    finally:
        store.close()


def sealed_context(root: Path, store: Path, processes: ProcessGroups) -> ToolContext:
    ctx = make_context(root, processes)
    workspace = Workspace(root, sealed=SealedFiles.of_store(store))
    return dataclasses.replace(ctx, workspace=workspace)


def test_grep_does_not_search_the_stores_files_moved_in_or_in_another_case(
    tmp_path: Path, processes: ProcessGroups
) -> None:
    """Before: Grep over a directory holding the store's files printed their lines (seen:
    all three). Text files here, so ripgrep's binary check (which a real store's headers
    happen to trip) keeps nothing out: only the tool's skipping does. The store's
    directory is renamed into the workspace after the runtime started (its old path names
    nothing), one name is in another case (a case-insensitive file system opens it), and
    the model's glob names every file: none of them is searched."""
    state, workspace = tmp_path / "state", tmp_path / "ws"
    state.mkdir()
    workspace.mkdir()
    for name in ("runs.sqlite3", "runs.sqlite3-journal"):
        (state / name).write_text("the approval of r-1\n")
    ctx = sealed_context(workspace, state / "runs.sqlite3", processes)
    state.rename(workspace / "moved")
    (workspace / "moved" / "RUNS.SQLITE3-WAL").write_text("the approval of r-2\n")
    (workspace / "plain.txt").write_text("the approval of r-3\n")
    shown = call(ctx, "Grep", pattern="approval", output_mode="content", glob="*")
    assert shown == f"{workspace / 'plain.txt'}:1:the approval of r-3"
    listed = call(ctx, "Grep", pattern="approval", path="moved", glob="runs.*")
    assert listed == "No files found"


def test_glob_lists_the_stores_files_and_reading_one_is_refused(
    tmp_path: Path, open_store: Path, processes: ProcessGroups
) -> None:
    """Glob shows names, never content: the store's files are listed like any file (the
    store's place is no secret: the runtime names it), and a Read of one says why not."""
    ctx = sealed_context(tmp_path, open_store, processes)
    listed = call(ctx, "Glob", pattern="state/*").splitlines()
    assert sorted(Path(p).name for p in listed) == [
        "runs.sqlite3", "runs.sqlite3-shm", "runs.sqlite3-wal",
    ]  # fmt: skip
    for path in listed:
        with pytest.raises(ToolError, match="is a file of the run store"):
            call(ctx, "Read", file_path=path)


READ_STORE = """
import sqlite3, sys
for name in sys.argv[1:]:
    try:
        print(name.rsplit("/", 1)[1], len(open(name, "rb").read()))
    except OSError as exc:
        print(name.rsplit("/", 1)[1], type(exc).__name__)
try:
    rows = sqlite3.connect(sys.argv[1]).execute("select task from runs").fetchall()
    print("rows", rows)
except sqlite3.Error as exc:
    print("sqlite", exc)
"""


@landlock
def test_a_sandboxed_command_reads_nothing_of_the_store(tmp_path: Path) -> None:
    """Before: reads are not restricted in the sandbox, so a run's ``cat``/``sqlite3`` of
    the store beside its workspace read every run's task and conversation (seen: the rows).
    Now each command's mount namespace covers the store's files with an empty one it may
    not read (root, whom file modes do not stop, reads it empty); the store is untouched."""
    if private_shm_refusal() is not None:
        pytest.skip("no mount namespace of the command's own here")
    workspace, store = tmp_path / "ws", tmp_path / "state" / "runs.sqlite3"
    workspace.mkdir()
    (script := tmp_path / "read.py").write_text(READ_STORE)
    files = [str(store), f"{store}-wal", f"{store}-shm", f"{store}-journal"]
    line = shlex.join([sys.executable, "-I", str(script), *files])
    model = ScriptedModel(
        {"worker": [{"tool_calls": [{"name": "Bash", "input": {"command": line}}]}, "done"]}
    )
    spec = AgentSpec(name="worker", description="The worker.", prompt="You act.")
    permissions = Permissions(mode="acceptEdits", allow=("Bash",))
    with Runtime(
        [spec], model=model, workspace=workspace, store=store, permissions=permissions
    ) as rt:
        secret = rt.run("worker", "the secret task", wait=WAIT)
        assert secret.status is RunStatus.COMPLETED
    shown = [b.content for r in model.requests for b in r.messages[-1].content
             if isinstance(b, ToolResultBlock)]  # fmt: skip
    assert len(shown) == 1
    lines = shown[0].splitlines()
    denied = "PermissionError" if os.geteuid() else "0"
    assert lines[:3] == [f"{Path(f).name} {denied}" for f in files[:3]], shown
    assert lines[3] == "runs.sqlite3-journal FileNotFoundError", shown
    assert "secret" not in shown[0], shown
    reopened = SQLiteStore(store)
    assert [r.task for r in reopened.list_runs()] == ["the secret task"]
    reopened.close()
