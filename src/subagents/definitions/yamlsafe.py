"""A YAML reader that refuses documents built to explode.

``yaml.safe_load`` is safe from code execution but not from work: a few lines of anchors and
aliases expand into billions of nodes ("billion laughs"), and deep nesting recurses through the
composer. Agent frontmatter never needs either, so this loader refuses every anchor and alias
outright, caps nesting depth and node count, and reports problems with their line so the caller
can say where the file is wrong.

Depth and size are checked twice. First on the raw text, by ``yamlshape.check_shape``, before
any parser runs: PyYAML's parsers have limits of their own that differ by release (6.0.4's
libyaml stops at 1,000 levels with its own error, read ahead of our composer; 6.0.1 to 6.0.3
have none), so the verdict and its message must not come from them. Then while composing
(before anything is expanded), for whatever that scan could not tell.

Each document is parsed once. A short document with no ``&``, ``*`` or ``<<`` cannot hold a
bomb, so libyaml parses and composes it in C and its values are built with the depth and size
checked as they are built (the normal case: agent frontmatter; the values are exactly
``yaml.safe_load``'s). Anything else, and anything that fails that
way, is read by a loader whose composer checks every node as it is built, on libyaml's parser
(or PyYAML's pure-Python one where libyaml is missing).
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

from subagents.definitions.yamlshape import (
    MAX_DEPTH,
    MAX_NODES,
    ShapeRefused,
    check_shape,
    too_big,
    too_deep,
)

__all__ = ["MAX_DEPTH", "MAX_NODES", "YamlProblem", "load_yaml"]


class YamlProblem(Exception):
    """A document that is not YAML or that we refuse; ``line`` is 1-based within the text."""

    def __init__(self, reason: str, line: int | None = None, *, refused: bool = False) -> None:
        self.reason = reason
        self.line = line
        self.refused = refused  # well-formed but refused (aliases, depth, size): never retried
        super().__init__(reason if line is None else f"line {line}: {reason}")


def _line(mark: Any) -> int | None:
    return None if mark is None else mark.line + 1


class _BoundedComposer(Composer):
    """PyYAML's composer, counting depth and nodes and rejecting anchors and aliases.

    It checks each event as it composes it, so the document is parsed once: the checks and
    the composition read the same event stream, and a bomb is refused as soon as its first
    anchor (or its 21st nested level, or its 20,001st node) is read, before anything is built.
    """

    _depth = 0
    _nodes = 0

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        event = self.peek_event()  # type: ignore[attr-defined]  # the parser's, mixed in below
        if isinstance(event, yaml.AliasEvent):
            raise YamlProblem(
                f"alias '*{event.anchor}' refused: anchors and aliases are not allowed",
                _line(event.start_mark),
                refused=True,
            )
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            raise YamlProblem(
                f"anchor '&{anchor}' refused: anchors and aliases are not allowed",
                _line(event.start_mark),
                refused=True,
            )
        self._nodes += 1
        if self._nodes > MAX_NODES:
            raise YamlProblem(too_big(), _line(event.start_mark), refused=True)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise YamlProblem(too_deep(), _line(event.start_mark), refused=True)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


class _BoundedLoader(Reader, Scanner, Parser, _BoundedComposer, SafeConstructor, Resolver):
    """``yaml.SafeLoader`` with the bounded composer: pure Python (where libyaml is missing)."""

    def __init__(self, stream: str) -> None:
        Reader.__init__(self, stream)
        Scanner.__init__(self)
        Parser.__init__(self)
        _BoundedComposer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)


def _libyaml_parser() -> Any:
    """libyaml's scanner and parser (C), or None when PyYAML was built without libyaml."""
    try:
        from yaml import cyaml
    except ImportError:
        return None
    return getattr(cyaml, "CParser", None)


_CParser: Any = _libyaml_parser()

if _CParser is not None:

    class _CBoundedLoader(_BoundedComposer, _CParser, SafeConstructor, Resolver):  # type: ignore[misc]
        """libyaml (C) scans and parses; the bounded composer above builds the nodes.

        ``yaml.CSafeLoader`` composes in C, where no check can be hooked in (and where deep
        nesting recurses on the C stack: 100,000 ``[`` crash the process), so a document that
        could hold a bomb is loaded by this class, one parse with the checks on every node.
        """

        def __init__(self, stream: str) -> None:
            _CParser.__init__(self, stream)
            _BoundedComposer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)


class _Exceeded(Exception):
    """The fast path met a document beyond the limits: the checking loader must read it."""


_STR_TAG = "tag:yaml.org,2002:str"
_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"

