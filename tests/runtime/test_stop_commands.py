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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from subagents import FunctionAgent, Limits, Runtime, SQLiteStore
from subagents.behaviour.function import AgentContext
from subagents.messages import EventKind, PollCommands, RunStatus
from subagents.runtime import RunHandle

from .conftest import WAIT, Events

QUIET = {"command_poll_s": 3600, "sweep_every_s": 3600}  # polled when the test says


class OneSlot:
    """Two roots of an agent that works until ``release``: the first holds the one slot
    (working: a waiting run would lend it), the second is queued behind it; ``ran`` lists
    the tasks whose code ran."""

    def __init__(self, db: Path) -> None:
        self.db, self.ran, self.release, self.events = db, [], threading.Event(), Events()

    def runtime(self) -> Runtime:
        def holds(ctx: AgentContext) -> str:
            self.ran.append(ctx.task)
            self.release.wait(WAIT)
            return "not stopped"

        agent = FunctionAgent.create("holds", holds)
        rt = Runtime([agent], store=SQLiteStore(self.db), limits=Limits(max_concurrency=1), **QUIET)
        rt.subscribe(self.events)
        return rt

    def cli(self, *args: str) -> str:
        return _cli(self.db, *args)

    def check(self, first: RunHandle, queued: RunHandle) -> None:
        """Both ended cancelled by the commands; only the first ever started or ran."""
        outcomes = [h.result(WAIT) for h in (first, queued)]
        assert [(o.status, o.error) for o in outcomes] == [
            (RunStatus.CANCELLED, "stopped from another process")
        ] * 2
        assert [e.run_id for e in self.events.of(EventKind.STARTED)] == [first.run_id]
        assert self.ran == ["first"]  # the queued root's code never ran


def _cli(db: Path, *args: str) -> str:
    """The real ``subagents`` command in another process, on the store ``db``: its stdout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SUBAGENTS_")}
    argv = [sys.executable, "-m", "subagents.cli.main", *args, "--state", str(db)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=WAIT, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _started(rt: Runtime) -> tuple[RunHandle, RunHandle]:
    first = rt.spawn("holds", "first")
    queued = rt.spawn("holds", "queued")
    assert first.wait_admitted() is RunStatus.RUNNING
    assert queued.wait_admitted() is RunStatus.QUEUED
    return first, queued


def test_stops_of_one_poll_start_no_queued_run_of_a_tree_they_stop(tmp_path: Path) -> None:
    slot = OneSlot(tmp_path / "runs.db")
    with slot.runtime() as rt:
        try:
            first, queued = _started(rt)
            stopped = slot.cli("stop", "--all")
            assert first.run_id in stopped and queued.run_id in stopped
            rt._hosting.poll(PollCommands())  # the poll takes both stops: one decision
            slot.check(first, queued)
        finally:
            slot.release.set()


def test_a_send_between_stops_starts_no_queued_run_a_later_stop_ends(tmp_path: Path) -> None:
    """``subagents stop`` of each run racing a ``subagents send`` from another process: one
    poll takes a stop, the mail, then the stop of the queued run. The slot the first stop
    frees must not start the queued run the next stop ends (a send between the stops made
    them two walks, and the first handed its slot to the queue)."""
    slot = OneSlot(tmp_path / "runs.db")
    with slot.runtime() as rt:
        try:
            first, queued = _started(rt)
            slot.cli("stop", first.run_id)
            slot.cli("send", first.run_id, "posted between the stops")
            slot.cli("stop", queued.run_id)
            rt._hosting.poll(PollCommands())  # the poll takes the three commands in order
            slot.check(first, queued)
        finally:
            slot.release.set()


def _lead_with_a_detached_child(gate: threading.Event) -> list[Callable[..., Any]]:
    """A lead spawning a detached waiter and an attached one (awaited: the lead is stopped
    while it waits); the waiters end when ``gate`` is set."""

    async def lead(ctx: AgentContext) -> str:
        await ctx.spawn("waiter", "detached", detach=True)
        await ctx.spawn("waiter", "attached")
        return "unreachable"

    def waiter(ctx: AgentContext) -> str:
        gate.wait(WAIT)
        return f"{ctx.task} done"

    return [lead, waiter]


def test_a_tree_stop_taken_after_a_turn_stop_of_the_run_ends_its_detached_child(
    tmp_path: Path,
) -> None:
    """``subagents stop --turn LEAD`` and ``subagents stop LEAD`` (its tree), the second
    posted once its command had checked that LEAD was live, but taken in the host's next
    poll (the first had ended LEAD by then). The tree stop ends the detached child the turn
    stop left; before, the host did not even take the command (LEAD was no longer live)."""
    db, gate = tmp_path / "runs.db", threading.Event()
    events = Events()
    with Runtime(_lead_with_a_detached_child(gate), store=SQLiteStore(db), **QUIET) as rt:
        rt.subscribe(events)
        try:
            top = rt.spawn("lead", "go")
            events.wait_count(EventKind.STARTED, "waiter", 2)
            [detached] = [r for r in rt.runs(agent="waiter") if r.task == "detached"]
            _cli(db, "stop", "--turn", top.run_id)
            rt._hosting.poll(PollCommands())
            assert top.result(WAIT).status is RunStatus.CANCELLED
            assert rt.status(detached.run_id).status is RunStatus.RUNNING  # the turn's stop
            # what `subagents stop` posts once it has read the run live, before that poll
            poster = SQLiteStore(db)
            try:
                poster.post_command("stop", top.run_id)
            finally:
                poster.close()
            rt._hosting.poll(PollCommands())
            ended = rt.wait_any([detached.run_id], timeout=WAIT)
            assert (ended.status, ended.error) == (
                RunStatus.CANCELLED,
                "stopped from another process",
            )
        finally:
            gate.set()


def test_stop_of_a_run_ended_by_a_turn_stop_stops_what_outlived_it(tmp_path: Path) -> None:
    """``subagents stop LEAD`` (its tree) once a ``--turn`` stop has ended LEAD: the command
    said "has already ended" and left its detached child running, with no way to name the
    tree. It now stops the highest live runs under LEAD, each with its subtree."""
    db, gate = tmp_path / "runs.db", threading.Event()
    events = Events()
    with Runtime(_lead_with_a_detached_child(gate), store=SQLiteStore(db), **QUIET) as rt:
        rt.subscribe(events)
        try:
            top = rt.spawn("lead", "go")
            events.wait_count(EventKind.STARTED, "waiter", 2)
            [detached] = [r for r in rt.runs(agent="waiter") if r.task == "detached"]
            rt.stop(top.run_id, scope="turn")
            assert top.result(WAIT).status is RunStatus.CANCELLED
            said = _cli(db, "stop", top.run_id)
            assert f"posted stop for waiter {detached.run_id}" in said
            rt._hosting.poll(PollCommands())
            ended = rt.wait_any([detached.run_id], timeout=WAIT)
            assert (ended.status, ended.error) == (
                RunStatus.CANCELLED,
                "stopped from another process",
            )
        finally:
            gate.set()
