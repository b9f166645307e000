"""One agent making one MCP call, on a SQLite store, for the MCP crash tests.

Usage: mcp_crash_job.py DB WORKDIR TOOL OUT. TOOL is ``note`` (side-effecting) or ``peek``
(marked read-only); both append to WORKDIR/effects.log and write WORKDIR/marker. On the first
start the server holds the call 60 s after its side effect (the test kills this process
then); when the store already holds the run, this process takes it up (restore + attach).
Writes {"status", "result", "is_error"} (the call's result as the model saw it) to OUT.
"""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec

from subagents.definitions.spec import AgentSpec
from subagents.messages import ToolResultBlock
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.store.sqlite import SQLiteStore

SERVER = Path(__file__).with_name("mcp_server_app.py")


def main(db: str, workdir: str, tool: str, out: str) -> int:
    work = Path(workdir)
    hold = "60" if not Path(db).exists() else "0"
    server = {
        "command": sys.executable,
        "args": [str(SERVER), "--log", str(work / "effects.log"), "--hold", hold],
    }
    arguments = {"text": "once"} if tool == "note" else {}
    call = {"name": f"mcp__calc__{tool}", "input": arguments}
    model = ScriptedModel({"worker": [{"tool_calls": [call]}, {"text": "after: {result0}"}]})
    worker = AgentSpec(name="worker", description="Acts once.", prompt="Act.")
    store = SQLiteStore(db)
    with Runtime(
        [worker],
        model=model,
        store=store,
        workspace=work,
        mcp_servers={"calc": server},
        permissions="bypassPermissions",
        command_poll_s=0,
    ) as rt:
        roots = [r for r in store.list_runs() if r.parent_run_id is None]
        handle = rt.spawn("worker", "act") if not roots else rt.attach(roots[0].run_id)
        print("ready", flush=True)
        outcome = handle.result(timeout=300)
        checkpoint = store.load_checkpoint(outcome.run_id)
    store.close()
    assert checkpoint is not None
    answers = [b for m in checkpoint.messages for b in m.content if isinstance(b, ToolResultBlock)]
    Path(out).write_bytes(
        msgspec.json.encode(
            {
                "status": str(outcome.status),
                "result": outcome.result,
                "is_error": answers[0].is_error if answers else None,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
