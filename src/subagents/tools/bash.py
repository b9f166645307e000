"""Bash, BashOutput and KillShell: shell commands in the workspace (Claude Code's tools).

Each command runs in its own process group (``ProcessGroups``), starting in the directory
the previous command of this run ended in (as Claude Code's shell keeps its ``cd``), never
outside the workspace. The group is killed when the timeout passes, when the run is stopped
or reaches its deadline, and, for background commands, when the run ends. Output (stdout and
stderr interleaved, as a terminal shows them) is capped at 30,000 characters with a note.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import re
import secrets
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import msgspec

from subagents.tools.base import (
    Tool,
    ToolError,
    ToolResult,
    decode_input,
    need_context,
    struct_schema,
)
from subagents.tools.context import ToolContext
from subagents.tools.output_files import open_regular, read_output
from subagents.tools.process import Process
from subagents.tools.processes import KILL_GRACE_S
from subagents.tools.text import OUTPUT_LIMIT, capped

DEFAULT_TIMEOUT_MS = 120_000
MAX_TIMEOUT_MS = 600_000
_UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")


class BashInput(msgspec.Struct, forbid_unknown_fields=True):
    command: Annotated[str, msgspec.Meta(description="The command to execute")]
    timeout: (
        Annotated[
            float,
            msgspec.Meta(
                gt=0, description="Optional timeout in milliseconds (max 600000, default 120000)"
            ),
        ]
        | None
    ) = None
    description: (
        Annotated[
            str,
            msgspec.Meta(
                description="Clear, concise description of what this command does in 5-10 words"
            ),
        ]
        | None
    ) = None
    run_in_background: Annotated[
        bool,
        msgspec.Meta(
            description="Set to true to run this command in the background. Use BashOutput to"
            " read the output later."
        ),
    ] = False
    dangerously_disable_sandbox: Annotated[
        bool,
        msgspec.Meta(
            description="Set this to true to ask for approval to run this command outside"
            " the sandbox (it could then write anywhere and use the network)."
        ),
    ] = msgspec.field(default=False, name="dangerouslyDisableSandbox")


class BashOutputInput(msgspec.Struct, forbid_unknown_fields=True):
    bash_id: Annotated[
        str, msgspec.Meta(description="The ID of the background shell to retrieve output from")
    ]
    filter: (
        Annotated[
            str,
            msgspec.Meta(
                description="Optional regular expression to filter the output lines. Only"
                " lines matching this regex will be included in the result. Any lines that do"
                " not match will no longer be available to read."
            ),
        ]
        | None
    ) = None


class KillShellInput(msgspec.Struct, forbid_unknown_fields=True):
    shell_id: Annotated[str, msgspec.Meta(description="The ID of the background shell to kill")]


BASH_DESCRIPTION = """Executes a given bash command with an optional timeout, in the workspace.

- The working directory persists between commands (a `cd` stays in effect) but never leaves
  the workspace; prefer absolute paths.
- Optional timeout in milliseconds (up to 600000 ms / 10 minutes); default 120000 ms. When it
  passes, the command and every process it started are killed.
- Output (stdout and stderr together) over 30000 characters is truncated; past 64 MB it is
  dropped and the command's next write fails (a closed pipe).
- run_in_background: true starts the command and returns its shell ID at once; read its
  output with BashOutput, stop it with KillShell. It is killed when your run ends. A run
  holds a limited number at once (16 by default): KillShell the ones you no longer need.
- Avoid `find`, `grep`, `cat`, `head`, `tail`, `ls`: use Glob, Grep, Read and LS instead."""

BASH_OUTPUT_DESCRIPTION = """Retrieves output from a running or completed background bash
shell. Returns only the output produced since the last check, with the shell's status."""

KILL_SHELL_DESCRIPTION = "Kills a running background bash shell by its ID."


def _cwd_file(ctx: ToolContext, process_dir: Path) -> Path:
    """Where the call's shell writes the directory it ended in: a name of its own in the
    run's directory. The call's id comes from the model's answer: only its letters, digits,
    ``_`` and ``-`` are kept (an id holding ``/..`` named a file anywhere, which the runtime
    deleted after the call), with a random mark, so that no two calls share a name."""
    call = _UNSAFE_NAME_CHARS.sub("_", f"{ctx.run_id}-{ctx.tool_use_id or 'call'}")
    return process_dir / f"cwd-{call}-{secrets.token_hex(4)}"


