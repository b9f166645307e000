"""Edit and MultiEdit: exact string replacement in a file (Claude Code's Edit, MultiEdit).

An ``old_string`` must match exactly once unless ``replace_all`` is set: a replacement the
model did not aim at is worse than an error that says how many places matched. MultiEdit
applies its edits in order to the file's text in memory and writes once: all or nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import msgspec

from subagents.tools.base import Tool, ToolError, decode_input, need_context, struct_schema
from subagents.tools.context import ToolContext
from subagents.tools.filestate import check_fresh, read_text, write_text
from subagents.tools.text import numbered, quoted

CONTEXT_LINES = 4

_OLD = msgspec.Meta(description="The text to replace")
_NEW = msgspec.Meta(description="The text to replace it with (must be different from old_string)")
_ALL = msgspec.Meta(description="Replace all occurences of old_string (default false)")


class EditInput(msgspec.Struct, forbid_unknown_fields=True):
    file_path: Annotated[str, msgspec.Meta(description="The absolute path to the file to modify")]
    old_string: Annotated[str, _OLD]
    new_string: Annotated[str, _NEW]
    replace_all: Annotated[bool, _ALL] = False


class OneEdit(msgspec.Struct, forbid_unknown_fields=True):
    old_string: Annotated[str, _OLD]
    new_string: Annotated[str, _NEW]
    replace_all: Annotated[bool, _ALL] = False


class MultiEditInput(msgspec.Struct, forbid_unknown_fields=True):
    file_path: Annotated[str, msgspec.Meta(description="The absolute path to the file to modify")]
    edits: Annotated[
        list[OneEdit],
        msgspec.Meta(min_length=1, description="Array of edit operations to perform in order"),
    ]


EDIT_DESCRIPTION = """Performs exact string replacements in files.

Usage:
- You must use your Read tool at least once in the conversation before editing. This tool
  will error if you attempt an edit without reading the file.
- When editing text from Read tool output, preserve the exact indentation as it appears AFTER
  the line number prefix (spaces + line number + tab). Never include the prefix itself.
- The edit will FAIL if old_string is not unique in the file. Either provide a larger string
  with more surrounding context to make it unique or use replace_all to change every instance.
- Use replace_all for replacing and renaming strings across the file."""

MULTI_DESCRIPTION = """Makes multiple edits to a single file in one operation.

All edits are applied in sequence, in the order provided; each edit operates on the result of
the previous one. Either all edits succeed or none are applied. Same rules as Edit: read the
file first; each old_string must match exactly and uniquely unless replace_all is true. To
create a new file, give a new file path with an empty old_string in the first edit."""


def replace(text: str, edit: OneEdit, shown: str, prefix: str = "") -> tuple[str, int]:
    """``text`` with one edit made; (new text, offset of the first replacement)."""
    old, new = edit.old_string, edit.new_string
    if old == new:
        raise ToolError(
            f"{prefix}No changes to make: old_string and new_string are exactly the same."
        )
    if old == "":
        raise ToolError(f"{prefix}old_string is empty; it can only be empty to create {shown}")
    count = text.count(old)
    if count == 0:
        raise ToolError(f"{prefix}String to replace not found in file.\nString: {old}")
    if count > 1 and not edit.replace_all:
        raise ToolError(
            f"{prefix}Found {count} matches of the string to replace, but replace_all is false."
            f" To replace all occurrences, set replace_all to true. To replace only one"
            f" occurrence, please provide more context to uniquely identify the instance."
            f"\nString: {old}"
        )
    at = text.index(old)
    return (text.replace(old, new) if edit.replace_all else text.replace(old, new, 1)), at


def snippet(text: str, at: int, length: int) -> str:
    """The lines around ``text[at:at+length]``, numbered."""
    first = text.count("\n", 0, at)
    last = first + text.count("\n", at, at + length)
    lines = text.split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()  # the newline that ends the last line starts no line
    lo = max(0, first - CONTEXT_LINES)
    hi = min(len(lines), last + CONTEXT_LINES + 1)
    return numbered([line.rstrip("\r") for line in lines[lo:hi]], lo + 1)


def _target(ctx: ToolContext, file_path: str, creating: bool) -> tuple[Path, str | None]:
    """The file's real path and its text (None: it does not exist and is being created)."""
    path = ctx.workspace.resolve(file_path, what="file_path")
    if path.is_dir():
        raise ToolError(f"{file_path} is a directory, not a file")
    if not path.exists():
        if creating:
            return path, None
        raise ToolError(f"File does not exist: {file_path}")
    if creating and path.stat().st_size > 0:
        raise ToolError(f"Cannot create new file - file already exists: {file_path}")
    check_fresh(ctx.session, path, file_path)
    return path, read_text(path, file_path)


def run_edit(arguments: Mapping[str, Any], ctx: ToolContext | None) -> str:
    ctx = need_context("Edit", ctx)
    args = decode_input("Edit", EditInput, arguments)
    creating = args.old_string == ""
    path, text = _target(ctx, args.file_path, creating)
    if text is None or (creating and text == ""):
        write_text(
            path,
            args.new_string,
            args.file_path,
            root=ctx.workspace.root,
            sealed=ctx.workspace.sealed,
        )
        ctx.session.saw(path)
        return f"File created successfully at: {args.file_path}"
    edit = OneEdit(args.old_string, args.new_string, args.replace_all)
    updated, at = replace(text, edit, args.file_path)
    write_text(path, updated, args.file_path, root=ctx.workspace.root, sealed=ctx.workspace.sealed)
    ctx.session.saw(path)
    if args.replace_all:
        return (
            f"The file {args.file_path} has been updated. All occurrences of"
            f" '{quoted(args.old_string)}' were successfully replaced with"
            f" '{quoted(args.new_string)}'."
        )
    return (
        f"The file {args.file_path} has been updated. Here's the result of running `cat -n` on"
        f" a snippet of the edited file:\n{snippet(updated, at, len(args.new_string))}"
    )


def run_multi(arguments: Mapping[str, Any], ctx: ToolContext | None) -> str:
    ctx = need_context("MultiEdit", ctx)
    args = decode_input("MultiEdit", MultiEditInput, arguments)
    edits = list(args.edits)
    creating = edits[0].old_string == ""
    path, text = _target(ctx, args.file_path, creating)
    if creating:
        text = edits.pop(0).new_string
    assert text is not None
    for i, edit in enumerate(edits, 2 if creating else 1):
        text, _ = replace(text, edit, args.file_path, prefix=f"edit {i} of {len(args.edits)}: ")
    write_text(path, text, args.file_path, root=ctx.workspace.root, sealed=ctx.workspace.sealed)
    ctx.session.saw(path)
    lines = [f"Applied {len(args.edits)} edits to {args.file_path}:"]
    for i, edit in enumerate(args.edits, 1):
        lines.append(f'{i}. Replaced "{quoted(edit.old_string)}" with "{quoted(edit.new_string)}"')
    return "\n".join(lines)


EDIT = Tool(
    name="Edit",
    starts_processes=False,
    description=EDIT_DESCRIPTION,
    input_schema=struct_schema(EditInput),
    run=run_edit,
    needs_approval=True,
    edits_files=True,
    params=EditInput,
)
MULTI_EDIT = Tool(
    name="MultiEdit",
    starts_processes=False,
    description=MULTI_DESCRIPTION,
    input_schema=struct_schema(MultiEditInput),
    run=run_multi,
    needs_approval=True,
    edits_files=True,
    params=MultiEditInput,
)
