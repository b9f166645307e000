"""Half a job for test_restore_limits: under a concurrency limit of 2, a lead waiting on a
running worker, a root 'other' running in the slot the lead lent it (parked), and a root 'late'
queued behind them; then the process dies (os._exit) without closing.

Each step waits for the event that says it happened (events follow the commit), so the store
holds the same state on every run: 'other' queues while the lead waits, so the lead is asked to
park and 'other' starts in its slot; only then does 'late' come, and finds both slots held by
working runs, so it stays queued."""

from __future__ import annotations

import os
import sys
import threading

from subagents import AgentSpec, Limits, Runtime, ScriptedModel, SQLiteStore

SPECS = [
    AgentSpec(name=n, description="d", prompt="p") for n in ("lead", "worker", "other", "late")
]


def model(delay: float) -> ScriptedModel:
    return ScriptedModel(
        {
            "lead": [
                {
                    "tool_calls": [
                        {"name": "spawn_subagent", "input": {"agent": "worker", "task": "w"}}
                    ]
                },
                {"text": "lead done: {result0_result}"},
            ],
            "worker": [{"text": "worker done", "delay": delay}],
            "other": [{"text": "other done", "delay": delay}],
            "late": [{"text": "late done", "delay": delay}],
        },
        fresh_ids=True,
    )


def main(db: str) -> None:
    wanted = [
        ("started", "worker"),
        ("parked", "lead"),
        ("started", "other"),
        ("queued", "late"),
    ]
    seen = {key: threading.Event() for key in wanted}
    rt = Runtime(SPECS, model=model(60), store=SQLiteStore(db), limits=Limits(max_concurrency=2))
    rt.subscribe(lambda e: seen[(e.kind, e.agent)].set() if (e.kind, e.agent) in seen else None)
    rt.spawn("lead", "go")
    assert seen[("started", "worker")].wait(60), "the worker never started"
    rt.spawn("other", "go")
    assert seen[("parked", "lead")].wait(60), "the waiting lead never lent its slot"
    assert seen[("started", "other")].wait(60), "'other' never started in the lent slot"
    rt.spawn("late", "go")
    assert seen[("queued", "late")].wait(60), "'late' was not queued"
    os._exit(0)  # die with the worker and 'other' running, the lead parked, 'late' queued


if __name__ == "__main__":
    main(sys.argv[1])
