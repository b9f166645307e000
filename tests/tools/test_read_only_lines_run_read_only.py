"""A Bash line allowed because it only reads runs held to reading (session 26, e-adv26).

The judge of command lines proves a line names only readers (``git status``, ``cat``), not
what those readers run: git runs programs its repository's config names
(``core.fsmonitor`` on ``status``, ``diff.external`` on ``diff``, textconv drivers). In
``acceptEdits`` mode a run edits ``.git/config`` unasked, then runs ``git status`` unasked
(read-only): the planted program ran with the editing run's rights (the workspace, the
network) though every other command in that mode needs approval. Such a line now runs
in the ``plan`` sandbox (writes only its temporary directory, no network), which is what
its being read-only promised."""

from __future__ import annotations

from pathlib import Path

import pytest

from subagents.messages import RunStatus
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.tools.approval import ApprovalRequest

from .conftest import WAIT, git
from .test_sandbox_runs import agent, landlock, results, use


@landlock
@pytest.mark.parametrize("line", ["git status", "git -C . diff HEAD", "git status && cat mark"])
def test_a_program_planted_in_git_config_gets_no_more_than_a_read(
    repo: Path, tmp_path: Path, line: str
) -> None:
    config = repo / ".git" / "config"
    program = f"echo ran > {repo}/mark; echo ran > $TMPDIR/mark; cat $TMPDIR/mark >&2; false"
    planted = config.read_text() + f'[core]\n\tfsmonitor = "{program}"\n'
    planted += f"[diff]\n\texternal = \"sh -c '{program}'\"\n"
    (repo / "src" / "calc.py").write_text("changed\n")  # so that git diff has a file to show
    asked: list[ApprovalRequest] = []

    def approve(request: ApprovalRequest) -> bool:
        asked.append(request)
        return False

    model = ScriptedModel(
        {
            "worker": [
                {"tool_calls": [use("Read", file_path=str(config))]},
                {"tool_calls": [use("Write", file_path=str(config), content=planted)]},
                {"tool_calls": [use("Bash", command=line)]},
                "done",
            ]
        }
    )
    with Runtime(
        [agent("worker")], model=model, workspace=repo, permissions="acceptEdits", approve=approve
    ) as rt:
        assert rt.run("worker", "go", wait=WAIT).status is RunStatus.COMPLETED
    _read, written, ran = results(model, "worker")
    assert not written.is_error and config.read_text() == planted  # edited unasked
    assert asked == []  # and the line ran unasked: it only reads
    assert not (repo / "mark").exists(), ran.content  # but what git ran could not write
    assert "Read-only file system" in ran.content or "Permission denied" in ran.content


def partial_clone(tmp_path: Path) -> Path:
    """A blobless clone (``--filter=blob:none``): ``git show`` of an old file fetches its
    blob from the remote into ``.git/objects`` (here ``file://``, no network needed)."""
    up = tmp_path / "up"
    up.mkdir()
    git(up, "init", "-q", "-b", "main")
    git(up, "config", "uploadpack.allowfilter", "true")
    for text in ("one\n", "two\n"):
        (up / "a.txt").write_text(text)
        git(up, "add", "a.txt")
        git(up, "commit", "-q", "-m", text.strip())
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--filter=blob:none", f"file://{up}", str(clone))
    return clone


@landlock
def test_in_bypass_mode_a_read_only_line_runs_as_any_other(tmp_path: Path) -> None:
    """Review of session 26: held to reading in every mode, ``git show HEAD~1:a.txt`` in a
    partial clone failed (its blob could not be fetched into ``.git/objects``) even in
    ``bypassPermissions``, where every line runs unasked and holding one buys nothing."""
    clone = partial_clone(tmp_path)
    model = ScriptedModel(
        {"worker": [{"tool_calls": [use("Bash", command="git show HEAD~1:a.txt")]}, "done"]}
    )
    with Runtime(
        [agent("worker")], model=model, workspace=clone, permissions="bypassPermissions"
    ) as rt:
        assert rt.run("worker", "go", wait=WAIT).status is RunStatus.COMPLETED
    (shown,) = results(model, "worker")
    assert not shown.is_error and shown.content == "one", shown.content
