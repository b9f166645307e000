"""Half a job for test_spawn_many_crash: ``spawn_many`` admits four runs (two start, two
queue under a concurrency limit of 2) and refuses one, then the process dies (os._exit) the
moment the call returns: nothing after it is waited for, so what the store holds is what the
call's one commit made durable before it answered."""

from __future__ import annotations

import json
import os
import sys

from subagents import AgentSpec, Limits, Runtime, ScriptedModel, SQLiteStore

SPECS = [AgentSpec(name="worker", description="d", prompt="p")]


def model(delay: float) -> ScriptedModel:
    return ScriptedModel({"worker": [{"text": "done {task}", "delay": delay}]})


def main(db: str) -> None:
    rt = Runtime(SPECS, model=model(60), store=SQLiteStore(db), limits=Limits(max_concurrency=2))
    jobs = [("worker", "a"), ("worker", "b"), ("nobody", "x"), ("worker", "c"), ("worker", "d")]
    out = rt.spawn_many(jobs)
    admitted = {
        h.run_id: task
        for h, (_, task) in zip(out, jobs, strict=True)
        if not isinstance(h, Exception)
    }
    print(json.dumps(admitted), flush=True)
    os._exit(0)  # die at once: two runs in model calls, two queued


if __name__ == "__main__":
    main(sys.argv[1])
