"""Half a job for test_tree_limit_restored: under ``max_runs_per_tree=4``, a lead has spawned
a worker (finished) and a slow child (still running); then the process dies (os._exit)
without closing, the tree's three runs in the store, one of them ended.

Each step waits for the event that says it happened (events follow the commit)."""

from __future__ import annotations

import os
import sys
import threading

from subagents import AgentSpec, Limits, Runtime, ScriptedModel, SQLiteStore

SPECS = [
    AgentSpec(name=n, description="d", prompt="p")
    for n in ("lead", "worker", "slow", "extra", "late")
]
LIMITS = Limits(max_runs_per_tree=4)


def spawn(agent: str) -> dict[str, object]:
    return {"name": "spawn_subagent", "input": {"agent": agent, "task": agent}}


def model(delay: float) -> ScriptedModel:
    """The lead spawns the worker and the slow child, then (once both answered) two more:
    one fits in the tree, the other does not."""
    return ScriptedModel(
        {
            "lead": [
                {"tool_calls": [spawn("worker"), spawn("slow")]},
                {"tool_calls": [spawn("extra"), spawn("late")]},
                {"text": "lead done: {result0_result}; {result1}"},
            ],
            "worker": [{"text": "worker done"}],
            "slow": [{"text": "slow done", "delay": delay}],
            "extra": [{"text": "extra done"}],
            "late": [{"text": "late done"}],
        },
        fresh_ids=True,
    )


def main(db: str) -> None:
    wanted = [("completed", "worker"), ("started", "slow")]
    seen = {key: threading.Event() for key in wanted}
    rt = Runtime(SPECS, model=model(60), store=SQLiteStore(db), limits=LIMITS)
    rt.subscribe(lambda e: seen[(e.kind, e.agent)].set() if (e.kind, e.agent) in seen else None)
    rt.spawn("lead", "go")
    for (kind, agent), event in seen.items():
        assert event.wait(60), f"{agent} never {kind}"
    os._exit(0)  # die with the lead waiting on the slow child, the worker ended


if __name__ == "__main__":
    main(sys.argv[1])
