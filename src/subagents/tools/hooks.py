"""Hooks: shell commands a definition's ``hooks`` runs around tool calls and at its end, in
Claude Code's shapes (``PreToolUse``, ``PostToolUse``, ``Stop``)::

    hooks:
      PreToolUse:
        - matcher: "Edit|Write"        # a tool name, a regular expression, or "*" / ""
          hooks:
            - type: command
              command: "./scripts/check-edit.sh"
              timeout: 30              # seconds, default 60

A hook gets Claude Code's JSON on stdin (``hook_event_name``, ``tool_name``,
``tool_input``, ``tool_response`` after the call, ``cwd``, ``session_id`` = the run id) and
runs in the workspace, in its own process group. Exit code 2 blocks: a PreToolUse hook stops
the call and its stderr is the model's tool result; a PostToolUse hook's stderr is added to
the result; a Stop hook's stderr is given to the model, which goes on instead of ending. A
JSON answer on stdout (``{"decision": "block", "reason": ...}`` or ``hookSpecificOutput``'s
``permissionDecision: deny``) blocks the same way. Any other non-zero exit is logged and
changes nothing.

A shell command that comes from a file is a trust decision: hooks run only when the Runtime
is created with ``allow_hooks=True``; otherwise the runtime warns once when it loads a
definition that has some.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from subagents.blocking import about_to_block
from subagents.models.base import CancelSignal
from subagents.tools.detached import DetachedReaper, detaches
from subagents.tools.group_leader import GroupLeader
from subagents.tools.held import said_exit, status_pipe, stop_held
from subagents.tools.lease_line import fds_of
from subagents.tools.processes import (
    KILL_GRACE_S,
    POLL_S,
    LauncherStuck,
    detached_reaper,
    held_argv,
    shell,
)
from subagents.tools.reaper import LEASE_VARIABLE
from subagents.tools.sandbox import UNSANDBOXED, RunSandbox, SandboxRefused

EVENTS = ("PreToolUse", "PostToolUse", "Stop")
Event = Literal["PreToolUse", "PostToolUse", "Stop"]
DEFAULT_TIMEOUT_S = 60.0
BLOCK_EXIT = 2


class HookConfigError(ValueError):
    """A ``hooks`` value that does not have Claude Code's shape; says where and why."""


@dataclass(frozen=True)
class HookCommand:
    command: str
    timeout: float = DEFAULT_TIMEOUT_S


@dataclass(frozen=True)
class Matcher:
    pattern: str
    commands: tuple[HookCommand, ...]

    def matches(self, tool: str) -> bool:
        if self.pattern in ("", "*"):
            return True
        try:
            return re.fullmatch(self.pattern, tool) is not None
        except re.error:
            return self.pattern == tool


@dataclass(frozen=True)
class HookOutcome:
    """What the hooks of one event said: blocked (with the reason for the model) or not."""

    blocked: bool = False
    reason: str = ""
    ran: int = 0


@dataclass(frozen=True)
class Hooks:
    """A definition's hooks, by event."""

    by_event: Mapping[str, tuple[Matcher, ...]]
    ignored: tuple[str, ...] = ()
    """Events the definition names that this runtime does not run (warned about)."""

    @classmethod
    def parse(cls, value: Any, where: str) -> Hooks:
        if value is None:
            return cls({})
        if not isinstance(value, Mapping):
            raise HookConfigError(f"{where}: hooks must be a mapping of event names, got {value!r}")
        by_event: dict[str, tuple[Matcher, ...]] = {}
        ignored: list[str] = []
        for event, entries in value.items():
            if event not in EVENTS:
                ignored.append(str(event))
                continue
            if not isinstance(entries, list):
                raise HookConfigError(f"{where}: hooks.{event} must be a list, got {entries!r}")
            matchers = []
            for i, entry in enumerate(entries):
                matchers.append(_matcher(entry, f"{where}: hooks.{event}[{i}]"))
            by_event[event] = tuple(matchers)
        return cls(by_event, tuple(ignored))

    def __bool__(self) -> bool:
        return any(self.by_event.values())

    def commands(self, event: Event, tool: str | None = None) -> list[HookCommand]:
        found: list[HookCommand] = []
        for matcher in self.by_event.get(event, ()):
            if tool is None or matcher.matches(tool):
                found.extend(matcher.commands)
        return found


