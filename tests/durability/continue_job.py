"""One agent on a SQLite store, in three processes, for the tests of continued runs.

Usage: continue_job.py DB OUT MODE [RUN_ID]. ``finish``: runs ``a`` to its end, writes its
run id to OUT. ``continue``: continues RUN_ID (finished by another process) with "go on",
writes the new run's id to OUT once admitted, then waits for it; its model's turn is slow
(the test kills it there) unless ``continue-quick``. ``resume``: takes up what a killed
``continue`` left (``Runtime(restore=True)``), waits for the continued run RUN_ID, writes
its outcome and the conversation its model was shown (JSON) to OUT.
"""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec

from subagents.definitions.spec import AgentSpec
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.store.sqlite import SQLiteStore

AGENT = AgentSpec(name="a", description="Answers.", prompt="Answer.")


def _written(path: str, text: str) -> None:
    """``text`` in ``path`` at once (written aside, then renamed): a test waiting for the
    file to exist reads it whole, never the empty file a plain write shows first."""
    aside = Path(path + ".part")
    aside.write_text(text)
    aside.replace(path)


def main(db: str, out: str, mode: str, run_id: str = "") -> int:
    second: object = "second answer"
    if mode == "continue":
        second = {"text": "too slow", "delay": 300.0}  # killed during this model call
    model = ScriptedModel({"a": ["first answer", second]})
    store = SQLiteStore(db)
    with Runtime([AGENT], model=model, store=store, command_poll_s=0) as rt:
        if mode == "finish":
            handle = rt.spawn("a", "the question")
            handle.result(timeout=60)
            _written(out, handle.run_id)
        elif mode.startswith("continue"):
            handle = rt.continue_run(run_id, "go on")
            _written(out, handle.run_id)
            outcome = handle.result(timeout=600)
            _written(out + ".outcome", outcome.result or "")
        else:
            outcome = rt.attach(run_id).result(timeout=60)
            shown = [r.messages for r in model.requests]
            Path(out).write_bytes(
                msgspec.json.encode({"result": outcome.result, "status": outcome.status,
                                     "shown": shown})
            )  # fmt: skip
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
