"""The environment note an agent with file or shell tools gets after its prompt.

Claude Code gives its subagents their definition's prompt plus basic details of where they
work (the working directory, whether it is a git repository, the platform, the date): the
file tools want absolute paths, so a model that is not told the directory has to guess it.
A run in its own worktree is told so, with the branch its changes land on.
"""

from __future__ import annotations

import datetime
import platform
from pathlib import Path

FILE_AND_SHELL_TOOLS = frozenset(
    {"Read", "Write", "Edit", "MultiEdit", "Glob", "Grep", "LS", "Bash", "NotebookEdit"}
)


def _in_git(root: Path) -> bool:
    return any((folder / ".git").exists() for folder in (root, *root.parents))


def environment_note(root: Path, *, worktree_branch: str | None = None) -> str:
    """The ``<env>`` block (with a blank line before it) for a run working in ``root``."""
    if worktree_branch is not None:
        git = f"Yes (your own git worktree, on branch {worktree_branch})"
    else:
        git = "Yes" if _in_git(root) else "No"
    lines = [
        f"Working directory: {root}",
        f"Is directory a git repo: {git}",
        f"Platform: {platform.system().lower()}",
        f"Today's date: {datetime.date.today().isoformat()}",
    ]
    return "\n\n<env>\n" + "\n".join(lines) + "\n</env>"
