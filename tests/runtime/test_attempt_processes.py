"""A run's processes belong to one start of it (``RunAttempt``), through the real runtime:
real actors, a real restart, real shells.

Keyed by the run's id, a restarted run's two starts shared their processes: the earlier
start's end (``ToolCalls.close``, on its own actor's thread) runs while the next start works,
and it killed the next start's background shell (or refused its start while under way, and
removed its directory). Held with events, not sleeps: the earlier start is inside a call
until the next one has started its shell and is inside a call of its own; the earlier
start's end is known by its log line (it is logged once its processes are killed).

And a run that ended by itself (no stop: its cancel unset) refuses a late start of a call
of it still going."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import LogCapture

from marked import marked, new_mark
from polling import wait_until
from subagents.behaviour.function import AgentContext, FunctionAgent
from subagents.behaviour.tools import SPAWN
from subagents.messages import RunStatus, ToolResultBlock
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.tools.base import Tool, ToolContext
from subagents.tools.builtin import builtin_tools
from subagents.tools.run_starts import RunEnding

from .conftest import requests_of, spec, tool_results

WAIT = 30.0


def test_a_restarted_runs_earlier_start_ends_without_its_next_starts_shell(
    tmp_path: Path, every_log: LogCapture
) -> None:
    first_in, first_go, next_in, next_go, fail = (threading.Event() for _ in range(5))
    m301, m302 = new_mark(), new_mark()  # (in the reapers' and the shells' command lines)

    entered: list[int] = []

    def hold_first() -> str:
        """Waits until the test lets the earlier start go; at once in the next start (it
        runs the call again: its earlier start never answered it)."""
        entered.append(1)
        if len(entered) == 1:
            first_in.set()
            assert first_go.wait(WAIT)
        return "held"

    def hold_next() -> str:
        """Waits until the test lets the next start go."""
        next_in.set()
        assert next_go.wait(WAIT)
        return "held"

    async def doomed(ctx: AgentContext) -> str:
        assert fail.wait(WAIT)
        raise RuntimeError("the child failed")

    def bash(command: str) -> dict[str, Any]:
        return {"name": "Bash", "input": {"command": command, "run_in_background": True}}

    spawn = {
        "name": SPAWN,
        "input": {"agent": "doomed", "task": "fail", "background": True,
                  "on_failure": "fail_parent"},
    }  # fmt: skip
    model = ScriptedModel(
        {
            "lead": [
                {"tool_calls": [spawn, bash(f"sleep {m301}"), {"name": "hold_first", "input": {}}]},
                {"tool_calls": [bash(f"sleep {m302}"), {"name": "hold_next", "input": {}}]},
                {"tool_calls": [{"name": "BashOutput", "input": {"bash_id": "bash_2"}}]},
                {"tool_calls": [{"name": "KillShell", "input": {"shell_id": "bash_2"}}]},
                "done",
            ]
        }
    )
    tools = [
        Tool.from_function(hold_first, read_only=True),
        Tool.from_function(hold_next, read_only=True),
    ]
    agents = [spec("lead", restart="transient", restart_backoff=0.0),
              FunctionAgent.create("doomed", doomed)]  # fmt: skip
    try:
        with (
            Runtime(
                agents, model=model, tools=tools, workspace=tmp_path,
                permissions="bypassPermissions",
            ) as rt,
        ):  # fmt: skip
            lead = rt.spawn("lead", "work")
            assert first_in.wait(WAIT)  # the earlier start holds its shell, inside a call
            assert marked(m301)  # (its reaper, and its shell until it execs)
            fail.set()  # its child fails: the lead is restarted at once
            assert next_in.wait(WAIT)  # the next start has its shell, inside a call
            assert marked(m302)
            first_go.set()  # the earlier start goes on to its end

            def ended() -> bool:
                said = every_log.entries
                return any(e.get("event") == "killed the run's processes" for e in said)

            wait_until(ended, "the earlier start's end killed its processes", WAIT)
            assert marked(m301) == []  # its own shell went with it
            assert marked(m302), "the next start's shell was killed"
            next_go.set()
            assert lead.result(timeout=WAIT).status is RunStatus.COMPLETED
        asked = requests_of(model, "lead")
        shown: list[ToolResultBlock] = tool_results(asked[-2].messages[-1])
        assert "<status>running</status>" in str(shown[0].content), shown
    finally:
        fail.set()
        first_go.set()
        next_go.set()
    assert marked(m301) == [] and marked(m302) == []


def test_a_call_going_on_after_its_run_ended_by_itself_starts_no_shell(
    tmp_path: Path, every_log: LogCapture
) -> None:
    """A run that ends by itself has no stop set (its ``cancel``): a call of it still going
    after its end (here a tool that handed its context to a thread of its own) reached its
    start after the end had killed the run's shells, and its shell ran on until the runtime
    closed. The end ends its start for good (``RunAttempt``): the late start is refused."""
    kept: list[ToolContext] = []
    m303, m304 = new_mark(), new_mark()

    def keep(ctx: ToolContext) -> str:
        """Keeps the call's context for later."""
        kept.append(ctx)
        return "kept"

    start = {"name": "Bash", "input": {"command": f"sleep {m303}", "run_in_background": True}}
    model = ScriptedModel(
        {"lead": [{"tool_calls": [start, {"name": "keep", "input": {}}]}, "done"]}
    )
    with (
        Runtime(
            [spec("lead")], model=model, tools=[Tool.from_function(keep, read_only=True)],
            workspace=tmp_path, permissions="bypassPermissions",
        ) as rt,
    ):  # fmt: skip
        assert rt.run("lead", "work", wait=WAIT).status is RunStatus.COMPLETED

        def ended() -> bool:
            return any(e.get("event") == "killed the run's processes" for e in every_log.entries)

        wait_until(ended, "the run's end killed its processes", WAIT)
        assert marked(m303) == []
        late = {"command": f"sleep {m304}", "run_in_background": True}
        with pytest.raises(RunEnding, match="has ended: no command may start"):
            builtin_tools()["Bash"].run(late, kept[0])
        assert marked(m304) == [], "a shell started after its run's end"
