"""A wait that timed out names what reaches its run, and only what does.

The message said the run "goes on" and named ``subagents attach R`` / ``subagents stop R``
from a terminal, whatever the store: with the default store (in memory, this process's
alone) no terminal sees the run, and with a SQLite file of the program's own the CLI, not
told ``--state``, reads another store. And the run goes on only while its runtime is open:
the error usually leaves a ``with Runtime(...)`` block, whose close cancels it. Now the
message says so, names the terminal's commands only for a store a terminal reaches, with
its ``--state``, and those commands are run here to show they reach the run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from subagents.behaviour.function import AgentContext, FunctionAgent
from subagents.messages import RunStatus
from subagents.runtime import Runtime
from subagents.store.sqlite import SQLiteStore

from .conftest import WAIT

pytestmark = pytest.mark.usefixtures("no_new_threads")


async def hold(ctx: AgentContext) -> str:
    """Sleeps past any wait here (holding no thread): it ends only when stopped."""
    await ctx.sleep(10 * WAIT)
    return "slept"


AGENT = FunctionAgent.create("hold", hold)


def test_a_run_in_a_store_in_memory_names_no_terminal_and_ends_with_its_runtime() -> None:
    with Runtime([AGENT]) as rt:
        with pytest.raises(TimeoutError) as timed_out:
            rt.run("hold", "x", wait=0.01)
        [run_id] = [r.run_id for r in rt.runs()]
        message = str(timed_out.value)
        assert message == (
            f"run {run_id} did not finish within 0.01 s; it goes on while this runtime is"
            f" open (its close cancels it): rt.attach('{run_id}') gives a handle to wait"
            f" for it, rt.stop('{run_id}') ends it"
        )
        assert "subagents" not in message  # no terminal sees a store in memory
        attached = rt.attach(run_id)
    # the close cancelled it, as the message says
    outcome = attached.result(timeout=0)
    assert outcome.status is RunStatus.CANCELLED and outcome.error == "runtime closed"


def test_a_run_in_a_sqlite_file_names_the_terminal_commands_that_reach_it(tmp_path: Path) -> None:
    db = tmp_path / "a folder with spaces" / "runs.db"
    db.parent.mkdir()
    store = SQLiteStore(db)
    try:
        with Runtime([AGENT], store=store, command_poll_s=0.05) as rt:
            handle = rt.spawn("hold", "x")
            with pytest.raises(TimeoutError) as timed_out:
                handle.result(timeout=0.01)
            run_id = handle.run_id
            state = f"--state '{db}'"  # quoted for a shell
            assert str(timed_out.value) == (
                f"run {run_id} did not finish within 0.01 s; it goes on while this runtime is"
                f" open (its close cancels it): rt.attach('{run_id}') gives a handle to wait"
                f" for it, rt.stop('{run_id}') ends it (from a terminal: `subagents attach"
                f" {run_id} {state}`, `subagents stop {run_id} {state}`)"
            )
            # the terminal's command, as named, reaches the run (another process, this store);
            # without its --state it reads the CLI's own store, which does not hold the run
            env = {**os.environ, "SUBAGENTS_STATE_DIR": str(tmp_path / "elsewhere")}
            env.pop("SUBAGENTS_STATE", None)
            stop = [sys.executable, "-m", "subagents.cli.main", "stop", run_id]
            unnamed = subprocess.run(stop, env=env, capture_output=True, timeout=WAIT)
            assert unnamed.returncode != 0
            named = subprocess.run(
                [*stop, "--state", str(db)], env=env, capture_output=True, text=True, timeout=WAIT
            )
            assert named.returncode == 0, named.stderr
            assert handle.result(timeout=WAIT).status is RunStatus.CANCELLED
    finally:
        store.close()
