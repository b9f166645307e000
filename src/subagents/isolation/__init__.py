"""Isolation of a run's files: ``isolation: worktree`` gives a run its own git worktree.

Layering: beside ``tools/`` (below ``behaviour/``); ``git`` runs the git program,
``worktrees`` decides when a worktree is made, kept or removed.
"""

from subagents.isolation.git import GitError
from subagents.isolation.worktrees import (
    Worktree,
    WorktreeError,
    WorktreeReport,
    Worktrees,
    isolation_of,
)

__all__ = [
    "GitError",
    "Worktree",
    "WorktreeError",
    "WorktreeReport",
    "Worktrees",
    "isolation_of",
]
