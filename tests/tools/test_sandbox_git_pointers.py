"""What the sandbox grants must not come from a file a run may write (session 26, e-adv26).

A run in a git worktree may write its git directory and the repository's shared objects,
refs and logs, found from the ``.git`` file at the workspace's top. That file lies in the
workspace, which every editing run may write: a run that rewrote it (``gitdir: /elsewhere``)
made the next run in the same workspace (its own child, or the next task) free to write
``/elsewhere``. These attacks plant such pointers and check that nothing outside changes;
and that a genuine worktree still gets its git directories."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from subagents.messages import RunStatus
from subagents.runtime import Runtime
from subagents.tools.sandbox import git_dirs_of_worktree

from .conftest import WAIT, git
from .test_sandbox_runs import agent, bash_run, landlock, results


@pytest.fixture
def target(tmp_path: Path) -> Path:
    """A directory no run may write, shaped like a git directory (the pointers name it)."""
    out = tmp_path / "target"
    for name in ("objects", "refs", "logs"):
        (out / name).mkdir(parents=True)
    (out / "commondir").write_text(".\n")
    return out


def pointers(target: Path) -> list[str]:
    """``.git`` files a run could write at its workspace's top, each naming ``target``
    (directly, or a git directory in the workspace whose ``commondir`` names it)."""
    return [
        f"gitdir: {target}",
        f"gitdir: {os.path.relpath(target, start=target.parent / 'workspace')}",
        "gitdir: fake",  # ./fake/commondir names the target: its objects, refs, logs
    ]


def _fake_workspace(tmp_path: Path, target: Path) -> Path:
    """A workspace whose ``fake`` directory's ``commondir`` names ``target``."""
    workspace = tmp_path / "workspace"
    (workspace / "fake").mkdir(parents=True)
    (workspace / "fake" / "commondir").write_text(f"{target}\n")
    return workspace


def _repo(path: Path) -> Path:
    """A git repository at ``path`` with one (empty) commit."""
    path.mkdir()
    git(path, "init", "-q")
    git(path, "commit", "-q", "--allow-empty", "-m", "init")
    return path


def _other_worktree(tmp_path: Path) -> tuple[Path, Path]:
    """A repository outside the workspace (``other``) and a genuine worktree of it."""
    other = _repo(tmp_path / "other")
    tree = tmp_path / "other-tree"
    git(other, "worktree", "add", "-q", "-b", "side", str(tree))
    return other, tree


def _plant_then_escape(workspace: Path, plant: str, escape: str) -> None:
    """A run plants a ``.git`` (it reads back as a pointer), then the next task in the same
    workspace tries ``escape``: refused by the sandbox."""
    first, second = bash_run([plant]), bash_run([escape])
    for model in (first, second):
        with Runtime(
            [agent("worker")], model=model, workspace=workspace, permissions="bypassPermissions"
        ) as rt:
            assert rt.run("worker", "go", wait=WAIT).status is RunStatus.COMPLETED
    assert results(first, "worker")[0].content.startswith("gitdir:")
    assert "Permission denied" in results(second, "worker")[0].content


@landlock
@pytest.mark.parametrize("which", range(3))
def test_a_planted_git_pointer_gives_the_next_run_nothing_outside(
    tmp_path: Path, target: Path, which: int
) -> None:
    workspace = _fake_workspace(tmp_path, target)
    plant = f"printf '%s\\n' '{pointers(target)[which]}' > .git && cat .git"
    escape = " ; ".join(
        f"echo pwned > {target}/{name}/x" for name in ("", "objects", "refs", "logs")
    )
    _plant_then_escape(workspace, plant, escape)
    assert sorted(p.name for p in target.rglob("x")) == []


def test_a_pointer_is_believed_only_when_its_git_directory_points_back(
    tmp_path: Path, target: Path
) -> None:
    """The pure check: a ``.git`` file naming a directory is a worktree only when that
    directory is ``<common>/worktrees/NAME`` and its ``gitdir`` names this ``.git``."""
    workspace = _fake_workspace(tmp_path, target)
    for pointer in pointers(target):
        (workspace / ".git").write_text(pointer + "\n")
        assert git_dirs_of_worktree(workspace) == (), pointer


