"""``isolation: worktree`` on real git repositories in temporary directories."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest

from subagents.definitions.spec import AgentSpec
from subagents.isolation import WorktreeError, Worktrees, isolation_of


def sh(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def make_repo(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    sh(root, "init", "-q", "-b", "main")
    sh(root, "config", "user.email", "t@example.com")
    sh(root, "config", "user.name", "Test")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("VALUE = 1\n", encoding="utf-8")
    (root / "README.md").write_text("demo\n", encoding="utf-8")
    sh(root, "add", ".")
    sh(root, "commit", "-q", "-m", "first")
    return root


def worktree_paths(repo: Path) -> list[str]:
    listing = sh(repo, "worktree", "list", "--porcelain")
    return [line.split(" ", 1)[1] for line in listing.splitlines() if line.startswith("worktree ")]


def test_a_run_gets_a_worktree_on_its_own_branch_from_head(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    head = sh(repo, "rev-parse", "HEAD")
    trees = Worktrees(repo)
    tree = trees.create("r123", "coder")
    assert tree.path == repo / ".claude" / "worktrees" / "coder-r123"
    assert tree.branch == "subagents/coder-r123" and tree.base == head
    assert sh(tree.path, "rev-parse", "--abbrev-ref", "HEAD") == tree.branch
    assert (tree.workspace / "src" / "app.py").read_text() == "VALUE = 1\n"
    assert str(tree.path) in worktree_paths(repo)
    # the main tree does not list the worktrees folder as untracked
    assert sh(repo, "status", "--porcelain") == ""
    assert trees.create("r123", "coder") == tree  # the same run asks again: the same one


def test_an_unchanged_worktree_is_removed_with_its_branch(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    trees = Worktrees(repo)
    tree = trees.create("r1", "reader")
    (tree.workspace / "README.md").read_text()
    report = trees.finish("r1")
    assert report is not None and not report.kept and report.note() == ""
    assert not tree.path.exists()
    assert worktree_paths(repo) == [str(repo)]
    assert sh(repo, "branch", "--list", tree.branch) == ""
    assert trees.finish("r1") is None


@pytest.mark.parametrize("change", ["modify", "add", "delete", "commit"])
def test_a_changed_worktree_is_kept_and_reported(tmp_path: Path, change: str) -> None:
    repo = make_repo(tmp_path / "repo")
    trees = Worktrees(repo)
    tree = trees.create("r2", "coder")
    app = tree.workspace / "src" / "app.py"
    if change == "modify":
        app.write_text("VALUE = 2\n", encoding="utf-8")
    elif change == "add":
        (tree.workspace / "src" / "new.py").write_text("x = 1\n", encoding="utf-8")
    elif change == "delete":
        app.unlink()
    else:
        app.write_text("VALUE = 3\n", encoding="utf-8")
        sh(tree.path, "commit", "-q", "-am", "three")
    report = trees.finish("r2")
    assert report is not None and report.kept and report.error is None
    assert tree.path.is_dir() and str(tree.path) in worktree_paths(repo)
    note = report.note()
    assert str(tree.path) in note and tree.branch in note
    if change == "commit":
        assert report.commits == 1 and report.changed_files == 0 and "1 commit(s)" in note
    else:
        assert report.changed_files == 1 and report.commits == 0
        assert "1 changed file(s)" in note
        assert ("new.py" if change == "add" else "app.py") in note
    # the main tree never saw it
    assert (repo / "src" / "app.py").read_text() == "VALUE = 1\n"
    assert sh(repo, "status", "--porcelain") == ""


def test_parallel_editors_never_see_each_others_changes(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    trees = Worktrees(repo)
    barrier = threading.Barrier(4)
    seen: dict[str, str] = {}
    errors: list[BaseException] = []

    def editor(n: int) -> None:
        try:
            tree = trees.create(f"r{n}", "editor")
            app = tree.workspace / "src" / "app.py"
            barrier.wait(30)  # everyone has a worktree
            app.write_text(f"VALUE = {100 + n}\n", encoding="utf-8")
            barrier.wait(30)  # everyone has written
            seen[f"r{n}"] = app.read_text()
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=editor, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert seen == {f"r{n}": f"VALUE = {100 + n}\n" for n in range(4)}
    assert (repo / "src" / "app.py").read_text() == "VALUE = 1\n"
    reports = trees.close()
    assert len(reports) == 4 and all(r.kept for r in reports)
    branches = {r.branch for r in reports}
    for n in range(4):
        assert sh(repo, "show", f"subagents/editor-r{n}:src/app.py") == "VALUE = 1"  # uncommitted
    assert len(branches) == 4


def test_the_workspace_may_be_a_folder_inside_the_repository(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    tree = Worktrees(repo / "src").create("r9", "coder")
    assert tree.workspace == tree.path / "src"
    assert (tree.workspace / "app.py").is_file()


def test_a_workspace_outside_git_is_a_clear_error(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(WorktreeError, match="needs the workspace in a git repository"):
        Worktrees(plain).create("r1", "coder")


def test_a_repository_without_commits_is_a_clear_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    sh(empty, "init", "-q")
    with pytest.raises(WorktreeError, match="has none yet"):
        Worktrees(empty).create("r1", "coder")


def test_a_run_resumed_by_a_new_runtime_finds_its_worktree_again(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    first = Worktrees(repo).create("r7", "coder")
    (first.workspace / "src" / "app.py").write_text("VALUE = 7\n", encoding="utf-8")
    # a crash: the runtime that made it is gone; a new one resumes the same run
    again = Worktrees(repo).create("r7", "coder")
    assert again.path == first.path and again.base == first.base
    assert (again.workspace / "src" / "app.py").read_text() == "VALUE = 7\n"


def test_isolation_of_reads_the_definition() -> None:
    def spec(**metadata: object) -> AgentSpec:
        return AgentSpec(name="a", description="d", metadata=dict(metadata))

    assert isolation_of(spec()) is None
    assert isolation_of(spec(isolation="worktree")) == "worktree"
    assert isolation_of(spec(isolation=" Worktree ")) == "worktree"
    with pytest.raises(ValueError, match="isolation 'container' is not known"):
        isolation_of(spec(isolation="container"))


def test_a_worktree_whose_head_went_back_past_its_base_is_kept(tmp_path: Path) -> None:
    # no changed file and no commit of its own, but HEAD is not the base: kept, as when it
    # was compared with `rev-parse HEAD` (a count of base..HEAD alone would remove it)
    repo = make_repo(tmp_path / "repo")
    (repo / "README.md").write_text("two\n", encoding="utf-8")
    sh(repo, "commit", "-q", "-am", "second")
    trees = Worktrees(repo)
    tree = trees.create("r3", "coder")
    sh(tree.path, "reset", "-q", "--hard", "HEAD~1")
    report = trees.finish("r3")
    assert report is not None and report.kept and report.error is None
    assert (report.changed_files, report.commits) == (0, 0)
    assert sh(tree.path, "rev-parse", "HEAD") != tree.base


def test_a_branch_left_by_an_earlier_start_is_checked_out_again(tmp_path: Path) -> None:
    # its worktree gone but its branch kept (a crash between the two, a user's cleanup):
    # the start finds the branch (in the one look that also finds the repository and its
    # HEAD) and checks it out, from a folder inside the repository too
    repo = make_repo(tmp_path / "repo")
    first = Worktrees(repo / "src").create("r8", "coder")
    (first.workspace / "app.py").write_text("VALUE = 8\n", encoding="utf-8")
    sh(first.path, "commit", "-q", "-am", "eight")
    made = sh(first.path, "rev-parse", "HEAD")
    sh(repo, "worktree", "remove", "--force", str(first.path))
    again = Worktrees(repo / "src").create("r8", "coder")
    assert (again.path, again.branch, again.base) == (first.path, first.branch, first.base)
    assert sh(again.path, "rev-parse", "HEAD") == made
    assert (again.workspace / "app.py").read_text() == "VALUE = 8\n"


def test_a_repository_whose_path_holds_a_newline_gets_its_worktree(tmp_path: Path) -> None:
    # (review) the start's one look read the top from `--show-toplevel`'s first line: a
    # repository at "new\nline" was said to have no commit, at ".../new"
    repo = make_repo(tmp_path / "new\nline")
    tree = Worktrees(repo / "src").create("r9", "coder")
    assert tree.repo == repo and tree.base == sh(repo, "rev-parse", "HEAD")
    assert (tree.workspace / "app.py").read_text() == "VALUE = 1\n"
