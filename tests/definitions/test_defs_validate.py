"""Validation of specs however they were built (files, dicts, or AgentSpec in code)."""

from __future__ import annotations

import pytest

from subagents.definitions import KNOWN_TOOLS, AgentSpec, validate


def spec(**fields: object) -> AgentSpec:
    base: dict[str, object] = {"name": "a", "description": "d", "prompt": "p", "source": "a.md"}
    base.update(fields)
    return AgentSpec(**base)  # type: ignore[arg-type]


def test_a_good_spec_has_no_issues():
    assert validate(spec(tools=("Read", "Bash(git status)", "mcp__github__issues"))) == []


def test_known_tools_include_claude_code_and_runtime_tools():
    for tool in ("Read", "Write", "Edit", "MultiEdit", "Bash", "Grep", "Glob", "LS", "WebFetch",
                 "WebSearch", "Task", "TodoWrite", "NotebookEdit", "spawn_subagent",
                 "send_message", "check_mailbox", "wait_for_message", "stop_subagent",
                 "load_skill"):  # fmt: skip
        assert tool in KNOWN_TOOLS


def test_unknown_tool_is_a_warning_with_a_suggestion_and_an_error_when_strict():
    issues = validate(spec(tools=("Reed",), disallowed_tools=("Frobnicate",)))
    assert [(i.severity, i.reason) for i in issues] == [
        ("warning", "tools: unknown tool 'Reed' (did you mean 'Read'?)"),
        ("warning", "disallowedTools: unknown tool 'Frobnicate'"),
    ]
    assert all(i.file == "a.md" and i.name == "a" for i in issues)
    strict = validate(spec(tools=("Reed",)), strict=True)
    assert [i.severity for i in strict] == ["error"]


def test_extra_tools_and_a_custom_known_set():
    assert validate(spec(tools=("my_tool",)), extra_tools=("my_tool",)) == []
    issues = validate(spec(tools=("Read",)), known_tools=frozenset({"Grep"}))
    assert [i.reason for i in issues] == ["tools: unknown tool 'Read'"]


def test_empty_prompt_is_a_warning():
    issues = validate(spec(prompt="  \n"))
    assert [(i.severity, i.reason) for i in issues] == [
        ("warning", "the system prompt (the markdown body) is empty")
    ]


def test_an_empty_prompt_that_extends_a_parent_is_not_warned():
    """A definition that ``extends`` another takes its parent's prompt when it has none
    (agents/code's fixer, planner, scout): no warning about an empty body."""
    assert validate(spec(prompt="", extends="explore")) == []


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"name": ""}, "name is empty"),
        ({"name": "a/../b"}, "name 'a/../b' contains a '..' path component"),
        ({"description": " "}, "missing required field 'description'"),
        ({"max_depth": 0}, "maxDepth must be a positive whole number, got 0"),
        ({"max_children": -1}, "maxChildren must be a positive whole number, got -1"),
        ({"token_budget": 0}, "tokenBudget"),
        ({"max_turns": 0}, "maxTurns"),
        ({"timeout": 0.0}, "timeout must be more than 0 and at most 3600 s, got 0"),
        ({"timeout": 3600.5}, "got 3600.5"),
        ({"tier": 4}, "tier must be 0, 1, 2 or 3, got 4"),
        ({"restart": "permanent"}, "restart must be 'temporary' or 'transient'"),
        ({"extends": "a"}, "extends names the definition itself"),
    ],
)
def test_errors(fields: dict[str, object], fragment: str):
    issues = validate(spec(**fields))
    assert len(issues) == 1, issues
    assert issues[0].severity == "error" and fragment in issues[0].reason


def test_limits_at_their_bounds_are_fine():
    assert validate(spec(timeout=3600.0, tier=0, max_depth=1, max_children=1)) == []
    assert validate(spec(tier=3, restart="transient")) == []


def test_a_name_that_is_not_kebab_case_is_a_warning_that_suggests_one():
    issues = validate(spec(name="Python DevOps/CI-CD Expert"))
    assert [(i.severity, i.name) for i in issues] == [("warning", "Python DevOps/CI-CD Expert")]
    assert issues[0].reason == (
        "name 'Python DevOps/CI-CD Expert' is not kebab-case: it loads as written, and spawn and "
        "mail must use it exactly; consider a kebab-case name such as 'python-devops-ci-cd-expert'"
    )


def test_spawn_settings_that_cannot_be_read_are_errors_naming_the_key():
    issues = validate(spec(metadata={"allowSelfSpawn": "maybe", "allowedChildTypes": 3}))
    assert [(i.severity, i.reason) for i in issues] == [
        ("error", "allowSelfSpawn must be true or false, got 'maybe'"),
        ("error", "allowedChildTypes must be a list of types or a comma-separated string, got 3"),
    ]
    assert validate(spec(metadata={"allow_self_spawn": True, "allowedChildTypes": "a, b"})) == []
