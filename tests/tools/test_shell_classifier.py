"""The shell reader behind permissions (pure): what counts as read-only is an allowlist that
must be proven (every trick of the trial is not read-only, so it is asked in default mode and
refused in plan mode), and deny rules catch a program however it is named."""

from __future__ import annotations

from pathlib import Path

import pytest

from subagents.definitions.spec import AgentSpec
from subagents.tools.builtin import builtin_tools
from subagents.tools.permissions import PermissionPolicy, Permissions
from subagents.tools.programs_run import commands_run
from subagents.tools.read_only_commands import is_read_only
from subagents.tools.shellwords import parse

BASH = builtin_tools()["Bash"]
ROOT = Path("/work/project")

TRICKS = [
    # leading environment assignments that make a reader run something else
    "GIT_EXTERNAL_DIFF='touch /tmp/pwned' git diff --no-index a b",
    "GIT_PAGER='touch /tmp/pwned' git log",
    "PAGER=evil git log",
    "PATH=./bin:$PATH cat f",
    "PATH=./bin:$PATH git diff",
    "X='touch /tmp/pwned' git --config-env=diff.external=X diff",
    "LD_PRELOAD=./evil.so cat f",
    # a program named by a path, quoted, escaped: not the reader on the list
    "./bin/cat f",
    "./bin/git diff",
    "/tmp/cat f",
    "'cat' f",
    "\\cat f",
    # git options and subcommands that run programs or write
    "git -c core.pager='touch /tmp/pwned' log",
    "git -c diff.external=evil diff",
    "git --config-env=diff.external=X diff",
    "git --exec-path=./bin log",
    "git -p log",
    "git --paginate log",
    "git --git-dir=./evil log",
    "git grep -O'touch /tmp/pwned' x",
    "git grep -nO'touch /tmp/pwned' x",
    "git grep --open-files-in-pager='touch /tmp/pwned' x",
    "git grep --open=evil x",
    "git diff --ext-diff",
    "git diff --ext",
    "git log -p --ext-diff",
    "git show --ext-diff HEAD",
    "git diff --output=/tmp/x",
    "git diff --out=/tmp/x",
    "git log --output /tmp/x",
    "git myalias",
    "git commit -m x",
    "git diff *",
    "git log $REV",
    # find that deletes, runs or writes
    "find . -delete",
    "find . -name '*.pyc' -delete",
    "find . '-delete'",
    "find . -exec rm {} ;",
    "find . -execdir sh -c x {} +",
    "find . -ok rm {} ;",
    "find . -fprint /tmp/x",
    "find . -fls /tmp/x",
    "find *",
    # other readers' writing or program-running options
    "rg --pre ./evil x",
    "rg --pre=./evil x",
    "tree -o /tmp/x",
    "date -s 2020-01-01",
    "file -C -m x",
    # shell constructs: substitution, subshells, groups, control, background, redirections
    "cat $(rm -rf x)",
    "cat `rm -rf x`",
    'echo "$(touch y)"',
    "cat <(rm x)",
    "(cd /; rm -rf x)",
    "{ cat f; }",
    "if true; then cat f; fi",
    "for f in *; do cat $f; done",
    "cat f &",
    "cat f > out",
    "cat f >> out",
    "cat f 2> err",
    "cat f &> out",
    "cat f >| out",
    "cat f <> rw",
    "echo x >&out",
    "cat < /dev/tcp/example.com/80",
    "cat <<EOF\nx\nEOF",
    "cat <<'EOF'\nx\nEOF",
    "echo $((x=1))",
    "cat f; rm g",
    "ls && rm -rf x",
    "export PATH=./bin; cat f",
    "X=1",
    "eval cat f",
    "sh -c 'cat f'",
    "env cat f",
    "command cat f",
    "xargs cat",
    "echo 'unclosed",
    "cat $(",
    "",
]


@pytest.mark.parametrize("line", TRICKS)
def test_a_trick_is_not_read_only(line: str) -> None:
    assert not is_read_only(line)


@pytest.mark.parametrize("line", TRICKS)
def test_a_trick_is_refused_in_plan_mode_and_asked_in_default_mode(line: str) -> None:
    spec = AgentSpec(name="a", description="d")
    plan, _ = PermissionPolicy.for_agent(Permissions(mode="plan"), spec, ROOT)
    default, _ = PermissionPolicy.for_agent(Permissions(), spec, ROOT)
    assert plan.decide(BASH, {"command": line}).behavior == "deny"
    assert default.decide(BASH, {"command": line}).behavior == "ask"


