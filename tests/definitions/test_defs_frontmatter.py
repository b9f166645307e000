"""The tolerant frontmatter reader: files strict YAML rejects still load as their authors meant."""

from __future__ import annotations

import pytest

from subagents.definitions import DefinitionError, parse_markdown
from subagents.definitions.frontmatter import parse


def test_unquoted_colon_in_a_one_line_description():
    text = (
        "---\nname: rails\ndescription: Rails expert. Examples: <example>Context: x "
        "user: y</example>\ntools: Read, Grep\nmodel: opus\n---\nBody\n"
    )
    header = parse(text)
    assert header.lenient
    assert header.data == {
        "name": "rails",
        "description": "Rails expert. Examples: <example>Context: x user: y</example>",
        "tools": "Read, Grep",
        "model": "opus",
    }
    assert header.notes[0].line == 3 and "not strict YAML" in header.notes[0].reason
    assert any("'description' read as plain text" in n.reason for n in header.notes)


def test_lenient_reader_keeps_block_scalars_lists_and_continuations():
    text = """---
name: multi
description: One: two
  continued here
notes: |
  line one
  line two
summary: >-
  folded
  text

  second paragraph
tools:
- Read
- Grep
count: 3
---
Body
"""
    header = parse(text)
    assert header.lenient
    assert header.data["description"] == "One: two continued here"
    assert header.data["notes"] == "line one\nline two\n"
    assert header.data["summary"] == "folded text\nsecond paragraph"
    assert header.data["tools"] == ["Read", "Grep"]
    assert header.data["count"] == 3
    assert header.body.strip() == "Body"


def test_lenient_reader_on_text_fallbacks_for_block_and_list_chunks():
    # chunks YAML rejects even alone are read by hand
    text = "---\nname: a\ndescription: x: y\nbad: |\n  keep: this\n   and: that\n---\n"
    header = parse(text)
    assert header.data["bad"] == "keep: this\n and: that\n"


def test_a_dashed_line_closes_the_frontmatter():
    text = "---\n\nname: fd\ndescription: d\ntools: LS, Read\n" + "-" * 56 + "\n\n# Title\n"
    header = parse(text)
    assert header.data == {"name": "fd", "description": "d", "tools": "LS, Read"}
    assert header.body.strip() == "# Title"
    assert [n.line for n in header.notes] == [6]
    assert "56 dashes" in header.notes[0].reason


def test_frontmatter_indented_after_a_blank_line():
    text = (
        "\n    ---\n    name: sqs\n    description: Queues.\n    model: haiku\n    ---\n\n## Do\n"
    )
    header = parse(text)
    assert header.data == {"name": "sqs", "description": "Queues.", "model": "haiku"}
    assert header.body.strip() == "## Do"
    assert header.body_line == 7
    reasons = " ".join(n.reason for n in header.notes)
    assert "blank line" in reasons and "indented by 4" in reasons


def test_an_indented_dash_line_inside_a_block_scalar_does_not_close():
    text = "---\nname: a\ndescription: |\n  text\n  ---\n  more\n---\nBody\n"
    header = parse(text)
    assert header.data["description"] == "text\n---\nmore\n"
    assert not header.lenient


def test_key_lines_point_at_the_file_lines():
    header = parse("\n---\nname: a\ndescription: d\nmax_turns: 3\n---\nx\n")
    assert header.key_lines == {"name": 3, "description": 4, "max_turns": 5}
    assert header.header_line == 3 and header.body_line == 7


@pytest.mark.parametrize(
    ("text", "reason", "line"),
    [
        ("", "file is empty", 1),
        ("# Just markdown\n", "no frontmatter", 1),
        ("\n\nname: a\n", "no frontmatter", 3),
        ("---\nname: a\ndescription: d\n", "never closed", 1),
        ("---\n- a\n- b\n---\n", "mapping", 2),
    ],
)
def test_unreadable_headers_raise_with_a_line(text: str, reason: str, line: int):
    with pytest.raises(DefinitionError, match=reason) as caught:
        parse(text)
    assert caught.value.line == line


def test_a_line_that_is_no_key_is_noted_and_skipped():
    text = "---\nname: a\njust words: here: there\ndescription: d\nloose words\n---\nB\n"
    spec = parse_markdown(text)
    assert (spec.name, spec.description) == ("a", "d")
    assert spec.metadata == {}
    header = parse(text)
    ignored = [n.line for n in header.notes if "line ignored" in n.reason]
    assert ignored == [3, 5]


def test_claude_code_agent_entries_keep_their_commas_in_tools():
    text = (
        "---\nname: lead\ndescription: d\n"
        "tools: Read, Agent(reviewer, tester), Bash(git diff:*)\n"
        'disallowedTools: ["Task(writer, editor)"]\n---\nbody\n'
    )
    spec = parse_markdown(text)
    assert spec.tools == ("Read", "Agent(reviewer, tester)", "Bash(git diff:*)")
    assert spec.disallowed_tools == ("Task(writer, editor)",)
