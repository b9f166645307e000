"""The runtime's own git, where a run could have planted a program for it (session 26).

The runtime runs git itself to make an ``isolation: worktree`` run's worktree (``git
worktree add`` in the repository) and to see at the run's end whether it changed anything
(``git status`` in the worktree). Both read files a run may write: a worktree run writes its
worktree (its ``.git`` file, a nested repository it adds as a submodule), an editing run
whose workspace is the repository's top writes ``.git/hooks`` and ``.git/config``. git runs
programs those name (``core.fsmonitor``, hooks), and it ran them outside every sandbox, with
the runtime's whole environment. These attacks plant such programs through the real runtime
and the real kernel sandbox and check that nothing outside changed and no secret leaked."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from subagents.definitions.spec import AgentSpec
from subagents.isolation import WorktreeError, Worktrees
from subagents.messages import RunStatus, ToolResultBlock
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.tools.sandbox import Sandbox
from subagents.tools.sandbox_exec import kernel_abi
from terminal import in_a_terminal

from .test_worktrees import make_repo, worktree_paths

landlock = pytest.mark.skipif(kernel_abi() < 4, reason="the kernel offers no Landlock ABI 4+")
WAIT = 120.0
SECRET = "sk-ant-not-for-hooks"


def bash(*commands: str) -> list[object]:
    steps: list[object] = [
        {"tool_calls": [{"name": "Bash", "input": {"command": c}}]} for c in commands
    ]
    return [*steps, {"text": "done"}]


def shown(model: ScriptedModel, name: str) -> list[ToolResultBlock]:
    out: list[ToolResultBlock] = []
    for request in model.requests:
        if request.agent == name and request.messages[-1].role == "user":
            out += [b for b in request.messages[-1].content if isinstance(b, ToolResultBlock)]
    return out


def editor(name: str, isolated: bool) -> AgentSpec:
    metadata = {"isolation": "worktree"} if isolated else {}
    return AgentSpec(name=name, description="Edits.", prompt="You edit.", metadata=metadata)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    out = tmp_path / "outside"
    out.mkdir()
    return out


def planted(outside: Path, name: str) -> str:
    """A program that leaves its mark outside, with what it saw of the environment."""
    return f'echo "pwned $ANTHROPIC_API_KEY" > {outside}/{name}; false'


FSMONITOR = {
    "own .git": "rm .git && git init -q . && git config core.fsmonitor '{program}'",
    "submodule": (
        "mkdir sub && cd sub && git init -q"
        " && git -c user.name=t -c user.email=t@t commit -q --allow-empty -m s"
        " && git config core.fsmonitor '{program}' && cd .. && git add sub 2>/dev/null"
    ),
}


@landlock
@pytest.mark.parametrize("how", sorted(FSMONITOR))
def test_a_worktree_run_plants_nothing_the_runtime_runs_at_its_end(
    tmp_path: Path, outside: Path, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run rewrites its worktree so that the runtime's ``git status`` there runs its
    program (``core.fsmonitor`` of its own ``.git``, or of a submodule it added)."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    repo = make_repo(tmp_path / "repo")
    plant = FSMONITOR[how].format(program=planted(outside, how)) + " && echo planted"
    model = ScriptedModel({"worker": bash(plant)})
    with Runtime(
        [editor("worker", True)], model=model, workspace=repo, permissions="bypassPermissions"
    ) as rt:
        outcome = rt.run("worker", "go", wait=WAIT)
    assert outcome.status is RunStatus.COMPLETED, outcome
    assert shown(model, "worker")[0].content == "planted"
    assert "[worktree kept" in (outcome.result or "")  # the run changed its worktree
    assert list(outside.iterdir()) == []


@landlock
def test_a_hook_an_editing_run_planted_runs_confined_when_a_worktree_is_made(
    tmp_path: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An editing run whose workspace is the repository's top may write ``.git/hooks``
    (documented); the runtime's ``git worktree add`` for the next isolated run runs its
    ``post-checkout`` there, which may write no more than the run that planted it could,
    and never sees the runtime's secrets."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    repo = make_repo(tmp_path / "repo")
    hook = repo / ".git" / "hooks" / "post-checkout"
    body = '#!/bin/sh\necho "seen $ANTHROPIC_API_KEY" > "$(git rev-parse --git-common-dir)/seen"\n'
    body += planted(outside, "hook").replace("; false", "") + "\nexit 0\n"
    plant = f"cat > {hook} <<'EOF'\n{body}EOF\nchmod +x {hook} && echo planted"
    model = ScriptedModel({"lead": bash(plant), "worker": bash("echo in the worktree")})
    agents = [editor("lead", False), editor("worker", True)]
    with Runtime(agents, model=model, workspace=repo, permissions="bypassPermissions") as rt:
        assert rt.run("lead", "plant", wait=WAIT).status is RunStatus.COMPLETED
        outcome = rt.run("worker", "go", wait=WAIT)
    assert shown(model, "lead")[0].content == "planted"
    assert outcome.status is RunStatus.COMPLETED, outcome
    assert shown(model, "worker")[0].content == "in the worktree"
    assert list(outside.iterdir()) == []
    seen = (repo / ".git" / "seen").read_text()  # the hook ran, in the git directory
    assert seen.startswith("seen") and SECRET not in seen


@landlock
@pytest.mark.parametrize("how", ["symlink", "gitdir file"])
def test_a_repository_whose_git_directory_a_run_swapped_makes_no_worktree(
    tmp_path: Path, how: str
) -> None:
    """An editing run at the top replaced ``.git`` by another repository's (a symlink, or a
    ``gitdir:`` file): a worktree made from it would give the isolated run that repository's
    objects and refs to write, and its git the other repository's directory."""
    repo, other = make_repo(tmp_path / "repo"), make_repo(tmp_path / "other")
    shutil.rmtree(repo / ".git")
    if how == "symlink":
        (repo / ".git").symlink_to(other / ".git")
    else:
        (repo / ".git").write_text(f"gitdir: {other / '.git'}\n")
    with pytest.raises(WorktreeError, match=r"it is neither .* so no worktree is made"):
        Worktrees(repo).create("r1", "coder", sandbox=Sandbox().resolve())
    assert worktree_paths(other) == [str(other)]


