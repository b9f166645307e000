"""The skeleton of a sub-command is written once (``cli.command``): the inspecting commands
take RUN, --json and the store from it, open the store and resolve the run with it, and
leave a store's failure and a ``CliError`` to it. Checked on their source, so a new command
that copies the old shape (its own ``try``/``except CliError``, ``except StoreError``) is
pointed at the skeleton instead."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from subagents.cli.main import COMMANDS

OWN_SHAPE = {
    "run": "starts a runtime and watches it: its errors come from three phases",
    "demo": "starts a runtime on the offline model",
    "agents": "reads definition files, not the store",
    "completion": "prints a shell's code; at a TAB it reads the store only to offer run ids,"
    " and a store it cannot read offers nothing rather than an error (a TAB must not fail)",
}
"""The commands that do not inspect the store, and why they keep their own shape."""

INSPECTING = sorted(set(COMMANDS) - set(OWN_SHAPE))


def _handled(path: Path) -> list[str]:
    """The exceptions a module catches itself that the skeleton handles."""
    caught = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.ExceptHandler)
            and isinstance(node.type, ast.Name)
            and node.type.id in ("CliError", "StoreError")
        ):
            caught.append(f"{path.name}:{node.lineno} except {node.type.id}")
    return caught


@pytest.mark.parametrize("name", INSPECTING)
def test_an_inspecting_command_leaves_its_errors_to_the_skeleton(name: str) -> None:
    module = importlib.import_module(COMMANDS[name][0])
    assert module.__file__ is not None
    assert _handled(Path(module.__file__)) == []
    assert "subagents.cli.command" in Path(module.__file__).read_text(encoding="utf-8")


def test_the_walk_finds_the_handlers_it_looks_for() -> None:
    run_cmd = importlib.import_module(COMMANDS["run"][0])
    assert run_cmd.__file__ is not None
    assert _handled(Path(run_cmd.__file__))  # run keeps its own: the walk sees them
