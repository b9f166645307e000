"""What the sandbox holds on this machine, and what to change where it is weak.

`subagents doctor [--json]`: Landlock and its ABI, turning the network off, the seccomp
filter, the command's own mount namespace (a private /dev/shm; the run store and other runs',
runtimes' and MCP servers' scratch files hidden) and the scratch directory's home, each `ok`,
`weak` or `off` with what it means for the runs' commands, hooks and MCP servers. Exit 0 when
every part holds, 1 when one is weak or off (a script may refuse to go on).
"""

from __future__ import annotations

import argparse

from subagents.cli.command import reports_errors

NAME = "doctor"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the checks as JSON")


@reports_errors(NAME)
def run(args: argparse.Namespace) -> int:
    from subagents.cli import output
    from subagents.tools.sandbox_report import checks, found, holds

    parts = checks(found())
    if args.json:
        output.print_json(parts)
    else:
        for part in parts:
            print(f"{part.name:<10} {part.state:<5} {part.says}")
    return 0 if holds(parts) else 1
