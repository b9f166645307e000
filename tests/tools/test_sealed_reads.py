"""The read side of the file tools never reads the run store's files (``tools.sealed``):
Grep's walk skips them wherever they are and however they are named; Glob lists their
names (no content), and reading one is refused. A real SQLite store, real ripgrep."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from subagents.store.sqlite import SQLiteStore
from subagents.tools.builtin import builtin_tools
from subagents.tools.context import ToolContext
from subagents.tools.errors import ToolError
from subagents.tools.processes import ProcessGroups
from subagents.tools.sealed import SealedFiles
from subagents.tools.workspace import Workspace

from .conftest import make_context

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
