"""Grep: search file contents with ripgrep (Claude Code's Grep, same options).

ripgrep (the ``ripgrep`` wheel ships the ``rg`` binary) is what Claude Code itself runs: it
honours ``.gitignore``/``.ignore`` files, skips hidden and binary files, and is far faster
than anything written in Python. The tool turns the model's options into ``rg`` arguments,
runs it in its own process group (killed if the run is stopped), and shapes the answer as
Claude Code does: file lists newest first, ``path:line:text`` lines, or per-file counts.

The run store's files (``tools.sealed``) are never searched: a path naming one is refused
(``Workspace.resolve``), and a directory searched skips every file named as one of them, in
any directory and any case (``--iglob !NAME``, after the model's own globs, so none of them
can bring one back). Not only the store's own directory: that directory may be moved into
the workspace, or reached by another name, after the runtime started (a path would miss
it), and a file named ``runs.sqlite3`` elsewhere is a SQLite database ripgrep would skip as
binary anyway. Before, ripgrep opened and read them like any file: only its binary check
(a NUL byte in a file's first block, which SQLite's headers happen to have) kept their text
out of the answer; a file of the store without one (text under the store's name, in tests)
was printed whole.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, BinaryIO, Literal

import msgspec

from subagents.tools.base import Tool, ToolError, decode_input, need_context, struct_schema
from subagents.tools.context import ToolContext
from subagents.tools.grep_order import Listing
from subagents.tools.processes import POLL_S
from subagents.tools.text import OUTPUT_LIMIT, capped

MAX_COLUMNS = 500
SEARCH_TIMEOUT_S = 120.0
LISTING_TICK_S = 0.005
"""How often a file list is read while rg runs: its paths are stat'ed beside its search."""

OutputMode = Literal["content", "files_with_matches", "count"]


def _d(text: str) -> msgspec.Meta:
    return msgspec.Meta(description=text)


class GrepInput(msgspec.Struct, forbid_unknown_fields=True):
    pattern: Annotated[str, _d("The regular expression pattern to search for in file contents")]
    path: (
        Annotated[str, _d("File or directory to search in. Defaults to the workspace root.")] | None
    ) = None
    glob: Annotated[str, _d('Glob pattern to filter files (e.g. "*.js", "*.{ts,tsx}")')] | None = (
        None
    )
    type: Annotated[str, _d("File type to search (rg --type), e.g. js, py, rust")] | None = None
    output_mode: Annotated[
        OutputMode,
        _d(
            'Output mode: "content" shows matching lines, "files_with_matches" shows file'
            ' paths (default), "count" shows match counts'
        ),
    ] = "files_with_matches"
    case_insensitive: Annotated[bool, _d("Case insensitive search (rg -i)")] = msgspec.field(
        default=False, name="-i"
    )
    line_numbers: Annotated[bool, _d("Show line numbers in output (rg -n); content mode")] = (
        msgspec.field(default=True, name="-n")
    )
    after: (
        Annotated[int, msgspec.Meta(ge=0), _d("Lines to show after each match (rg -A)")] | None
    ) = msgspec.field(default=None, name="-A")
    before: (
        Annotated[int, msgspec.Meta(ge=0), _d("Lines to show before each match (rg -B)")] | None
    ) = msgspec.field(default=None, name="-B")
    around: (
        Annotated[int, msgspec.Meta(ge=0), _d("Lines to show around each match (rg -C)")] | None
    ) = msgspec.field(default=None, name="-C")
    multiline: Annotated[
        bool, _d("Enable multiline mode where . matches newlines (rg -U --multiline-dotall)")
    ] = False
    head_limit: (
        Annotated[int, msgspec.Meta(ge=0), _d("Limit output to the first N lines/entries")] | None
    ) = None
    offset: Annotated[int, msgspec.Meta(ge=0), _d("Skip the first N lines/entries")] = 0


DESCRIPTION = """A powerful search tool built on ripgrep

Usage:
- ALWAYS use Grep for search tasks. NEVER invoke `grep` or `rg` as a Bash command.
- Supports full regex syntax (e.g., "log.*Error", "function\\s+\\w+")
- Filter files with glob parameter (e.g., "*.js", "**/*.tsx") or type parameter (e.g., "js")
- Output modes: "content" shows matching lines, "files_with_matches" shows only file paths
  (default), "count" shows match counts
- Pattern syntax: Uses ripgrep (not grep) - literal braces need escaping
- Multiline matching: By default patterns match within single lines only. For cross-line
  patterns, use multiline: true"""


@functools.cache
def rg_binary() -> str:
    """The ``rg`` of the ``ripgrep`` wheel installed with us, else one on PATH."""
    candidates = [
        Path(sys.executable).parent / "rg",
        Path(sysconfig.get_path("scripts")) / "rg",
    ]
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("rg")
    if found is None:
        raise ToolError(
            "Grep needs ripgrep: install the 'ripgrep' package (pip install ripgrep) or put"
            " rg on PATH"
        )
    return found


def rg_arguments(args: GrepInput, target: Path, skipped: Iterable[str] = ()) -> list[str]:
    """The ``rg`` command line for the model's options; files named as one of ``skipped``
    (the run store's) are never searched."""
    cmd = [rg_binary(), "--no-config", "--color=never", f"--max-columns={MAX_COLUMNS}"]
    if args.output_mode == "files_with_matches":
        cmd += ["--files-with-matches", "--null"]  # each path ends with NUL, not a newline
    elif args.output_mode == "count":
        cmd.append("--count-matches")
    else:
        cmd.append("--no-heading")
        cmd.append("--line-number" if args.line_numbers else "--no-line-number")
        if args.around is not None:
            cmd += ["-C", str(args.around)]
        if args.before is not None:
            cmd += ["-B", str(args.before)]
        if args.after is not None:
            cmd += ["-A", str(args.after)]
    if args.case_insensitive:
        cmd.append("-i")
    if args.multiline:
        cmd += ["-U", "--multiline-dotall"]
    if args.glob:
        for part in args.glob.split():
            cmd += ["--glob", part]
    if args.type:
        cmd += ["--type", args.type]
    for name in skipped:  # last: a later glob wins over the model's
        cmd += ["--iglob", "!" + _glob_literal(name)]
    cmd += ["--with-filename", "-e", args.pattern, "--", str(target)]
    return cmd


