"""Durable approvals and a continued run, on the offline model.

The builder wants to run a shell command. With ``approve="store"`` the ask is kept in the
store and the run waits (holding no thread) until someone answers it: here through the
store's path, as ``subagents approve ID`` from another terminal would. Then the ended run is
continued with a follow-up question: a new run whose conversation is the builder's.
"""

import tempfile
import threading
from pathlib import Path

from subagents import (
    AgentSpec,
    EventKind,
    Runtime,
    ScriptedModel,
    SQLiteStore,
    answer_approval,
    pending_approvals,
)

builder = AgentSpec(
    name="builder", description="Builds the artifact.", prompt="You build.", tools=("Bash",)
)
model = ScriptedModel(
    {
        "builder": [
            {"tool_calls": [{"name": "Bash", "input": {"command": "echo built | tee out.txt"}}]},
            {"text": "the shell said: {result0}"},
            {"text": "it is in out.txt"},  # the continued run's turn
        ]
    }
)

# the store apart from the workspace: inside, the run's commands could write it and answer
# their own approvals (the runtime refuses to start so)
with tempfile.TemporaryDirectory() as folder, tempfile.TemporaryDirectory() as state:
    path = Path(state) / "runs.sqlite3"
    with Runtime(
        [builder], model=model, store=SQLiteStore(path), workspace=folder, approve="store"
    ) as rt:
        asked = threading.Event()
        rt.subscribe(lambda event: event.kind is EventKind.APPROVAL_ASKED and asked.set())
        handle = rt.spawn("builder", "build the artifact")
        asked.wait(60)
        (ask,) = pending_approvals(path)  # any process that can open the store sees it
        print(f"pending: {ask.agent} wants {ask.tool} {ask.input}")
        answer_approval(path, ask.approval_id, True, "go ahead")  # `subagents approve ID`
        outcome = handle.result(timeout=60)
        print(outcome.status, "-", outcome.result)
        more = rt.continue_run(handle.run_id, "where is it?").result(timeout=60)
        print("continued:", more.status, "-", more.result)
