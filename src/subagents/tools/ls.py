"""LS: a directory's tree (Claude Code's LS), hidden entries and ``__pycache__`` left out."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import msgspec

from subagents.tools.base import Tool, ToolError, decode_input, need_context, struct_schema
from subagents.tools.context import ToolContext

ENTRY_LIMIT = 1_000
SKIPPED = frozenset({"__pycache__", "node_modules"})


class LSInput(msgspec.Struct, forbid_unknown_fields=True):
    path: Annotated[str, msgspec.Meta(description="The absolute path to the directory to list")]
    ignore: (
        Annotated[list[str], msgspec.Meta(description="List of glob patterns to ignore")] | None
    ) = None


DESCRIPTION = """Lists files and directories in a given path. The path parameter must be an
absolute path, not a relative path. You can optionally provide an array of glob patterns to
ignore with the ignore parameter. You should generally prefer the Glob and Grep tools, if you
know which directories to search."""


def run(arguments: Mapping[str, Any], ctx: ToolContext | None) -> str:
    ctx = need_context("LS", ctx)
    args = decode_input("LS", LSInput, arguments)
    root = ctx.workspace.resolve(args.path, what="path")
    if not root.is_dir():
        raise ToolError(
            f"{args.path} is not a directory" if root.exists() else f"{args.path} does not exist"
        )
    ignore = args.ignore or []
    entries: list[tuple[int, str]] = []
    more = _walk(root, 1, ignore, entries)
    lines = [f"- {root}/"] + [f"{'  ' * depth}- {name}" for depth, name in entries]
    text = "\n".join(lines)
    if more:
        text = (
            f"There are more than {ENTRY_LIMIT} files in the directory. Use the LS tool (passing"
            f" a specific path), Bash tool, and other tools to explore nested directories. The"
            f" first {ENTRY_LIMIT} files and directories are included below:\n\n{text}"
        )
    return text


def _ignored(name: str, patterns: list[str]) -> bool:
    """Whether ``name`` matches one of the ``ignore`` patterns (wcmatch, with braces; imported
    here, at the first LS given patterns, not with the runtime)."""
    from wcmatch import fnmatch

    return bool(fnmatch.fnmatch(name, patterns, flags=fnmatch.BRACE))


def _walk(folder: Path, depth: int, ignore: list[str], out: list[tuple[int, str]]) -> bool:
    """Add ``folder``'s entries (dirs with their contents) to ``out``; True if cut short."""
    try:
        with os.scandir(folder) as it:
            items = sorted(it, key=lambda e: e.name)
    except OSError:
        return False
    for entry in items:
        if entry.name.startswith(".") or entry.name in SKIPPED:
            continue
        if ignore and _ignored(entry.name, ignore):
            continue
        if len(out) >= ENTRY_LIMIT:
            return True
        is_dir = entry.is_dir(follow_symlinks=False)
        out.append((depth, entry.name + ("/" if is_dir else "")))
        if is_dir and _walk(Path(entry.path), depth + 1, ignore, out):
            return True
    return False


TOOL = Tool(
    name="LS",
    starts_processes=False,
    description=DESCRIPTION,
    input_schema=struct_schema(LSInput),
    run=run,
    read_only=True,
    idempotent=True,
    params=LSInput,
)
