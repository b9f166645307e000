"""Permission decisions (pure): Claude Code's modes, rules with patterns, and a runtime
configuration that a definition can only tighten."""

from __future__ import annotations

from pathlib import Path

import pytest

from subagents.definitions.spec import AgentSpec
from subagents.tools.builtin import builtin_tools
from subagents.tools.modes import MODES
from subagents.tools.permissions import PermissionPolicy, Permissions
from subagents.tools.read_only_commands import is_read_only
from subagents.tools.rules import Rule, RuleError
from subagents.tools.shellwords import parse

TOOLS = builtin_tools()
ROOT = Path("/work/project")


def policy(permissions: Permissions | str = "default", **spec: object) -> PermissionPolicy:
    agent = AgentSpec(name="a", description="d", **spec)  # type: ignore[arg-type]
    made, _ = PermissionPolicy.for_agent(Permissions.coerce(permissions), agent, ROOT)
    return made


def decide(p: PermissionPolicy, tool: str, **arguments: object) -> str:
    return p.decide(TOOLS[tool], arguments).behavior


def test_default_mode_reads_freely_and_asks_before_changing() -> None:
    p = policy()
    assert decide(p, "Read", file_path="/work/project/a.py") == "allow"
    assert decide(p, "Grep", pattern="x") == "allow"
    assert decide(p, "Edit", file_path="/work/project/a.py") == "ask"
    assert decide(p, "Bash", command="git status && ls | wc -l") == "allow"  # reads only
    assert decide(p, "Bash", command="rm -rf build") == "ask"
    assert decide(p, "Bash", command="cat a > b") == "ask"  # a redirection writes
    assert decide(p, "Bash", command="echo $(rm x)") == "ask"
    assert decide(p, "KillShell", shell_id="bash_1") == "allow"


def test_each_mode() -> None:
    edit = {"file_path": "/work/project/a.py"}
    rm = {"command": "rm x"}
    expected = {
        "plan": ("allow", "deny", "deny", "allow"),
        "dontAsk": ("allow", "deny", "deny", "allow"),
        "default": ("allow", "ask", "ask", "allow"),
        "acceptEdits": ("allow", "allow", "ask", "allow"),
        "bypassPermissions": ("allow", "allow", "allow", "allow"),
    }
    for mode in MODES:
        p = policy(mode)
        got = (
            decide(p, "Read", file_path="/work/project/a.py"),
            decide(p, "Edit", **edit),
            decide(p, "Bash", **rm),
            decide(p, "Bash", command="git diff"),
        )
        assert got == expected[mode], mode


def test_plan_mode_explains_the_refusal() -> None:
    decision = policy("plan").decide(TOOLS["Edit"], {"file_path": "/work/project/a.py"})
    assert decision.behavior == "deny"
    assert "plan mode is read-only" in decision.reason


def test_bash_rules_match_every_command_of_a_line() -> None:
    p = policy(Permissions(allow=("Bash(python -m pytest:*)",), deny=("Bash(git push:*)",)))
    assert decide(p, "Bash", command="python -m pytest -q") == "allow"
    assert decide(p, "Bash", command="python -m pytest -q | tail -1") == "allow"  # tail reads
    assert decide(p, "Bash", command="python -m pytest && rm -rf /") == "ask"
    assert decide(p, "Bash", command="python -m pytestx") == "ask"  # a word boundary
    assert decide(p, "Bash", command="git status; git push origin main") == "deny"
    exact = policy(Permissions(allow=("Bash(make test)",)))
    assert decide(exact, "Bash", command="make test") == "allow"
    assert decide(exact, "Bash", command="make test2") == "ask"
    star = policy(Permissions(allow=("Bash(git * main)",)))
    assert decide(star, "Bash", command="git merge main") == "allow"


def test_path_rules_are_gitignore_patterns_from_the_workspace() -> None:
    p = policy(Permissions(allow=("Edit(docs/**)",), deny=("Read(./secrets/**)", "Edit(//etc/**)")))
    assert decide(p, "Edit", file_path="/work/project/docs/a/b.md") == "allow"
    assert decide(p, "Write", file_path="/work/project/docs/new.md") == "allow"
    assert decide(p, "Edit", file_path="/work/project/src/a.py") == "ask"
    assert decide(p, "Read", file_path="/work/project/secrets/key") == "deny"
    assert decide(p, "Grep", pattern="x", path="/work/project/secrets") == "deny"
    assert decide(p, "Read", file_path="/work/project/src/../secrets/key") == "deny"
    assert decide(p, "Write", file_path="/etc/passwd") == "deny"


