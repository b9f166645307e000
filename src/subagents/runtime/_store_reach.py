"""The run store out of the runs' reach: a runtime whose runs' commands could write its
store's file does not start.

Why: the store holds every run's record, budget and permission ceiling, and the pending
approvals (``approve="store"``). A trial (session 16) kept the store in the workspace: a
run's background Bash answered the run's own pending approval, one asking to leave the
sandbox, and the command then wrote outside it. Landlock grants writes per directory tree
and cannot take one file out of a tree it grants, so the only holding answer is a store
outside every tree a writing run's processes may write, and no second name (a hardlink)
of its files, through which a command would write them where it may: checked here at
start, before a run exists, by the store's directory (SQLite makes its ``-wal``, ``-shm``
and ``-journal`` files there) against

- the workspace, and the git directories a worktree workspace commits to;
- the owner's extra writable directories (``Sandbox(writable=...)``);
- where ``isolation: worktree`` runs get theirs: ``<repo>/.claude/worktrees`` and the
  repository's ``objects``, ``refs``, ``logs`` and ``worktrees`` (``isolation/worktrees.py``).

A runtime whose runs start no process (no ``Bash``, no custom tool that may, no hooks or
stdio MCP servers) is not refused: its file tools, which run outside the sandbox, refuse the
store's files wherever it is (``tools.sealed``). A ``plan`` runtime is refused like any
other: its runs' processes write only their temporary directory, but a run whose plan is
approved (ExitPlanMode) goes on in a writing mode (``behaviour/plan_exit.py``), and then
its commands could write the store and answer its later asks.

Without a sandbox (``Runtime(sandbox=False)``, or a kernel without Landlock) the runs'
commands have the user's rights: the store is as open to them as every other file of the
user, wherever it is. The runtime then says so at start rather than refusing: refusing
would leave such a machine no way to run commands at all. A PostgreSQL store has no file:
``runtime._server_reach`` checks that no run's command can log in to it.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from subagents.logs import get_logger
from subagents.mcp.config import StdioServer, parse_servers
from subagents.mcp.hub import McpHub
from subagents.store.base import RunStore, StoreError
from subagents.store.locations import is_database_url
from subagents.tools.sandbox import Sandbox, git_dirs_of_worktree
from subagents.tools.sealed import SQLITE_SUFFIXES, SealedFiles
from subagents.tools.workspace import Workspace

log = get_logger("subagents.runtime")

FIX = (
    "Keep the store elsewhere (Runtime(store=...), --state PATH, $SUBAGENTS_STATE) or give"
    " the runs another workspace (Runtime(workspace=...), --workspace DIR)"
)


class StoreInReach(StoreError):
    """The runtime's SQLite store lies where its runs' commands may write: it does not
    start (the message names the store, the writable directory and the fix)."""


def store_path(store: RunStore) -> Path | None:
    """The SQLite file of ``store``, or None (a database server's, or in memory). A
    PostgreSQL store's ``path`` is no file of its own but the folder for what is kept
    beside it (the CLI's listing, hosts' logs): not one to seal."""
    if isinstance(url := getattr(store, "url", None), str) and is_database_url(url):
        return None
    path = getattr(store, "path", None)
    return path if isinstance(path, Path) else None


def sealed_files(store: RunStore) -> SealedFiles | None:
    """The store's files, which no file tool may touch (None: it has none)."""
    path = store_path(store)
    return None if path is None else SealedFiles.of_store(path)


def workspace_of(given: str | os.PathLike[str] | None, store: RunStore) -> Workspace:
    """The runtime's workspace (default: the working directory), its file tools kept off
    the store's files."""
    root = given if given is not None else os.getcwd()
    return Workspace(root, sealed=sealed_files(store))


def starts_processes(tools: Mapping[str, Any], allow_hooks: bool, mcp_commands: bool) -> bool:
    """Whether a run could start a process: Bash, any tool that does not say it starts none
    (``Tool.starts_processes``: a custom tool counts unless its maker said so), a hook, or
    a stdio MCP server (``mcp_commands``: ``hub_starts_commands``,
    ``servers_start_commands``)."""
    return (
        allow_hooks
        or mcp_commands
        or any(getattr(tool, "starts_processes", True) for tool in tools.values())
    )


def hub_starts_commands(mcp: McpHub | None) -> bool:
    """Whether the runtime's MCP servers, or a definition's, may start a command: a stdio
    server of its own, or definitions' commands allowed."""
    if mcp is None:
        return False
    return mcp.allow_commands or any(
        isinstance(server.config, StdioServer) for server in mcp.servers.values()
    )


def servers_start_commands(mcp_servers: Any, allow_commands: bool) -> bool:
    """``hub_starts_commands`` of the hub ``Runtime(mcp_servers=..., allow_mcp_commands=...)``
    will make, before it is made (a project's ``.mcp.json`` starts commands only when they
    are allowed). ``McpConfigError`` names a bad server, as the hub would."""
    if allow_commands:
        return True
    servers = parse_servers(mcp_servers, origin="Runtime(mcp_servers=...)")
    return any(isinstance(server.config, StdioServer) for server in servers.values())


def check_store_reach(
    sandbox: Sandbox,
    store: RunStore,
    workspace: Workspace,
    *,
    processes: bool,
) -> None:
    """``StoreInReach`` when a writing run's processes could write the store's directory;
    a warning when no sandbox holds them at all. ``processes``: whether runs can start any
    (``starts_processes``)."""
    path = store_path(store)
    if path is None:  # a server's store: runtime._server_reach
        return
    on_head = getattr(store, "run_on_head", None)  # a cluster's: the file is on its head
    if on_head is not None and processes and sandbox.enabled and sandbox.abi:
        on_head(check_on_head, sandbox, str(path), str(workspace.root))
    check_path_reach(sandbox, path, workspace.root, processes=processes)


def check_on_head(sandbox: Sandbox, path: str, workspace: str) -> None:
    """``check_path_reach`` run on a cluster's head node, which holds the store's file: its
    directories, links, mounts and git repositories are the ones the commands of the runs
    hosted there meet, which the driver's machine (another, perhaps) cannot see."""
    try:
        check_path_reach(sandbox, Path(path), Path(workspace), processes=True)
    except StoreInReach as refused:
        where = f"checked on the cluster's head node {socket.gethostname()}, which holds it"
        raise StoreInReach(f"{refused} ({where})") from None


def check_path_reach(sandbox: Sandbox, path: Path, workspace: Path, *, processes: bool) -> None:
    """``check_store_reach`` of the SQLite file ``path``, which need not exist yet: checked
    before the runtime opens (and so makes) it, a refused store leaves no file behind."""
    if not processes:
        return
    if not (sandbox.enabled and sandbox.abi):
        log.warning(
            "the runs' commands run without a sandbox: one could rewrite the run store"
            " (answer its own approvals, change records), as any other file of this user",
            store=str(path),
        )
        return
    directory = Path(os.path.realpath(path)).parent
    for root, what in writable_roots(sandbox, workspace):
        if inside(directory, root):
            raise StoreInReach(
                f"the run store {path} is inside {root} ({what}), which the commands of"
                " runs may write: a run could rewrite the store, answer its own approvals"
                f" and change records. {FIX}"
            )
    second_names(path)


def second_names(path: Path) -> None:
    """``StoreInReach`` when a file of the store has another name (a hardlink): Landlock
    judges the path a command opens, not the file, so a name left inside the workspace (by
    a run without the sandbox, or one let out of it) writes the store though its directory
    is out of reach; where the other name is, no start can tell cheaply."""
    for suffix in SQLITE_SUFFIXES:
        file = Path(f"{path}{suffix}")
        try:
            names = os.stat(file).st_nlink
        except OSError:
            continue
        if names > 1:
            raise StoreInReach(
                f"the run store's file {file} has another name ({names} names, a hardlink):"
                " inside what the commands of runs may write, it would let a run rewrite the"
                f" store. Remove the other names (find / -xdev -samefile {file} lists them). {FIX}"
            )


def inside(directory: Path, root: Path) -> bool:
    """Whether ``directory`` is ``root`` or below it: by path, or by identity (device and
    inode) of it or a parent, so a root that is another name of one of them (a bind mount,
    another case on a case-insensitive file system) is no way round."""
    if directory.is_relative_to(root):
        return True
    try:
        key = _identity(root)
        return any(_identity(d) == key for d in (directory, *directory.parents))
    except OSError:
        return False


def _identity(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return (st.st_dev, st.st_ino)


def writable_roots(sandbox: Sandbox, workspace: Path) -> list[tuple[Path, str]]:
    """Every directory a writing run's processes may write, with what it is."""
    roots = [(workspace, "the workspace")]
    for extra in sandbox.writable:
        roots.append((Path(extra), "a Sandbox(writable=...) directory"))
    for git in git_dirs_of_worktree(workspace):
        roots.append((git, "a git directory the workspace's worktree commits to"))
    for place in isolation_roots(workspace):
        roots.append((place, "where isolation: worktree runs write"))
    return roots


def isolation_roots(workspace: Path) -> list[Path]:
    """Where the worktrees of ``isolation: worktree`` runs and their git directories go,
    when the workspace is in a git repository (``isolation/worktrees.py``)."""
    for top in (workspace, *workspace.parents):
        marker = top / ".git"
        if marker.is_dir():
            shared = [marker / name for name in ("objects", "refs", "logs", "worktrees")]
            break
        if marker.is_file():
            dirs = git_dirs_of_worktree(top)
            shared = [dirs[0].parent, *dirs[1:]] if dirs else []  # <common>/worktrees/<name>
            break
    else:
        return []
    places = [top / ".claude" / "worktrees", *shared]
    return [Path(os.path.realpath(place)) for place in places]
