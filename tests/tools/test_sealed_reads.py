"""Nothing a run does reads the run store's files: the file tools (``tools.sealed``): Grep's
walk skips them wherever they are and however they are named; Glob lists their names (no
content), and reading one is refused; and its sandboxed commands (``sandbox_shm.hide``).
A real SQLite store, real ripgrep, real Bash in the real sandbox."""

from __future__ import annotations

import dataclasses
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from subagents.definitions.spec import AgentSpec
from subagents.messages import RunStatus, ToolResultBlock
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.store.sqlite import SQLiteStore
from subagents.tools import sandbox_exec
from subagents.tools.builtin import builtin_tools
from subagents.tools.context import ToolContext
from subagents.tools.errors import ToolError
from subagents.tools.permissions import Permissions
from subagents.tools.processes import ProcessGroups
from subagents.tools.sandbox import LAUNCHER, private_shm_refusal
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


BY_HANDLE = """
import ctypes, os, struct, sys
store = sys.argv[1]
folder, name = os.path.split(store)
inode = next(e.inode() for e in os.scandir(folder) if e.name == name)  # the entry's
handle = struct.pack("=IiII", 8, 1, inode, 0)  # FILEID_INO32_GEN, generation 0: ext4 checks none
libc = ctypes.CDLL(None, use_errno=True)
call = {"x86_64": 304, "aarch64": 265}[os.uname().machine]  # open_by_handle_at
fd = libc.syscall(call, os.open(folder, os.O_RDONLY), handle, os.O_RDONLY)
print(os.read(fd, 16) if fd >= 0 else os.strerror(ctypes.get_errno()))
"""


def _launch(tmp_path: Path, *inner: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-I", "-S", LAUNCHER, "--write", str(tmp_path), *inner],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


@landlock
def test_no_command_opens_the_covered_store_by_its_inode(tmp_path: Path, open_store: Path) -> None:
    """Before: root in the sandbox keeps ``CAP_DAC_READ_SEARCH``, so ``open_by_handle_at``
    opened the store under its cover by the inode number its directory lists (ext4 checks
    no generation of 0; seen: ``SQLite format 3``). The filter now denies the call."""
    if private_shm_refusal() is not None:
        pytest.skip("no mount namespace of the command's own here")
    (script := tmp_path / "by_handle.py").write_text(BY_HANDLE)
    hide = ["--private-shm", "--hide", str(open_store)]
    done = _launch(tmp_path, *hide, "--", sys.executable, "-I", str(script), str(open_store))
    assert done.returncode == 0, done
    assert done.stdout.strip() == "Operation not permitted", done


@landlock
def test_a_command_the_store_could_not_be_hidden_from_does_not_run(
    tmp_path: Path, open_store: Path
) -> None:
    """The runtime passes ``--hide`` only where its probe made a namespace; a launch whose
    own namespace then fails (here: inside a sandbox, whose filter denies ``unshare``; a
    user's namespaces used up) must not run the command with the store in reach. Before:
    it fell back silently and ``head`` printed the store (seen: ``SQLite format 3``)."""
    inner = [sys.executable, "-I", "-S", LAUNCHER, "--private-shm", "--hide", str(open_store)]
    done = _launch(tmp_path, "--", *inner, "--", "head", "-c", "15", str(open_store))
    assert done.returncode == sandbox_exec.FAILED_EXIT, done
    assert "SQLite" not in done.stdout, done
    assert "could not hide the run store" in done.stderr and "unshare" in done.stderr, done
    shm_only = _launch(tmp_path, "--", *inner[:4], "--", "true")  # no --hide: as before
    assert shm_only.returncode == 0, shm_only


@landlock
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root")
def test_the_store_is_covered_through_a_second_mount_of_its_file_system_too(
    tmp_path: Path, open_store: Path
) -> None:
    """A directory above the store mounted again elsewhere (a bind mount, a container's
    volume seen twice) is another path to the same file. Before: only the store's own path
    was covered, and ``head`` through the second mount printed it (seen: ``SQLite format
    3``). Made in a mount namespace of the test's own, so nothing leaks to the machine."""
    if private_shm_refusal() is not None:
        pytest.skip("no mount namespace of the command's own here")
    (again := tmp_path / "again").mkdir()
    through = again / open_store.relative_to(tmp_path)
    launch = [sys.executable, "-I", "-S", LAUNCHER, "--write", str(tmp_path), "--private-shm"]
    launch += ["--hide", str(open_store), "--", "head", "-c", "15", str(open_store), str(through)]
    script = f"mount --bind {shlex.quote(str(tmp_path))} {shlex.quote(str(again))} && "
    script += shlex.join(launch)
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done
    assert "SQLite" not in done.stdout, done
    assert done.stdout.count("==> ") == 2, done  # head read both: empty covers