def test_a_genuine_worktree_still_gets_its_git_directories(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    tree = tmp_path / "tree"
    git(repo, "worktree", "add", "-q", "-b", "side", str(tree))
    common = (repo / ".git").resolve()
    (tree / "sub").mkdir()
    assert git_dirs_of_worktree(tree / "sub") == (
        common / "worktrees" / "tree",
        common / "objects",
        common / "refs",
        common / "logs",
    )


def test_a_git_symlink_to_another_worktree_gives_the_next_run_nothing(tmp_path: Path) -> None:
    """A variant the pointer check missed (review of session 26): ``.git`` replaced by a
    symlink to a genuine worktree's ``.git`` file elsewhere. git's records point back to the
    link's target, so the link was believed and the next run got that other repository's
    objects and refs (move its branches). A ``.git`` that is a symlink names nothing."""
    _, tree = _other_worktree(tmp_path)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / ".git").symlink_to(tree / ".git")
    assert git_dirs_of_worktree(workspace) == ()
    assert git_dirs_of_worktree(tree) != ()  # the genuine one still is


@landlock
def test_a_planted_git_symlink_lets_the_next_run_move_no_branch_elsewhere(
    tmp_path: Path,
) -> None:
    other, tree = _other_worktree(tmp_path)
    refs = other / ".git" / "refs" / "heads"
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    _plant_then_escape(
        workspace, f"ln -s {tree}/.git .git && cat .git", f"echo pwned > {refs}/planted"
    )
    assert not (refs / "planted").exists()


def _submodule_workspace(tmp_path: Path) -> Path:
    """A superproject with a submodule; the submodule's checkout (its ``.git`` a file naming
    ``.git/modules/lib``, whose ``core.worktree`` names the checkout back) is the workspace."""
    for name in ("lib", "super"):
        repo = tmp_path / name
        repo.mkdir()
        git(repo, "init", "-q")
        (repo / "f").write_text("x")
        git(repo, "add", "f")
        git(repo, "commit", "-qm", "m")
    git(tmp_path / "super", "-c", "protocol.file.allow=always", "submodule", "add", "-q",
        str(tmp_path / "lib"), "lib")  # fmt: skip
    return tmp_path / "super" / "lib"


def test_a_submodule_checkouts_git_directory_is_its_own_to_write(tmp_path: Path) -> None:
    """The last read of session 26: the pointer checks refused a submodule checkout's git
    directory, and every ``git add`` in a sandboxed run there failed on its index.lock."""
    workspace = _submodule_workspace(tmp_path)
    modules = (tmp_path / "super" / ".git" / "modules" / "lib").resolve()
    assert git_dirs_of_worktree(workspace) == (modules,)


def test_a_pointer_to_a_submodules_git_directory_from_elsewhere_gives_nothing(
    tmp_path: Path,
) -> None:
    """A run that plants ``gitdir:`` naming a real submodule's git directory: its
    ``core.worktree`` names its own checkout, not this workspace."""
    real = _submodule_workspace(tmp_path)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    gitdir = (real / (real / ".git").read_text().split(":", 1)[1].strip()).resolve()
    (workspace / ".git").write_text(f"gitdir: {gitdir}\n")
    assert git_dirs_of_worktree(workspace) == ()


@landlock
def test_a_sandboxed_run_commits_in_a_submodule_checkout(tmp_path: Path) -> None:
    workspace = _submodule_workspace(tmp_path)
    model = bash_run(["echo y > g && git add g && git -c user.name=t -c user.email=t@t"
                      " commit -qm g && git log --format=%s -1"])  # fmt: skip
    with Runtime(
        [agent("worker")], model=model, workspace=workspace, permissions="bypassPermissions"
    ) as rt:
        outcome = rt.run("worker", "go", wait=WAIT)
    assert outcome.status is RunStatus.COMPLETED, outcome
    assert git(workspace, "log", "--format=%s", "-1").strip() == "g", results(model, "worker")