def _matcher(entry: Any, where: str) -> Matcher:
    if not isinstance(entry, Mapping):
        raise HookConfigError(f"{where} must be a mapping with 'matcher' and 'hooks'")
    pattern = entry.get("matcher", "")
    if not isinstance(pattern, str):
        raise HookConfigError(f"{where}.matcher must be text, got {pattern!r}")
    raw = entry.get("hooks")
    if not isinstance(raw, list) or not raw:
        raise HookConfigError(f"{where}.hooks must be a non-empty list of commands")
    commands = []
    for j, hook in enumerate(raw):
        at = f"{where}.hooks[{j}]"
        if not isinstance(hook, Mapping) or hook.get("type", "command") != "command":
            raise HookConfigError(f"{at} must be {{type: command, command: ...}}, got {hook!r}")
        command = hook.get("command")
        if not isinstance(command, str) or not command.strip():
            raise HookConfigError(f"{at}.command must be a non-empty shell command")
        timeout = hook.get("timeout", DEFAULT_TIMEOUT_S)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise HookConfigError(f"{at}.timeout must be a positive number of seconds")
        commands.append(HookCommand(command, float(timeout)))
    return Matcher(pattern, tuple(commands))


def run_hooks(
    hooks: Hooks,
    event: Event,
    payload: dict[str, Any],
    *,
    tool: str | None,
    cwd: Path,
    cancel: CancelSignal,
    log: Any,
    sandbox: RunSandbox | None = None,
    temp_dir: Path | None = None,
    lease_env: Mapping[str, str] | None = None,
) -> HookOutcome:
    """Run the hooks of ``event`` that match ``tool`` in order; the first block wins. Each
    runs in the run's ``sandbox`` (``tools.sandbox``: Landlock, the scrubbed environment),
    with ``temp_dir`` (the run's own) writable; a sandbox that refuses to start a process
    (a read-only run on a kernel without Landlock) makes the hook fail, logged. ``lease_env``:
    the runtime's lease line (``tools.lease_line``), which its reaper kills it by."""
    commands = hooks.commands(event, tool)
    body = json.dumps({**payload, "hook_event_name": event, "cwd": str(cwd)})
    if sandbox is None:
        sandbox = UNSANDBOXED.for_run(workspace=cwd, read_only=False, network=True)
    for i, hook in enumerate(commands):
        code, out, err = _run(hook, body, cwd, cancel, sandbox, temp_dir or cwd, lease_env)
        if code == BLOCK_EXIT:
            reason = err.strip() or out.strip() or f"blocked by the {event} hook {hook.command!r}"
            return HookOutcome(True, reason, i + 1)
        decided = _decision(out) if code == 0 else None
        if decided is not None:
            return HookOutcome(True, decided, i + 1)
        if code != 0:
            log.warning(
                "hook failed", hook_event=event, command=hook.command, exit_code=code,
                stderr=err.strip()[:500],
            )  # fmt: skip
    return HookOutcome(False, "", len(commands))


def _decision(stdout: str) -> str | None:
    """A block decided in a hook's JSON answer, as the reason; None when it did not block."""
    text = stdout.strip()
    if not text.startswith("{"):
        return None
    try:
        answer = json.loads(text)
    except ValueError:
        return None
    if not isinstance(answer, dict):
        return None
    if answer.get("decision") == "block":
        return str(answer.get("reason") or "blocked by a hook")
    specific = answer.get("hookSpecificOutput")
    if isinstance(specific, dict) and specific.get("permissionDecision") == "deny":
        return str(specific.get("permissionDecisionReason") or "denied by a hook")
    if answer.get("continue") is False:
        return str(answer.get("stopReason") or "stopped by a hook")
    return None


def _run(
    hook: HookCommand,
    body: str,
    cwd: Path,
    cancel: CancelSignal,
    sandbox: RunSandbox,
    temp_dir: Path,
    lease_env: Mapping[str, str] | None = None,
) -> tuple[int, str, str]:
    """Run one hook's command, held by the reaper (``tools/held.py``): at its end, its
    timeout or the run's stop, everything it started is killed, daemons included."""
    about_to_block()
    status, told = status_pipe()
    detach = told >= 0 and detaches()  # a node host's: not its child (``tools/detached.py``)
    try:
        argv = held_argv([shell(), "-c", hook.command], temp_dir, sandbox, _reap(told, detach))
    except SandboxRefused as exc:
        _close(status, told)
        return -1, "", f"not run: {exc}"
    env = sandbox.environment(temp_dir)
    env.pop(LEASE_VARIABLE, None)  # only this runtime's own line (``lease_env``)
    env["CLAUDE_PROJECT_DIR"] = str(cwd)
    env.update(lease_env or {})
    stdin, feed = os.pipe()
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            pass_fds=((told,) if told >= 0 else ()) + fds_of(lease_env),
        )
    except BaseException:
        _close(status, feed)
        raise
    finally:
        _close(told, stdin)
    leader = GroupLeader.of(proc)  # before anything waits: its pid is still its own
    reaper: DetachedReaper | None = None
    until = time.monotonic() + hook.timeout
    try:
        said = b""
        if detach:
            try:
                reaper, said = detached_reaper(proc, status, hook.command)
            except LauncherStuck as exc:
                _close(feed)
                return -1, "", f"not run: {exc}"
        _send(feed, body.encode())
        code, out, err = _outcome(proc, hook, cancel, until)
        if reaper is None or code < 0:
            return code, out, err
        return _said(status, said, until, hook, out, err)  # its launcher's exit: not the shell's
    finally:
        _end(leader, held=status >= 0, reaper=reaper)
        _close(status)  # after the reaper's end: while it runs, the pipe is its lifeline


