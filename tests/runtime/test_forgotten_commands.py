"""Commands posted for a run while it was live, and found by the runtime's poll only after
the run's tree ended and was forgotten (``supervision.commands.forgotten_commands``).

The runtime claims the commands of the runs it holds; an ended run's tree is forgotten as
soon as nothing in it is live. A ``subagents send`` posted while the run was live (the
command checks the run has not ended) and polled after that was claimed by nobody: the
mail stayed pending in the store for ever, neither delivered nor a dead letter. Now the
runtime that hosted it takes it, and the mail is a dead letter, as mail to an ended run is;
a run another live runtime hosts keeps its commands for that runtime."""

from __future__ import annotations

import threading
from pathlib import Path

from subagents import FunctionAgent, Runtime, SQLiteStore
from subagents.behaviour.function import AgentContext
from subagents.messages import EXTERNAL_SENDER, MailState, PollCommands
from subagents.runtime import RunHandle

from .conftest import WAIT

QUIET = {"command_poll_s": 3600, "sweep_every_s": 3600}  # polled when the test says


class Holding:
    """An agent that works until ``release`` (``started``: its code runs)."""

    def __init__(self) -> None:
        self.started, self.release = threading.Event(), threading.Event()

    def agent(self) -> FunctionAgent:
        def holds(ctx: AgentContext) -> str:
            self.started.set()
            self.release.wait(WAIT)
            return "done"

        return FunctionAgent.create("holds", holds)


def post_from_another_process(db: Path, run_id: str, text: str) -> None:
    """What ``subagents send`` does: its own store on the file posts a command."""
    other = SQLiteStore(db)
    try:
        other.post_command("send", run_id, text)
    finally:
        other.close()


def poll_until_taken(rt: Runtime, store: SQLiteStore) -> None:
    """Tell ``rt`` to take its commands, until the store has none pending (or ``WAIT``)."""
    tick = threading.Event()  # never set: a wait between polls
    for _ in range(int(WAIT / 0.05)):
        rt._hosting.poll(PollCommands())
        if not store.pending_command_runs():
            return
        tick.wait(0.05)


def test_a_send_taken_after_its_runs_tree_ended_is_a_dead_letter(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    holding = Holding()
    with SQLiteStore(db) as store:
        with Runtime([holding.agent()], store=store, **QUIET) as rt:
            handle: RunHandle = rt.spawn("holds", "work")
            assert holding.started.wait(WAIT)
            post_from_another_process(db, handle.run_id, "too late")  # while it is live
            holding.release.set()
            assert handle.result(WAIT).result == "done"  # its tree ends and is forgotten
            poll_until_taken(rt, store)
            assert store.pending_command_runs() == []  # taken, not pending for ever
        [mail] = [m for m in store.mail_for(handle.run_id) if m.content == "too late"]
        assert (mail.sender, mail.state) == (EXTERNAL_SENDER, MailState.DEAD)


def test_a_runs_commands_stay_for_the_runtime_that_hosts_it(tmp_path: Path) -> None:
    """Two runtimes on one store: the one that does not host the run does not take its
    command (nor when the run has ended in the other's memory: that one takes it)."""
    db = tmp_path / "runs.db"
    holding = Holding()
    with (
        SQLiteStore(db) as store,
        Runtime([holding.agent()], store=db, **QUIET) as host,
        Runtime([holding.agent()], store=db, **QUIET) as other,
    ):
        handle = host.spawn("holds", "work")
        assert holding.started.wait(WAIT)
        post_from_another_process(db, handle.run_id, "for the host")
        other._hosting.poll(PollCommands())
        other.stats()  # (asked after the poll: it was handled)
        assert store.pending_command_runs() == [handle.run_id]  # left to its host
        poll_until_taken(host, store)
        assert store.pending_command_runs() == []
        [mail] = [m for m in store.mail_for(handle.run_id) if m.content == "for the host"]
        assert mail.state is not MailState.DEAD  # delivered to the live run
        holding.release.set()
        assert handle.result(WAIT).result == "done"


def test_a_send_to_a_run_of_a_runtime_that_closed_before_its_poll_is_a_dead_letter(
    tmp_path: Path,
) -> None:
    """The run's runtime closed (its runs cancelled, its lease released) before it polled
    the send posted while the run was live: the next runtime on the store takes it (its
    lease is gone and nothing of the run's tree is unfinished: nobody else ever would)."""
    db = tmp_path / "runs.db"
    holding = Holding()
    with Runtime([holding.agent()], store=db, **QUIET) as first:
        handle = first.spawn("holds", "work")
        assert holding.started.wait(WAIT)
        post_from_another_process(db, handle.run_id, "after its close")
        holding.release.set()  # (its agent returns as the close stops it)
    with SQLiteStore(db) as store, Runtime([holding.agent()], store=db, **QUIET) as later:
        assert store.pending_command_runs() == [handle.run_id]
        poll_until_taken(later, store)
        assert store.pending_command_runs() == []
        [mail] = [m for m in store.mail_for(handle.run_id) if m.content == "after its close"]
        assert (mail.sender, mail.state) == (EXTERNAL_SENDER, MailState.DEAD)
