"""Definitions given as dicts and JSON: one object, a list, and the Agent SDK `--agents` shape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from subagents.definitions import DefinitionError, Level, load_file, parse_json, parse_mapping
from subagents.definitions.parse import read_json


def test_mapping_with_snake_case_keys_and_a_prompt_argument():
    spec = parse_mapping(
        {"name": "a", "description": "d", "max_turns": 3, "key_sub_agents": ["b"], "x": 1},
        prompt="Be brief.",
    )
    assert (spec.max_turns, spec.key_sub_agents, spec.prompt) == (3, ("b",), "Be brief.")
    assert spec.metadata == {"x": 1} and spec.level == Level.CODE and spec.source is None


def test_mapping_prompt_key_and_explicit_metadata_are_kept():
    spec = parse_mapping(
        {"name": "a", "description": "d", "prompt": "P", "metadata": {"owner": "me"}, "t": 2}
    )
    assert spec.prompt == "P" and spec.metadata == {"owner": "me", "t": 2}
    spec = parse_mapping({"name": "a", "description": "d", "prompt": "from dict"}, prompt="arg")
    assert spec.prompt == "arg" and spec.metadata == {"prompt": "from dict"}


def test_mapping_errors_name_the_field():
    with pytest.raises(DefinitionError, match="maxDepth must be a positive whole number, got -1"):
        parse_mapping({"name": "a", "description": "d", "maxDepth": -1})
    with pytest.raises(DefinitionError, match="a definition must be a mapping, not a list"):
        parse_mapping(["name"])  # type: ignore[arg-type]
    with pytest.raises(DefinitionError, match="prompt must be text"):
        parse_mapping({"name": "a", "description": "d", "prompt": 3})


def test_json_single_object_and_list():
    one = parse_json('{"name": "a", "description": "d", "prompt": "P", "tools": ["Read"]}')
    assert [(s.name, s.prompt, s.tools) for s in one] == [("a", "P", ("Read",))]
    many = parse_json(b'[{"name": "a", "description": "d"}, {"name": "b", "description": "e"}]')
    assert [s.name for s in many] == ["a", "b"]


def test_json_agents_sdk_shape():
    data = {
        "code-reviewer": {
            "description": "Reviews code.",
            "prompt": "You review code.",
            "tools": ["Read", "Grep"],
            "model": "sonnet",
        },
        "tester": {"description": "Runs tests.", "prompt": "You test."},
    }
    specs = parse_json(json.dumps(data), source="agents.json")
    assert [(s.name, s.description, s.prompt, s.tools, s.model) for s in specs] == [
        ("code-reviewer", "Reviews code.", "You review code.", ("Read", "Grep"), "sonnet"),
        ("tester", "Runs tests.", "You test.", None, None),
    ]
    assert all(s.source == "agents.json" and s.level == Level.CODE for s in specs)


@pytest.mark.parametrize(
    ("text", "fragment", "line"),
    [
        ('{"name": "a",\n "description": }', "invalid JSON", 2),
        ("3", "must be an object or a list", None),
        ('{"a": 3}', "agent 'a': expected an object", None),
        ('{"a": {"name": "b", "description": "d"}}', "its 'name' field says 'b'", None),
        ('[{"name": "ok", "description": "d"}, {"name": "x"}]', "item 1: missing required", None),
        ('[{"name": "ok", "description": "d"}, 5]', "item 1: must be an object", None),
    ],
)
def test_json_errors(text: str, fragment: str, line: int | None):
    with pytest.raises(DefinitionError) as caught:
        parse_json(text, source="a.json")
    assert fragment in caught.value.reason and caught.value.file == "a.json"
    assert caught.value.line == line


def test_a_json_file_loads_its_good_entries_and_reports_the_bad_one(tmp_path: Path):
    path = tmp_path / "team.json"
    path.write_text(
        json.dumps(
            {
                "good": {"description": "d", "prompt": "p"},
                "bad": {"description": "d", "prompt": "p", "tier": 9},
            }
        )
    )
    specs, issues = load_file(path)
    assert [s.name for s in specs] == ["good"]
    assert len(issues) == 1 and issues[0].name == "bad" and "tier" in issues[0].reason
    assert issues[0].severity == "error" and issues[0].file == str(path)


@pytest.mark.parametrize("depth", [21, 1000, 100_000])
def test_json_nesting_is_bounded_like_yamls(tmp_path: Path, depth: int):
    doc = '{"name": "deep", "description": "d", "x": ' + "[" * depth + "]" * depth + "}"
    with pytest.raises(DefinitionError, match="nesting deeper than 20 levels"):
        parse_json(doc)
    path = tmp_path / "deep.json"
    path.write_text(doc)
    specs, issues = load_file(path)  # a clear error for that file, not an "internal error"
    assert specs == []
    assert [i.reason for i in issues] == ["JSON document refused: nesting deeper than 20 levels"]
    shallow = '{"name": "ok", "description": "d", "x": ' + "[" * 18 + "]" * 18 + "}"
    assert [s.name for s in parse_json(shallow)] == ["ok"]


def test_json_reports_every_bad_field_of_an_entry():
    _, issues = read_json(
        '[{"name": "a", "description": "d", "prompt": "p", "onFailure": "retyr",'
        ' "maxRestarts": "x"}]'
    )
    assert [i.reason for i in issues] == [
        "item 0: onFailure must be one of report, retry, fail_parent, got 'retyr' (did you"
        " mean 'retry'?)",
        "item 0: maxRestarts must be a whole number, got 'x'",
    ]