def submodule_checkout(root: Path) -> Path:
    """A repository holding another as a submodule: its checkout's ``.git`` is a file
    naming ``.git/modules/sub`` (no ``commondir``; ``core.worktree`` names it back)."""
    inner, outer = make_repo(root / "inner"), make_repo(root / "outer")
    config = ["-c", "protocol.file.allow=always", "-c", "user.name=t", "-c", "user.email=t@t"]
    for args in (["submodule", "add", "-q", str(inner), "sub"], ["commit", "-qm", "sub"]):
        subprocess.run(["git", "-C", str(outer), *config, *args], check=True, capture_output=True)
    return outer / "sub"


@pytest.mark.parametrize("sandboxed", [True, False])
def test_a_submodule_checkout_still_gets_its_worktree(tmp_path: Path, sandboxed: bool) -> None:
    """Review of session 26: the pointer check refused a submodule's ``.git`` file (it is
    no worktree's), so ``isolation: worktree`` failed there, even with no sandbox at all."""
    if sandboxed and kernel_abi() < 4:
        pytest.skip("the kernel offers no Landlock ABI 4+")
    sub = submodule_checkout(tmp_path.resolve())
    trees = Worktrees(sub)
    sandbox = Sandbox().resolve() if sandboxed else Sandbox(enabled=False).resolve()
    tree = trees.create("r1", "coder", sandbox=sandbox)
    assert (tree.workspace / "src" / "app.py").exists() and tree.common is not None
    assert tree.common.parent.name == "modules"
    report = trees.finish("r1")
    assert report is not None and not report.kept and report.error is None, report
    assert not any("coder-r1" in p for p in worktree_paths(sub)) and not tree.path.exists()


