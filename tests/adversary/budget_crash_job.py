"""A lead with a token budget whose worker spends most of it and ends, then the lead calls
a read-only tool (``look``) and ends: for test_budget_crash.

Usage: budget_crash_job.py DB MODE OUT [BUDGET]. MODE:
- ``measure``: no budget, no crash; writes {"lead", "worker"}: each run's total tokens;
- ``crash``: the lead gets BUDGET tokens; on the first start ``look`` writes ``looking``
  beside DB and blocks (the test kills the process there); a start on a store that holds the
  lead takes it up. Writes {"status", "result"} of the lead to OUT.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).parents[1] / "durability"))
from job_kit import say, write_outcome

from subagents.definitions.spec import AgentSpec
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.store.sqlite import SQLiteStore
from subagents.tools.base import Tool

SPECS = [AgentSpec(name=n, description="d", prompt="p") for n in ("lead", "worker")]
SCRIPT = {
    "lead": [
        {"tool_calls": [{"name": "spawn_subagent", "input": {"agent": "worker", "task": "w"}}]},
        {"tool_calls": [{"name": "look", "input": {}}]},
        {"text": "lead saw: {result0}"},
    ],
    "worker": [{"text": "spent " + "word " * 2000}],
}


def main(db: str, mode: str, out: str, budget: str = "") -> int:
    first_start = not Path(db).exists()

    def look() -> str:
        """Looks around (changes nothing)."""
        if mode == "crash" and first_start:
            (Path(db).parent / "looking").write_text("yes")
            time.sleep(60)  # killed here
        return "all quiet"

    store = SQLiteStore(db)
    with Runtime(
        SPECS,
        model=ScriptedModel(SCRIPT),
        store=store,
        tools=[Tool.from_function(look, read_only=True)],
        permissions="bypassPermissions",
        command_poll_s=0,
    ) as rt:
        roots = [r for r in store.list_runs() if r.parent_run_id is None]
        if roots:
            handle = rt.attach(roots[0].run_id)
        else:
            handle = rt.spawn("lead", "go", token_budget=int(budget) if budget else None)
        say("ready")
        outcome = handle.result(timeout=60)
        runs = {r.agent: r.usage.total_tokens for r in store.list_runs()}
    store.close()
    if mode == "measure":
        Path(out).write_bytes(msgspec.json.encode(runs))
    else:
        write_outcome(out, outcome)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