if _CParser is not None:

    class _CFastLoader(_CParser, SafeConstructor, Resolver):  # type: ignore[misc]
        """``yaml.CSafeLoader`` (libyaml parses and composes), constructing the plain shapes
        directly and checking the limits as it goes.

        PyYAML's constructor goes through a generator and a state machine per node, which
        costs more than libyaml's whole parse of a frontmatter. Here a plain string, mapping
        or list node is built in one call (the values ``SafeConstructor`` would build: its
        str, map and seq constructors do nothing else once merge keys, ``=`` keys and
        aliases are ruled out), and every other node -- ints, booleans, dates, ``!!set``, an
        unknown tag -- goes to ``SafeConstructor`` itself, unchanged. Anything unusual (a
        merge or ``=`` key, an unhashable key) rebuilds the whole document the standard way.
        Only used on the fast path, whose text holds no anchor, alias or merge key.
        """

        def __init__(self, stream: str) -> None:
            _CParser.__init__(self, stream)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            self._nodes = 0

        def construct_document(self, node: Node) -> Any:
            try:
                return self._build(node, 1)
            except _Exceeded:
                raise
            except Exception:  # let SafeConstructor decide, or say what is wrong
                self.constructed_objects = {}
                self.recursive_objects = {}
                self.state_generators = []
                return SafeConstructor.construct_document(self, node)

        def _count(self, depth: int, nodes: int = 1) -> None:
            self._nodes += nodes
            if depth > MAX_DEPTH or self._nodes > MAX_NODES:
                raise _Exceeded

        def _build(self, node: Node, depth: int) -> Any:
            kind = type(node)
            tag = node.tag
            if kind is ScalarNode:
                self._count(depth)
                if tag == _STR_TAG:
                    return node.value
                return self.construct_object(node, deep=True)
            if kind is MappingNode and tag == _MAP_TAG:
                self._count(depth)
                result: dict[Any, Any] = {}
                for key_node, value_node in node.value:
                    if key_node.tag in (_MERGE_TAG, _VALUE_TAG):
                        raise ValueError("a merge or '=' key: the standard constructor")
                    key = self._build(key_node, depth + 1)
                    result[key] = self._build(value_node, depth + 1)  # TypeError: unhashable
                return result
            if kind is SequenceNode and tag == _SEQ_TAG:
                self._count(depth)
                return [self._build(item, depth + 1) for item in node.value]
            value = self.construct_object(node, deep=True)
            deepest, nodes = _shape(value, depth)
            self._count(deepest, nodes)
            return value


_MERGE_TAG = "tag:yaml.org,2002:merge"
_VALUE_TAG = "tag:yaml.org,2002:value"


# The fast path: a document of at most this many characters with no anchor, alias or merge key
# cannot be a bomb: no alias means no expansion, every node takes at least one character, and
# 8,192 levels of nesting are well within the C stack (measured: 100,000 crash CSafeLoader,
# 8,000 do not, on a thread's default stack). Agent frontmatter is a few hundred characters.
FAST_MAX_CHARS = 8192
_FAST_REFUSED = ("&", "*", "<<")


_CONTAINERS = (dict, list, tuple, set, frozenset)


def _shape(value: Any, depth: int = 1) -> tuple[int, int]:
    """(deepest level, node count) of a loaded value, counted as the composer counts nodes
    (a mapping is one node, each key and each value another); it stops going down past
    ``MAX_DEPTH`` (that is already too deep). Scalars are counted in place, without a call
    each: frontmatter is mostly scalars, and this runs on every file."""
    if depth > MAX_DEPTH:
        return depth, 1
    groups: tuple[Any, ...]
    if isinstance(value, dict):
        groups = (value, value.values())  # the keys, then the values
    elif isinstance(value, _CONTAINERS):
        groups = (value,)
    else:
        return depth, 1
    deepest, nodes = depth, 1
    below = depth + 1
    for group in groups:
        for part in group:
            if isinstance(part, _CONTAINERS):
                part_depth, part_nodes = _shape(part, below)
                deepest = max(deepest, part_depth)
                nodes += part_nodes
            else:
                nodes += 1
                deepest = max(deepest, below)
    return deepest, nodes


def _fast(text: str) -> tuple[bool, Any]:
    """(True, value) when libyaml's own loader read ``text`` within the limits; else
    (False, None): the checking loader must read it (and will say what is wrong)."""
    if _CParser is None or len(text) > FAST_MAX_CHARS:
        return False, None
    if any(mark in text for mark in _FAST_REFUSED):
        return False, None
    loader = _CFastLoader(text)  # safe_load semantics, parsed and composed in C
    try:
        return True, loader.get_single_data()
    except (yaml.YAMLError, RecursionError, _Exceeded):
        return False, None  # the checking loader reports it, with the checks' precedence
    finally:
        loader.dispose()


def _loader(text: str, use_libyaml: bool) -> Any:
    """The checking loader for ``text``: on libyaml's parser when asked and available."""
    if use_libyaml and _CParser is not None:
        return _CBoundedLoader(text)
    return _BoundedLoader(text)


def _load(text: str, use_libyaml: bool, fast: bool) -> Any:
    if fast:
        done, value = _fast(text)
        if done:
            return value
    loader = _loader(text, use_libyaml)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def load_yaml(text: str, *, use_libyaml: bool = True) -> Any:
    """Parse one YAML document with the limits above; raises ``YamlProblem``.

    ``use_libyaml=False`` forces the pure-Python path (the one used where libyaml is missing).
    """
    return _read(text, use_libyaml, fast=use_libyaml)


def _read(text: str, use_libyaml: bool, *, fast: bool) -> Any:
    try:
        check_shape(text)  # ours, on the raw text: the same verdict whatever the parser
    except ShapeRefused as refused:
        raise YamlProblem(refused.reason, refused.line, refused=True) from None
    try:
        return _load(text, use_libyaml, fast)
    except YamlProblem:
        raise
    except yaml.YAMLError as exc:
        raise _invalid(exc) from None
    except RecursionError:
        raise YamlProblem(too_deep(), refused=True) from None


def _invalid(exc: yaml.YAMLError) -> YamlProblem:
    """``exc`` as our problem: "invalid YAML: " and the parser's reason, with its line."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        reason = exc.problem or exc.context or "invalid YAML"
        if mark is not None:
            reason = f"{reason} (column {mark.column + 1})"
        return YamlProblem(f"invalid YAML: {reason}", _line(mark))
    return YamlProblem(f"invalid YAML: {exc}")
