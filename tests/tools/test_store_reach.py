"""No run can rewrite the run store: a runtime whose runs' commands could write it does not
start; with the store out of their reach the runs' commands (on the real kernel, Landlock)
cannot touch it, and the file tools refuse its files wherever it is (a runtime whose runs
start no process may keep it in the workspace).
Real runtimes, a real SQLite file, real Bash in the real sandbox."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import structlog

from subagents.definitions.spec import AgentSpec
from subagents.messages import RunStatus, ToolResultBlock
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.runtime._store_reach import StoreInReach
from subagents.store.sqlite import SQLiteStore
from subagents.tools.base import Tool
from subagents.tools.builtin import builtin_tools
from subagents.tools.errors import ToolError
from subagents.tools.filestate import write_text
from subagents.tools.permissions import Permissions
from subagents.tools.sandbox import Sandbox
from subagents.tools.sandbox_exec import kernel_abi
from subagents.tools.sealed import SealedFiles
from subagents.tools.web_search import SearchResult, web_search_tool
from subagents.tools.workspace import Workspace

from .conftest import WAIT

landlock = pytest.mark.skipif(kernel_abi() < 4, reason="the kernel offers no Landlock ABI 4+")
NO_BASH = [tool for name, tool in builtin_tools().items() if name != "Bash"]


def agent(name: str) -> AgentSpec:
    return AgentSpec(name=name, description=f"The {name} agent.", prompt="You act.")


def calls(*uses: tuple[str, dict[str, Any]]) -> ScriptedModel:
    steps: list[Any] = [{"tool_calls": [{"name": n, "input": i}]} for n, i in uses]
    return ScriptedModel({"worker": [*steps, "done"]})


def results(model: ScriptedModel) -> list[ToolResultBlock]:
    return [
        b
        for r in model.requests
        if r.messages[-1].role == "user"
        for b in r.messages[-1].content
        if isinstance(b, ToolResultBlock)
    ]


@landlock
@pytest.mark.parametrize(
    ("where", "mode"),
    [("workspace", "default"), ("writable", "acceptEdits"), ("workspace", "plan")],
)
def test_a_runtime_whose_commands_could_write_its_store_does_not_start(
    tmp_path: Path, where: str, mode: str
) -> None:
    """Plan mode too: a run whose plan is approved goes on in a writing mode."""
    workspace, extra = tmp_path / "ws", tmp_path / "cache"
    workspace.mkdir()
    extra.mkdir()
    holder = workspace if where == "workspace" else extra
    store = holder / "state" / "runs.sqlite3"
    sandbox = Sandbox(writable=(str(extra),))
    with pytest.raises(StoreInReach) as refused:
        Runtime(
            [agent("worker")], workspace=workspace, store=store, sandbox=sandbox, permissions=mode
        )
    said = str(refused.value)
    assert f"the run store {store} is inside {holder}" in said
    what = "the workspace" if where == "workspace" else "a Sandbox(writable=...) directory"
    assert f"({what}), which the commands of runs may write" in said
    assert "--state PATH, $SUBAGENTS_STATE" in said and "--workspace DIR" in said
    assert not store.parent.exists()  # refused before it was opened: no file left behind


def shell(command: str) -> str:
    """Runs a shell command (a custom tool that starts processes)."""
    done = subprocess.run(command, shell=True, capture_output=True, text=True, check=False)
    return done.stdout


@landlock
def test_a_custom_tool_counts_as_starting_processes_unless_it_says_not(tmp_path: Path) -> None:
    """No Bash, but a tool of the owner's that runs commands: unknown tools count, so the
    store in the workspace is refused; a tool whose maker says it starts no process
    (``starts_processes=False``) does not count, and the runtime starts."""
    store = tmp_path / "state" / "runs.sqlite3"
    with pytest.raises(StoreInReach, match=r"inside .* \(the workspace\)"):
        Runtime(
            [agent("worker")], workspace=tmp_path, store=store,
            tools=[*NO_BASH, shell], builtin_tools=False,
        )  # fmt: skip
    assert not store.parent.exists()
    vouched = Tool.from_function(shell, starts_processes=False)
    with Runtime(
        [agent("worker")], workspace=tmp_path, store=store,
        tools=[*NO_BASH, vouched], builtin_tools=False,
    ) as rt:  # fmt: skip
        assert rt.store.list_runs() == []


class NoResults:
    def search(
        self, query: str, *, allowed_domains: tuple[str, ...], blocked_domains: tuple[str, ...]
    ) -> list[SearchResult]:
        return []


@landlock
def test_the_shipped_web_search_tool_starts_no_process(tmp_path: Path) -> None:
    """``web_search_tool`` (shipped, given like a user's tool) asks its provider in the
    runtime's process: it does not count as starting processes, so a runtime without Bash
    keeps its store in the workspace as before (on e-pgreach it was refused: the tool kept
    the default, True)."""
    store = tmp_path / "state" / "runs.sqlite3"
    tools = [*NO_BASH, web_search_tool(NoResults())]
    with Runtime(
        [agent("worker")], workspace=tmp_path, store=store, tools=tools, builtin_tools=False
    ) as rt:
        assert rt.store.list_runs() == []


@landlock
def test_a_commands_writes_to_the_store_beside_its_workspace_fail_in_the_sandbox(
    tmp_path: Path,
) -> None:
    """The store kept out of reach: an editing run whose every Bash line is allowed tries
    the store's files, and the kernel refuses each."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    store = tmp_path / "state" / "runs.sqlite3"
    rewrite = (
        f"import sqlite3; c = sqlite3.connect('{store}'); c.execute('delete from runs'); c.commit()"
    )
    commands = [
        f"echo x >> {store}",
        f"touch {store}-journal",
        f"rm -f {store}-wal {store}-shm",
        f'{sys.executable} -c "{rewrite}"',
    ]
    model = calls(*(("Bash", {"command": c}) for c in commands))
    permissions = Permissions(mode="acceptEdits", allow=("Bash",))
    with Runtime(
        [agent("worker")], model=model, workspace=workspace, store=store, permissions=permissions
    ) as rt:
        run = rt.run("worker", "try the store", wait=WAIT)
        assert run.status is RunStatus.COMPLETED
        assert [r.run_id for r in rt.store.list_runs()] == [run.run_id]
    shown = results(model)
    assert len(shown) == len(commands)
    assert all(
        "Permission denied" in r.content
        or "readonly database" in r.content
        or "unable to open" in r.content
        or "no such table" in r.content  # root opens the empty file covering it (hide)
        for r in shown
    ), shown
    assert not Path(f"{store}-journal").exists()


def tool_uses(store: Path, workspace: Path) -> list[tuple[str, dict[str, Any]]]:
    """File tool calls naming the store's files every way: each must be refused."""
    (workspace / "sub").mkdir()
    (workspace / "link").symlink_to(store)
    (workspace / "linked-dir").symlink_to(store.parent)
    os.link(store, workspace / "hard")
    rel = store.relative_to(workspace).as_posix()
    return [
        ("Read", {"file_path": str(store)}),
        ("Read", {"file_path": str(workspace / "link")}),
        ("Read", {"file_path": str(workspace / "hard")}),
        ("Write", {"file_path": f"{workspace}/sub/../{rel}-wal", "content": "x"}),
        ("Write", {"file_path": f"{workspace}/{rel}-journal", "content": "x"}),
        ("Write", {"file_path": f"{workspace}/linked-dir/runs.sqlite3-shm", "content": "x"}),
        ("Write", {"file_path": f"{workspace}/state/RUNS.SQLITE3", "content": "x"}),
        ("Edit", {"file_path": str(workspace / "link"), "old_string": "a", "new_string": "b"}),
        ("NotebookEdit", {"notebook_path": str(store), "new_source": "x", "cell_id": "0"}),
    ]


def test_the_file_tools_refuse_the_stores_files_however_they_are_named(tmp_path: Path) -> None:
    """No process-starting tool: the runtime starts with its store in the workspace, and
    its file tools (outside the sandbox) refuse the store by name, symlink, hardlink, ``..``
    and case."""
    store = tmp_path / "state" / "runs.sqlite3"
    SQLiteStore(store).close()
    model = calls(*tool_uses(store, tmp_path))
    permissions = Permissions(mode="acceptEdits")
    with Runtime(
        [agent("worker")], workspace=tmp_path, store=store, tools=NO_BASH, builtin_tools=False,
        permissions=permissions, model=model,
    ) as rt:  # fmt: skip
        run = rt.run("worker", "try the store", wait=WAIT)
        assert run.status is RunStatus.COMPLETED
    shown = results(model)
    assert len(shown) == 9
    for result in shown:
        assert result.is_error and f"a file of the run store {store}" in result.content, result
    left = sorted(p.name for p in store.parent.iterdir())
    assert not any(name.endswith("-journal") or name.isupper() for name in left), left


def test_a_write_is_refused_in_the_stores_directory_moved_in_after_the_check(
    tmp_path: Path,
) -> None:
    """A path checked in an ordinary directory, whose place the store's directory takes
    before the write (a run's process renaming directories): the write, made relative to
    the directory it opens, sees the store's and refuses."""
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "runs.sqlite3").write_text("records")
    (tmp_path / "plain").mkdir()
    sealed = SealedFiles.of_store(tmp_path / "state" / "runs.sqlite3")
    workspace = Workspace(tmp_path, sealed=sealed)
    checked = workspace.resolve("plain/runs.sqlite3")
    (tmp_path / "plain").rename(tmp_path / "old")
    (tmp_path / "state").rename(tmp_path / "plain")
    with pytest.raises(ToolError, match="it is a file of the run store"):
        write_text(checked, "rewritten", "plain/runs.sqlite3", root=tmp_path, sealed=sealed)
    assert (tmp_path / "plain" / "runs.sqlite3").read_text() == "records"


