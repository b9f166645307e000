"""A YAML reader that refuses documents built to explode.

``yaml.safe_load`` is safe from code execution but not from work: a few lines of anchors and
aliases expand into billions of nodes ("billion laughs"), and deep nesting recurses through the
composer. Agent frontmatter never needs either, so this loader refuses every anchor and alias
outright, caps nesting depth and node count while composing (before anything is expanded), and
reports problems with their line so the caller can say where the file is wrong.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.nodes import Node

MAX_DEPTH = 20
MAX_NODES = 20_000


class YamlProblem(Exception):
    """A document that is not YAML or that we refuse; ``line`` is 1-based within the text."""

    def __init__(self, reason: str, line: int | None = None, *, refused: bool = False) -> None:
        self.reason = reason
        self.line = line
        self.refused = refused  # well-formed but refused (aliases, depth, size): never retried
        super().__init__(reason if line is None else f"line {line}: {reason}")


def _line(mark: Any) -> int | None:
    return None if mark is None else mark.line + 1


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader whose composer counts depth and nodes and rejects anchors and aliases."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
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
            raise YamlProblem(
                f"more than {MAX_NODES} YAML nodes", _line(event.start_mark), refused=True
            )
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise YamlProblem(
                    f"nesting deeper than {MAX_DEPTH} levels", _line(event.start_mark), refused=True
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


_CLoader: Any = getattr(yaml, "CSafeLoader", None)


def _check_events(text: str) -> None:
    """Refuse anchors, aliases, deep nesting and huge documents from libyaml's event stream.

    Events are produced lazily, so a bomb is refused as soon as its first anchor (or the 21st
    nested level) is parsed, before anything is expanded.
    """
    depth = nodes = 0
    for event in yaml.parse(text, Loader=_CLoader):
        if isinstance(event, yaml.AliasEvent):
            raise YamlProblem(
                f"alias '*{event.anchor}' refused: anchors and aliases are not allowed",
                _line(event.start_mark),
                refused=True,
            )
        if isinstance(event, yaml.NodeEvent):
            if event.anchor is not None:
                raise YamlProblem(
                    f"anchor '&{event.anchor}' refused: anchors and aliases are not allowed",
                    _line(event.start_mark),
                    refused=True,
                )
            nodes += 1
            if nodes > MAX_NODES:
                raise YamlProblem(
                    f"more than {MAX_NODES} YAML nodes", _line(event.start_mark), refused=True
                )
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise YamlProblem(
                    f"nesting deeper than {MAX_DEPTH} levels", _line(event.start_mark), refused=True
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _load(text: str, use_libyaml: bool) -> Any:
    if use_libyaml and _CLoader is not None:
        # libyaml (C) when available: the same checks and results, about ten times faster
        _check_events(text)
        return yaml.load(text, Loader=_CLoader)  # safe_load semantics: CSafeLoader, in C
    loader = _BoundedLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def load_yaml(text: str, *, use_libyaml: bool = True) -> Any:
    """Parse one YAML document with the limits above; raises ``YamlProblem``.

    ``use_libyaml=False`` forces the pure-Python path (the one used where libyaml is missing).
    """
    try:
        return _load(text, use_libyaml)
    except YamlProblem:
        raise
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        reason = exc.problem or exc.context or "invalid YAML"
        if mark is not None:
            reason = f"{reason} (column {mark.column + 1})"
        raise YamlProblem(f"invalid YAML: {reason}", _line(mark)) from None
    except yaml.YAMLError as exc:
        raise YamlProblem(f"invalid YAML: {exc}") from None
    except RecursionError:
        raise YamlProblem(f"nesting deeper than {MAX_DEPTH} levels", refused=True) from None
