"""Markdown definitions: every field's accepted shapes, and precise errors for the rest."""

from __future__ import annotations

import pytest

from subagents.definitions import AgentSpec, DefinitionError, Level, parse_markdown
from subagents.definitions.parse import read_markdown


def md(header: str, body: str = "You are a helper.") -> str:
    return f"---\n{header.strip()}\n---\n\n{body}\n"


def test_minimal_definition_body_is_the_prompt():
    spec = parse_markdown(md("name: helper\ndescription: Helps."), source="a/helper.md")
    assert spec == AgentSpec(
        name="helper",
        description="Helps.",
        prompt="You are a helper.",
        source="a/helper.md",
        level=Level.DIRS,
    )
    assert spec.tools is None and spec.allows_tool("Anything")


@pytest.mark.parametrize(
    ("line", "tools"),
    [
        ("tools: Read, Grep,Glob", ("Read", "Grep", "Glob")),
        ("tools: [Read, Grep]", ("Read", "Grep")),
        ("tools:\n  - Read\n  - Bash(git diff:*)", ("Read", "Bash(git diff:*)")),
        ("tools: []", ()),
        ("tools: Read, Read", ("Read",)),
        ("", None),
    ],
)
def test_tools_shapes(line: str, tools: tuple[str, ...] | None):
    spec = parse_markdown(md(f"name: a\ndescription: d\n{line}"))
    assert spec.tools == tools


@pytest.mark.parametrize(
    "model", ["inherit", "sonnet", "opus", "haiku", "fable", "claude-sonnet-4-20250514", "x-9"]
)
def test_model_is_kept_as_written(model: str):
    assert parse_markdown(md(f"name: a\ndescription: d\nmodel: {model}")).model == model


def test_camel_snake_and_kebab_keys_are_the_same_field():
    for key in ("maxTurns", "max_turns", "max-turns"):
        assert parse_markdown(md(f"name: a\ndescription: d\n{key}: 7")).max_turns == 7


def test_both_spellings_with_different_values_is_an_error_naming_both():
    with pytest.raises(DefinitionError) as caught:
        parse_markdown(md("name: a\ndescription: d\nmaxTurns: 3\nmax_turns: 4"), source="f.md")
    assert "'maxTurns'" in str(caught.value) and "'max_turns'" in str(caught.value)
    assert caught.value.file == "f.md" and caught.value.line == 5


def test_every_known_field():
    header = """
name: full
description: All fields.
tools: Read, Task
disallowedTools: [Bash]
model: opus
skills: [pdf, xlsx]
maxTurns: 12
color: blue
permissionMode: acceptEdits
mcpServers: {github: {command: gh}}
hooks: {PreToolUse: []}
memory: project
background: true
effort: high
initialPrompt: Start here.
type: reviewer
tier: 2
scope: backend
capabilities: {review: 0.9, test: 0.5}
priority: high
keySubAgents: explore, code
extends: base
maxDepth: 2
maxChildren: 4
timeout: 5m
tokenBudget: 20000
restart: transient
team: core
"""
    spec = parse_markdown(md(header), category="x/y", level=Level.PROJECT)
    assert spec.tools == ("Read", "Task") and spec.disallowed_tools == ("Bash",)
    assert not spec.allows_tool("Bash") and spec.allows_tool("Read")
    assert spec.skills == ("pdf", "xlsx") and spec.max_turns == 12
    assert (spec.color, spec.permission_mode, spec.memory) == ("blue", "acceptEdits", "project")
    assert spec.mcp_servers == {"github": {"command": "gh"}} and spec.hooks == {"PreToolUse": []}
    assert spec.background is True and spec.effort == "high"
    assert spec.initial_prompt == "Start here."
    assert (spec.type, spec.tier, spec.scope) == ("reviewer", 2, "backend")
    assert spec.capabilities == {"review": 0.9, "test": 0.5}
    assert spec.capability_names == ("review", "test")
    assert spec.priority == "high" and spec.key_sub_agents == ("explore", "code")
    assert spec.extends == "base"
    assert (spec.max_depth, spec.max_children, spec.timeout, spec.token_budget) == (
        2,
        4,
        300.0,
        20000,
    )
    assert spec.restart == "transient"
    assert spec.metadata == {"team": "core"}
    assert (spec.category, spec.level) == ("x/y", Level.PROJECT)


def test_capabilities_as_a_list():
    spec = parse_markdown(md("name: a\ndescription: d\ncapabilities: [search, read]"))
    assert spec.capabilities == ("search", "read") and spec.capability_names == ("search", "read")


def test_unknown_keys_are_kept_in_metadata_with_their_values():
    spec = parse_markdown(
        md("name: a\ndescription: d\nversion: 1.2\ntags: [x, y]\ncategory: web\nprompt: hi")
    )
    assert spec.metadata == {"version": 1.2, "tags": ["x", "y"], "category": "web", "prompt": "hi"}
    assert spec.category == ""  # the folder decides the category, not a frontmatter key