def test_a_definition_only_tightens() -> None:
    # a definition cannot loosen the runtime's mode
    assert policy("default", permission_mode="bypassPermissions").mode == "default"
    assert policy("acceptEdits", permission_mode="plan").mode == "plan"
    # tools listed only with patterns are restricted to them; the runtime still decides
    restricted = policy("bypassPermissions", tools=("Read", "Bash(git diff:*)"))
    assert decide(restricted, "Bash", command="git diff HEAD") == "allow"
    denied = restricted.decide(TOOLS["Bash"], {"command": "rm -rf x"})
    assert denied.behavior == "deny" and "only as: Bash(git diff:*)" in denied.reason
    gated = policy("default", tools=("Bash(make:*)",))
    assert decide(gated, "Bash", command="make build") == "ask"  # matched; the runtime asks
    # disallowedTools patterns are deny rules
    p = policy("bypassPermissions", disallowed_tools=("Bash(rm:*)", "Edit(src/**)"))
    assert decide(p, "Bash", command="ls && rm x") == "deny"
    assert decide(p, "Edit", file_path="/work/project/src/a.py") == "deny"
    assert decide(p, "Edit", file_path="/work/project/docs/a.md") == "allow"


def test_ask_rules_and_user_tools() -> None:
    from subagents.tools.base import Tool

    def deploy(env: str) -> str:
        return env

    tool = Tool.from_function(deploy)
    p = policy(Permissions(ask=("deploy",)))
    assert p.decide(tool, {"env": "prod"}).behavior == "ask"
    assert policy().decide(tool, {"env": "prod"}).behavior == "allow"  # the owner gave it
    assert policy("plan").decide(tool, {"env": "prod"}).behavior == "deny"
    reader = Tool.from_function(deploy, read_only=True)
    assert policy("plan").decide(reader, {"env": "x"}).behavior == "allow"


def test_mcp_rules_name_a_server_or_a_tool() -> None:
    rule = Rule.parse("mcp__github")
    assert rule.names("mcp__github__create_issue")
    assert not rule.names("mcp__gitlab__x")
    assert Rule.parse("mcp__github__*").names("mcp__github__list")
    assert not Rule.parse("mcp__github__list").names("mcp__github__create")


def test_bad_configuration_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="permission mode 'yolo' is not one of plan"):
        Permissions(mode="yolo")  # type: ignore[arg-type]
    with pytest.raises(RuleError, match=r"Permissions.allow: permission rule 'Bash\(' is not"):
        Permissions(allow=("Bash(",))
    with pytest.raises(TypeError, match="must be a list of rules"):
        Permissions(allow="Bash")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="agent 'a': permissionMode: permission mode 'nope'"):
        policy(permission_mode="nope")


def test_command_lines_are_cut_outside_quotes() -> None:
    commands = parse('echo "a && b" && ls; pwd | wc').commands
    assert [[w.text for w in c.words] for c in commands] == [
        ["echo", "a && b"],
        ["ls"],
        ["pwd"],
        ["wc"],
    ]
    assert parse("echo 'unclosed").error is not None
    assert is_read_only("git log --oneline | head -5 2>/dev/null")
    assert not is_read_only("find . -name '*.pyc' -delete")
    assert not is_read_only("git commit -m x")
    assert not is_read_only("python script.py")


def test_an_unknown_permission_mode_is_an_error_of_the_definition() -> None:
    from subagents.definitions.validate import validate

    spec = AgentSpec(name="a", description="d", prompt="p", permission_mode="ask")
    (issue,) = validate(spec)
    assert issue.severity == "error"
    assert issue.reason == (
        "permissionMode must be one of default, acceptEdits, plan, dontAsk, bypassPermissions,"
        " got 'ask'"
    )


def test_one_definitions_policy_is_made_per_ceiling_and_kept_for_the_next_run(
    tmp_path: Path,
) -> None:
    """The policy of a definition's runs is made once per (permissions, definition,
    workspace, ceiling) and reused by its next runs (a fan-out's children); a run under
    another requester's grant gets its own, narrowed by that grant."""
    from subagents.messages import PermissionGrant

    permissions = Permissions(mode="acceptEdits", deny=("Bash(rm:*)",))
    spec = AgentSpec(name="worker", description="d", tools=("Read", "Edit", "Bash"))
    plain, _ = PermissionPolicy.for_agent(permissions, spec, tmp_path)
    again, _ = PermissionPolicy.for_agent(permissions, spec, tmp_path)
    assert again is plain and plain.mode == "acceptEdits"
    planning = (PermissionGrant(agent="lead", run_id="r1", mode="plan"),)
    narrowed, warnings = PermissionPolicy.for_agent(permissions, spec, tmp_path, planning)
    assert narrowed.mode == "plan" and warnings and "requester lead (r1)" in warnings[0]
    denying = (PermissionGrant(agent="lead", run_id="r2", disallowed_tools=("Edit",)),)
    limited, _ = PermissionPolicy.for_agent(permissions, spec, tmp_path, denying)
    assert limited.mode == "acceptEdits" and any(lim.forbids("Edit") for lim in limited.limits)
    assert not any(lim.forbids("Edit") for lim in plain.limits)
    again_narrowed, again_warnings = PermissionPolicy.for_agent(
        permissions, spec, tmp_path, planning
    )
    assert again_narrowed is narrowed and again_warnings == warnings
    other = AgentSpec(name="worker", description="d", tools=("Read",), permission_mode="plan")
    assert PermissionPolicy.for_agent(permissions, other, tmp_path)[0].mode == "plan"