@pytest.mark.skipif(kernel_abi() < 1, reason="no Landlock: the runtime warns instead")
def test_subagents_run_in_the_home_directory_says_what_to_do(tmp_path: Path) -> None:
    """The default store is under ~/.local/state: a run started in the home directory would
    have it in its workspace. The command refuses, naming the store and the ways out."""
    home = tmp_path / "home"
    (home / "team").mkdir(parents=True)
    (home / "team" / "quick.md").write_text(
        "---\nname: quick\ndescription: Answers.\nscript:\n  - text: hi\n---\nYou answer.\n"
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SUBAGENTS_", "XDG_")) and k != "ANTHROPIC_API_KEY"
    }
    env["HOME"] = str(home)
    argv = [sys.executable, "-m", "subagents.cli.main", "run", "quick", "hi", "--agents", "team"]
    done = subprocess.run(argv, cwd=home, env=env, capture_output=True, text=True, timeout=WAIT)
    assert done.returncode != 0, done.stdout
    store = home / ".local" / "state" / "subagents" / "runs.sqlite3"
    assert f"the run store {store} is inside {home} (the workspace)" in done.stderr
    assert "--state PATH" in done.stderr and "--workspace DIR" in done.stderr


def test_a_read_is_refused_in_the_stores_directory_moved_into_the_workspace(
    tmp_path: Path,
) -> None:
    """The store's directory renamed into the workspace after the runtime started: its old
    path names nothing, but it is the same directory (device and inode), so a read of the
    store there is refused as a write is."""
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "runs.sqlite3").write_text("records")
    (tmp_path / "ws").mkdir()
    sealed = SealedFiles.of_store(tmp_path / "state" / "runs.sqlite3")
    workspace = Workspace(tmp_path / "ws", sealed=sealed)
    (tmp_path / "state").rename(tmp_path / "ws" / "moved")
    for name in ("moved/runs.sqlite3", "moved/runs.sqlite3-wal"):
        with pytest.raises(ToolError, match="is a file of the run store"):
            workspace.resolve(name)


