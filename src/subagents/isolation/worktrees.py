"""``isolation: worktree``: a run that works in its own git worktree, on its own branch.

Claude Code's meaning, kept here: at the run's start the runtime adds a worktree of the
workspace's repository at ``<repo>/.claude/worktrees/<agent>-<run id>``, on a new branch
``subagents/<agent>-<run id>`` from the repository's ``HEAD`` (a clean checkout: what is not
committed in the main tree is not in it). The run's file tools and Bash work there, so two
isolated editors never see each other's half-done changes, nor touch the main tree. At the
run's end the worktree is removed (with its branch) when the run changed nothing; when it
changed something (modified, added or deleted files, or commits) it is kept, and the run's
result says where and on which branch, to review and merge.

``.claude/worktrees/`` is added to the repository's ``info/exclude`` (local, never
committed) so the main tree's ``git status`` and Grep do not list the worktrees.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from subagents.definitions.spec import AgentSpec
from subagents.isolation.git import GitError, git
from subagents.logs import get_logger

log = get_logger("subagents.isolation")

WORKTREES_DIR = Path(".claude") / "worktrees"
BRANCH_PREFIX = "subagents/"
ISOLATION_MODES = ("worktree",)
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_SHOWN_CHANGES = 20


class WorktreeError(RuntimeError):
    """A worktree that cannot be made (not a git repository, no commit yet, git failed)."""


def isolation_of(spec: AgentSpec) -> str | None:
    """The definition's ``isolation`` (``worktree``) or None; ``ValueError`` for another."""
    value = spec.metadata.get("isolation")
    if value is None or value is False:
        return None
    if not isinstance(value, str) or value.strip().lower() not in ISOLATION_MODES:
        raise ValueError(
            f"agent {spec.name!r}: isolation {value!r} is not known; the one mode is 'worktree'"
        )
    return value.strip().lower()


@dataclass(frozen=True)
class Worktree:
    """One run's worktree."""

    run_id: str
    repo: Path
    """The top level of the tree it was made from."""
    path: Path
    """The worktree's top level."""
    workspace: Path
    """Where the run works: the workspace's place inside the worktree."""
    branch: str
    base: str
    """The commit it started from."""


@dataclass(frozen=True)
class WorktreeReport:
    """How a worktree ended: removed (nothing changed), or kept with what changed."""

    path: Path
    branch: str
    base: str
    kept: bool
    changes: tuple[str, ...] = ()
    """``git status --porcelain`` lines (the first few)."""
    changed_files: int = 0
    commits: int = 0
    error: str | None = None

    def note(self) -> str:
        """One paragraph for the run's result (empty when the worktree was removed)."""
        if not self.kept:
            return ""
        parts = []
        if self.changed_files:
            parts.append(f"{self.changed_files} changed file(s)")
        if self.commits:
            parts.append(f"{self.commits} commit(s)")
        shown = "\n".join(f"  {line}" for line in self.changes)
        return (
            f"[worktree kept: {self.path} on branch {self.branch} (from {self.base[:12]}):"
            f" {', '.join(parts) or 'changes'}. Review it and merge the branch, or remove it"
            f" with `git worktree remove --force {self.path}` and"
            f" `git branch -D {self.branch}`.]" + (f"\n{shown}" if shown else "")
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "branch": self.branch,
            "base": self.base,
            "kept": self.kept,
            "changed_files": self.changed_files,
            "commits": self.commits,
        }


def _slug(text: str) -> str:
    return _UNSAFE.sub("-", text).strip("-.") or "run"


