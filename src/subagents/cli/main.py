"""The `subagents` command: one argparse dispatcher, one module per sub-command.

Why a table of modules: each sub-command lives in its own module with two functions,
``add_arguments(parser)`` and ``run(args) -> int``, and is added here with one line (its
module and the first line of its docstring, which a test keeps equal); the shape the commands
that inspect the store share is written once in ``cli.command``. Only the module of the
command being run is imported (``subagents ps`` must not pay for the runtime and the anthropic
SDK that ``subagents run`` needs); ``subagents --help`` and ``--version`` import none of them,
nor structlog (``benchmarks/cli_startup.py`` measures them).

Logging options (``-v``, ``--log-level``, ``--log-json``) are accepted before or after the
sub-command name; their environment twins are ``SUBAGENTS_LOG_LEVEL`` and
``SUBAGENTS_LOG_JSON``. One place configures structlog: ``subagents.logs.configure`` (at the
first line logged: ``configure_on_first_use``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Protocol, cast

from subagents import __version__

PROG = "subagents"

# sub-command name -> (module implementing it, its summary: the docstring's first line)
COMMANDS: dict[str, tuple[str, str]] = {
    "run": (
        "subagents.cli.run_cmd",
        "Run an agent on a task, watch its tree work, print the result (`subagents run AGENT"
        " TASK`).",
    ),
    "continue": (
        "subagents.cli.continue_cmd",
        "Continue an ended run with a new message (`subagents continue RUN TEXT`).",
    ),
    "ps": (
        "subagents.cli.ps_cmd",
        "List runs from the store: live ones, or all with --all (`subagents ps`).",
    ),
    "info": (
        "subagents.cli.info_cmd",
        "Everything the store knows about one run (`subagents info RUN`).",
    ),
    "log": (
        "subagents.cli.log_cmd",
        "A run's transcript in order: its conversation, tool calls, mail and events (`subagents"
        " log`).",
    ),
    "events": (
        "subagents.cli.events_cmd",
        "Every run's events as they happen, one line each (`subagents events`), like `docker"
        " events`.",
    ),
    "tree": (
        "subagents.cli.tree_cmd",
        "The execution tree under a run: status, depth, time, steps, tokens (`subagents tree"
        " RUN`).",
    ),
    "stop": (
        "subagents.cli.stop_cmd",
        "Stop a run with its subtree, every live run, or a run's children (`subagents stop`).",
    ),
    "send": (
        "subagents.cli.send_cmd",
        "Mail a run from outside: the process hosting it delivers it (`subagents send RUN TEXT`).",
    ),
    "prune": (
        "subagents.cli.prune_cmd",
        "Archive, clean and delete finished runs now: the store's sweeper (`subagents prune`).",
    ),
    "approvals": (
        "subagents.cli.approvals_cmd",
        "List the approvals waiting for an answer in the store (`subagents approvals`).",
    ),
    "approve": (
        "subagents.cli.approve_cmd",
        "Allow a pending approval: the waiting call runs (`subagents approve ID`).",
    ),
    "deny": (
        "subagents.cli.deny_cmd",
        "Deny a pending approval: the call is refused, the model told why (`subagents deny ID`).",
    ),
    "resume": (
        "subagents.cli.resume_cmd",
        "Continue the runs whose host process is gone (`subagents resume [RUN ...]`).",
    ),
    "attach": (
        "subagents.cli.attach_cmd",
        "Watch a run's tree live from any terminal, until it ends (`subagents attach RUN`).",
    ),
    "wait": (
        "subagents.cli.wait_cmd",
        "Wait until a run ends and exit with its status code (`subagents wait RUN`).",
    ),
    "serve": (
        "subagents.console.serve_cmd",
        "Serve the console: a web page over the store, live (`subagents serve`).",
    ),
    "agents": (
        "subagents.cli.agents_cmd",
        "List every agent definition that would load, or validate them all (`subagents agents`).",
    ),
    "completion": (
        "subagents.cli.completion",
        "Print the code that makes your shell complete `subagents` (`subagents completion bash`).",
    ),
    "doctor": (
        "subagents.cli.doctor_cmd",
        "What the sandbox holds on this machine, and what to change where it is weak.",
    ),
    "demo": (
        "subagents.cli.demo_cmd",
        "Run a demo team on the offline model and watch it work (no network, no API key).",
    ),
}

EXIT_USAGE = 2


class SubCommand(Protocol):
    """What a sub-command module provides (its docstring's first line is its help)."""

    __doc__: str | None

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...
    def run(self, args: argparse.Namespace) -> int: ...


def load(name: str) -> SubCommand:
    return cast(SubCommand, importlib.import_module(COMMANDS[name][0]))


def _logging_options(parser: argparse.ArgumentParser, *, top: bool) -> None:
    """The logging flags; below the top level their defaults are SUPPRESS, so a flag given
    before the sub-command is not reset by the sub-command's parser."""
    default = (lambda value: value) if top else (lambda _value: argparse.SUPPRESS)
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=default(0),
        help="log more to stderr (-v info, -vv debug)",
    )
    parser.add_argument(
        "--log-level",
        default=default(None),
        metavar="LEVEL",
        help="debug, info, warning (default), error; or SUBAGENTS_LOG_LEVEL",
    )
    parser.add_argument(
        "--log-json",
        action="store_true",
        default=default(False),
        help="log JSON lines to stderr (or SUBAGENTS_LOG_JSON=1)",
    )


