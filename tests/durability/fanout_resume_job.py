"""Half a job for test_fanout_resume: a lead's fan_out of two workers; the process dies
(os._exit) while both work."""

from __future__ import annotations

import os
import sys
import threading

from subagents import AgentSpec, Runtime, ScriptedModel, SQLiteStore

SPECS = [AgentSpec(name=n, description="d", prompt="p") for n in ("lead", "worker")]


def model(delay: float) -> ScriptedModel:
    fan_out = {
        "name": "fan_out",
        "input": {
            "strategy": "merge",
            "runs": [{"agent": "worker", "task": "A"}, {"agent": "worker", "task": "B"}],
        },
    }
    return ScriptedModel(
        {
            "lead": [{"tool_calls": [fan_out]}, {"text": "lead got: {results}"}],
            "worker": [{"text": "done {task}", "delay": delay}],
        },
        fresh_ids=True,
    )


def main(db: str) -> None:
    started = threading.Semaphore(0)
    rt = Runtime(SPECS, model=model(60), store=SQLiteStore(db))
    rt.subscribe(
        lambda e: started.release() if (e.kind, e.agent) == ("started", "worker") else None
    )
    rt.spawn("lead", "go")
    assert started.acquire(timeout=60) and started.acquire(timeout=60)
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1])