class Worktrees:
    """The worktrees of one runtime's isolated runs, made from one workspace's repository."""

    def __init__(self, workspace: str | os.PathLike[str]) -> None:
        self.workspace = Path(os.path.realpath(workspace))
        self._lock = threading.Lock()
        self._open: dict[str, Worktree] = {}

    def _repo(self) -> tuple[Path, Path, str]:
        """(top level, the workspace relative to it, HEAD's commit); WorktreeError if none."""
        try:
            top = Path(os.path.realpath(git(self.workspace, "rev-parse", "--show-toplevel")))
        except GitError as exc:
            raise WorktreeError(
                f"isolation: worktree needs the workspace in a git repository, and"
                f" {self.workspace} is not in one ({exc.stderr or exc})"
            ) from None
        try:
            base = git(top, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
        except GitError:
            raise WorktreeError(
                f"isolation: worktree needs a commit to start from, and the repository at"
                f" {top} has none yet (commit something first)"
            ) from None
        return top, self.workspace.relative_to(top), base

    def create(self, run_id: str, agent: str) -> Worktree:
        """The run's worktree, made now (or found again, for a run resumed after a crash)."""
        with self._lock:
            existing = self._open.get(run_id)
            if existing is not None:
                return existing
            top, inside, base = self._repo()
            name = f"{_slug(agent)}-{_slug(run_id)}"
            path = top / WORKTREES_DIR / name
            branch = f"{BRANCH_PREFIX}{name}"
            self._exclude(top)
            try:
                if (path / ".git").exists():  # resumed: the earlier start made it
                    base = self._branch_base(top, branch, base)
                elif self._has_branch(top, branch):
                    git(top, "worktree", "add", str(path), branch)
                    base = self._branch_base(top, branch, base)
                else:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    git(top, "worktree", "add", "-b", branch, str(path), base)
            except (GitError, OSError) as exc:
                raise WorktreeError(f"could not make a worktree for run {run_id}: {exc}") from None
            tree = Worktree(
                run_id=run_id,
                repo=top,
                path=path,
                workspace=path / inside,
                branch=branch,
                base=base,
            )
            self._open[run_id] = tree
            log.info("worktree created", run_id=run_id, path=str(path), branch=branch)
            return tree

    def get(self, run_id: str) -> Worktree | None:
        with self._lock:
            return self._open.get(run_id)

    def finish(self, run_id: str) -> WorktreeReport | None:
        """End the run's worktree: removed if unchanged, kept (and described) if changed.
        Never raises: a git failure keeps the worktree and says why in the report."""
        with self._lock:
            tree = self._open.pop(run_id, None)
            if tree is None:
                return None
            return self._finish(tree)

    def _finish(self, tree: Worktree) -> WorktreeReport:
        try:
            if not tree.path.exists():
                git(tree.repo, "worktree", "prune")
                return WorktreeReport(tree.path, tree.branch, tree.base, kept=False)
            status = git(tree.path, "status", "--porcelain", "--untracked-files=all")
            lines = [line for line in status.splitlines() if line.strip()]
            head = git(tree.path, "rev-parse", "HEAD")
            commits = 0
            if head != tree.base:
                commits = int(git(tree.path, "rev-list", "--count", f"{tree.base}..HEAD") or 0)
            if not lines and head == tree.base:
                git(tree.repo, "worktree", "remove", "--force", str(tree.path))
                git(tree.repo, "branch", "-D", tree.branch)
                log.info("worktree removed (no changes)", run_id=tree.run_id, path=str(tree.path))
                return WorktreeReport(tree.path, tree.branch, tree.base, kept=False)
            report = WorktreeReport(
                tree.path,
                tree.branch,
                tree.base,
                kept=True,
                changes=tuple(lines[:_SHOWN_CHANGES]),
                changed_files=len(lines),
                commits=commits,
            )
            log.info(
                "worktree kept",
                run_id=tree.run_id,
                path=str(tree.path),
                branch=tree.branch,
                changed_files=len(lines),
                commits=report.commits,
            )
            return report
        except (GitError, OSError, ValueError) as exc:
            log.warning("worktree left in place", run_id=tree.run_id, error=str(exc))
            return WorktreeReport(tree.path, tree.branch, tree.base, kept=True, error=str(exc))

    def close(self) -> list[WorktreeReport]:
        """Finish every worktree still open (the runtime is closing)."""
        with self._lock:
            trees, self._open = list(self._open.values()), {}
        return [self._finish(tree) for tree in trees]

    # ---- git details --------------------------------------------------------------------------

    @staticmethod
    def _has_branch(top: Path, branch: str) -> bool:
        try:
            git(top, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}")
        except GitError:
            return False
        return True

    @staticmethod
    def _branch_base(top: Path, branch: str, head: str) -> str:
        """Where an existing branch forked from the repository's HEAD."""
        try:
            return git(top, "merge-base", head, branch) or head
        except GitError:
            return head

    @staticmethod
    def _exclude(top: Path) -> None:
        """Keep ``.claude/worktrees/`` out of the main tree's status (info/exclude)."""
        try:
            common = Path(git(top, "rev-parse", "--git-common-dir"))
            if not common.is_absolute():
                common = top / common
            exclude = common / "info" / "exclude"
            line = f"/{WORKTREES_DIR.as_posix()}/"
            text = exclude.read_text(encoding="utf-8") if exclude.exists() else ""
            if line not in text.splitlines():
                exclude.parent.mkdir(parents=True, exist_ok=True)
                with exclude.open("a", encoding="utf-8") as handle:
                    handle.write(("" if text.endswith("\n") or not text else "\n") + line + "\n")
        except (GitError, OSError) as exc:
            log.warning("could not add the worktrees folder to info/exclude", error=str(exc))