@landlock
def test_a_store_with_a_second_name_inside_the_workspace_does_not_start(tmp_path: Path) -> None:
    """A hardlink to the store's file left in the workspace (by a run without the sandbox,
    or one a person let out of it): Landlock judges the path a command opens, so the
    command writes the store through that name though its directory is out of reach. A
    store file with a second name is refused, wherever that name is."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    store = tmp_path / "state" / "runs.sqlite3"
    SQLiteStore(store).close()
    os.link(store, workspace / "notes.db")
    with pytest.raises(StoreInReach) as refused:
        Runtime([agent("worker")], workspace=workspace, store=store)
    said = str(refused.value)
    assert f"the run store's file {store} has another name (2 names, a hardlink)" in said
    assert f"find / -xdev -samefile {store}" in said and "--state PATH" in said


@landlock
def test_a_postgresql_store_starts_with_the_state_directory_in_the_workspace(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PostgreSQL store keeps only the CLI's listing and hosts' logs in the state
    directory (its ``path``), not itself: a run in the home directory, where that folder
    lies, is not refused as if it held a SQLite file, and its file tools seal nothing
    there."""
    monkeypatch.setenv("SUBAGENTS_STATE_DIR", str(tmp_path / ".local" / "state"))
    with Runtime([agent("worker")], workspace=tmp_path, store=pg_url) as rt:
        assert rt.workspace.sealed is None


