"""One agent making one tool call, on a SQLite store, for the tool-journal crash tests.

Usage: tool_crash_job.py DB WORKDIR MODE OUT. MODE picks the call:
- ``bash``: a Bash command that appends a line to ``bash.log``, writes its process group id
  to ``pid`` and then sleeps (the test kills the process during the call);
- ``effect``: a user tool (side effects assumed) that appends to ``effects.log``, writes
  ``marker`` and then blocks (killed right after its side effect);
- ``readonly``: the same tool declared ``read_only``: after a crash it simply runs again.

Starts the run, or takes it up when the store already holds it, and writes
{"status", "result", "is_error"} (the call's result as the model saw it) to OUT.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import msgspec
from job_kit import say, spawn_or_attach

from subagents.definitions.spec import AgentSpec
from subagents.messages import ToolResultBlock
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.store.sqlite import SQLiteStore
from subagents.tools.base import Tool

NS = "$(readlink /proc/$$/ns/pid)"  # (ns_pids.NS: its PID namespace)


def main(db: str, workdir: str, mode: str, out: str) -> int:
    work = Path(workdir)
    first_start = not Path(db).exists()

    def side_effect(note: str) -> str:
        """Appends the note to effects.log."""
        with open(work / "effects.log", "a") as log:
            log.write(note + "\n")
        (work / "marker").write_text("done")
        if first_start:
            time.sleep(60)  # killed here, right after the side effect
        return f"wrote {note}"

    tool = Tool.from_function(side_effect, read_only=mode == "readonly")
    if mode == "bash":
        command = f"echo ran >> {work / 'bash.log'}; echo $$ {NS} > {work / 'pid'}; sleep 60"
        call = {"name": "Bash", "input": {"command": command}}
    else:
        call = {"name": "side_effect", "input": {"note": "once"}}
    script = {"worker": [{"tool_calls": [call]}, {"text": "after: {result0}"}]}
    model = ScriptedModel(script, fresh_ids=True)  # a turn taken again would call anew
    worker = AgentSpec(name="worker", description="Acts once.", prompt="Act.")
    store = SQLiteStore(db)
    with Runtime(
        [worker],
        model=model,
        store=store,
        tools=[tool],
        workspace=work,
        permissions="bypassPermissions",
        command_poll_s=0,
    ) as rt:
        handle = spawn_or_attach(rt, store, "worker", "act")
        say("ready")
        outcome = handle.result(timeout=60)
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
