"""The bounded YAML reader: libyaml and pure-Python paths agree, and both refuse bombs."""

from __future__ import annotations

import time

import pytest
import yaml

from subagents.definitions import yamlsafe
from subagents.definitions.yamlsafe import MAX_DEPTH, YamlProblem, load_yaml

BOTH = pytest.mark.parametrize("use_libyaml", [True, False], ids=["libyaml", "pure"])


@BOTH
def test_ordinary_frontmatter(use_libyaml: bool):
    text = "name: a\ndescription: >-\n  folded\n  text\ntools: [Read, Grep]\nn: 3\nok: true\n"
    assert load_yaml(text, use_libyaml=use_libyaml) == {
        "name": "a",
        "description": "folded text",
        "tools": ["Read", "Grep"],
        "n": 3,
        "ok": True,
    }


@BOTH
@pytest.mark.parametrize(
    ("text", "reason", "line"),
    [
        ("a: &x [1]\nb: *x\n", "anchor '&x' refused", 1),
        ("a: 1\nb: *x\n", "alias '*x' refused", 2),
        ("a: " + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1) + "\n", "nesting deeper", 1),
        ("a: " + "[" * 100_000 + "\n", "nesting deeper", 1),
        ("a: [" + "1," * 25_000 + "1]\n", "YAML nodes", 1),
    ],
)
def test_refusals(use_libyaml: bool, text: str, reason: str, line: int):
    started = time.perf_counter()
    with pytest.raises(YamlProblem) as caught:
        load_yaml(text, use_libyaml=use_libyaml)
    assert time.perf_counter() - started < 2.0
    assert caught.value.refused and reason in caught.value.reason
    assert caught.value.line == line


@BOTH
def test_nesting_at_the_limit_is_fine(use_libyaml: bool):
    # the top mapping is one level, so MAX_DEPTH - 1 flow levels fit
    levels = MAX_DEPTH - 1
    value = load_yaml("a: " + "[" * levels + "]" * levels + "\n", use_libyaml=use_libyaml)
    depth = 0
    while value:
        value = value["a"] if isinstance(value, dict) else value[0]
        depth += 1
    assert depth == levels  # the mapping, then levels - 1 lists down to the innermost []


@BOTH
def test_invalid_yaml_is_not_a_refusal(use_libyaml: bool):
    with pytest.raises(YamlProblem) as caught:
        load_yaml("description: a: b\n", use_libyaml=use_libyaml)
    assert not caught.value.refused and caught.value.line == 1
    assert caught.value.reason.startswith("invalid YAML: mapping values are not allowed")
    assert caught.value.reason.endswith("(column 15)")


@pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML here was built without libyaml")
def test_the_libyaml_path_parses_with_libyaml_and_composes_with_the_checks():
    """One parse per document: libyaml's parser feeds the checking composer directly (it once
    ran a checking pass over libyaml's events, then parsed again to load)."""
    from yaml.cyaml import CParser  # type: ignore[attr-defined]

    loader = yamlsafe._loader("a: 1\n", use_libyaml=True)
    try:
        assert isinstance(loader, CParser)
        assert isinstance(loader, yamlsafe._BoundedComposer)
        assert loader.get_single_data() == {"a": 1}
    finally:
        loader.dispose()
    assert not isinstance(yamlsafe._loader("a: 1\n", use_libyaml=False), CParser)
