"""Stop commands from another process, taken in one poll, end their runs in one cancel walk.

`subagents stop --all` posts one stop per live root. Handled one by one, the first stop's
walk handed the slot it freed to the queue before the next stop was handled: a queued run
of a tree stopped next was started (its agent started, its code run) only to be stopped.
Here one slot is held by the first root and the second root is queued behind it; both are
stopped by the real command in another process, and the runtime takes both commands in one
poll (``SupervisorCore.commands``). The queued root must end cancelled without starting."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

from subagents import FunctionAgent, Limits, Runtime, SQLiteStore
from subagents.behaviour.function import AgentContext
from subagents.messages import EventKind, PollCommands, RunStatus

from .conftest import WAIT, Events


def test_stops_of_one_poll_start_no_queued_run_of_a_tree_they_stop(tmp_path: Path) -> None:
    ran: list[str] = []
    release = threading.Event()

    def holds(ctx: AgentContext) -> str:
        ran.append(ctx.task)
        release.wait(WAIT)  # working, holding the one slot (a waiting run would lend it)
        return "not stopped"

    db = tmp_path / "runs.db"
    events = Events()
    quiet = {"command_poll_s": 3600, "sweep_every_s": 3600}  # polled when the test says
    limits = Limits(max_concurrency=1)
    with Runtime(
        [FunctionAgent.create("holds", holds)], store=SQLiteStore(db), limits=limits, **quiet
    ) as rt:
        rt.subscribe(events)
        try:
            first = rt.spawn("holds", "first")
            queued = rt.spawn("holds", "queued")
            assert first.wait_admitted() is RunStatus.RUNNING
            assert queued.wait_admitted() is RunStatus.QUEUED
            env = {k: v for k, v in os.environ.items() if not k.startswith("SUBAGENTS_")}
            argv = [sys.executable, "-m", "subagents.cli.main", "stop", "--all", "--state", str(db)]
            stopped = subprocess.run(argv, capture_output=True, text=True, timeout=WAIT, env=env)
            assert stopped.returncode == 0, stopped.stderr
            assert first.run_id in stopped.stdout and queued.run_id in stopped.stdout
            rt._hosting.poll(PollCommands())  # the poll takes both stops: one decision
            outcomes = [h.result(WAIT) for h in (first, queued)]
        finally:
            release.set()
    assert [(o.status, o.error) for o in outcomes] == [
        (RunStatus.CANCELLED, "stopped from another process")
    ] * 2
    assert [e.run_id for e in events.of(EventKind.STARTED)] == [first.run_id]
    assert ran == ["first"]  # the queued root's code never ran


def test_a_send_between_stops_starts_no_queued_run_a_later_stop_ends(tmp_path: Path) -> None:
    """``subagents stop`` of each run racing a ``subagents send`` from another process: one
    poll takes a stop, the mail, then the stop of the queued run. The slot the first stop
    frees must not start the queued run the next stop ends (a send between the stops made
    them two walks, and the first handed its slot to the queue)."""
    ran: list[str] = []
    release = threading.Event()

    def holds(ctx: AgentContext) -> str:
        ran.append(ctx.task)
        release.wait(WAIT)  # working, holding the one slot (a waiting run would lend it)
        return "not stopped"

    db = tmp_path / "runs.db"
    events = Events()
    quiet = {"command_poll_s": 3600, "sweep_every_s": 3600}  # polled when the test says
    limits = Limits(max_concurrency=1)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SUBAGENTS_")}

    def cli(*args: str) -> None:
        argv = [sys.executable, "-m", "subagents.cli.main", *args, "--state", str(db)]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=WAIT, env=env)
        assert done.returncode == 0, done.stderr

    with Runtime(
        [FunctionAgent.create("holds", holds)], store=SQLiteStore(db), limits=limits, **quiet
    ) as rt:
        rt.subscribe(events)
        try:
            first = rt.spawn("holds", "first")
            queued = rt.spawn("holds", "queued")
            assert first.wait_admitted() is RunStatus.RUNNING
            assert queued.wait_admitted() is RunStatus.QUEUED
            cli("stop", first.run_id)
            cli("send", first.run_id, "posted between the stops")
            cli("stop", queued.run_id)
            rt._hosting.poll(PollCommands())  # the poll takes the three commands in order
            outcomes = [h.result(WAIT) for h in (first, queued)]
        finally:
            release.set()
    assert [(o.status, o.error) for o in outcomes] == [
        (RunStatus.CANCELLED, "stopped from another process")
    ] * 2
    assert [e.run_id for e in events.of(EventKind.STARTED)] == [first.run_id]
    assert ran == ["first"]  # the queued root's code never ran
