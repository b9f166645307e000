"""The dispatcher: `--version` and `--help` import no command module and no structlog (their
speed is measured by benchmarks/cli_startup.py, never asserted here), and the summaries it
shows are the commands' own."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from subagents.cli.main import COMMANDS

PROBE = """
import sys
from subagents.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
heavy = sorted(m for m in sys.modules if m.endswith("_cmd") or m.split(".")[0] in
               ("structlog", "msgspec", "rich", "pykka", "anthropic", "sqlite3"))
print("loaded:" + ",".join(heavy))
"""


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["run", "--help"]])
def test_version_and_help_import_nothing_heavy(args: list[str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    loaded = proc.stdout.strip().splitlines()[-1].removeprefix("loaded:")
    allowed = {"subagents.cli.run_cmd"} if args[0] == "run" else set()
    assert set(filter(None, loaded.split(","))) <= allowed, loaded


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_summary_is_its_modules_first_docstring_line(name: str) -> None:
    module_name, summary = COMMANDS[name]
    module = importlib.import_module(module_name)
    assert module.__doc__ is not None
    assert module.__doc__.strip().splitlines()[0] == summary


def test_run_help_states_the_real_maximum_timeout() -> None:
    from subagents.cli import run_cmd
    from subagents.supervision.limits import MAX_TIMEOUT_S

    assert run_cmd.MAX_TIMEOUT_S == MAX_TIMEOUT_S


def test_top_level_help_lists_every_command_with_its_summary() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "subagents.cli.main", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"COLUMNS": "300", "PATH": ""},
    )
    assert proc.returncode == 0, proc.stderr
    for name, (_module, summary) in COMMANDS.items():
        assert f"{name} " in proc.stdout and summary in proc.stdout, name
