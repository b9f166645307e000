"""Write: create or overwrite a file (Claude Code's Write)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

import msgspec

from subagents.tools.base import Tool, ToolError, decode_input, need_context, struct_schema
from subagents.tools.context import ToolContext
from subagents.tools.filestate import check_fresh, write_text
from subagents.tools.text import numbered


class WriteInput(msgspec.Struct, forbid_unknown_fields=True):
    file_path: Annotated[
        str,
        msgspec.Meta(description="The absolute path to the file to write (must be absolute)"),
    ]
    content: Annotated[str, msgspec.Meta(description="The content to write to the file")]


DESCRIPTION = """Writes a file to the local filesystem (inside the workspace).

Usage:
- This tool will overwrite the existing file if there is one at the provided path.
- If this is an existing file, you MUST use the Read tool first to read the file's contents.
  This tool will fail if you did not read the file first.
- ALWAYS prefer editing existing files. NEVER write new files unless explicitly required."""

SNIPPET_LINES = 20


def run(arguments: Mapping[str, Any], ctx: ToolContext | None) -> str:
    ctx = need_context("Write", ctx)
    args = decode_input("Write", WriteInput, arguments)
    path = ctx.workspace.resolve(args.file_path, what="file_path")
    if path.is_dir():
        raise ToolError(f"{args.file_path} is a directory; Write writes files")
    existed = path.exists()
    if existed:
        check_fresh(ctx.session, path, args.file_path)
    write_text(
        path, args.content, args.file_path, root=ctx.workspace.root, sealed=ctx.workspace.sealed
    )
    ctx.session.saw(path)
    if not existed:
        return f"File created successfully at: {args.file_path}"
    lines = args.content.splitlines()[:SNIPPET_LINES]
    return (
        f"The file {args.file_path} has been updated. Here's the result of running `cat -n`"
        f" on a snippet of the edited file:\n{numbered(lines, 1)}"
    )


TOOL = Tool(
    name="Write",
    starts_processes=False,
    description=DESCRIPTION,
    input_schema=struct_schema(WriteInput),
    run=run,
    needs_approval=True,
    edits_files=True,
    params=WriteInput,
)