def _said(
    status: int, said: bytes, until: float, hook: HookCommand, out: str, err: str
) -> tuple[int, str, str]:
    """A detached reaper's hook's outcome: the shell's exit code as the reaper says it
    (``held.said_exit``; killed: ``-SIGKILL``), or a timeout (its output ended, not it)."""
    code = said_exit(status, said, max(0.0, until - time.monotonic()))
    if code is not None:
        return code, out, err
    if time.monotonic() >= until:
        return -1, "", f"hook timed out after {hook.timeout:g} s"
    return -signal.SIGKILL, out, err


def _reap(told: int, detach: bool) -> list[str]:
    return ["--status-fd", str(told), *(["--detach"] if detach else [])] if told >= 0 else []


def _send(feed: int, body: bytes) -> None:
    """Write ``body`` to the hook's stdin (``feed``, the pipe's write end) and close it: at
    once when it fits in the pipe (64 KiB), else the rest from a thread of its own. Why not
    ``communicate(input=...)``: retried after its timeout (the loop that watches the cancel
    signal), it neither sends the rest nor closes stdin, so a hook reading a body larger
    than the pipe that was not read within the first ``POLL_S`` (a slow start: the reaper's
    interpreter, a loaded machine) waited for the rest until its timeout, and its answer
    (a PreToolUse guard's block) was lost."""
    os.set_blocking(feed, False)
    try:
        body = body[os.write(feed, body) :]
    except BlockingIOError:
        pass
    except OSError:  # the hook ended without reading it all (EPIPE)
        body = b""
    if not body:
        os.close(feed)
        return
    os.set_blocking(feed, True)
    try:
        threading.Thread(target=_write_all, args=(feed, body), daemon=True).start()
    except BaseException:
        os.close(feed)
        raise


def _write_all(feed: int, body: bytes) -> None:
    view = memoryview(body)
    try:
        while view:
            view = view[os.write(feed, view) :]
    except OSError:
        pass  # the hook ended (or was killed) without reading it all
    finally:
        os.close(feed)


def _outcome(
    proc: subprocess.Popen[bytes], hook: HookCommand, cancel: CancelSignal, until: float
) -> tuple[int, str, str]:
    """The hook's exit code and output (``until``: its timeout's end), or -1 and why it was
    cut short."""
    while True:
        try:
            out, err = proc.communicate(timeout=POLL_S)
            break
        except subprocess.TimeoutExpired:
            if cancel.is_set():
                return -1, "", "the run was stopped"
            if time.monotonic() >= until:
                return -1, "", f"hook timed out after {hook.timeout:g} s"
    return proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


def _end(leader: GroupLeader, *, held: bool, reaper: DetachedReaper | None = None) -> None:
    """Kill what is left of the hook: held, its reaper stops it all (``stop_held``; by its
    pidfd when detached: ``reaper``); else its group, after its end too (what it left in
    it; a daemon that left it lives on). Every signal through ``leader`` (a pidfd of the
    hook's first process opened at its start: ``group_leader``): after ``communicate`` has
    reaped it, its number may be another group's."""
    proc = leader.popen
    if held:
        stop_held(leader, reaper)
    elif proc.poll() is None:
        leader.signal(signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.communicate(timeout=KILL_GRACE_S)  # its pipes read to their end, and closed
    if not held:  # held, its reaper killed all
        leader.signal(signal.SIGKILL)  # what it left in its group goes too


def _close(*fds: int) -> None:
    for fd in fds:
        if fd >= 0:
            os.close(fd)
