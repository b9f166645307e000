"""The end of a run, for people: the final result and one line per run of its tree."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.text import Text

from subagents.cli.live import STATUS_STYLE
from subagents.cli.output import printable
from subagents.cli.state import short_id
from subagents.messages import Outcome, RunRecord
from subagents.store.locations import default_location, redacted


def summary_lines(records: Sequence[RunRecord]) -> list[Text]:
    """One line per run, in tree order (parents before children)."""
    by_parent: dict[str | None, list[RunRecord]] = {}
    for r in records:
        by_parent.setdefault(r.parent_run_id, []).append(r)
    ordered: list[RunRecord] = []

    def walk(parent: str | None) -> None:
        for r in sorted(by_parent.get(parent, ()), key=lambda r: r.created_at):
            ordered.append(r)
            walk(r.run_id)

    walk(None)
    known = {r.run_id for r in ordered}
    ordered.extend(r for r in records if r.run_id not in known)
    lines = []
    for r in ordered:
        elapsed = (r.ended_at or 0) - (r.started_at or r.ended_at or 0)
        outcome = r.outcome
        detail = ""
        if outcome is not None:
            detail = outcome.result if outcome.ok and outcome.result else (outcome.error or "")
        detail = " ".join(printable(detail).split())
        line = Text("  " * r.depth)
        line.append(f"{printable(r.agent):<14}", style="bold")
        line.append(f" {short_id(r.run_id)} ", style="dim")
        line.append(f"{r.status!s:<15}", style=STATUS_STYLE.get(r.status, ""))
        line.append(
            f" depth {r.depth}  steps {r.steps:>2}  tokens {r.usage.total_tokens:>6}"
            f"  {elapsed:5.2f}s  "
        )
        line.append(detail[:90] + ("…" if len(detail) > 90 else ""), style="dim")
        lines.append(line)
    return lines


def print_outcome(console: Console, outcome: Outcome, records: Sequence[RunRecord]) -> None:
    console.print()
    console.print(Text(f"Result ({outcome.status}):", style="bold"))
    text = outcome.result or "" if outcome.ok else f"{outcome.error_kind}: {outcome.error}"
    console.print(printable(text), soft_wrap=True, markup=False, highlight=False)
    console.print()
    console.print(Text("Runs:", style="bold"))
    for line in summary_lines(records):
        console.print(line, soft_wrap=True)


def print_next_steps(
    out: Console,
    store_path: Path | str,
    root: str,
    records: Sequence[RunRecord],
    *,
    child_agent: str = "researcher",
) -> None:
    """What to try next: the commands that show the runs just recorded."""
    child = next((r.run_id for r in records if r.agent == child_agent), root)
    state = "" if is_default_store(store_path) else f" --state {store_path}"
    me = command_name()
    out.print()
    out.print(f"Recorded in {store_path}. Try:", soft_wrap=True, markup=False)
    for line in (
        f"{me} tree {root}{state}",
        f"{me} log {child}{state}",
        f"{me} info {root}{state}",
        f"{me} ps --all{state}",
    ):
        out.print(f"  {line}", soft_wrap=True, markup=False, highlight=False)


def is_default_store(path: Path | str) -> bool:
    """Whether ``path`` (a file, or a database's URL) is the store the commands use
    without ``--state``."""
    try:
        default = default_location()
    except ValueError:
        return False
    if isinstance(path, str) or isinstance(default, str):
        return isinstance(default, str) and redacted(default) == path
    try:
        return path.resolve() == default.resolve()
    except OSError:
        return False


def command_name(argv0: str | None = None, path: str | None = None) -> str:
    """How to type this command again: ``subagents`` when that is on ``PATH`` and is the
    program that runs, else the path it was run by (``.venv/bin/subagents`` after the
    README's install, which activates no venv); ``subagents`` when run as a module."""
    program = argv0 if argv0 is not None else sys.argv[0]
    if not program or os.path.basename(program) != "subagents":
        return "subagents"  # python -m subagents.cli.main, or embedded
    found = shutil.which("subagents", path=path)
    if found is not None and os.path.realpath(found) == os.path.realpath(program):
        return "subagents"
    return os.path.relpath(program) if not os.path.isabs(program) else program
