"""The PostgreSQL store under a runtime: what a database server adds to SQLite's promises.

- The database stopped mid-run (``pg_ctl stop -m fast``, and ``-m immediate``: a crash of
  the server) for a few seconds: the runs fail with a clear error (the runtime's store
  outage, ``actors.outage``, as for a full disk), every caller is told, nothing that was
  acknowledged before is lost, and once the server is back the same runtime takes work again
  without a restart.
- Several runtimes (several drivers) on one database: each takes only what is its own or
  orphaned. A live runtime's runs are left to it; the orphans of a killed host are taken by
  exactly one of two runtimes restoring at once (their takeovers are serialised, the lapsed
  lease locked ``FOR UPDATE SKIP LOCKED``), and every run ends once.

The SIGKILL crash tests (tests/durability/test_crash_recovery.py) and the fencing tests
(test_fencing.py) run on PostgreSQL too.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from fence_job import gated_agent

from pgserver import PgServer
from polling import wait_until
from run_ends import ends_of
from subagents import AdmissionError, FunctionAgent, Runtime, ScriptedModel
from subagents.behaviour.function import AgentContext
from subagents.messages import Event, EventKind, RunStatus
from subagents.store.base import StoreError
from subagents.store.leases import Liveness
from subagents.store.postgres import PostgresStore

JOB = Path(__file__).with_name("fence_job.py")
SRC = str(Path(__file__).resolve().parents[2] / "src")
DOWN = "the database is unreachable|the server closed the connection mid-batch"
"""What a caller is told of the database stopped mid-run."""


async def busy(ctx: AgentContext) -> str:
    for i in range(100_000):  # until the database goes away
        await ctx.spawn("leaf", str(i))
    return "never"


def leaf(ctx: AgentContext) -> str:
    return f"ok {ctx.task}"


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_the_database_stopped_mid_run_fails_the_runs_loses_nothing_and_recovers(
    pg_server: PgServer, pg_url: str, mode: str
) -> None:
    agents = [FunctionAgent.create("busy", busy), FunctionAgent.create("leaf", leaf)]
    acknowledged: list[str] = []  # leaves whose end was published: committed first

    def on_event(event: Event) -> None:
        if event.kind is EventKind.COMPLETED and event.agent == "leaf":
            acknowledged.append(event.run_id)

    with Runtime(agents, model=ScriptedModel(), store=pg_url, command_poll_s=0.1) as rt:
        rt.subscribe(on_event)
        handle = rt.spawn("busy", "go")
        wait_until(lambda: len(acknowledged) >= 20, "twenty leaves done before the stop")
        pg_server.stop(mode)
        try:
            outcome = handle.result(timeout=60)
            seen = list(acknowledged)
            assert (outcome.status, outcome.error_kind) == (RunStatus.FAILED, "store")
            # the database gone: unreachable, or (a batch under way when it stopped) the
            # server closed the connection mid-batch, which is never finished elsewhere
            assert re.search(DOWN, outcome.error or ""), outcome.error
            with pytest.raises(AdmissionError, match=DOWN):
                rt.spawn("leaf", "while it is down").result(timeout=60)  # on its handle
        finally:
            pg_server.start()
        # back: the same runtime records what its callers were told, and takes work again
        wait_until(lambda: _takes_work(rt), "the runtime taking work again")
        assert rt.spawn("leaf", "after").result(timeout=60).result == "ok after"
    store = PostgresStore(pg_url)
    try:
        for run_id in seen:  # nothing acknowledged is lost
            record = store.get_run(run_id)
            assert record is not None and record.status is RunStatus.COMPLETED
        root = store.get_run(handle.run_id)
        assert root is not None and root.status is RunStatus.FAILED
        assert root.outcome is not None and root.outcome.error_kind == "store"
        assert [r for r in store.list_runs() if not r.status.terminal] == []
        for record in store.list_runs():  # and every run ended once
            ends = ends_of(store, record.run_id)
            assert len(ends) == 1, (record.agent, ends)
    finally:
        store.close()


def _takes_work(rt: Runtime) -> bool:
    try:
        rt.spawn("leaf", "probe").result(timeout=60)
    except (StoreError, AdmissionError):  # refused by the store's failure, on the handle
        return False
    return True


def _host(url: str, gate: Path, runs: int) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    host = subprocess.Popen(
        [sys.executable, str(JOB), url, str(gate), str(runs)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert host.stdout is not None
    line = host.stdout.readline()
    if line.strip() != "ready":
        host.kill()
        raise AssertionError(f"the host did not start: {line!r} {host.communicate()[1]}")
    return host


def test_runtimes_on_one_database_take_only_their_own_or_orphaned_runs(
    tmp_path: Path, pg_url: str
) -> None:
    gate = tmp_path / "gate"
    killed = _host(pg_url, gate, 4)  # four runs, then SIGKILL: orphans
    store = PostgresStore(pg_url)
    orphans = {r.run_id for r in store.list_runs()}
    killed.send_signal(signal.SIGKILL)
    killed.wait(timeout=30)
    started = threading.Event()
    live = Runtime([gated_agent(gate)], model=ScriptedModel(), store=pg_url, restore=False)
    try:
        live.subscribe(lambda e: started.set() if e.kind == "started" else None)
        own = live.spawn("gated", "live")  # a live runtime's run: nobody else's to take
        assert started.wait(60)
        wait_until(
            lambda: all(Liveness(store.leases()).orphaned(r) for r in _of(store, orphans)),
            "the killed host's runs orphaned",
        )
        takers: list[Runtime] = []
        errors: list[BaseException] = []
        barrier = threading.Barrier(2)

        def restore() -> None:
            try:
                barrier.wait(30)
                rt = Runtime([gated_agent(gate)], model=ScriptedModel(), store=pg_url)
                takers.append(rt)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=restore) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert errors == [] and len(takers) == 2
        try:
            reports = [t.restore_report for t in takers]
            resumed = [set(r.resumed) for r in reports]
            assert resumed[0] | resumed[1] == orphans  # every orphan taken...
            assert not resumed[0] & resumed[1]  # ...by exactly one of them
            assert all(own.run_id not in r.resumed for r in reports)  # the live one's left
            gate.touch()
            assert own.result(timeout=120).status is RunStatus.COMPLETED
            for taker, taken in zip(takers, resumed, strict=True):
                for run_id in taken:
                    outcome = taker.attach(run_id).result(timeout=120)
                    assert outcome.status is RunStatus.COMPLETED
        finally:
            for t in takers:
                t.close()
    finally:
        live.close()
    owners = {r.run_id: r.owner for r in store.list_runs()}
    assert owners[own.run_id] == live.owner
    assert Counter(owners[r] for r in orphans) == Counter(
        {takers[0].owner: len(resumed[0]), takers[1].owner: len(resumed[1])}
    )
    for record in store.list_runs():
        assert record.status is RunStatus.COMPLETED
        ends = ends_of(store, record.run_id)
        assert ends == [EventKind.COMPLETED], (record.run_id, ends)
    store.close()


def _of(store: PostgresStore, ids: set[str]) -> list[Any]:
    return [r for r in store.list_runs() if r.run_id in ids]


def test_a_database_restarted_while_the_runtime_idles_costs_it_nothing(
    pg_server: PgServer, pg_url: str
) -> None:
    """The connection the server closed while nothing was asked of it is replaced before
    the next batch: no run fails for it (the batch cannot be sent again blindly once sent:
    a commit whose answer was lost may have been committed)."""
    agents = [FunctionAgent.create("leaf", leaf)]
    with Runtime(agents, model=ScriptedModel(), store=pg_url, command_poll_s=0) as rt:
        assert rt.run("leaf", "before", wait=60).result == "ok before"
        pg_server.stop("fast")
        pg_server.start()
        outcome = rt.run("leaf", "after", wait=60)
        assert (outcome.status, outcome.result) == (RunStatus.COMPLETED, "ok after")


def test_a_command_is_taken_when_posted_not_at_the_next_poll(pg_url: str) -> None:
    """The runtime LISTENs for commands: with a poll an hour apart, mail sent by another
    process still reaches a waiting run (it would wait for the poll without the listener)."""

    async def waiter(ctx: AgentContext) -> str:
        mail = await ctx.receive(timeout=600)
        return f"heard {mail.content if mail else None}"

    agents = [FunctionAgent.create("waiter", waiter)]
    with Runtime(agents, model=ScriptedModel(), store=pg_url, command_poll_s=3600) as rt:
        waiting = threading.Event()
        rt.subscribe(lambda e: waiting.set() if e.kind == "waiting" else None)
        handle = rt.spawn("waiter", "listen")
        assert waiting.wait(60)
        other = PostgresStore(pg_url)  # another process's view of the store
        other.post_command("send", handle.run_id, "hello")
        other.close()
        assert handle.result(timeout=60).result == "heard hello"


def test_a_command_posted_before_the_listener_listens_is_looked_at_once_it_does(
    pg_url: str,
) -> None:
    """A command's NOTIFY sent while no listener was connected reaches nobody: the listener
    looks once as soon as it listens (a fresh-clone CI run saw a runtime's mail wait for its
    hour-long poll: the command was posted before its listener's LISTEN)."""
    from subagents.store.postgres_listen import CommandListener

    other = PostgresStore(pg_url)
    other.post_command("send", "r-nobody", "hello")  # announced to nobody
    other.close()
    looked = threading.Event()
    listener = CommandListener(pg_url, "test", looked.set)
    try:
        assert looked.wait(30)
    finally:
        listener.close()
