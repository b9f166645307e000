"""Glob: files whose path matches a glob pattern, newest first (Claude Code's Glob).

Matching is wcmatch's (``**``, braces, character classes; hidden files only when the pattern
names them): a maintained implementation of the shell's rules, where the standard
library's ``glob`` has no brace expansion and ``pathlib`` cannot sort by what it matched.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any

import msgspec

from subagents.tools.base import Tool, ToolError, decode_input, need_context, struct_schema
from subagents.tools.context import ToolContext

RESULT_LIMIT = 100


def _wcmatch() -> tuple[ModuleType, int]:
    """wcmatch's glob module and our flags, imported at the first Glob call: most runs never
    glob, and every ``import subagents.runtime`` would otherwise pay for it."""
    from wcmatch import glob as wglob

    return wglob, wglob.GLOBSTAR | wglob.BRACE | wglob.NODIR | wglob.SPLIT


class GlobInput(msgspec.Struct, forbid_unknown_fields=True):
    pattern: Annotated[str, msgspec.Meta(description="The glob pattern to match files against")]
    path: (
        Annotated[
            str,
            msgspec.Meta(
                description="The directory to search in. If not specified, the workspace root"
                " is used. Must be a valid directory path if provided."
            ),
        ]
        | None
    ) = None


DESCRIPTION = """- Fast file pattern matching tool that works with any codebase size
- Supports glob patterns like "**/*.js" or "src/**/*.ts"
- Returns matching file paths sorted by modification time (newest first)
- Use this tool when you need to find files by name patterns"""


def run(arguments: Mapping[str, Any], ctx: ToolContext | None) -> str:
    ctx = need_context("Glob", ctx)
    args = decode_input("Glob", GlobInput, arguments)
    if not args.pattern.strip():
        raise ToolError("pattern is empty")
    base = ctx.workspace.resolve(args.path, what="path") if args.path else ctx.workspace.root
    if not base.is_dir():
        raise ToolError(f"path {args.path} is not a directory")
    pattern = args.pattern
    if ".." in Path(pattern).parts:
        raise ToolError(
            f"pattern {args.pattern!r} climbs out with '..': give a path inside the workspace"
            f" {ctx.workspace.root} instead"
        )
    if pattern.startswith("/"):  # an absolute pattern: from its fixed part, inside the workspace
        fixed, rest = _split_fixed(pattern)
        base = ctx.workspace.resolve(fixed, what="pattern")
        pattern = rest or "*"
    wglob, flags = _wcmatch()
    try:
        found = wglob.glob(pattern, root_dir=str(base), flags=flags, limit=0)
    except (ValueError, OSError) as exc:
        raise ToolError(f"bad glob pattern {args.pattern!r}: {exc}") from None
    dated: list[tuple[float, str]] = []
    for rel in found:
        full = os.path.join(base, rel)
        if not ctx.workspace.contains(Path(os.path.realpath(full))):
            continue  # a symlink out of the workspace: not even its name is shown
        try:
            dated.append((os.stat(full).st_mtime, full))
        except OSError:
            continue
    if not dated:
        return "No files found"
    dated.sort(key=lambda item: (-item[0], item[1]))
    lines = [path for _, path in dated[:RESULT_LIMIT]]
    if len(dated) > RESULT_LIMIT:
        lines.append("(Results are truncated. Consider using a more specific path or pattern.)")
    return "\n".join(lines)


def _split_fixed(pattern: str) -> tuple[str, str]:
    """``/a/b/**/*.py`` -> (``/a/b``, ``**/*.py``): the leading components with no magic."""
    wglob, flags = _wcmatch()
    parts = Path(pattern).parts
    fixed: list[str] = []
    for i, part in enumerate(parts):
        if wglob.is_magic(part, flags=flags):
            return str(Path(*fixed)), "/".join(parts[i:])
        fixed.append(part)
    return str(Path(*fixed[:-1])), fixed[-1]


TOOL = Tool(
    name="Glob",
    starts_processes=False,
    description=DESCRIPTION,
    input_schema=struct_schema(GlobInput),
    run=run,
    read_only=True,
    idempotent=True,
    params=GlobInput,
)
