"""The `subagents` command: one argparse dispatcher, one module per sub-command.

Why a table of modules: each sub-command (``agents`` now; ``run``, ``demo``, ``ps``... later)
lives in its own module with two functions, ``add_arguments(parser)`` and ``run(args) -> int``,
and is added here with one line. Modules are imported only when the command line is parsed,
so a command never pays for another's imports at module load.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Protocol, cast

from subagents import __version__
from subagents.cli.output import PROG, configure_logging

# sub-command name -> module implementing it (add new commands here)
COMMANDS: dict[str, str] = {
    "agents": "subagents.cli.agents_cmd",
    "demo": "subagents.cli.demo_cmd",
}


class SubCommand(Protocol):
    """What a sub-command module provides (its docstring's first line is its help)."""

    __doc__: str | None

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...
    def run(self, args: argparse.Namespace) -> int: ...


def load(name: str) -> SubCommand:
    return cast(SubCommand, importlib.import_module(COMMANDS[name]))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="An actor-model runtime for LLM subagents with mailboxes.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="log more to stderr (-vv for debug)"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        module = load(name)
        summary = (module.__doc__ or "").strip().splitlines()[0] if module.__doc__ else ""
        command = sub.add_parser(name, help=summary, description=module.__doc__)
        command.formatter_class = argparse.RawDescriptionHelpFormatter
        module.add_arguments(command)
        command.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``subagents`` console script; returns the exit status."""
    args = build_parser().parse_args(argv)
    configure_logging(args.verbose)
    try:
        return int(args._run(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `subagents agents | head`: the reader left, not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the exit-time flush does not fail again
        return 0


if __name__ == "__main__":
    sys.exit(main())
