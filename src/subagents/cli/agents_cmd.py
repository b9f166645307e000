"""List every agent definition that would load, or validate them all (`subagents agents`).

Discovery is the runtime's own (nearest .claude/agents/, --dir directories, ~/.claude/agents/,
built-in defaults), so what this lists is exactly what `run` would see. Warnings go to stderr;
--validate prints every problem (file:line: reason) and exits 1 if there is an error, 0 when
there are only warnings (--strict: 1 on warnings too).
"""

from __future__ import annotations

import argparse
import os
import stat
from collections.abc import Sequence
from pathlib import Path

import msgspec

from subagents.behaviour.tools import runtime_tool_names
from subagents.cli import output
from subagents.cli.state import CliError, stat_of
from subagents.definitions import DefinitionLoader, LoadIssue, default_sources, validate
from subagents.definitions.catalog import Catalog
from subagents.definitions.spec import AgentSpec
from subagents.definitions.validate import known_tools

NAME = "agents"
DESCRIPTION_WIDTH = 60
TOOLS_WIDTH = 40
EXIT_PROBLEMS = 1
EXIT_USAGE = 2


class AgentRow(msgspec.Struct, frozen=True):
    """One definition as `--json` prints it (``tools`` null = every tool)."""

    name: str
    description: str
    tools: tuple[str, ...] | None
    model: str | None
    source: str | None
    level: str


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dir",
        dest="dirs",
        action="append",
        default=[],
        metavar="DIR",
        help="also load definitions from DIR (repeatable; searched recursively)",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON list on stdout")
    parser.add_argument(
        "--validate",
        action="store_true",
        help="print every problem (file:line: reason); exit 1 on errors (with --strict, on"
        " warnings too)",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="treat tool-name problems as errors; with --validate, exit 1 on any problem",
    )


def run(args: argparse.Namespace) -> int:
    dirs: list[str] = list(args.dirs)
    for d in dirs:
        try:
            found = stat_of(Path(d), f"--dir {d}")
        except CliError as exc:
            output.error(NAME, str(exc))
            return EXIT_USAGE
        if found is None:
            output.error(NAME, f"directory not found: {d}")
            return EXIT_USAGE
        if not stat.S_ISDIR(found.st_mode):
            output.error(NAME, f"not a directory: {d}")
            return EXIT_USAGE

    # Load leniently even in strict mode, so that every problem is listed, not just the first.
    # the tools a runtime started here has (its own; no user tools): what `run` checks too
    loader = DefinitionLoader(
        default_sources(cwd=Path.cwd(), dirs=tuple(Path(d) for d in dirs)),
        known_tools=known_tools(runtime_tool_names()),
    )
    catalog = Catalog(loader)
    specs = catalog.list()
    issues = _all_issues(catalog.issues(), specs, strict=args.strict)

    if args.validate:
        return _report_problems(issues, specs, as_json=args.json, strict=args.strict)

    # a name defined twice is said by the loader's warning already (the files, which wins)
    said = {(d.name, d.loser) for d in catalog.duplicates()}
    for issue in issues:
        if (issue.name, issue.file) not in said:
            output.warn(output.printable(str(issue)))
    if args.json:
        output.print_json([_row(s) for s in specs])
    else:
        _print_table(specs)
    if args.strict and any(i.severity == "error" for i in issues):
        return EXIT_PROBLEMS
    return 0


def _all_issues(
    loaded: Sequence[LoadIssue], specs: Sequence[AgentSpec], *, strict: bool
) -> list[LoadIssue]:
    """The loader's issues; in strict mode also each spec's strict findings, one per problem
    (a warning the loader gave becomes the error strict mode makes it)."""
    issues = list(loaded)
    if not strict:
        return issues
    index = {(i.file, i.name, i.reason): n for n, i in enumerate(issues)}
    known = known_tools(runtime_tool_names())
    for spec in specs:
        for found in validate(spec, known_tools=known, strict=True):
            file = found.file if found.file is not None else spec.source
            name = found.name if found.name is not None else spec.name
            key = (file, name, found.reason)
            if key in index:
                n = index[key]
                issues[n] = msgspec.structs.replace(issues[n], severity=found.severity)
            else:
                index[key] = len(issues)
                issues.append(msgspec.structs.replace(found, file=file, name=name))
    return issues


def _report_problems(
    issues: Sequence[LoadIssue], specs: Sequence[AgentSpec], *, as_json: bool, strict: bool
) -> int:
    """Every problem; exit 1 on an error (``strict``: on a warning too), else 0."""
    if as_json:
        output.print_json(list(issues))
    else:
        for issue in issues:
            print(output.printable(str(issue)))
    errors = sum(1 for i in issues if i.severity == "error")
    files = len({i.file for i in issues if i.file})
    if issues:
        output.warn(
            f"{len(issues)} problem(s) ({errors} error(s), {len(issues) - errors} warning(s)) "
            f"in {files} file(s); {len(specs)} definition(s) loaded"
        )
        return EXIT_PROBLEMS if errors or strict else 0
    if not as_json:
        print(f"ok: {len(specs)} definition(s), no problems")
    return 0


def _row(spec: AgentSpec) -> AgentRow:
    return AgentRow(
        name=spec.name,
        description=spec.description,
        tools=spec.tools,
        model=spec.model,
        source=spec.source,
        level=spec.level.label,
    )


def _print_table(specs: Sequence[AgentSpec]) -> None:
    rows = [
        (
            s.name,
            output.truncate(s.description, DESCRIPTION_WIDTH),
            output.truncate(_tools(s), TOOLS_WIDTH),
            s.model or "inherit",
            _display_path(s.source),
            s.level.label,
        )
        for s in specs
    ]
    output.print_table(
        ("NAME", "DESCRIPTION", "TOOLS", "MODEL", "SOURCE", "LEVEL"),
        rows,
        wide=("DESCRIPTION", "SOURCE"),
    )


def _tools(spec: AgentSpec) -> str:
    if spec.tools is None:
        text = "(all)"
    elif not spec.tools:
        text = "(none)"
    else:
        text = ", ".join(spec.tools)
    if spec.disallowed_tools:
        text += " minus " + ", ".join(spec.disallowed_tools)
    return text


def _display_path(source: str | None) -> str:
    """A source path as a person reads it: relative to the working directory, or ~/..."""
    if not source:
        return "-"
    path = Path(source)
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        pass
    home = os.path.expanduser("~")
    if source.startswith(home + os.sep):
        return "~" + source[len(home) :]
    return source
