"""A tree spawned by a plan-mode runtime, on a SQLite store, for the crash test of the
runtime's mode kept in the ceiling.

Usage: runtime_mode_crash_job.py DB WORKDIR OUT. The first start (runtime in plan mode) is
killed while the child runs a read-only tool (it writes ``marker`` then sleeps). The second
start takes the tree up in bypassPermissions: the child's next step tries Write and Bash,
then the lead's tries Bash. Writes the lead's result (which quotes the child's) to OUT.
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

    tool = Tool.from_function(look, read_only=True)
    lead = AgentSpec(name="lead", description="Leads.", prompt="Lead.")
    child = AgentSpec(name="child", description="Acts.", prompt="Act.")
    model = ScriptedModel(
        {
            "lead": [
                {"tool_calls": [{"name": "spawn_subagent",
                                 "input": {"agent": "child", "task": "act"}}]},
                {"tool_calls": [{"name": "Bash", "input": {"command": "echo ran > lead.txt"}}]},
                {"text": "lead: {result0} || child: "},
            ],
            "child": [
                {"tool_calls": [{"name": "look", "input": {"note": "x"}}]},
                {"tool_calls": [
                    {"name": "Write", "input": {"file_path": "written.txt", "content": "x"}},
                    {"name": "Bash", "input": {"command": "echo ran > bash.txt"}},
                ]},
                {"text": "write: {result0} | bash: {result1}"},
            ],
        },
        fresh_ids=True,
    )  # fmt: skip
    store = SQLiteStore(db)
    with Runtime(
        [lead, child], model=model, store=store, tools=[tool], workspace=work,
        permissions="plan" if first_start else "bypassPermissions", command_poll_s=0,
    ) as rt:  # fmt: skip
        handle = spawn_or_attach(rt, store, "lead", "go")
        lead_result = handle.result(timeout=60).result or ""
        (record,) = [r for r in rt.runs() if r.agent == "child"]
    store.close()
    assert record.outcome is not None
    child_result = record.outcome.result or f"failed: {record.outcome.error}"
    Path(out).write_text(f"{lead_result}{child_result}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
