"""Read: a file's lines, numbered like ``cat -n`` (Claude Code's Read).

Lines are read as bytes and decoded one by one, so a huge file costs only the lines shown
(plus a count of the rest for the note, when the rest is under 4 MiB; past that the note gives
the file's size instead); a line longer than 2,000 characters is cut.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Annotated, Any

import msgspec

from subagents.tools import read_media
from subagents.tools.base import (
    Tool,
    ToolError,
    ToolOutput,
    decode_input,
    need_context,
    struct_schema,
)
from subagents.tools.context import ToolContext
from subagents.tools.text import cut_line, numbered

DEFAULT_LIMIT = 2_000
BINARY_SNIFF = 8_192
COUNT_BYTES = 4 << 20
"""Bytes past the lines shown that Read still counts lines in, for the note's total."""


class ReadInput(msgspec.Struct, forbid_unknown_fields=True):
    file_path: Annotated[str, msgspec.Meta(description="The absolute path to the file to read")]
    offset: (
        Annotated[
            int,
            msgspec.Meta(
                ge=1,
                description="The line number to start reading from. Only provide if the file"
                " is too large to read at once",
            ),
        ]
        | None
    ) = None
    limit: (
        Annotated[
            int,
            msgspec.Meta(
                ge=1,
                description="The number of lines to read. Only provide if the file is too"
                " large to read at once.",
            ),
        ]
        | None
    ) = None
    pages: (
        Annotated[
            str,
            msgspec.Meta(
                description='Page range for PDF files (e.g., "1-5", "3", "10-20"). Only'
                " applicable to PDF files."
            ),
        ]
        | None
    ) = None


DESCRIPTION = """Reads a file from the local filesystem (inside the workspace).

Usage:
- The file_path parameter must be an absolute path, not a relative path
- By default, it reads up to 2000 lines starting from the beginning of the file
- You can optionally specify a line offset and limit (especially handy for long files)
- Any lines longer than 2000 characters will be truncated
- Results are returned using cat -n format, with line numbers starting at 1
- You can call multiple tools in a single response; read several files at once when useful
- This tool can read images (PNG, JPG, GIF, WebP): their contents are presented visually
- This tool can read PDF files (.pdf); pages names the pages to look at
- This tool can read Jupyter notebooks (.ipynb files) and returns all cells with their outputs
- If you read a file that exists but has empty contents you will receive a warning"""


def run(arguments: Mapping[str, Any], ctx: ToolContext | None) -> ToolOutput:
    ctx = need_context("Read", ctx)
    args = decode_input("Read", ReadInput, arguments)
    path = ctx.workspace.resolve(args.file_path, what="file_path")
    if path.is_dir():
        raise ToolError(f"{args.file_path} is a directory, not a file: use LS to list it")
    if not path.exists():
        raise ToolError(f"File does not exist: {args.file_path}")
    kind = read_media.kind_of(path)
    if args.pages is not None and kind != "pdf":
        raise ToolError(f"pages applies to PDF files only, and {args.file_path} is not one")
    if kind == "image":
        return read_media.read_image(path, args.file_path)
    if kind == "pdf":
        return read_media.read_pdf(path, args.file_path, args.pages)
    if kind == "notebook":
        shown = read_media.read_notebook(path, args.file_path)
        ctx.session.saw(path)  # NotebookEdit may now change it
        return shown
    return _read_text(path, args, ctx)


def _read_text(path: Path, args: ReadInput, ctx: ToolContext) -> str:
    start = args.offset or 1
    limit = args.limit or DEFAULT_LIMIT
    try:
        with open(path, "rb") as f:
            head = f.read(BINARY_SNIFF)
            if b"\x00" in head:
                size = path.stat().st_size
                raise ToolError(
                    f"{args.file_path} is a binary file ({size} bytes); Read shows text files"
                )
            f.seek(0)
            size = os.fstat(f.fileno()).st_size
            lines: list[str] = []
            total, counted = 0, True
            for raw in f:
                total += 1
                if total < start:
                    continue
                if len(lines) < limit:
                    lines.append(cut_line(raw.decode("utf-8", errors="replace").rstrip("\r\n")))
                else:
                    rest = size - f.tell() + len(raw)
                    # The rest is only counted, and only when that is cheap: the model
                    # needs the lines shown, not a full scan of a huge log to number it.
                    if rest <= COUNT_BYTES:
                        total += _count_lines(f)
                    else:
                        counted = False
                    break
    except OSError as exc:
        raise ToolError(f"cannot read {args.file_path}: {exc.strerror or exc}") from None
    ctx.session.saw(path)
    if total == 0:
        return (
            "<system-reminder>Warning: the file exists but the contents are empty."
            "</system-reminder>"
        )
    if not lines:
        return (
            f"<system-reminder>Warning: the file exists but is shorter than the provided"
            f" offset ({start}). The file has {total} lines.</system-reminder>"
        )
    text = numbered(lines, start)
    last = start + len(lines) - 1
    if not counted:
        text += (
            f"\n\n(Showing lines {start}-{last} of a {size:,}-byte file; more lines follow."
            f" Use offset and limit to read other parts.)"
        )
    elif last < total or start > 1:
        text += (
            f"\n\n(Showing lines {start}-{last} of {total}. Use offset and limit to read"
            f" other parts.)"
        )
    return text


def _count_lines(f: IO[bytes]) -> int:
    """The lines left in ``f`` (a last line without a newline counts)."""
    count, last = 0, b"\n"
    for chunk in iter(lambda: f.read(1 << 20), b""):
        count += chunk.count(b"\n")
        last = chunk[-1:]
    return count + (last != b"\n")


TOOL = Tool(
    name="Read",
    starts_processes=False,
    description=DESCRIPTION,
    input_schema=struct_schema(ReadInput),
    run=run,
    read_only=True,
    idempotent=True,
    params=ReadInput,
)
