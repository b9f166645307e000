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

import dataclasses
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from subagents.definitions.spec import AgentSpec
from subagents.isolation.git import GitError, GitJail, git
from subagents.logs import get_logger
from subagents.tools.sandbox import Sandbox, submodule_git_dir, worktree_git_dir

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
    common: Path | None = None
    """The repository's git directory (``.git``), which removing it writes."""
    jail: GitJail | None = field(default=None, compare=False, repr=False)
    """Where the runtime's git looks at it (``isolation.git``): None, unconfined."""

    def writing(self) -> GitJail | None:
        """The jail of a git command that adds or removes a worktree of the repository."""
        if self.jail is None or self.common is None:
            return None
        return self.jail.writing(self.common, self.repo / WORKTREES_DIR)


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
        self._lent: dict[str, Path] = {}
        """By run held to plan mode: the workspace its parent reads (``lend``)."""
        self._borrowed: dict[Path, Worktree] = {}
        """Unchanged worktrees whose runs ended while a run they were lent to still reads
        them (a detached or cancelled child outlives its parent's end), by the workspace
        lent: removed when the last borrower ends (``finish``), or at ``close``."""

    def _repo(self, look: GitJail | None, branch: str) -> tuple[Path, Path, str, bool]:
        """(top level, the workspace relative to it, HEAD's commit, whether ``branch``
        exists); WorktreeError if no repository or no commit. One git call (it was three,
        each through the sandbox's launcher, ~18 ms of CPU): ``--revs-only`` drops a name
        that does not resolve instead of failing (and what follows it: so HEAD comes first),
        and the ``--show-cdup`` git prints between HEAD and the branch (empty or ``../``s:
        never a commit id) says which one is there. The top is the workspace climbed by that
        cdup, not ``--show-toplevel``'s line: a path may hold a newline (review)."""
        try:
            found = git(
                self.workspace,
                "rev-parse",
                "--revs-only",
                "HEAD^{commit}",
                "--show-cdup",
                f"refs/heads/{branch}^{{commit}}",
                jail=look,
            )
        except GitError as exc:
            raise WorktreeError(
                f"isolation: worktree needs the workspace in a git repository, and"
                f" {self.workspace} is not in one ({exc.stderr or exc})"
            ) from None
        lines = found.split("\n")
        if not _is_commit_id(lines[0]):
            raise WorktreeError(
                f"isolation: worktree needs a commit to start from, and the repository of"
                f" {self.workspace} has none yet (commit something first)"
            )
        cdup = lines[1] if len(lines) > 1 else ""
        top = Path(os.path.normpath(self.workspace / cdup)) if cdup else self.workspace
        has_branch = len(lines) >= 3 and _is_commit_id(lines[2])
        return top, self.workspace.relative_to(top), lines[0], has_branch

    def create(self, run_id: str, agent: str, sandbox: Sandbox | None = None) -> Worktree:
        """The run's worktree, made now (or found again, for a run resumed after a crash).
        ``sandbox``: the runs', which the runtime's git runs in too (``isolation.git``)."""
        look = GitJail(sandbox) if sandbox is not None else None
        with self._lock:
            existing = self._open.get(run_id)
            if existing is not None:
                return existing
            name = f"{_slug(agent)}-{_slug(run_id)}"
            branch = f"{BRANCH_PREFIX}{name}"
            top, inside, base, has_branch = self._repo(look, branch)
            common = _common_dir(top, look)
            path = top / WORKTREES_DIR / name
            self._exclude(common)
            tree = Worktree(run_id, top, path, path / inside, branch, base, common, look)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                if (path / ".git").exists():  # resumed: the earlier start made it
                    base = self._branch_base(top, branch, base, look)
                elif has_branch:
                    git(top, "worktree", "add", str(path), branch, jail=tree.writing())
                    base = self._branch_base(top, branch, base, look)
                else:
                    git(top, "worktree", "add", "-b", branch, str(path), base, jail=tree.writing())
            except (GitError, OSError) as exc:
                raise WorktreeError(f"could not make a worktree for run {run_id}: {exc}") from None
            tree = dataclasses.replace(tree, base=base)
            self._open[run_id] = tree
            self._borrowed.pop(tree.workspace, None)  # its owner's again (a restart)
            log.info("worktree created", run_id=run_id, path=str(path), branch=branch)
            return tree

    def lend(self, run_id: str, parent_id: str | None) -> Path | None:
        """Where a run held to plan mode (which gets no worktree of its own) reads: what its
        parent reads, its parent's worktree (or the one lent to its parent in turn), kept for
        the run until ``finish``; None when its parent has none here (the runtime's
        workspace then). A plan run's helper explores what its parent will change, not the
        main tree (session 27). The worktree stays while the run reads it, whenever its
        owner ends (session 28: the parent's end removed an unchanged one under its
        helper)."""
        with self._lock:
            tree = self._open.get(parent_id) if parent_id is not None else None
            seen = tree.workspace if tree is not None else self._lent.get(parent_id or "")
            if seen is not None:
                self._lent[run_id] = seen
            return seen

    def get(self, run_id: str) -> Worktree | None:
        with self._lock:
            return self._open.get(run_id)

    def finish(self, run_id: str) -> WorktreeReport | None:
        """End the run's worktree: removed if unchanged, kept (and described) if changed.
        Never raises: a git failure keeps the worktree and says why in the report."""
        with self._lock:
            read = self._lent.pop(run_id, None)
            left = self._borrowed.get(read) if read is not None else None
            if left is not None and read not in self._lent.values():  # its last borrower
                del self._borrowed[left.workspace]
                self._finish(left)
            tree = self._open.pop(run_id, None)
            if tree is None:
                return None
            lent = tree.workspace in self._lent.values()
            return self._finish(tree, lent=lent)

    def _finish(self, tree: Worktree, *, lent: bool = False) -> WorktreeReport:
        """Remove ``tree`` if unchanged, else keep it (the report). ``lent``: a run still
        reads it, so an unchanged one is left for the last of those to end (``finish``); it
        can write nothing there (held to plan mode), so the report stands."""
        try:
            look, write = tree.jail, tree.writing()
            if not tree.path.exists():
                git(tree.repo, "worktree", "prune", jail=write)
                return WorktreeReport(tree.path, tree.branch, tree.base, kept=False)
            status = git(tree.path, "status", "--porcelain", "--untracked-files=all", jail=look)
            lines = [line for line in status.splitlines() if line.strip()]
            # commits the base has and HEAD not, and HEAD has and the base not: both none
            # only when HEAD is the base (was `rev-parse HEAD` and a `rev-list --count`)
            apart = git(
                tree.path, "rev-list", "--count", "--left-right", f"{tree.base}...HEAD", jail=look
            )
            behind, commits = (int(part) for part in apart.split())
            if not lines and behind == commits == 0 and lent:
                self._borrowed[tree.workspace] = tree
                log.info("worktree left for its borrowers", run_id=tree.run_id, path=str(tree.path))
                return WorktreeReport(tree.path, tree.branch, tree.base, kept=False)
            if not lines and behind == commits == 0:
                git(tree.repo, "worktree", "remove", "--force", str(tree.path), jail=write)
                git(tree.repo, "branch", "-D", tree.branch, jail=write)
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
            left, self._borrowed, self._lent = list(self._borrowed.values()), {}, {}
        for tree in left:  # (their borrowers end with the runtime: only the removal was left)
            self._finish(tree)
        return [self._finish(tree) for tree in trees]

    # ---- git details --------------------------------------------------------------------------

    @staticmethod
    def _branch_base(top: Path, branch: str, head: str, look: GitJail | None) -> str:
        """Where an existing branch forked from the repository's HEAD."""
        try:
            return git(top, "merge-base", head, branch, jail=look) or head
        except GitError:
            return head

    @staticmethod
    def _exclude(common: Path) -> None:
        """Keep ``.claude/worktrees/`` out of the main tree's status (info/exclude)."""
        try:
            exclude = common / "info" / "exclude"
            line = f"/{WORKTREES_DIR.as_posix()}/"
            text = exclude.read_text(encoding="utf-8") if exclude.exists() else ""
            if line not in text.splitlines():
                exclude.parent.mkdir(parents=True, exist_ok=True)
                with exclude.open("a", encoding="utf-8") as handle:
                    handle.write(("" if text.endswith("\n") or not text else "\n") + line + "\n")
        except OSError as exc:
            log.warning("could not add the worktrees folder to info/exclude", error=str(exc))


