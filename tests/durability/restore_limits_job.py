"""Half a job for test_restore_limits: a lead waiting on a running worker and a queued root
under a concurrency limit of 2, then the process dies (os._exit) without closing."""

from __future__ import annotations

import os
import sys
import threading

from subagents import AgentSpec, Limits, Runtime, ScriptedModel, SQLiteStore

SPECS = [AgentSpec(name=n, description="d", prompt="p") for n in ("lead", "worker", "other")]


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
        }
    )


def main(db: str) -> None:
    seen: dict[tuple[str, str], threading.Event] = {
        ("started", "worker"): threading.Event(),
        ("queued", "other"): threading.Event(),
    }
    rt = Runtime(SPECS, model=model(60), store=SQLiteStore(db), limits=Limits(max_concurrency=2))
    rt.subscribe(lambda e: seen[(e.kind, e.agent)].set() if (e.kind, e.agent) in seen else None)
    rt.spawn("lead", "go")
    assert seen[("started", "worker")].wait(10)
    rt.spawn("other", "go")
    assert seen[("queued", "other")].wait(10)
    os._exit(0)  # die with the worker running and 'other' queued


if __name__ == "__main__":
    main(sys.argv[1])
