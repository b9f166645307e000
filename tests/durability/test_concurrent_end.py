"""A run ended by another writer while this runtime holds it: the runtime's end of it is
refused (``AlreadyEnded``, a run ends once) with the batch it was in, and the runtime goes
through an outage and its recovery (``actors.outage``), as for any refused write.

What its caller is told: the end the store keeps (the other writer's), not a failure whose
text says the run is kept unfinished and will run again (it is not: it ended). The runtime
then goes on. (The other writer is a stranger here; `subagents stop` of an orphaned run
writes so only once the host's lease lapsed, and releases it: a live host is fenced then.)
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import msgspec

from run_ends import ends_of
from subagents import FunctionAgent, Runtime, SQLiteStore
from subagents.behaviour.function import AgentContext
from subagents.messages import Outcome, RunStatus

WAIT = 60.0


def test_a_runs_end_refused_over_another_writers_is_told_as_the_store_keeps_it(
    tmp_path: Path,
) -> None:
    gate = threading.Event()

    def held(ctx: AgentContext) -> str:
        gate.wait(WAIT)
        return ctx.task

    path = tmp_path / "runs.db"
    store = SQLiteStore(path)
    agents = [FunctionAgent.create("held", held), FunctionAgent.create("echo", lambda c: c.task)]
    with Runtime(agents, store=store) as rt:
        handle = rt.spawn("held", "x")
        deadline = time.monotonic() + WAIT
        while (record := store.get_run(handle.run_id)) is None or record.started_at is None:
            assert time.monotonic() < deadline, "the run's start"
            time.sleep(0.02)
        other = SQLiteStore(path)  # another writer ends it where it lies
        try:
            end = Outcome(run_id=handle.run_id, status=RunStatus.CANCELLED, error="elsewhere")
            with other.batch():
                ended = msgspec.structs.replace(
                    record, status=RunStatus.CANCELLED, ended_at=time.time(), outcome=end
                )
                other.save_run(ended)
                other.save_outcome(end)
        finally:
            other.close()
        gate.set()  # its own end now: refused
        outcome = handle.result(timeout=WAIT)
        again = rt.run("echo", "again", timeout=WAIT)  # the runtime goes on
    kept = store.get_run(handle.run_id)
    assert kept is not None and kept.status is RunStatus.CANCELLED
    assert outcome.status is RunStatus.CANCELLED and outcome.error == "elsewhere", outcome
    assert ends_of(store, handle.run_id) == []  # (the other writer appended none)
    assert again.status is RunStatus.COMPLETED
    store.close()