def _wrapped(command: str, cwd_file: Path) -> str:
    """The command, reporting the directory it ends in (so the next call starts there)."""
    return f"trap 'pwd -P >| {shlex.quote(str(cwd_file))} 2>/dev/null' EXIT\n{command}"


def _environment(ctx: ToolContext) -> dict[str, str]:
    """The scrubbed environment (``tools.sandbox.ENV_ALLOWLIST`` and the owner's
    ``tool_env``), with ``TMPDIR`` the run's own directory."""
    return ctx.run_sandbox().environment(ctx.processes.run_dir(ctx.process_key))


def _start_dir(ctx: ToolContext) -> Path:
    cwd = ctx.session.cwd
    if not cwd.is_dir() or not ctx.workspace.contains(cwd):
        ctx.session.cwd = cwd = ctx.workspace.root
    return cwd


def run_bash(arguments: Mapping[str, Any], ctx: ToolContext | None) -> ToolResult:
    ctx = need_context("Bash", ctx)
    args = decode_input("Bash", BashInput, arguments)
    if not args.command.strip():
        raise ToolError("command is empty")
    timeout_ms = DEFAULT_TIMEOUT_MS if args.timeout is None else args.timeout
    if timeout_ms > MAX_TIMEOUT_MS:
        raise ToolError(f"timeout must be at most {MAX_TIMEOUT_MS} ms, got {timeout_ms:g}")
    cwd = _start_dir(ctx)
    sandbox = ctx.run_sandbox()
    if args.run_in_background:
        process = ctx.processes.start(
            args.command,
            cwd=cwd,
            run_id=ctx.process_key,
            env=_environment(ctx),
            prefix="bash",
            sandbox=sandbox,
            background=True,
            cancel=ctx.cancel,
            attempt=ctx.attempt,
        )
        return ToolResult(f"Command running in background with ID: {process.id}")
    cwd_file = _cwd_file(ctx, ctx.processes.run_dir(ctx.process_key))
    process = ctx.processes.start(
        _wrapped(args.command, cwd_file),
        cwd=cwd,
        run_id=ctx.process_key,
        env=_environment(ctx),
        sandbox=sandbox,
        cancel=ctx.cancel,
        attempt=ctx.attempt,
    )
    waited = ctx.processes.wait(
        process, timeout=timeout_ms / 1000, cancel=ctx.cancel, deadline=ctx.deadline
    )
    text, omitted, _ = read_output(process.output, limit_chars=OUTPUT_LIMIT)
    ctx.processes.release(process)
    note = _follow_cwd(ctx, cwd_file)
    output = _join(capped(text.rstrip("\n"), omitted), _dropped(process, ctx))
    if waited.reason == "timeout":
        killed = (
            "it and every process it started were killed."
            if process.contained()
            else "it was killed; processes it started may still run."
        )
        timed_out = f"Command timed out after {timeout_ms / 1000:g} s; {killed}"
        return ToolResult(_join(output, timed_out), is_error=True)
    if waited.reason == "cancelled":
        return ToolResult(_join(output, "Command killed: the run was stopped."), is_error=True)
    if waited.reason == "deadline":
        return ToolResult(
            _join(output, "Command killed: the run reached its deadline."), is_error=True
        )
    code = waited.exit_code
    output = _join(output, note)
    if code:
        return ToolResult(_join(f"Exit code {code}", output), is_error=True)
    return ToolResult(output or "(no output)")


def _dropped(process: Process, ctx: ToolContext) -> str:
    """The note for a command whose output was cut: past the cap, or not writable
    (``processes._relay``)."""
    if not process.dropped:
        return ""
    if process.cut:
        return (
            f"[output cut: it could not be kept ({process.cut}): the rest dropped; the"
            " command's next write after it got SIGPIPE (a closed pipe)]"
        )
    cap_mb = ctx.processes.output_cap / (1024 * 1024)
    return (
        f"[output over {cap_mb:g} MB: the rest dropped; the command's next write after it"
        " got SIGPIPE (a closed pipe)]"
    )


def _join(*parts: str) -> str:
    return "\n".join(p for p in parts if p)


