"""Half a job for test_repeated_ids_crash: a boss's lead whose model gives calls of a later turn the
ids of an earlier turn's calls; the process dies (``os._exit``, from a tool) in that turn.

Usage: repeated_ids_job.py DB MODE. The lead's first turn spawns worker A (foreground) and
sends a mail to the boss ("first"); its second turn, MODE:
- ``repeat``: the ``crash`` tool first (the process dies before anything else of the turn
  runs), then a spawn of worker B and a mail ("second") under the first turn's two ids;
- ``after``: the spawn of B and the mail "second" under ids of their own, then ``crash``
  (their effects happened before the process died: a resumed lead must not do them again).
Its third turn ends with the second turn's answers (``{result1}``, ``{result2}``).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from subagents import AgentSpec, Runtime, SQLiteStore
from subagents.messages import ModelRequest, ModelResponse, ToolUseBlock
from subagents.models.scripted import ScriptedModel
from subagents.tools.base import Tool

SPECS = [AgentSpec(name=n, description="d", prompt="p") for n in ("boss", "lead", "worker")]
IDS = {
    "repeat": {0: ("toolu_x", "toolu_z"), 1: ("toolu_y", "toolu_x", "toolu_z")},
    "after": {0: ("toolu_x", "toolu_z"), 1: ("toolu_x2", "toolu_z2", "toolu_y")},
}


class GivenIds:
    """The scripted model, each call of ``agent`` under the id ``ids`` gives for its turn
    (a model backend that repeats ids across turns, as the Messages API does not forbid)."""

    def __init__(
        self, script: dict[str, list[Any]], ids: dict[int, tuple[str, ...]], agent: str = "lead"
    ) -> None:
        self.scripted = ScriptedModel(script)
        self.ids = ids
        self.agent = agent

    def complete(self, request: ModelRequest, **options: Any) -> ModelResponse:
        response = self.scripted.complete(request, **options)
        if request.agent != self.agent:
            return response
        turn = sum(1 for m in request.messages if m.role == "assistant")
        given = iter(self.ids.get(turn, ()))
        content = tuple(
            ToolUseBlock(id=next(given), name=b.name, input=b.input)
            if isinstance(b, ToolUseBlock)
            else b
            for b in response.content
        )
        return ModelResponse(
            content=content, stop_reason=response.stop_reason, usage=response.usage
        )


def model(mode: str) -> GivenIds:
    spawn_a = {"name": "spawn_subagent", "input": {"agent": "worker", "task": "A"}}
    spawn_b = {"name": "spawn_subagent", "input": {"agent": "worker", "task": "B"}}
    first = {"name": "send_message", "input": {"to": "boss", "content": "first"}}
    second = {"name": "send_message", "input": {"to": "boss", "content": "second"}}
    crash = {"name": "crash", "input": {}}
    later = [crash, spawn_b, second] if mode == "repeat" else [spawn_b, second, crash]
    spawn_lead = {"name": "spawn_subagent", "input": {"agent": "lead", "task": "go"}}
    script = {
        "boss": [{"tool_calls": [spawn_lead]}, {"text": "boss got: {result0}"}],
        "lead": [
            {"tool_calls": [spawn_a, first]},
            {"tool_calls": later},
            {
                "text": "lead got: {result1} | {result2}"
                if mode == "repeat"
                else "lead got: {result0} | {result1}"
            },
        ],
        "worker": [{"text": "done {task}"}],
    }
    return GivenIds(script, IDS[mode])


def crash_tool(first_start: bool) -> Tool:
    def crash() -> str:
        """Stops the process, the first time."""
        if first_start:
            os._exit(0)  # a crash: nothing is closed, nothing more is written
        return "ran again"

    return Tool.from_function(crash)  # side effects assumed: journaled before it runs


def main(db: str, mode: str) -> None:
    rt = Runtime(
        SPECS,
        model=model(mode),  # type: ignore[arg-type]
        store=SQLiteStore(db),
        tools=[crash_tool(first_start=True)],
        permissions="bypassPermissions",
        command_poll_s=0,
    )
    rt.spawn("boss", "go").result(timeout=60)
    raise SystemExit("the crash tool did not stop the process")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
