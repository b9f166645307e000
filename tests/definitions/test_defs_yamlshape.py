"""The raw-text shape check: refuses what is too deep or too big before any parser reads it,
with our message, the same on every PyYAML; and never counts more than the composer builds.

(PyYAML 6.0.4's libyaml 0.2.6 stops at 1,000 nesting levels with an error of its own, read
ahead of our composer: without this check, 1,500 ``[`` were "invalid YAML" on the libyaml
path, so a definition holding them loaded leniently, while 21 were refused.)
"""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from subagents.definitions import DefinitionError, parse_markdown
from subagents.definitions.yamlsafe import MAX_DEPTH, MAX_NODES, YamlProblem, load_yaml
from subagents.definitions.yamlshape import ShapeRefused, check_shape, measure

BOTH = pytest.mark.parametrize("use_libyaml", [True, False], ids=["libyaml", "pure"])
DEEP = f"nesting deeper than {MAX_DEPTH} levels"


def flow(levels: int, closed: bool = True) -> str:
    return "a: " + "[" * levels + ("]" * levels if closed else "") + "\n"


REFUSED = [
    (flow(MAX_DEPTH), DEEP, 1),  # the mapping is a level: its 20th [ is the 21st
    (flow(1_000), DEEP, 1),  # libyaml 0.2.6's own limit
    (flow(1_500), DEEP, 1),
    (flow(200_000, closed=False), DEEP, 1),
    ("a: " + "{b: " * 1_500 + "1" + "}" * 1_500 + "\n", DEEP, 1),
    # one level a line: the line of the 21st level is named
    ("a: [\n" + "  [\n" * 1_500 + "]" * 1_501 + "\n", DEEP, 20),
    # inside block nesting, which counts too
    ("x:\n  y:\n    z: " + "[" * 1_500 + "]" * 1_500 + "\n", DEEP, 3),
    ("- " * 1_500 + "x\n", DEEP, 1),  # nested block sequences on one line
    ("a: [" + "1," * (MAX_NODES + 10) + "1]\n", f"more than {MAX_NODES} YAML nodes", 1),
]


@BOTH
@pytest.mark.parametrize(("text", "reason", "line"), REFUSED)
def test_too_deep_or_too_big_is_refused_with_our_message(
    use_libyaml: bool, text: str, reason: str, line: int
):
    with pytest.raises(YamlProblem) as caught:
        load_yaml(text, use_libyaml=use_libyaml)
    assert caught.value.refused
    assert (caught.value.reason, caught.value.line) == (reason, line)


@pytest.mark.parametrize(("text", "reason", "line"), REFUSED)
def test_the_check_needs_no_parser(text: str, reason: str, line: int):
    with pytest.raises(ShapeRefused) as caught:
        check_shape(text)
    assert (caught.value.reason, caught.value.line) == (reason, line)


@pytest.mark.parametrize("levels", [21, 1_500, 200_000])
def test_a_deep_definition_is_an_error_never_read_leniently(levels: int):
    text = f"---\nname: deep\ndescription: d\nx: {'[' * levels}{']' * levels}\n---\nB\n"
    with pytest.raises(DefinitionError) as caught:
        parse_markdown(text, source="deep.md")
    assert (caught.value.reason, caught.value.line) == (DEEP, 4)


# Brackets, colons and dashes that are text: none of them counts.
TEXT_NOT_STRUCTURE = [
    "description: Use [this] when: you need it. Examples: user: hi assistant: ok\n",
    "description: " + "a: " * 40 + "end\n",  # colons in a value: text (or invalid YAML)
    "d: " + '"' + "[" * 50 + '"\n',
    "d: '" + "{" * 50 + "''" + "[" * 50 + "'\n",
    'd: "multi\n  line [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n  \\" [[[[[[[[[[[[[[[[[[[[[["\n',
    "d: |\n  " + "[" * 50 + "\n  text\ne: >-\n   " + "{" * 50 + "\nf: 1\n",
    "d: a plain value\n  continued " + "[" * 50 + "\n  and on\nname: x\n",
    "d: value # a comment " + "[" * 50 + "\n# " + "[" * 50 + "\n",
    "tools: [Read, 'Grep]', \"Glob]\", don't, x#y]\n" + "n: " + "[" * 10 + "]" * 10 + "\n",
    "u: http://example.com/a[1]?b={c}#d\n",
    "- " + "a - " * 40 + "\n",
    "a:\n" + "".join(f"{'  ' * i}- k{i}: [x]\n" for i in range(1, 9)),
]