@pytest.mark.parametrize(
    "line",
    [
        "git status",
        "git diff",
        "git diff HEAD~1 -- src/a.py",
        "git --no-pager log --oneline -5",
        "git -C sub status",
        "git log --oneline | head -5 2>/dev/null",
        "git grep -n foo",
        "git show HEAD:src/a.py",
        "git diff --no-ext-diff --stat",
        "git diff --output-indicator-new=+",
        "ls -la && cat README.md; wc -l src/*.py",
        "grep -rn 'def main' src",
        "find . -name '*.py' -type f",
        "cat f 2>&1 | tail -3",
        "cat f >/dev/null",
        "head -5 < f",
        "rg -n foo src",
        "date +%s",
        "echo 'a > b' \"$HOME\"",
        "# a comment\nls",
    ],
)
def test_plain_readers_are_read_only(line: str) -> None:
    assert is_read_only(line)


DENY_RM = [
    "rm -rf x",
    "/bin/rm -rf x",
    "/usr/bin/rm x",
    "./rm x",
    "command rm x",
    "builtin rm x",
    "exec rm x",
    "\\rm x",
    "'rm' x",
    '"rm" x',
    "r''m x",
    "$'\\x72m' x",
    "env rm x",
    "env -i FOO=1 rm x",
    "env -S 'rm x'",
    "nice -n 5 rm x",
    "nohup rm x",
    "timeout 5 rm x",
    "timeout -s KILL 5 rm x",
    "sudo -u root rm x",
    "time rm x",
    "xargs rm",
    "xargs -0 -n 1 rm",
    "busybox rm x",
    "X=1 rm x",
    "ls; rm x",
    "ls && rm x",
    "ls | rm x",
    "ls & rm x",
    "echo $(rm x)",
    "echo `rm x`",
    'echo "$(rm x)"',
    "(rm x)",
    "{ rm x; }",
    "if true; then rm x; fi",
    "for f in a; do rm $f; done",
    "sh -c 'rm x'",
    "bash -lc 'ls; rm x'",
    "eval rm x",
    "eval 'rm x'",
    "find . -delete",
    "find . -name '*.tmp' -delete",
    "find . -exec rm {} ;",
    "find . -execdir /bin/rm {} +",
    "watch -n 1 rm x",
    "$X x",
    '"$(which rm)" x',
    "{r,}m x",
    "r?m x",
    "r[m] x",
    "/bin/r* x",
    "echo 'unclosed; rm x",
    "cat <<EOF\n$(rm x)\nEOF",
    "cat <<-EOF\n\t`rm x`\n\tEOF",
    "cat > f <<'EOF'\nhello\nEOF\nrm x",
]


@pytest.mark.parametrize("line", DENY_RM)
def test_a_deny_rule_holds_however_the_program_is_named(line: str) -> None:
    spec = AgentSpec(name="a", description="d", disallowed_tools=("Bash(rm:*)",))
    for mode in ("bypassPermissions", "default", "plan"):
        runtime = Permissions(mode=mode, deny=("Bash(rm:*)",))  # type: ignore[arg-type]
        for permissions, agent in ((runtime, AgentSpec(name="a", description="d")),
                                   (Permissions(mode=mode), spec)):  # type: ignore[arg-type]  # fmt: skip
            p, _ = PermissionPolicy.for_agent(permissions, agent, ROOT)
            decision = p.decide(BASH, {"command": line})
            assert decision.behavior == "deny", (line, mode)
            assert "Bash(rm:*)" in decision.reason


@pytest.mark.parametrize(
    "line",
    [
        "ls -la", "echo rm", "grep rm f", "git rm x", "cat 'rm'", "firm x", "rmdir x",
        "[ -f x ] && echo yes", "if [ -d build ]; then ls build; fi", "find . -exec ls {} +",
        # a here-document's body is text: writing a script that mentions rm runs no rm
        "cat > clean.sh <<'EOF'\nrm -rf build\nEOF",
        "cat > clean.sh <<EOF\nrm -rf $HOME/build\nEOF\nchmod +x clean.sh",
        "cat > x <<-EOF\n\trm -rf build\n\tEOF",
    ],
)  # fmt: skip
def test_a_deny_rule_lets_other_programs_run(line: str) -> None:
    p, _ = PermissionPolicy.for_agent(
        Permissions(mode="bypassPermissions", deny=("Bash(rm:*)",)),
        AgentSpec(name="a", description="d"),
        ROOT,
    )
    assert p.decide(BASH, {"command": line}).behavior == "allow"


def test_git_deny_rules_see_past_global_options() -> None:
    p, _ = PermissionPolicy.for_agent(
        Permissions(mode="bypassPermissions", deny=("Bash(git push:*)",)),
        AgentSpec(name="a", description="d"),
        ROOT,
    )
    pushes = ("git push", "git -C . push origin", "git -c a=b --no-pager push", "/bin/git push")
    for line in pushes:
        assert p.decide(BASH, {"command": line}).behavior == "deny", line
    assert p.decide(BASH, {"command": "git pull"}).behavior == "allow"


