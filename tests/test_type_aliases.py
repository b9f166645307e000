"""Each alias is defined once: a ``Literal`` of the same choices written in two places is two
statements of one thing, which drift apart (``OnFailure``, ``Cleanup`` and the command kinds
were each written two to four times). The second place imports the first's alias (and its
values, ``get_args`` of it: ``ON_FAILURE``, ``CLEANUPS``, ``COMMAND_KINDS``...)."""

from __future__ import annotations

import ast
from pathlib import Path

import subagents
from subagents.cli import run_cmd
from subagents.messages import CLEANUPS

SOURCE = Path(subagents.__file__).parent


def _literals(tree: ast.AST) -> list[tuple[frozenset[object], int]]:
    """Every ``Literal[...]`` of two or more choices: its choices and its line."""
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name)
            and node.value.id == "Literal"
            and isinstance(node.slice, ast.Tuple)
            and all(isinstance(e, ast.Constant) for e in node.slice.elts)
        ):
            choices = frozenset(e.value for e in node.slice.elts if isinstance(e, ast.Constant))
            found.append((choices, node.lineno))
    return found


def _alias_names(tree: ast.Module) -> list[tuple[str, int]]:
    """The type aliases a module binds at its top level (``Name = Literal[...]`` or a union)."""
    names = []
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and (
                isinstance(node.value, ast.Subscript)
                or (isinstance(node.value, ast.BinOp) and isinstance(node.value.op, ast.BitOr))
            )
        ):
            names.append((node.targets[0].id, node.lineno))
    return names


def _modules() -> list[tuple[str, ast.Module]]:
    return [
        (str(path.relative_to(SOURCE)), ast.parse(path.read_text(encoding="utf-8")))
        for path in sorted(SOURCE.rglob("*.py"))
    ]


def test_no_literal_of_the_same_choices_is_written_twice() -> None:
    places: dict[frozenset[object], list[str]] = {}
    for name, tree in _modules():
        for choices, line in _literals(tree):
            places.setdefault(choices, []).append(f"{name}:{line}")
    assert len(places) > 10  # the walk finds the literals
    twice = {tuple(sorted(map(str, c))): p for c, p in places.items() if len(p) > 1}
    assert twice == {}, "name the Literal once (an alias) and import it"


def test_no_type_alias_name_is_defined_in_two_modules() -> None:
    """One name, one alias: ``Job`` meant three things (a spawn_many job, a fan-out pair, a
    pool's callable) and ``OnFailure``/``Cleanup`` were each written twice."""
    defined: dict[str, list[str]] = {}
    for name, tree in _modules():
        for alias, line in _alias_names(tree):
            defined.setdefault(alias, []).append(f"{name}:{line}")
    assert {"OnFailure", "Cleanup", "Job", "CommandKind"} <= set(defined)  # the walk finds them
    twice = {alias: places for alias, places in defined.items() if len(places) > 1}
    assert twice == {}


def test_the_values_the_command_line_writes_out_are_the_aliases() -> None:
    """`subagents run --help` must not import msgspec, so its --cleanup choices are written
    out; they are the alias's."""
    assert run_cmd.CLEANUP_CHOICES == CLEANUPS
