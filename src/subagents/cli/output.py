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

PROG = "subagents"


_UNPRINTABLE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)
"""What text from a task, a model, mail or a file must not send to a terminal: C0 controls
but tab and newline (ESC starts colour, cursor and title sequences; BEL rings; CR overwrites
a line), DEL, the C1 controls (``\x9b`` is an 8-bit CSI), the bidirectional marks and
overrides that make text read backwards (the Arabic letter mark U+061C among them), and the
line and paragraph separators U+2028/U+2029 (a line break to some terminals and editors)."""


def printable(text: str) -> str:
    """``text`` safe for a human view: every control character shown as an escape
    (``\x1b[31m`` appears as the nine characters ``\\x1b[31m``), tabs and newlines kept.

    Every human view passes task, result, mail, transcript and definition text through this;
    ``--json`` never does (JSON escapes control characters itself, and stays exact)."""
    if not _UNPRINTABLE.search(text):
        return text
    return _UNPRINTABLE.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


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
    terminal is narrow; the others keep their width."""
    stream = sys.stdout if stream is None else stream
    rows = [[printable(cell) for cell in row] for row in rows]
    if not wants_color(stream):
        stream.write(plain_table(headers, rows))
        return
    table = Table(box=box.SIMPLE_HEAD, header_style="bold", show_edge=False)
    for header in headers:
        table.add_column(header, overflow="fold", no_wrap=header not in wide)
    for row in rows:
        table.add_row(*row)
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
    """``value`` as indented JSON (msgspec encodes Structs, enums, tuples) and a newline."""
    stream = sys.stdout if stream is None else stream
    stream.write(msgspec.json.format(msgspec.json.encode(value), indent=2).decode() + "\n")


def warn(message: str) -> None:
    """One warning line on stderr, printable (it may name what the store or an agent said)."""
    sys.stderr.write(printable(f"{PROG}: {message}\n"))


def error(command: str, message: str) -> None:
    """One error line on stderr naming the command, as argparse prints usage errors; printable."""
    sys.stderr.write(printable(f"{PROG} {command}: error: {message}\n"))
