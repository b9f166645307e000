"""A driver for test_stalled_driver: a ``Runtime(cluster=...)`` on a SQLite file with a short
lease, one LLM run pinned to the worker node. The test stops this process (SIGSTOP) past its
lease, has another runtime on the cluster take the run over, then lets it go on (SIGCONT).

Usage: stalled_driver_job.py ADDRESS DB WORKSPACE GATES SCRIPT. GATES: a pickle of the test's
``(entered, release)`` gates (``tests/gates.py``, served by the test process); the model set
``entered`` at its first call and waits for ``release`` before answering it. SCRIPT: the
worker's script as JSON. Prints the run id once spawned, then its outcome (status, error) as
one JSON line once it has ended here.
"""

from __future__ import annotations

import faulthandler
import pickle
import signal
import sys
from pathlib import Path
from typing import Any

import msgspec

from gates import Gate
from subagents import Runtime, ScriptedModel, SQLiteStore
from subagents.definitions.spec import AgentSpec
from subagents.logs import configure

HANG_GUARD_S = 300.0
WORKER = "sa-test-worker"


class GatedModel(ScriptedModel):
    """The scripts, its first call held until the test releases it (on the node, a copy: the
    gates talk to the test's process)."""

    def __init__(self, scripts: Any, entered: Gate, release: Gate) -> None:
        super().__init__(scripts)
        self.entered, self.release = entered, release

    def complete(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        if not self.entered.is_set():
            self.entered.set()
            assert self.release.wait(HANG_GUARD_S), "never released"
        return super().complete(request, *args, **kwargs)


def main(address: str, db: str, workspace: str, gates: str, script: str) -> None:
    configure(level="warning", stream=sys.stderr)
    faulthandler.register(signal.SIGUSR1)  # a hang shows its threads
    entered, release = pickle.loads(Path(gates).read_bytes())
    model = GatedModel({"worker": msgspec.json.decode(script)}, entered, release)
    spec = AgentSpec(
        name="worker", description="Works.", prompt="Work.", metadata={"resources": {WORKER: 1}}
    )
    with Runtime(
        [spec],
        model=model,
        store=SQLiteStore(db, busy_timeout=HANG_GUARD_S),
        cluster=address,
        workspace=workspace,
        permissions="bypassPermissions",
        lease_s=1.0,
        restore=False,
    ) as rt:
        handle = rt.spawn("worker", "work")
        print(handle.run_id, flush=True)
        outcome = handle.result(timeout=HANG_GUARD_S)
    print(msgspec.json.encode([str(outcome.status), outcome.error]).decode(), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:6])