BIND_MOUNTED = """
import subprocess, sys
from subagents.definitions.spec import AgentSpec
from subagents.runtime import Runtime, StoreInReach
data, workspace, store = sys.argv[1:]
subprocess.run(["mount", "--bind", data, workspace], check=True)
try:
    agents = [AgentSpec(name="w", description="W.", prompt="p")]
    Runtime(agents, workspace=workspace, store=store).close()
    print("started")
except StoreInReach as refused:
    print(refused)
"""


@landlock
def test_a_workspace_that_is_another_name_of_the_stores_parent_does_not_start(
    tmp_path: Path,
) -> None:
    """The workspace a bind mount of the directory holding the store (or its name in
    another case on a case-insensitive file system): no path names the store inside the
    workspace, but a command writes ``<workspace>/state/runs.sqlite3``. The store's
    directory and its parents are compared with each writable root by device and inode."""
    data, workspace = tmp_path / "data", tmp_path / "ws"
    (data / "state").mkdir(parents=True)
    workspace.mkdir()
    store = data / "state" / "runs.sqlite3"
    argv = ["unshare", "--user", "--map-root-user", "--mount", sys.executable, "-c", BIND_MOUNTED]
    try:
        done = subprocess.run(
            [*argv, str(data), str(workspace), str(store)],
            capture_output=True, text=True, timeout=WAIT,
        )  # fmt: skip
    except FileNotFoundError:
        pytest.skip("no unshare(1) here")
    if done.returncode != 0 and "mount" in done.stderr:
        pytest.skip(f"no mount namespace of our own here: {done.stderr.strip()[-200:]}")
    assert done.returncode == 0, done.stderr
    said = done.stdout
    assert f"the run store {store} is inside {workspace} (the workspace)" in said, said


def test_without_a_sandbox_the_runtime_starts_and_says_the_store_is_open(tmp_path: Path) -> None:
    """Commands with the user's rights reach the store wherever it is: refusing would leave
    no way to run commands at all, so the runtime starts and warns, naming the store."""
    store = tmp_path / "state" / "runs.sqlite3"
    with (
        structlog.testing.capture_logs() as logs,
        Runtime([agent("worker")], workspace=tmp_path, store=store, sandbox=False),
    ):
        pass
    warned = [e for e in logs if "without a sandbox: one could rewrite" in e["event"]]
    assert len(warned) == 1 and warned[0]["store"] == str(store), logs


@landlock
@pytest.mark.parametrize("where", [".claude/worktrees/state", ".git/refs/state"])
def test_a_store_where_worktree_runs_write_does_not_start(tmp_path: Path, where: str) -> None:
    """``isolation: worktree`` runs write their worktrees under ``<repo>/.claude/worktrees``
    and commit into the repository's objects, refs and logs, above a workspace that is a
    folder of the repository."""
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    store = repo / where / "runs.sqlite3"
    with pytest.raises(StoreInReach) as refused:
        Runtime([agent("worker")], workspace=repo / "src", store=store)
    assert f"the run store {store} is inside {repo / where.rsplit('/', 1)[0]}" in str(refused.value)
    assert "(where isolation: worktree runs write)" in str(refused.value)