@pytest.mark.parametrize(
    ("line", "field", "value"),
    [
        ("tier: 4", "tier", "4"),
        ("tier: -1", "tier", "-1"),
        ("maxTurns: many", "maxTurns", "'many'"),
        ("timeout: soon", "timeout", "'soon'"),
        ("timeout: 7200", "timeout", "7200"),
        ("maxDepth: 0", "maxDepth", "0"),
        ("maxChildren: -2", "maxChildren", "-2"),
        ("tokenBudget: 0", "tokenBudget", "0"),
        ("restart: permanent", "restart", "'permanent'"),
        ("background: maybe", "background", "'maybe'"),
        ("tools: {Read: true}", "tools", "{'Read': True}"),
        ("tools: [Read, 3]", "tools", "3"),
        ("description: [a, b]", "description", "['a', 'b']"),
        ("topics: reviews, has space", "topics", "'has space'"),
    ],
)
def test_bad_values_name_the_field_the_value_and_the_line(line: str, field: str, value: str):
    text = (
        md(f"name: a\ndescription: d\n{line}")
        if "description" not in line
        else md(f"name: a\n{line}")
    )
    with pytest.raises(DefinitionError) as caught:
        parse_markdown(text, source="agents/a.md")
    error = caught.value
    assert field in error.reason and value in error.reason, error.reason
    assert error.file == "agents/a.md"
    expected_line = text.splitlines().index(line) + 1
    assert error.line == expected_line
    assert str(error).startswith(f"agents/a.md:{expected_line}: ")


@pytest.mark.parametrize(
    ("header", "reason", "line"),
    [
        ("description: d", "missing required field 'name'", 2),
        ("name: a", "missing required field 'description'", 2),
        ("name: a\ndescription: ''", "'description' is empty", 3),
    ],
)
def test_required_fields(header: str, reason: str, line: int):
    with pytest.raises(DefinitionError, match=reason) as caught:
        parse_markdown(md(header), source="x.md")
    assert caught.value.line == line


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("../etc/passwd", "name '../etc/passwd' contains a '..' path component"),
        ("a/../b", "contains a '..' path component"),
        ("a\\b", "contains a backslash"),
        ("/etc/passwd", "starts with '/', like a path"),
        (".hidden", "starts with '.', like a path"),
        ('"bell\\x07"', "control or invisible character U+0007"),
        ('"zero\\u200bwidth"', "control or invisible character U+200B"),
        ('"no\\u00a0break"', "control or invisible character U+00A0"),
        ('" padded"', "starts or ends with whitespace"),
        ('"  "', "name is empty"),
        ("x" * 129, "129 characters"),
    ],
)
def test_path_like_and_invisible_names_are_errors(name: str, fragment: str):
    with pytest.raises(DefinitionError) as caught:
        parse_markdown(md(f"name: {name}\ndescription: d"))
    assert fragment in caught.value.reason
    assert caught.value.line == 2


@pytest.mark.parametrize(
    ("written", "name", "hint"),
    [
        ("Python Testing Expert", "Python Testing Expert", "python-testing-expert"),
        ("Python DevOps/CI-CD Expert", "Python DevOps/CI-CD Expert", "python-devops-ci-cd-expert"),
        ("-leading", "-leading", "leading"),
        ("a/b", "a/b", "a-b"),
        ("x" * 40 + " Y", "x" * 40 + " Y", "x" * 40 + "-y"),
        ("'\u4ee3\u7801'", "\u4ee3\u7801", None),
    ],
)
def test_other_names_load_as_written_with_a_warning(written: str, name: str, hint: str | None):
    spec, issues = read_markdown(md(f"name: {written}\ndescription: d"), source="x.md")
    assert spec is not None and spec.name == name
    [warning] = issues
    assert (warning.severity, warning.line, warning.name) == ("warning", 2, name)
    assert warning.reason.startswith(f"name {name!r} is not kebab-case: it loads as written")
    assert "spawn and mail must use it exactly" in warning.reason
    if hint is None:
        assert "such as" not in warning.reason
    else:
        assert warning.reason.endswith(f"such as {hint!r}")
    assert parse_markdown(md(f"name: {written}\ndescription: d")).name == name


def test_kebab_and_identifier_names_get_no_warning():
    for name in ("code-reviewer", "sqs_v2", "Agent.1", "2048", "x" * 128):
        spec, issues = read_markdown(md(f"name: {name}\ndescription: d"))
        assert spec is not None and spec.name == name and issues == []


def test_numeric_name_and_timeouts_in_other_units():
    spec = parse_markdown(md("name: 2048\ndescription: d\ntimeout: '90s'"))
    assert spec.name == "2048" and spec.timeout == 90.0
    assert parse_markdown(md("name: a\ndescription: d\ntimeout: 1h")).timeout == 3600.0
    assert parse_markdown(md("name: a\ndescription: d\ntimeout: 2.5")).timeout == 2.5


def test_crlf_and_bom_are_accepted():
    text = "\ufeff---\r\nname: a\r\ndescription: d\r\n---\r\nBody line\r\n"
    spec = parse_markdown(text)
    assert (spec.name, spec.description, spec.prompt) == ("a", "d", "Body line")


def test_horizontal_rules_in_the_body_stay_in_the_prompt():
    spec = parse_markdown(md("name: a\ndescription: d", "Intro\n\n---\n\nMore"))
    assert spec.prompt == "Intro\n\n---\n\nMore"


def test_empty_body_is_allowed_by_the_parser():
    assert parse_markdown(md("name: a\ndescription: d", "")).prompt == ""


def test_topics_are_a_list_of_topic_names():
    spec = parse_markdown(md("name: a\ndescription: d\ntopics: reviews, build/linux"))
    assert spec.topics == ("reviews", "build/linux")
    assert parse_markdown(md("name: a\ndescription: d")).topics == ()