TYPIST = """
import os, subprocess, sys, fcntl
from pathlib import Path
from subagents.isolation.git import GitJail, git
from subagents.tools.sandbox import Sandbox

repo = Path(sys.argv[1])
program = (
    "import fcntl, os, termios\\n"
    "fd = os.open('/dev/tty', os.O_RDWR)\\n"
    "for c in b'echo TYPED\\\\n': fcntl.ioctl(fd, termios.TIOCSTI, bytes([c]))\\n"
)
(repo / "typist.py").write_text(program)
subprocess.run(
    ["git", "-C", str(repo), "config", "core.fsmonitor", f"{sys.executable} typist.py; false"],
    check=True,
)
jail = GitJail(Sandbox().resolve()) if sys.argv[2] == "jailed" else None
print("status:", git(repo, "status", "--porcelain", jail=jail))
fcntl.fcntl(0, fcntl.F_SETFL, fcntl.fcntl(0, fcntl.F_GETFL) | os.O_NONBLOCK)
try:
    typed = os.read(0, 1000)
except BlockingIOError:
    typed = b""
print("typed:", typed)
"""


@pytest.mark.parametrize("how", ["jailed", "unconfined"])
def test_what_the_runtimes_git_runs_cannot_type_into_its_terminal(tmp_path: Path, how: str) -> None:
    """A program git runs for the runtime (here ``core.fsmonitor``) opened ``/dev/tty``,
    the runtime's terminal, and pushed ``echo TYPED`` into its input (``TIOCSTI``): what the
    user's shell reads once the runtime exits, outside every sandbox. git now starts in a
    session of its own, with no terminal (``unconfined``: the sandbox off, that alone holds;
    ``jailed``: the seccomp filter's TIOCSTI denial holds as well)."""
    if how == "jailed" and kernel_abi() < 4:
        pytest.skip("the kernel offers no Landlock ABI 4+")
    repo = make_repo(tmp_path / "repo")
    script = tmp_path / "typist_host.py"
    script.write_text(TYPIST)
    text = in_a_terminal([sys.executable, str(script), str(repo), how], WAIT)
    assert "status: ?? typist.py" in text, text  # git ran, and its fsmonitor
    assert "typed: b''" in text and "TYPED" not in text, text


@landlock
def test_with_reads_limited_a_workspace_below_the_top_still_gets_its_worktree(
    tmp_path: Path,
) -> None:
    """``Sandbox(readable=[])``: the runs read only the workspace; the runtime's git, held
    like them, still reads the repository it makes the worktree of."""
    repo = make_repo(tmp_path / "repo")
    trees = Worktrees(repo / "src")
    tree = trees.create("r1", "coder", sandbox=Sandbox(readable=[]).resolve())
    assert tree.workspace == tree.path / "src" and (tree.workspace / "app.py").exists()
    report = trees.finish("r1")
    assert report is not None and not report.kept and report.error is None, report
    assert worktree_paths(repo) == [str(repo)]


@landlock
def test_a_planted_hook_gets_no_network_the_planting_run_had_not(tmp_path: Path) -> None:
    """A variant (review of session 26): the owner turned the network off for editing runs;
    one plants ``post-checkout``, which the runtime's ``git worktree add`` for the next
    isolated run ran with the network on (the jail of a writing git call had it). Now no git
    call of the runtime has the network: the hook's connection is refused."""
    repo = make_repo(tmp_path / "repo")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    hook = repo / ".git" / "hooks" / "post-checkout"
    reach = (
        f"{sys.executable} -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}))'"
        ' && echo reached > "$(git rev-parse --git-common-dir)/net"'
        ' || echo refused > "$(git rev-parse --git-common-dir)/net"'
    )
    body = f"#!/bin/sh\n{reach}\nexit 0\n"
    plant = f"cat > {hook} <<'EOF'\n{body}EOF\nchmod +x {hook} && echo planted"
    model = ScriptedModel({"lead": bash(plant), "worker": bash("echo in the worktree")})
    agents = [editor("lead", False), editor("worker", True)]
    sandbox = Sandbox(network={"bypassPermissions": "off"})
    try:
        with Runtime(
            agents, model=model, workspace=repo, permissions="bypassPermissions", sandbox=sandbox
        ) as rt:
            assert rt.run("lead", "plant", wait=WAIT).status is RunStatus.COMPLETED
            outcome = rt.run("worker", "go", wait=WAIT)
    finally:
        listener.close()
    assert shown(model, "lead")[0].content == "planted"
    assert outcome.status is RunStatus.COMPLETED, outcome
    assert (repo / ".git" / "net").read_text() == "refused\n"