def _is_commit_id(text: str) -> bool:
    """A line of ``rev-parse`` that is an object id (SHA-1 or SHA-256), not a prefix."""
    return len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)


def _common_dir(top: Path, look: GitJail | None) -> Path:
    """The git directory of the repository whose top is ``top``: its ``.git`` directory, or
    for a top that is itself a worktree the common directory its ``.git`` file names, if
    git's records agree (``worktree_git_dir``), or for a submodule's checkout the git
    directory whose ``core.worktree`` names ``top`` back. The runtime's git may write it to
    add a worktree, and the worktree's runs its objects and refs: a ``.git`` an editing run
    replaced (a symlink or a file naming another repository's) is refused, not followed.
    Without the sandbox (``look`` None or no Landlock) nothing is held and git's own answer
    stands, as before session 26 (a run could write anywhere)."""
    marker = top / ".git"
    if marker.is_dir() and not marker.is_symlink():
        return Path(os.path.realpath(marker))
    if marker.is_file() and not marker.is_symlink():
        found = worktree_git_dir(marker)
        if found is not None:
            return found[1]
        module = submodule_git_dir(marker)
        if module is not None:
            return module
        named = _owner_named_git_dir(marker, look)
        if named is not None:
            return named
    if look is None or not look.sandbox.resolve().abi or not look.sandbox.enabled:
        try:
            common = Path(git(top, "rev-parse", "--git-common-dir"))
        except GitError as exc:
            raise WorktreeError(f"isolation: no git directory found for {top}: {exc}") from None
        return Path(os.path.realpath(common if common.is_absolute() else top / common))
    raise WorktreeError(
        f"isolation: worktree needs {marker} to be the repository's git directory (or a"
        " worktree's or submodule's .git file that git's records name back); it is neither"
        " (a symlink, or a --separate-git-dir repository's .git file), so no worktree is made"
        " from it while runs are sandboxed: a .git a run may rewrite cannot be trusted there."
        " For a --separate-git-dir repository, name its git directory in"
        " Sandbox(writable=[...]): the owner's word trusts it (its runs may then write it)"
    )


def _owner_named_git_dir(marker: Path, look: GitJail | None) -> Path | None:
    """The git directory a ``.git`` file names (a ``--separate-git-dir`` repository's: git
    keeps no record naming the checkout back) when the owner named that very directory in
    ``Sandbox(writable=...)``: a record outside the workspace, so a run that rewrote the
    pointer names nothing its runs could not already write (session 27). None otherwise."""
    if look is None:
        return None
    try:
        text = marker.read_text().strip()
        if not text.startswith("gitdir:"):
            return None
        gitdir = (marker.parent / text.removeprefix("gitdir:").strip()).resolve()
        owned = {Path(p).resolve() for p in look.sandbox.writable}
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if gitdir not in owned or (gitdir / "commondir").exists() or not (gitdir / "HEAD").is_file():
        return None
    return gitdir
