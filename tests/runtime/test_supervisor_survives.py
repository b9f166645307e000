"""The supervisor outlives a failed tell: the failure is logged, whoever waits on it is
answered, and the next run is served (an ask's failure goes to its sender instead).

What used to happen: the supervisor guessed from a message's content whether it was asked;
a ``Sweep`` told by the timer was taken for an ask, its error re-raised into pykka, which
stopped the supervisor, and the next ``rt.run`` raised ``RuntimeClosed``.

Each test runs on both stores: in memory, and a real SQLite file (where a failing write on a
tell rolls back inside the open group commit's transaction, and the next writes commit). The
failure is real: a store subclass whose sweeper or mail write raises, nothing of ours mocked.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from subagents import FunctionAgent, MemoryStore, Runtime
from subagents.behaviour.function import AgentContext, MailError
from subagents.messages import Mail, RunStatus, Sweep
from subagents.store.base import RunStore, StoreError
from subagents.store.sqlite import SQLiteStore

WAIT = 60.0


def quick(ctx: AgentContext) -> str:
    return f"done: {ctx.task}"


class SweepFails:
    """Mixed into a real store: its sweeper raises, counting its calls."""

    error: Exception
    calls: int
    called: threading.Condition

    def sweep(self, **_: Any) -> Any:
        with self.called:
            self.calls += 1
            self.called.notify_all()
        raise type(self.error)(*self.error.args)  # a fresh one: no traceback piling up

    def wait_calls(self, n: int) -> bool:
        with self.called:
            return self.called.wait_for(lambda: self.calls >= n, WAIT)


class MemorySweepFails(SweepFails, MemoryStore):
    pass


class SQLiteSweepFails(SweepFails, SQLiteStore):
    pass


@pytest.fixture(params=["memory", "sqlite"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def sweep_fails(kind: str, tmp_path: Path, error: Exception) -> Any:
    store: Any = MemorySweepFails() if kind == "memory" else SQLiteSweepFails(tmp_path / "r.db")
    store.error, store.calls, store.called = error, 0, threading.Condition()
    return store


@pytest.mark.parametrize("error", [RuntimeError("sweeper broke"), StoreError("archive failed")])
def test_a_sweep_that_raises_when_told_leaves_the_supervisor_serving(
    error: Exception, kind: str, tmp_path: Path
) -> None:
    store = sweep_fails(kind, tmp_path, error)
    agents = [FunctionAgent.create("quick", quick)]
    with Runtime(agents, store=store, sweep_every_s=0, command_poll_s=0) as rt:
        supervisor: Any = rt._supervisor
        for _ in range(3):  # told, as the runtime's timer tells it every sweep_every_s
            assert supervisor.tell(Sweep())
        assert store.wait_calls(3)  # each one failed, and the next was still taken in
        outcome = rt.run("quick", "after the sweeps", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED
        assert outcome.result == "done: after the sweeps"


def test_a_sweep_that_raises_when_asked_raises_to_the_caller_only(
    kind: str, tmp_path: Path
) -> None:
    store = sweep_fails(kind, tmp_path, RuntimeError("sweeper broke"))
    agents = [FunctionAgent.create("quick", quick)]
    with Runtime(agents, store=store, sweep_every_s=0, command_poll_s=0) as rt:
        with pytest.raises(RuntimeError, match="sweeper broke"):
            rt.sweep()
        supervisor: Any = rt._supervisor
        assert supervisor.tell(Sweep())  # and told: logged, nobody else hears of it
        assert store.wait_calls(2)
        assert rt.run("quick", "still here", wait=WAIT).status is RunStatus.COMPLETED


class MailWriteFailsOnce:
    """Mixed into a real store: its first write of mail raises (a bug in a store, not a full
    disk)."""

    failed = False

    def save_mails(self, mails: Sequence[Mail]) -> None:
        if not self.failed:
            self.failed = True
            raise RuntimeError("the mail write broke")
        super().save_mails(mails)  # type: ignore[misc]


class MemoryMailFails(MailWriteFailsOnce, MemoryStore):
    pass


class SQLiteMailFails(MailWriteFailsOnce, SQLiteStore):
    pass


def test_a_store_write_that_raises_on_a_tell_is_answered_and_survived(
    kind: str, tmp_path: Path
) -> None:
    async def lead(ctx: AgentContext) -> str:
        child: str = await ctx.spawn("sink", "wait", background=True)
        try:
            # by name: resolved by the supervisor's mail room, so it goes by the supervisor
            # (whose write raises), not straight to the sink (actors/mail_desk.py)
            await ctx.send("sink", "first")
            first = "accepted"
        except MailError as exc:
            first = f"refused: {exc}"
        second: str = await ctx.send(child, "second")
        got: Mail | None = await ctx.receive(timeout=WAIT)  # the sink's answer
        assert got is not None and second
        return f"{first} | {got.content}"

    async def sink(ctx: AgentContext) -> str:
        mail: Mail | None = await ctx.receive(timeout=WAIT)
        assert mail is not None
        await ctx.send(ctx.parent_run_id or "", f"got {mail.content}")
        return mail.content

    store: RunStore = MemoryMailFails() if kind == "memory" else SQLiteMailFails(tmp_path / "r.db")
    agents = [
        FunctionAgent.create("lead", lead),
        FunctionAgent.create("sink", sink),
        FunctionAgent.create("quick", quick),
    ]
    with Runtime(agents, store=store) as rt:
        outcome = rt.run("lead", "go", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED, outcome
        assert outcome.result == (
            "refused: the supervisor could not handle this request: RuntimeError: the mail"
            " write broke | got second"
        )
        assert rt.run("quick", "next", wait=WAIT).status is RunStatus.COMPLETED
        # nothing half-written: the refused mail is nowhere, the second one was kept
        sent = [m.content for m in store.mail_for(outcome.run_id)]
        assert "first" not in sent and "second" in sent