def _command_in(argv: Sequence[str]) -> str | None:
    """The sub-command named on the command line (the first word that is one), if any."""
    skip = False
    for word in argv:
        if skip:
            skip = False
        elif word == "--log-level":
            skip = True  # its value may be a command name ("info")
        elif word in COMMANDS:
            return word
        elif word == "--" or not word.startswith("-"):
            return None
    return None


def build_parser(
    argv: Sequence[str] | None = None, *, load_all: bool = False
) -> argparse.ArgumentParser:
    """The parser. Only the module of the command ``argv`` names is loaded (every one with
    ``load_all``); the others are listed with their summaries from ``COMMANDS``."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="An actor-model runtime for LLM subagents with mailboxes.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    _logging_options(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    chosen = _command_in(argv) if argv is not None else None
    for name, (_module, summary) in COMMANDS.items():
        if not load_all and name != chosen:
            sub.add_parser(name, help=summary)  # known, not loaded
            continue
        module = load(name)
        command = sub.add_parser(
            name,
            help=summary,
            description=module.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        _logging_options(command, top=False)
        module.add_arguments(command)
        command.set_defaults(_run=module.run)
    return parser


def _configure_logging(args: argparse.Namespace) -> str | None:
    """Configure structlog from the flags (then the environment); an error message or None.

    Checked now, applied at the first line logged: most commands log nothing, and importing
    structlog costs more than the rest of ``subagents ps`` (``logs.configure_on_first_use``)."""
    from subagents.logs import configure_on_first_use as configure

    level: str | int | None = args.log_level
    if level is None and args.verbose:
        level = "info" if args.verbose == 1 else "debug"
    try:
        configure(level=level, json=True if args.log_json else None)
    except ValueError as exc:
        source = "--log-level" if args.log_level is not None else "SUBAGENTS_LOG_LEVEL"
        return f"{source}: {exc}"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``subagents`` console script; returns the exit status."""
    if "_ARGCOMPLETE" in os.environ:  # the shell asks for completions (cli.completion)
        from subagents.cli.completion import complete

        complete(build_parser(load_all=True))  # prints them and exits
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(argv).parse_args(argv)
    if not hasattr(args, "_run"):  # the guess of the command was wrong: load them all
        args = build_parser(argv, load_all=True).parse_args(argv)
    problem = _configure_logging(args)
    if problem is not None:
        sys.stderr.write(f"{PROG}: error: {problem}\n")
        return EXIT_USAGE
    try:
        return int(args._run(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `subagents ps | head`: the reader left, not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the exit-time flush does not fail again
        return 0


if __name__ == "__main__":
    sys.exit(main())
