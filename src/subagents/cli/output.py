"""Printing for every `subagents` sub-command: colour rules, tables, JSON, warnings, logs.

Why one module: each command must behave the same way for people and for scripts. A terminal
gets a rich table; a pipe, a file or ``NO_COLOR`` gets plain aligned text with no ANSI codes;
``--json`` gets one JSON document on stdout (msgspec) and nothing else there. Warnings and
errors always go to stderr so they never corrupt stdout (log lines too: ``subagents.logs``).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from typing import Any, TextIO

import msgspec
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from subagents.logs import UNPRINTABLE
from subagents.logs import printable as printable  # every view imports it from here

PROG = "subagents"


def wants_color(stream: TextIO) -> bool:
    """Colour only on a terminal, and never when ``NO_COLOR`` is set (https://no-color.org)."""
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


PIPE_WIDTH = 10_000
"""The width a console assumes on a pipe or a file: lines are never wrapped there (a figure
cut at column 80 cannot be read back); a terminal wraps at its own width."""


class _Console(Console):
    """A rich console that lets a closed pipe be what it is everywhere else in the CLI."""

    def on_broken_pipe(self) -> None:
        """Rich's own exits with status 1 (``SystemExit(1)``): `subagents events | head -1`
        then looked failed. Raised as ``BrokenPipeError`` instead, it reaches ``cli.main``,
        which ends the command with status 0 as for every other write (the reader left)."""
        self.quiet = True
        raise BrokenPipeError


def console(stream: TextIO | None = None) -> Console:
    """A rich console for ``stream`` (stdout by default) following ``wants_color``; on a pipe
    or a file it never wraps a line."""
    stream = sys.stdout if stream is None else stream
    color = wants_color(stream)
    isatty = getattr(stream, "isatty", None)
    terminal = bool(isatty and isatty())
    return _Console(
        file=stream,
        no_color=not color,
        color_system="auto" if color else None,
        highlight=False,
        emoji=False,
        width=None if terminal else PIPE_WIDTH,
        soft_wrap=not terminal,
    )


def truncate(text: str, width: int) -> str:
    """The first line of ``text``, printable, cut to ``width`` characters with an ellipsis."""
    text = printable(text)
    line = " ".join(text.strip().splitlines()[0].split()) if text.strip() else ""
    return line if len(line) <= width else line[: max(width - 1, 0)].rstrip() + "…"


def print_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    stream: TextIO | None = None,
    wide: Sequence[str] = (),
) -> None:
    """A rich table on a colour terminal; otherwise plain columns (two spaces, no trailing
    blanks, never wrapped) that ``grep``/``cut`` can read. ``wide`` columns fold when the
    terminal is narrow; the others keep their width. A cell is text, never rich markup: a
    model's tool input holding ``[conceal]`` hid what followed it from the person asked to
    approve it, and a closing tag nothing opened (``[/bold]``) failed the whole view."""
    stream = sys.stdout if stream is None else stream
    rows = [[printable(cell) for cell in row] for row in rows]
    if not wants_color(stream):
        stream.write(plain_table(headers, rows))
        return
    table = Table(box=box.SIMPLE_HEAD, header_style="bold", show_edge=False)
    for header in headers:
        table.add_column(header, overflow="fold", no_wrap=header not in wide)
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    console(stream).print(table)


def plain_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Rows as aligned text; the last column is not padded."""
    all_rows = [list(headers), *[list(r) for r in rows]]
    widths = [max(len(r[i]) for r in all_rows) for i in range(len(headers))]
    lines = []
    for row in all_rows:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines) + "\n"


def print_json(value: Any, *, stream: TextIO | None = None) -> None:
    """``value`` as indented JSON (msgspec encodes Structs, enums, tuples) and a newline,
    every character ``printable`` escapes written as a JSON escape (``json_text``)."""
    stream = sys.stdout if stream is None else stream
    stream.write(json_text(msgspec.json.format(msgspec.json.encode(value), indent=2)) + "\n")


def json_line(value: Any) -> str:
    """``value`` as one line of JSON and its newline (the streaming ``--json`` views: one
    document per line), escaped as ``print_json`` is."""
    return json_text(msgspec.json.encode(value)) + "\n"


def json_text(encoded: bytes) -> str:
    """JSON as msgspec encoded it, with DEL, the C1 controls, the bidirectional marks and
    the line separators written as ``\\uXXXX`` escapes: msgspec escapes only the C0 controls,
    so a run's result holding ``\\x9b`` (an 8-bit CSI) or U+202E reached a terminal raw through
    ``--json``. Outside its strings JSON is ASCII, so each one found is inside a string and
    its escape decodes to the very same text: the document stays exact."""
    text = encoded.decode()
    if not UNPRINTABLE.search(text):
        return text
    return UNPRINTABLE.sub(_json_escape, text)


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def warn(message: str) -> None:
    """One warning line on stderr, printable (it may name what the store or an agent said)."""
    sys.stderr.write(printable(f"{PROG}: {message}\n"))


def error(command: str, message: str) -> None:
    """One error line on stderr naming the command, as argparse prints usage errors; printable."""
    sys.stderr.write(printable(f"{PROG} {command}: error: {message}\n"))
