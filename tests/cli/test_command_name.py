"""The commands a run suggests next name the program as the person can type it again: the
README installs into .venv without activating it, so `subagents` alone is not found."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from subagents.cli.summary import command_name


def _program(folder: Path) -> Path:
    folder.mkdir(parents=True)
    program = folder / "subagents"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    return program


def test_a_program_not_on_path_is_named_by_its_path(tmp_path: Path) -> None:
    program = _program(tmp_path / ".venv" / "bin")
    other = _program(tmp_path / "elsewhere")  # another subagents on PATH: not this one
    assert command_name(str(program), path=str(other.parent)) == str(program)
    assert command_name(str(program), path="") == str(program)


def test_the_program_on_path_is_named_subagents(tmp_path: Path) -> None:
    program = _program(tmp_path / "bin")
    assert command_name(str(program), path=str(program.parent)) == "subagents"


def test_a_relative_path_stays_relative(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _program(tmp_path / ".venv" / "bin")
    monkeypatch.chdir(tmp_path)
    assert command_name(".venv/bin/subagents", path="") == os.path.join(".venv", "bin", "subagents")


def test_run_as_a_module_is_named_subagents() -> None:
    assert command_name("/usr/lib/python3/site-packages/subagents/cli/main.py", path="") == (
        "subagents"
    )
