"""The tool journal's decisions: what is recorded before a call runs, and what a resumed run
does with a call that started and never finished. (Pure: the recording itself is the
supervisor's, in the run's checkpoint: ``Checkpoint.started`` and ``Checkpoint.answered``.)

Why not record every call first: the supervisor's thread is the store's one writer, so a
record made before a call costs the agent a round trip to it and a commit. A read-only or
idempotent call that ran half way can simply run again, so only calls with side effects pay.

After a crash, a call is in one of three states:
- answered (its result is in the checkpoint): not run again, the result is reused;
- started but not answered: it may have done all, part or none of its work. A read-only
  or idempotent tool runs again; any other comes back to the model as interrupted, state
  unknown, so that it looks before doing it again (never silently twice);
- never started: it runs (nothing of it happened).
"""

from __future__ import annotations

from subagents.tools.base import Tool


def record_before_run(tool: Tool) -> bool:
    """Whether a call must be in the journal before it may run."""
    return tool.side_effects


def interrupted(tool: Tool | None, started: bool) -> bool:
    """Whether a resumed run must answer the call as interrupted instead of running it."""
    if not started:
        return False
    return tool is None or tool.side_effects


def interrupted_message(tool_name: str, cause: str = "the process running it stopped") -> str:
    """What the model reads of a call that started and has no result: ``cause`` says why
    (a resumed run's: its process died; a continued run's: its run ended)."""
    return (
        f"This {tool_name} call was interrupted: {cause} before its"
        f" result was recorded, so its effects are unknown (it may have run completely,"
        f" partly or not at all). It was not run again. Check the current state (read the"
        f" file, list the directory, look at the output or the repository status) before"
        f" you decide whether to do it again."
    )