def _glob_literal(name: str) -> str:
    """``name`` as a glob matching only itself (ripgrep's globs escape with a backslash)."""
    return "".join(f"\\{c}" if c in "\\*?[]{}!" else c for c in name)


def run(arguments: Mapping[str, Any], ctx: ToolContext | None) -> str:
    ctx = need_context("Grep", ctx)
    args = decode_input("Grep", GrepInput, arguments)
    if not args.pattern:
        raise ToolError("pattern is empty")
    target = ctx.workspace.resolve(args.path, what="path") if args.path else ctx.workspace.root
    if not target.exists():
        raise ToolError(f"path does not exist: {args.path}")
    sealed = ctx.workspace.sealed
    skipped = sealed.files if sealed is not None else ()
    listing = Listing() if args.output_mode == "files_with_matches" else None
    code, raw, err = _run_rg(rg_arguments(args, target, skipped), ctx, listing)
    if code not in (0, 1):
        raise ToolError(f"Grep failed: {err.strip() or f'rg exited with {code}'}")
    if listing is not None:
        lines = listing.newest_first() if code == 0 else []
        if not lines:
            return "No files found"
        lines = _window(lines, args)
        return capped(
            f"Found {len(lines)} file{'s' if len(lines) != 1 else ''}\n" + "\n".join(lines)
        )
    lines = raw.decode("utf-8", "replace").splitlines() if code == 0 else []
    if args.output_mode == "count":
        if not lines:
            return "No matches found"
        lines = _window(lines, args)
        total = sum(int(line.rsplit(":", 1)[1]) for line in lines if ":" in line)
        files = len(lines)
        summary = (
            f"Found {total} total occurrence{'s' if total != 1 else ''} across"
            f" {files} file{'s' if files != 1 else ''}."
        )
        # The summary is the answer; the per-file lines are what the cap may cut.
        return capped("\n".join(lines), limit=OUTPUT_LIMIT - len(summary) - 2) + "\n\n" + summary
    if not lines:
        return "No matches found"
    return capped("\n".join(_window(lines, args)))


def _window(lines: list[str], args: GrepInput) -> list[str]:
    lines = lines[args.offset :]
    return lines[: args.head_limit] if args.head_limit else lines


def _run_rg(
    cmd: list[str], ctx: ToolContext, listing: Listing | None = None
) -> tuple[int, bytes, str]:
    """Run rg in its own process group; killed when the run is stopped or out of time. Its
    exit code, its output (all fed to ``listing`` instead when one is given) and its stderr.

    Its output goes to an in-memory file: through a pipe, this process woke for every few
    files rg printed (hundreds of reads when a pattern is in every file), and rg waited on a
    full pipe whenever it was slow to read them. A ``listing`` is fed what rg has written every
    ``LISTING_TICK_S`` while it runs, and the rest at its exit; otherwise the file is read once,
    at its exit. Its stderr stays a pipe: its end of file is how the exit is seen at once."""
    with _output_file() as out:
        proc = subprocess.Popen(
            cmd,
            cwd=ctx.workspace.root,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        until = min(time.monotonic() + SEARCH_TIMEOUT_S, ctx.deadline)
        tick = POLL_S if listing is None else LISTING_TICK_S
        fed = 0
        try:
            while True:
                try:
                    _, err = proc.communicate(timeout=tick)
                    break
                except subprocess.TimeoutExpired:
                    if ctx.cancel.is_set():
                        raise ToolError("Grep was stopped: the run was cancelled") from None
                    if time.monotonic() >= until:
                        raise ToolError(
                            f"Grep timed out after {SEARCH_TIMEOUT_S:g} s (or the run's"
                            " deadline); narrow the path or the pattern"
                        ) from None
                    if listing is not None:
                        fed = _feed(out, fed, listing)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        if listing is not None:
            _feed(out, fed, listing)
            return proc.returncode, b"", err.decode("utf-8", "replace")
        out.seek(0)
        return proc.returncode, out.read(), err.decode("utf-8", "replace")


def _feed(out: BinaryIO, offset: int, listing: Listing) -> int:
    """What rg wrote to ``out`` after ``offset``, fed to ``listing``; the new offset."""
    while chunk := os.pread(out.fileno(), 1 << 20, offset):
        offset += len(chunk)
        listing.feed(chunk)
    return offset


def _output_file() -> BinaryIO:
    """An anonymous file for rg's output: in memory where the kernel has ``memfd_create``
    (Python may have it where the kernel refuses it: ENOSYS, a seccomp filter), else an
    unlinked temporary file; an error naming why when neither can be made."""
    if hasattr(os, "memfd_create"):
        try:
            return os.fdopen(os.memfd_create("rg-output", os.MFD_CLOEXEC), "w+b", buffering=0)
        except OSError:
            pass
    try:
        return tempfile.TemporaryFile(buffering=0)
    except OSError as exc:
        raise ToolError(f"Grep could not make a file for rg's output: {exc}") from None


TOOL = Tool(
    name="Grep",
    starts_processes=False,
    description=DESCRIPTION,
    input_schema=struct_schema(GrepInput),
    run=run,
    read_only=True,
    idempotent=True,
    params=GrepInput,
)
