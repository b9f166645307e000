"""A plan-mode lead (Bash disallowed) and its child, on a SQLite store, for the crash test of
narrowed permissions.

Usage: narrowing_crash_job.py DB WORKDIR OUT. The first start is killed while the child
runs a read-only tool (it writes ``marker`` then sleeps). The second start takes the tree up
with the lead's definition loosened (no permissionMode, no disallowedTools) and the runtime
in bypassPermissions: the child's next step tries Write and Bash. Writes the child's result
to OUT.
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
    if first_start:
        lead = AgentSpec(
            name="lead", description="Plans.", prompt="Plan.", permission_mode="plan",
            disallowed_tools=("Bash",),
        )  # fmt: skip
    else:  # the definition changed since: the child's ceiling is what it was at its spawn
        lead = AgentSpec(name="lead", description="Plans.", prompt="Plan.")
    child = AgentSpec(name="child", description="Acts.", prompt="Act.")
    model = ScriptedModel(
        {
            "lead": [
                {"tool_calls": [{"name": "spawn_subagent",
                                 "input": {"agent": "child", "task": "act"}}]},
                {"text": "lead: {result0_result}"},
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
        permissions="bypassPermissions", command_poll_s=0,
    ) as rt:  # fmt: skip
        handle = spawn_or_attach(rt, store, "lead", "go")
        handle.result(timeout=60)
        (record,) = [r for r in rt.runs() if r.agent == "child"]
    store.close()
    assert record.outcome is not None
    Path(out).write_text(record.outcome.result or f"failed: {record.outcome.error}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
