"""ToolContext: what one tool call may use besides its arguments.

Built by the LLM loop for each call. ``cancel`` is set when the run is stopped (or the
runtime closes) and ``deadline`` is the run's deadline (``time.monotonic()`` seconds): a
tool that blocks (Bash, up to 600 s) must return soon after either. ``session`` is the run's
own state that outlives one call (files read, Bash's working directory); ``processes`` is
the runtime's registry of child process groups, which kills a run's leftovers when it ends;
``sandbox`` says how the run's processes start (Landlock, the scrubbed environment).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from subagents.models.base import CancelSignal
from subagents.tools.processes import ProcessGroups
from subagents.tools.run_starts import RunAttempt
from subagents.tools.sandbox import UNSANDBOXED, RunSandbox
from subagents.tools.workspace import Workspace


@dataclass
class RunSession:
    """A run's tool state across calls (in memory: a resumed run starts a new one)."""

    cwd: Path
    files_read: dict[Path, float] = field(default_factory=dict)
    """Files the model has read (or written) in this run -> their mtime then; Edit and
    Write refuse a file that was not read, or that changed since (as Claude Code does)."""

    answers: dict[str, str] = field(default_factory=dict)
    """AskUserQuestion calls (tool_use id) -> the answer they got (tools/ask_user.py)."""

    def saw(self, path: Path) -> None:
        try:
            self.files_read[path] = path.stat().st_mtime
        except OSError:
            self.files_read.pop(path, None)


@dataclass(frozen=True)
class ToolContext:
    """One call's context: where, for whom, until when, and how to stop."""

    workspace: Workspace
    run_id: str
    agent: str
    cancel: CancelSignal
    deadline: float
    log: Any
    processes: ProcessGroups
    session: RunSession
    tool_use_id: str = ""
    sandbox: RunSandbox | None = None
    """How this run's processes start (``tools.sandbox``); None: without Landlock, with the
    scrubbed environment (a context made by hand)."""
    attempt: RunAttempt | None = None
    """The start of the run this call belongs to: its processes are listed under its key,
    apart from another attempt's, and none starts once it ended; None: the run's id (a
    context made by hand)."""

    @property
    def process_key(self) -> str:
        """What this call's processes are listed under in ``processes``."""
        return self.attempt.key if self.attempt is not None else self.run_id

    def run_sandbox(self) -> RunSandbox:
        if self.sandbox is not None:
            return self.sandbox
        return UNSANDBOXED.for_run(workspace=self.workspace.root, read_only=False, network=True)

    def remaining(self) -> float:
        """Seconds until the run's deadline (never below 0)."""
        return max(0.0, self.deadline - time.monotonic())
