"""A text argument of a command (`run`'s TASK, `send`'s TEXT), given on the command line or
read from stdin (``-``): it must be UTF-8 text.

Why checked here: the store keeps every text as UTF-8. Bytes that are not UTF-8 (a file in
Latin-1 piped in, an argument in another locale's encoding) reach Python as lone surrogates
(its ``surrogateescape``), and the first write of the run failed deep in the store with a
``UnicodeEncodeError`` traceback. Stdin is read as bytes and decoded here, whatever the
locale, so the error names the byte and where it is, as a usage error (exit 2).
"""

from __future__ import annotations

import sys

from subagents.cli.state import EXIT_USAGE, HINT, CliError, utf8_text

STDIN = "-"


def text_argument(value: str, what: str) -> str:
    """``value``, or stdin's text when it is ``-`` (exactly, its line ends included, as
    ``sys.stdin`` read it); ``CliError`` (usage) naming ``what`` and the first offending byte
    when it is not UTF-8."""
    if value == STDIN:
        return _stdin(what)
    return utf8_text(value, what)


def _stdin(what: str) -> str:
    buffer = getattr(sys.stdin, "buffer", None)
    if buffer is None:  # a text stream with no bytes under it (an embedding host's)
        text: str = sys.stdin.read()
        return text
    data: bytes = buffer.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise CliError(
            f"{what} read from stdin is not UTF-8 text: byte 0x{data[exc.start]:02x} at offset"
            f" {exc.start} (line {line}); {HINT}",
            EXIT_USAGE,
        ) from None
    return text