def _follow_cwd(ctx: ToolContext, cwd_file: Path) -> str:
    """Move the run's shell directory to where the command ended; a note if it left."""
    try:
        with open_regular(cwd_file) as f:  # written by the command: perhaps not a file
            ended = Path(f.read(4096).decode("utf-8", "replace").strip())
    except OSError:
        return ""
    finally:
        with contextlib.suppress(OSError):
            cwd_file.unlink()
    real = Path(os.path.realpath(ended))
    if ctx.workspace.contains(real):
        ctx.session.cwd = real
        return ""
    ctx.session.cwd = ctx.workspace.root
    return f"Shell cwd was reset to {ctx.workspace.root}"


def run_bash_output(arguments: Mapping[str, Any], ctx: ToolContext | None) -> str:
    ctx = need_context("BashOutput", ctx)
    args = decode_input("BashOutput", BashOutputInput, arguments)
    process = _shell(ctx, args.bash_id)
    pattern = None
    if args.filter:
        try:
            pattern = re.compile(args.filter)
        except re.error as exc:
            raise ToolError(f"filter is not a valid regular expression: {exc}") from None
    code = process.exit_code()
    if code is not None:
        process.drained.wait(KILL_GRACE_S)  # the last of its output into the file
    text, omitted, process.read_offset = read_output(
        process.output, offset=process.read_offset, limit_chars=OUTPUT_LIMIT
    )
    if pattern is not None:
        text = "\n".join(line for line in text.splitlines() if pattern.search(line))
    status = "running" if code is None else ("killed" if process.killed else "completed")
    parts = [f"<status>{status}</status>"]
    if code is not None:
        parts.append(f"<exit_code>{code}</exit_code>")
        if process.read_offset >= process.output.stat().st_size:
            ctx.processes.release(process)  # ended and fully read
    shown = _join(capped(text.rstrip(chr(10)), omitted), _dropped(process, ctx))
    parts.append(f"<stdout>\n{shown}\n</stdout>")
    parts.append(f"<timestamp>{datetime.datetime.now(datetime.UTC).isoformat()}</timestamp>")
    return "\n\n".join(parts)


def run_kill_shell(arguments: Mapping[str, Any], ctx: ToolContext | None) -> str:
    """Kill a background shell, and free its slot (``ShellLimits``): a shell whose command
    ended still holds one while processes it started run (a daemon), so those are killed
    too, said in the answer; a shell with nothing left running is not running, as in
    Claude Code."""
    ctx = need_context("KillShell", ctx)
    args = decode_input("KillShell", KillShellInput, arguments)
    process = ctx.processes.shell(ctx.process_key, args.shell_id)
    if process is None:
        raise ToolError(f"No shell found with ID: {args.shell_id}")
    code = process.exit_code()
    if code is not None and process.poll() is not None:
        ctx.processes.release(process)
        raise ToolError(
            f"Shell {args.shell_id} is not running, so cannot be killed (status: completed)"
        )
    ctx.processes.kill(process, "KillShell")
    ctx.processes.release(process)
    if code is not None:
        return (
            f"Successfully killed shell: {args.shell_id} ({process.command}): it had ended"
            f" (exit code {code}); the processes it left running were killed"
        )
    return f"Successfully killed shell: {args.shell_id} ({process.command})"


def _shell(ctx: ToolContext, shell_id: str) -> Process:
    process = ctx.processes.get(ctx.process_key, shell_id)
    if process is None:
        raise ToolError(f"No shell found with ID: {shell_id}")
    return process


BASH = Tool(
    name="Bash",
    description=BASH_DESCRIPTION,
    input_schema=struct_schema(BashInput),
    run=run_bash,
    needs_approval=True,
    params=BashInput,
)
BASH_OUTPUT = Tool(
    name="BashOutput",
    starts_processes=False,
    description=BASH_OUTPUT_DESCRIPTION,
    input_schema=struct_schema(BashOutputInput),
    run=run_bash_output,
    read_only=True,
    params=BashOutputInput,
)
KILL_SHELL = Tool(
    name="KillShell",
    starts_processes=False,
    description=KILL_SHELL_DESCRIPTION,
    input_schema=struct_schema(KillShellInput),
    run=run_kill_shell,
    idempotent=True,
    params=KillShellInput,
)
