"""One agent whose one turn makes three calls with side effects, on a SQLite store, for
test_turn_crash: an Edit of ``a.txt`` (``a`` -> ``ab``: a second run would make ``abb``), a
Bash command that appends to ``bash.log``, writes its pid (and PID namespace) to ``pid`` and
sleeps (the test kills the process there), and a Bash command that appends to ``third.log``.
A turn before reads ``a.txt`` (an Edit needs it read).

Usage: turn_crash_job.py DB WORKDIR OUT. Starts the run, or takes it up when the store
already holds it, and writes {"status", "result"} to OUT; the result names each call's
answer as the model read it (``{result0}`` ... ``{result2}`` of the last turn).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "durability"))
from job_kit import say, spawn_or_attach, write_outcome

from subagents.definitions.spec import AgentSpec
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.store.sqlite import SQLiteStore

NS = "$(readlink /proc/$$/ns/pid)"  # (ns_pids.NS: its PID namespace)


def main(db: str, workdir: str, out: str) -> int:
    work = Path(workdir)
    slow = f"echo ran >> {work / 'bash.log'}; echo $$ {NS} > {work / 'pid'}; sleep 60"
    turn = [
        {
            "name": "Edit",
            "input": {"file_path": str(work / "a.txt"), "old_string": "a", "new_string": "ab"},
        },
        {"name": "Bash", "input": {"command": slow}},
        {"name": "Bash", "input": {"command": f"echo third >> {work / 'third.log'}"}},
    ]
    script = {
        "worker": [
            {"tool_calls": [{"name": "Read", "input": {"file_path": str(work / "a.txt")}}]},
            {"tool_calls": turn},
            {"text": "edit: {result0}\nslow: {result1}\nthird: {result2}"},
        ]
    }
    model = ScriptedModel(script, fresh_ids=True)  # a turn taken again would call anew
    worker = AgentSpec(name="worker", description="Acts thrice.", prompt="Act.")
    store = SQLiteStore(db)
    with Runtime(
        [worker],
        model=model,
        store=store,
        workspace=work,
        permissions="bypassPermissions",
        command_poll_s=0,
    ) as rt:
        handle = spawn_or_attach(rt, store, "worker", "act")
        say("ready")
        write_outcome(out, handle.result(timeout=60))
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
