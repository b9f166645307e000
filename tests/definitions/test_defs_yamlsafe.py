"""The bounded YAML reader: libyaml and pure-Python paths agree, and both refuse bombs."""

from __future__ import annotations

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
    # No wall-clock bound (the machine is shared): refused while composing means before
    # anything was expanded, and the depth and node counters stop the work early.
    with pytest.raises(YamlProblem) as caught:
        load_yaml(text, use_libyaml=use_libyaml)
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
    # ours: "invalid YAML: ", the line, not a refusal; the rest is the parser's own wording,
    # which differs between parsers and releases, so it is not asserted on
    assert not caught.value.refused and caught.value.line == 1
    assert caught.value.reason.startswith("invalid YAML: ")


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


SAME_EITHER_WAY = [
    "name: a\ndescription: Use it **proactively** & often\n",  # '*' and '&' in plain text
    "a: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "\n",
    "a: " + "[" * (MAX_DEPTH - 2) + "1" + "]" * (MAX_DEPTH - 2) + "\n",  # a scalar at the limit
    "a: " + "[" * (MAX_DEPTH - 1) + "1" + "]" * (MAX_DEPTH - 1) + "\n",  # one level too deep
    "a: " + "[" * 8000 + "]" * 8000 + "\n",  # deep, within the fast path's size
    "a: {b: {c: [1, 2, {d: e}]}}\nf: [g, h]\n",
    "s: !!set {x, y}\no: !!omap [{k: 1}, {j: 2}]\nb: !!binary aGk=\nt: 2024-01-02\n",
    "base: {x: 1}\nmerged:\n  <<: {x: 2, y: 3}\n  y: 4\n",  # merge keys: checked path
    "[1, 2]: no\n",
    "a: b\n  c: d\n",
    "",
    "just text\n",
    "- - - - x\n",
    # the fast path builds str/map/seq itself: every other shape must come out as safe_load's
    "=: equals\nx: 1\n",  # an '=' key (the value tag) becomes the string '='
    "a: 1\na: 2\n",  # a duplicate key: the last wins
    "~: null key\n1: int key\n2024-01-02: date key\ntrue: bool key\n1.5: float key\n",
    "f: [.inf, -.Inf, .nan, 1e3, 0x1f, 0o17, +12, 1_000]\n",
    "q: !!str 12\nr: !!int '3'\ns: !!float '2'\nn: !!null ''\n",
    "m: !!map {a: b}\nl: !!seq [c, d]\n",
    "t: 2001-12-14t21:59:43.10-05:00\n",
    "p: !!pairs [{a: 1}, {a: 2}]\n",
    "? [a, b]\n: unhashable key\n",
    "? {a: 1}\n: unhashable key\n",
    "x: !custom thing\n",
    "x: !!python/object:os.system ls\n",
    "o: !!omap [{k: 1}, {k: 2}]\n",
    "d: " + "{a: " * (MAX_DEPTH - 1) + "1" + "}" * (MAX_DEPTH - 1) + "\n",
    "d: " + "{a: " * MAX_DEPTH + "1" + "}" * MAX_DEPTH + "\n",
]


@pytest.mark.parametrize("text", SAME_EITHER_WAY)
def test_the_fast_path_and_the_checking_loaders_agree(text: str):
    """libyaml's own loader reads short documents with no anchor, alias or merge key; every
    answer (value, refusal, error and its line) must be what the checking loader on the same
    parser gives, and the pure-Python loader must agree on the value or the kind of problem
    (libyaml and PyYAML word their syntax errors differently)."""

    def outcome(use_libyaml: bool, fast: bool) -> tuple[object, ...]:
        try:
            return ("value", yamlsafe._read(text, use_libyaml, fast=fast))
        except YamlProblem as problem:
            return ("problem", problem.reason, problem.line, problem.refused)

    fast = outcome(True, fast=True)
    assert fast == outcome(True, fast=False)
    pure = outcome(False, fast=False)
    if fast[0] == "value" or fast[3]:  # a value or a refusal: the same everywhere
        assert fast == pure
    else:
        assert pure[0] == "problem" and pure[2:] == fast[2:]


@pytest.mark.parametrize("text", SAME_EITHER_WAY)
def test_values_are_exactly_safe_loads(text: str):
    """Every value the loaders give is ``yaml.safe_load``'s, type for type (the fast path
    constructs plain strings, mappings and lists itself and must not drift from it)."""
    answers: list[tuple[object, ...]] = []
    for use_libyaml in (True, False):
        try:
            answers.append(("value", load_yaml(text, use_libyaml=use_libyaml)))
        except YamlProblem as problem:
            if not problem.refused:  # a refusal (too deep, too big) is ours, not safe_load's
                answers.append(("error",))
    if not answers:
        return
    safe_loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # safe_load's, in C: fast
    try:
        expected: tuple[object, ...] = ("value", yaml.load(text, Loader=safe_loader))
    except (yaml.YAMLError, RecursionError):
        expected = ("error",)
    for got in answers:
        assert _typed(got) == _typed(expected)


def _typed(value: object) -> object:
    """``value`` with the type of every part beside it: ``1 == True == 1.0`` must not hide a
    type that changed (NaN is compared as its text, it equals nothing)."""
    if isinstance(value, dict):
        return ("dict", sorted((repr(_typed(k)), _typed(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return (type(value).__name__, [_typed(item) for item in value])
    if isinstance(value, set):
        return ("set", sorted(repr(_typed(item)) for item in value))
    return (type(value).__name__, repr(value))


def test_corpus_frontmatter_loads_as_safe_load_does():
    """All 372 public frontmatters: the fast path's values equal ``yaml.safe_load``'s."""
    from corpora import definition_files, require_public_corpus
    from subagents.definitions.frontmatter import split

    safe_loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # safe_load's, in C: fast
    compared = 0
    for path in definition_files(require_public_corpus()):
        header = "\n".join(split(path.read_text(encoding="utf-8"))[0]) + "\n"
        try:
            expected = yaml.load(header, Loader=safe_loader)
        except yaml.YAMLError:
            continue  # read leniently by frontmatter.parse, covered elsewhere
        assert _typed(load_yaml(header)) == _typed(expected), path
        compared += 1
    assert compared > 300