def test_allow_rules_match_the_command_as_written() -> None:
    p, _ = PermissionPolicy.for_agent(
        Permissions(allow=("Bash(git diff:*)", "Bash(python -m pytest:*)")),
        AgentSpec(name="a", description="d"),
        ROOT,
    )
    assert p.decide(BASH, {"command": "python -m pytest -q | tail -1"}).behavior == "allow"
    for line in (
        "PATH=./bin:$PATH git diff",  # an assignment is part of what is written
        "./bin/git diff",
        "GIT_EXTERNAL_DIFF=x git diff",
        "git diff $(rm x)",
        "python -m pytest; rm x",
    ):
        assert p.decide(BASH, {"command": line}).behavior == "ask", line


def test_a_definitions_bash_pattern_is_matched_as_written() -> None:
    """The built-in explore agent: ``Bash(git diff:*)`` only. ``PATH=./bin:$PATH git diff``
    ran the repository's own ./bin/git; it is now outside the pattern, and not read-only."""
    spec = AgentSpec(name="explore", description="d", tools=("Read", "Bash(git diff:*)"))
    for mode in ("bypassPermissions", "plan"):
        p, _ = PermissionPolicy.for_agent(Permissions(mode=mode), spec, ROOT)  # type: ignore[arg-type]
        for line in ("PATH=./bin:$PATH git diff", "./bin/git diff", "git diff; ./bin/x"):
            assert p.decide(BASH, {"command": line}).behavior == "deny", (mode, line)
        assert p.decide(BASH, {"command": "git diff HEAD"}).behavior == "allow"


def test_the_reader_finds_nested_commands_and_names() -> None:
    ran = commands_run("echo \"$(/bin/rm -f a)\" && command -p ls `cat x` | sh -c 'wc -l'")
    assert ran is not None
    texts = [r.text for r in ran]
    assert "rm -f a" in texts and "ls `...`" in texts and "cat x" in texts and "wc -l" in texts
    assert parse("echo 'a; b' && ls").constructs == {"and"}
    assert parse("echo 'open").error is not None
    assert commands_run('echo "open') is None


def test_the_explore_agent_does_not_run_a_repositorys_own_git(tmp_path: Path) -> None:
    """Real runtime, real Bash: the trial's ``PATH=./bin:$PATH git diff`` through the built-in
    explore agent (``Bash(git diff:*)``, plan mode) ran the repository's ./bin/git, in a
    runtime in bypassPermissions. Each trick is refused; a plain ``git diff`` runs."""
    import os
    import subprocess

    from subagents.messages import RunStatus
    from subagents.models.scripted import ScriptedModel
    from subagents.runtime import Runtime

    repo = tmp_path / "repo"
    (repo / "bin").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    pwned = tmp_path / "pwned"
    for name in ("git", "cat"):
        fake = repo / "bin" / name
        fake.write_text(f"#!/bin/sh\necho {name} >> {pwned}\n")
        fake.chmod(0o755)
    (repo / "a").write_text("a\n")
    (repo / "b").write_text("b\n")
    tricks = [
        "PATH=./bin:$PATH git diff",
        "./bin/git diff",
        f"GIT_EXTERNAL_DIFF={repo / 'bin' / 'git'} git diff --no-index a b",
        f"git -c diff.external={repo / 'bin' / 'git'} diff --no-index --ext-diff a b",
        f"git diff --no-index --ext-diff a b; {repo / 'bin' / 'cat'} a",
    ]
    calls = [{"name": "Bash", "input": {"command": line}} for line in tricks]
    calls.append({"name": "Bash", "input": {"command": "git diff --no-index --stat a b"}})
    shown = " || ".join(f"{{result{i}}}" for i in range(len(calls)))
    model = ScriptedModel({"explore": [{"tool_calls": calls}, {"text": shown}]})
    env_path = os.environ.get("PATH", "")
    assert "./bin" not in env_path
    with Runtime(discover=True, model=model, workspace=repo, permissions="bypassPermissions") as rt:
        outcome = rt.run("explore", "look", wait=120.0)
    assert outcome.status is RunStatus.COMPLETED, outcome
    assert not pwned.exists()
    assert outcome.result is not None
    answers = outcome.result.split(" || ")
    assert all(a.startswith("Permission to use Bash was denied") for a in answers[:-1]), answers
    assert "1 insertion(+), 1 deletion(-)" in answers[-1] or "2 files changed" in answers[-1], (
        answers
    )