@pytest.mark.parametrize("text", TEXT_NOT_STRUCTURE)
def test_brackets_in_text_are_not_counted(text: str):
    check_shape(text)  # no refusal
    try:
        expected = yaml.safe_load(text)
    except yaml.YAMLError:
        with pytest.raises(YamlProblem) as caught:
            load_yaml(text)
        assert not caught.value.refused  # invalid YAML, read leniently by frontmatter
    else:
        assert load_yaml(text) == expected


def _composed(text: str) -> tuple[int, int]:
    """The composer's deepest collection level and node count for ``text``."""
    node = yaml.compose(text, Loader=yaml.SafeLoader)

    def walk(node: yaml.Node | None, depth: int) -> tuple[int, int]:
        if node is None or isinstance(node, yaml.ScalarNode):
            return 0, 0 if node is None else 1
        parts = node.value if isinstance(node, yaml.SequenceNode) else sum(node.value, ())
        deepest, count = depth, 1
        for part in parts:
            part_depth, part_count = walk(part, depth + 1)
            deepest, count = max(deepest, part_depth), count + part_count
        return deepest, count

    return walk(node, 1)


SCALARS = st.one_of(
    st.text(alphabet="ab [{]}:,#-'\"\n|>&*!?", max_size=12),
    st.integers(),
    st.booleans(),
    st.none(),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.text(alphabet="abk [:#'\"-", min_size=1, max_size=6), inner, max_size=4
        )
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(value=VALUES, style=st.sampled_from([False, True, None]), width=st.sampled_from([20, 80]))
def test_the_scan_never_counts_more_than_the_composer_builds(
    value: object, style: bool | None, width: int
):
    text = yaml.safe_dump(value, default_flow_style=style, width=width, allow_unicode=True)
    depth, nodes = _composed(text)
    shape = measure(text)
    assert shape.depth <= depth and shape.nodes <= nodes, text


def test_the_scan_counts_flow_collections_exactly():
    text = "a: {b: [1, [2, {c: d}]], e: [f, g]}\nh: [i]\n"
    depth, nodes = _composed(text)
    assert measure(text) == (depth, nodes)


def test_real_frontmatter_is_never_counted_over():
    """Every header of the synthetic messy corpus, and of the public one where it is here:
    the scan counts no more than the composer (invalid ones: nothing near the limits)."""
    from pathlib import Path

    from corpora import definition_files, public_corpus
    from subagents.definitions.frontmatter import split

    messy = Path(__file__).resolve().parents[1] / "corpus" / "messy"
    public = public_corpus()
    files = [*messy.rglob("*.md"), *(definition_files(public) if public else [])]
    compared = 0
    for path in files:
        try:
            header = "\n".join(split(path.read_text(encoding="utf-8"))[0]) + "\n"
        except (DefinitionError, UnicodeDecodeError):
            continue
        shape = measure(header)
        try:
            depth, nodes = _composed(header)
        except yaml.YAMLError:
            assert shape.depth <= 3, path  # read leniently, never refused
            continue
        assert shape.depth <= depth and shape.nodes <= nodes, path
        compared += 1
    assert compared >= 10


@settings(max_examples=500, deadline=None)
@given(text=st.text(alphabet="ab:- \t\n[]{},#'\"|>!&*?%.\\\r\ufeff", max_size=80))
def test_any_text_is_scanned_without_an_error_of_its_own(text: str):
    """Whatever the text, the scan counts it or refuses it; it never fails otherwise (it
    runs before the parser, on every header)."""
    shape = measure(text)
    assert shape.depth <= len(text) and shape.nodes <= len(text)
    try:
        check_shape(text)
    except ShapeRefused:
        assert shape.depth > MAX_DEPTH
