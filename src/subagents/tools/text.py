"""The text shapes Claude Code's tools answer in, shared by the tools that use them."""

from __future__ import annotations

OUTPUT_LIMIT = 30_000
"""Characters of command or search output shown to the model; the rest is cut, with a note."""
LINE_LIMIT = 2_000
"""Characters of one line shown by Read; a longer line is cut."""


def numbered(lines: list[str], first: int) -> str:
    """``cat -n``: the line number right-aligned in 6 columns, a tab, the line."""
    return "\n".join(f"{n:>6}\t{line}" for n, line in enumerate(lines, first))


def cut_line(line: str) -> str:
    return line if len(line) <= LINE_LIMIT else line[:LINE_LIMIT] + "… [line truncated]"


def capped(text: str, omitted_bytes: int = 0, limit: int = OUTPUT_LIMIT) -> str:
    """``text`` within ``limit`` characters, with a note saying how much was left out."""
    extra = 0
    if len(text) > limit:
        extra = len(text) - limit
        text = text[:limit]
    if extra or omitted_bytes:
        amount = f"{extra} characters" if not omitted_bytes else f"{omitted_bytes} bytes"
        if extra and omitted_bytes:
            amount = f"{extra} characters and {omitted_bytes} bytes"
        text += (
            f"\n\n... [output truncated: {amount} more not shown; narrow the command or"
            f" write the output to a file and Read it in parts]"
        )
    return text


def quoted(text: str, limit: int = 80) -> str:
    """A string shown inside a message, on one line and short."""
    one = text.replace("\n", "\\n")
    return one if len(one) <= limit else one[: limit - 1] + "…"
