"""A planner whose plan was approved, on a SQLite store, for the crash test of leaving plan
mode.

Usage: plan_exit_crash_job.py DB WORKDIR OUT. The planner (``permissionMode: plan``, runtime
in acceptEdits) calls ExitPlanMode, which the first start's handler approves, then a
read-only tool (it writes ``marker`` then sleeps: the first start is killed there). The second
start's handler approves no plan (a run leaving plan mode now would be a run leaving it
without approval) but any other call: the planner's next step tries Write and Bash, which
work only if the restored run is out of plan mode, its sandbox too. Writes its result to OUT.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from job_kit import spawn_or_attach

from subagents.definitions.spec import AgentSpec
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.store.sqlite import SQLiteStore
from subagents.tools.approval import ApprovalRequest
from subagents.tools.base import Tool


def main(db: str, workdir: str, out: str) -> int:
    work = Path(workdir)
    first_start = not Path(db).exists()

    def look(note: str) -> str:
        """Looks at something (changes nothing)."""
        (work / "marker").write_text(note)
        if first_start:
            time.sleep(60)  # killed here
        return "looked"

    def approve(request: ApprovalRequest) -> bool:
        return first_start or request.tool != "ExitPlanMode"

    tool = Tool.from_function(look, read_only=True)
    planner = AgentSpec(
        name="planner", description="Plans.", prompt="Plan.", permission_mode="plan"
    )
    model = ScriptedModel(
        {
            "planner": [
                {"tool_calls": [{"name": "ExitPlanMode", "input": {"plan": "write"}}]},
                {"tool_calls": [{"name": "look", "input": {"note": "x"}}]},
                {"tool_calls": [
                    {"name": "Write", "input": {"file_path": "written.txt", "content": "x"}},
                    {"name": "Bash", "input": {"command": "echo ran > bash.txt"}},
                ]},
                {"text": "write: {result0} | bash: {result1}"},
            ],
        }, fresh_ids=True
    )  # fmt: skip
    store = SQLiteStore(db)
    with Runtime(
        [planner], model=model, store=store, tools=[tool], workspace=work, approve=approve,
        permissions="acceptEdits", command_poll_s=0,
    ) as rt:  # fmt: skip
        handle = spawn_or_attach(rt, store, "planner", "go")
        outcome = handle.result(timeout=60)
    store.close()
    Path(out).write_text(outcome.result or f"failed: {outcome.error}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