def separate_git_dir_repo(root: Path) -> tuple[Path, Path]:
    """A repository made with ``git init --separate-git-dir``: its checkout's ``.git`` is a
    file naming a git directory elsewhere, which keeps no record naming the checkout back."""
    repo, gitdir = root / "repo", root / "repo.git"
    repo.mkdir(parents=True)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q", "-b", "main", f"--separate-git-dir={gitdir}"], check=True)
    (repo / "README.md").write_text("demo\n")
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "first"], check=True)
    return repo, gitdir


@landlock
def test_a_separate_git_dir_repository_is_trusted_when_the_owner_names_its_git_directory(
    tmp_path: Path,
) -> None:
    """Refused under the sandbox, the message says what to do (session 27: it said only
    why); with the git directory named in ``Sandbox(writable=...)`` (the owner's word, a
    record outside the workspace) an isolated run gets its worktree and commits there, and
    a plain run commits in the checkout. A pointer naming another directory is still refused."""
    repo, gitdir = separate_git_dir_repo(tmp_path)
    with pytest.raises(WorktreeError, match=r"name its git directory in Sandbox\(writable="):
        Worktrees(repo).create("r1", "coder", sandbox=Sandbox().resolve())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with pytest.raises(WorktreeError, match="it is neither"):  # the owner named another one
        Worktrees(repo).create("r1", "coder", sandbox=Sandbox(writable=(str(elsewhere),)))
    commit = "echo x > f && git add f && git -c user.name=t -c user.email=t@t commit -qm f"
    commit += " && echo ok"
    model = ScriptedModel({"isolated": bash(commit), "plain": bash(commit.replace("f", "g"))})
    with Runtime(
        [editor("isolated", isolated=True), editor("plain", isolated=False)],
        model=model,
        workspace=repo,
        permissions="bypassPermissions",
        sandbox=Sandbox(writable=(str(gitdir),)),
    ) as rt:
        assert rt.run("isolated", "commit", wait=WAIT).status is RunStatus.COMPLETED
        assert rt.run("plain", "commit", wait=WAIT).status is RunStatus.COMPLETED
    assert [r.content for r in shown(model, "isolated")] == ["ok"]
    assert [r.content for r in shown(model, "plain")] == ["ok"]
    listed = subprocess.run(
        ["git", "-C", str(repo), "log", "--all", "--format=%s"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert sorted(listed) == ["f", "first", "g"]


@landlock
def test_a_planted_git_hook_reads_no_other_runs_scratch_files(tmp_path: Path) -> None:
    """The runtime's git runs in the runs' sandbox with a temporary directory of its own: in
    ``<tmp>/subagents-git-*`` (session 27's review) it was outside the user's home of scratch
    directories, so no cover was made for it, and a ``post-checkout`` a run planted read
    every run's, runtime's and MCP server's scratch files (here another runtime's run's),
    where it could leave them for the planting run to read. Now its directory is in the
    home, which its namespace covers but for its own directory."""
    from subagents.tools.processes import ProcessGroups
    from subagents.tools.sandbox import private_shm_refusal
    from subagents.tools.scratch import scratch_home

    if private_shm_refusal() is not None:
        pytest.skip("commands get no mount namespace of their own here")
    others = ProcessGroups()
    (others.run_dir("another-runtimes-run") / "out").write_text("a-secret-of-another-run")
    repo = make_repo(tmp_path / "repo")
    hook = repo / ".git" / "hooks" / "post-checkout"
    body = (
        f"#!/bin/sh\nfind {scratch_home()} -type f -exec cat {{}} + "
        '> "$(git rev-parse --git-common-dir)/seen" 2>&1\nexit 0\n'
    )
    plant = f"cat > {hook} <<'EOF'\n{body}EOF\nchmod +x {hook} && echo planted"
    model = ScriptedModel({"lead": bash(plant), "worker": bash("echo in the worktree")})
    agents = [editor("lead", False), editor("worker", True)]
    try:
        with Runtime(agents, model=model, workspace=repo, permissions="bypassPermissions") as rt:
            assert rt.run("lead", "plant", wait=WAIT).status is RunStatus.COMPLETED
            assert rt.run("worker", "go", wait=WAIT).status is RunStatus.COMPLETED
    finally:
        others.kill_all()
    seen = (repo / ".git" / "seen").read_text()  # the hook ran
    assert "a-secret-of-another-run" not in seen, seen
