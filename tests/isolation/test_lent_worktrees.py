"""A worktree lent to runs held to plan mode (``Worktrees.lend``) stays while they read it
(session 28): the end of its owner (a ``plan`` lead whose isolated helper it holds to plan)
removed an unchanged worktree under a helper still reading it, a detached one or one not yet
cancelled. Now an unchanged worktree is removed when the last run it was lent to ends (or the
runtime closes); a changed one is kept as before. On real git repositories; the whole runtime
for a detached helper that outlives its lead."""

from __future__ import annotations

from pathlib import Path

from polling import wait_until
from subagents.isolation.worktrees import Worktrees
from subagents.messages import RunStatus
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime

from .test_plan_worktrees import branches
from .test_worktree_runs import WAIT, answers, editor, use
from .test_worktrees import make_repo, worktree_paths


def test_an_unchanged_worktree_goes_with_its_last_borrower(tmp_path: Path) -> None:
    """The lead ends first: its worktree stays for the helper and the helper's own helper
    (a borrower's borrower), and goes, branch too, when the last of them ends."""
    repo = make_repo(tmp_path / "repo")
    trees = Worktrees(repo)
    tree = trees.create("lead", "lead")
    assert trees.lend("helper", "lead") == tree.workspace
    assert trees.lend("deeper", "helper") == tree.workspace
    report = trees.finish("lead")
    assert report is not None and not report.kept and report.note() == ""
    assert tree.path.is_dir() and str(tree.path) in worktree_paths(repo)
    assert trees.finish("helper") is None
    assert (tree.path / "README.md").read_text() == "demo\n"  # (deeper reads on)
    assert trees.finish("deeper") is None
    assert not tree.path.exists() and worktree_paths(repo) == [str(repo)]
    assert branches(repo) == ""


def test_a_worktree_left_for_a_borrower_goes_at_close(tmp_path: Path) -> None:
    """A borrower the runtime's close ends (no ``finish`` of its own) does not leave the
    worktree behind; one lent to nobody goes at its owner's end as before."""
    repo = make_repo(tmp_path / "repo")
    trees = Worktrees(repo)
    lent, alone = trees.create("lead", "lead"), trees.create("other", "other")
    trees.lend("helper", "lead")
    trees.finish("lead")
    trees.finish("other")
    assert lent.path.is_dir() and not alone.path.exists()
    assert trees.close() == []
    assert not lent.path.exists() and worktree_paths(repo) == [str(repo)]


def test_a_changed_worktree_is_kept_and_reported_whatever_reads_it(tmp_path: Path) -> None:
    """Its owner's report names it kept at its end, as without a borrower."""
    repo = make_repo(tmp_path / "repo")
    trees = Worktrees(repo)
    tree = trees.create("lead", "lead")
    trees.lend("helper", "lead")
    (tree.workspace / "new.txt").write_text("x")
    report = trees.finish("lead")
    assert report is not None and report.kept and report.changed_files == 1
    trees.finish("helper")
    assert (tree.workspace / "new.txt").read_text() == "x"


def test_a_detached_helper_reads_its_leads_worktree_after_the_lead_ended(tmp_path: Path) -> None:
    """A ``plan`` lead in its worktree starts a detached isolated helper (held to plan: it
    reads the lead's worktree) and, once the helper has started, is told to end; the
    helper, woken by mail after that, still reads the tree; the tree goes when the helper
    ends."""
    repo = make_repo(tmp_path / "repo")
    model = ScriptedModel(
        {
            "lead": [
                {"tool_calls": [use("Bash", command="pwd")]},
                {"tool_calls": [use("spawn_subagent", agent="helper", task="look", detach=True)]},
                {"tool_calls": [use("wait_for_message")]},
                "ok",
            ],
            "helper": [
                {"tool_calls": [use("wait_for_message")]},
                {"tool_calls": [use("Read", file_path="README.md")]},
                "looked",
            ],
        }
    )
    agents = [editor("lead", permission_mode="plan"), editor("helper")]
    with Runtime(agents, model=model, workspace=repo) as rt:
        lead = rt.spawn("lead", "plan")
        # (its workspace, the lent tree, is set before its model is first asked)
        wait_until(lambda: any(r.agent == "helper" for r in model.requests), "helper started")
        lead.send("end now")
        assert lead.result(WAIT).status is RunStatus.COMPLETED
        ((lead_pwd,), *_) = answers(model, "lead")
        tree = Path(lead_pwd.content)
        assert tree.is_relative_to(repo / ".claude" / "worktrees"), lead_pwd
        (helper,) = [r.run_id for r in rt.runs() if r.agent == "helper"]
        assert (tree / "README.md").is_file()  # the lead has ended: left for its helper
        rt.send(helper, "go on")
        (ended,) = rt.wait_ended([helper], WAIT).values()
        assert ended.status is RunStatus.COMPLETED, ended
        _, (read,) = answers(model, "helper")
        assert not read.is_error and "demo" in read.content, read
        assert worktree_paths(repo) == [str(repo)]  # gone with its last borrower
    assert branches(repo) == ""


def test_a_worktree_made_again_for_its_owner_is_not_taken_by_a_borrowers_end(
    tmp_path: Path,
) -> None:
    """An owner whose run ends (its actor stopped) and starts again with the same run id
    (a restart) finds its worktree again (``create``: resumed); a borrower's end after
    that must not remove the tree its owner now works in (review of session 28: the tree
    left for the borrower was removed, branch too, under the owner's new start)."""
    repo = make_repo(tmp_path / "repo")
    trees = Worktrees(repo)
    tree = trees.create("lead", "lead")
    trees.lend("helper", "lead")
    trees.finish("lead")  # left for the helper
    again = trees.create("lead", "lead")
    assert again.path == tree.path
    assert trees.finish("helper") is None
    assert again.path.is_dir() and str(again.path) in worktree_paths(repo)
    assert branches(repo) != ""
    report = trees.finish("lead")
    assert report is not None and not report.kept
    assert worktree_paths(repo) == [str(repo)]
