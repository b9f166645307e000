"""A close that begins while the store fails admits nothing after it, once the store works
again either; and the runs it held are not run again behind their callers' backs, or the
callers are told they may be.

While the store fails, the supervisor answers the close's ``StopAll`` without deciding it
(every run was stopped when the store failed: ``actors/outage.py``). It did not mark the
admission closed, so a spawn reaching it after that close, once the store took writes again
(its own recovery attempt succeeding), was admitted and its agent started: after the close
had begun, into a store the closing runtime was about to leave.

The outage is real: another connection holds SQLite's write lock (a locked store), so every
write of the runtime fails after its busy timeout; committing that connection's transaction
is the store working again. The close's ``StopAll`` is asked of the supervisor as
``SupervisorClient.close`` asks it, with the runtime left open, so that the late spawn can
be told after it by the public ``spawn`` (a close that runs on would end the supervisor)."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
import structlog

from subagents import FunctionAgent, Runtime, SQLiteStore
from subagents.behaviour.function import AgentContext
from subagents.messages import Ask, MailState, RunRecord, RunStatus, StopAll
from subagents.runtime import AdmissionError, RunHandle

WAIT = 60.0
QUIET = {"command_poll_s": 3600, "sweep_every_s": 3600}


def leaf(ctx: AgentContext) -> str:
    return "ok " + ctx.task


def test_a_spawn_after_a_close_during_a_store_outage_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    store = SQLiteStore(db, busy_timeout=0.05)
    quiet = {"command_poll_s": 3600, "sweep_every_s": 3600}
    rt = Runtime([FunctionAgent.create("leaf", leaf)], store=store, **quiet)
    locker = sqlite3.connect(db, isolation_level=None)
    try:
        assert rt.run("leaf", "before", wait=WAIT).result == "ok before"
        locker.execute("BEGIN IMMEDIATE")  # the store is locked: every write fails
        during = rt.spawn("leaf", "during")
        try:  # the store failed: refused on its handle, or failed with the store's error
            outcome = during.result(WAIT)
        except AdmissionError as exc:
            assert "busy" in str(exc)
        else:
            assert (outcome.status, outcome.error_kind) == (RunStatus.FAILED, "store")
        supervisor = rt._hosting.supervisor
        assert supervisor is not None
        # the close's StopAll while the store still fails: answered, nothing left unfinished
        # (the spawn during the outage was never recorded)
        assert supervisor._ref.ask(Ask(StopAll()), timeout=WAIT) == ()
        locker.execute("COMMIT")  # the store takes writes again
        late = rt.spawn("leaf", "late")
        with pytest.raises(AdmissionError, match="the runtime is closing"):
            late.result(WAIT)  # refused: no run starts after the close began
        assert rt.get(late.run_id) is None
    finally:
        locker.close()
        rt.close()
    store.close()
    reopened = SQLiteStore(db)
    try:
        runs = {r.task: r for r in reopened.list_runs()}
        assert runs.keys() <= {"before", "during"}  # nothing of the late spawn
        assert runs["before"].status is RunStatus.COMPLETED
        if "during" in runs:  # held in memory when its admission's write failed: recorded
            during_record = runs["during"]  # once the store worked, as the failure's end
            assert during_record.status is RunStatus.FAILED  # (by the recovery the failed
            assert during_record.outcome is not None  # StopAll decided: ``Outage._owed``)
            assert during_record.outcome.error_kind == "store"
    finally:
        reopened.close()


class WatchedStore(SQLiteStore):
    """A real SQLite store that says (``retried``) when the close has tried to record the
    runs a second time (``Outage.recover`` reads the unfinished runs first, each time):
    the first try was refused, and the close went on trying."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, busy_timeout=0.05)
        self.closing, self.tries, self.list_runs_tries = False, 0, 0
        self.retried = threading.Event()

    def list_runs(self, **kwargs: Any) -> list[RunRecord]:
        if kwargs.get("statuses") is not None:
            self.list_runs_tries += 1
        if self.closing and kwargs.get("statuses") is not None:
            self.tries += 1
            if self.tries == 2:
                self.retried.set()
        return super().list_runs(**kwargs)


class Held:
    """A runtime on a ``WatchedStore`` hosting one run that works until the test ends, then
    locked out of its store (another connection holds SQLite's write lock), so that the
    run's caller is told it failed."""

    def __init__(self, db: Path) -> None:
        self.db, self.gate, self.ran = db, threading.Event(), []
        self.store = WatchedStore(db)
        self.locker = sqlite3.connect(db, isolation_level=None)

    def agents(self) -> list[FunctionAgent]:
        def holds(ctx: AgentContext) -> str:
            self.ran.append(ctx.task)
            self.gate.wait(WAIT)
            return "held"

        return [FunctionAgent.create("holds", holds), FunctionAgent.create("leaf", leaf)]

    def fail(self, rt: Runtime, unread: str | None = None) -> RunHandle:
        """The run started (mailed ``unread``, which it never reads), then the store locked
        and a spawn's write failing on it."""
        first = rt.spawn("holds", "first")
        assert first.wait_admitted() is RunStatus.RUNNING
        if unread is not None:
            rt.send(first.run_id, unread)
        self.locker.execute("BEGIN IMMEDIATE")  # every write of the runtime fails now
        failing = rt.spawn("leaf", "its write fails")
        with contextlib.suppress(AdmissionError):
            failing.result(WAIT)
        return first

    def close_until_it_tries_again(self, rt: Runtime) -> tuple[threading.Thread, threading.Event]:
        """``rt.close`` on another thread, returned once it tried the store again (the
        closer and its end, set when the close returns): fails if it ended without."""
        closed = threading.Event()
        closer = threading.Thread(target=lambda: (rt.close(timeout=WAIT), closed.set()))
        closer.start()
        either = threading.Event()  # the close tried again, or ended without trying again
        threading.Thread(target=lambda: (self.store.retried.wait(WAIT), either.set())).start()
        threading.Thread(target=lambda: (closed.wait(WAIT), either.set())).start()
        assert either.wait(WAIT)
        assert self.store.retried.is_set(), "the close ended without trying the store again"
        return closer, closed

    def assert_failed_and_never_run_again(self, run_id: str) -> None:
        """The store (closed by now) keeps ``run_id`` failed by the store, as its caller
        was told, and the next runtime on it runs nothing again."""
        self.store.close()
        reopened = SQLiteStore(self.db)
        try:
            record = reopened.get_run(run_id)
            assert record is not None and record.status is RunStatus.FAILED
            assert record.outcome is not None and record.outcome.error_kind == "store"
        finally:
            reopened.close()
        with Runtime(self.agents(), store=SQLiteStore(self.db), **QUIET) as again:
            report = again.restore_report
            assert report.resumed == report.requeued == report.elsewhere == []
        assert self.ran == ["first"]  # never run again


def test_a_close_while_the_store_fails_records_the_runs_once_it_works_again(
    tmp_path: Path,
) -> None:
    """The store takes writes again while the close waits: the run it held is recorded
    failed, as its caller was told, and the next runtime on the store runs nothing again.
    Before, the close's one refused ``StopAll`` ended it: the run stayed unfinished, and the
    next runtime's restore ran it again."""
    held = Held(tmp_path / "runs.db")
    rt = Runtime(held.agents(), store=held.store, **QUIET)
    try:
        first = held.fail(rt)
        told = first.result(WAIT)
        assert (told.status, told.error_kind) == (RunStatus.FAILED, "store")
        assert "a restore runs it again" in (told.error or "")  # what may yet happen
        held.gate.set()  # (its agent was stopped: its thread leaves, whatever it returns)
        held.store.closing = True
        closer, closed = held.close_until_it_tries_again(rt)
        held.locker.execute("COMMIT")  # the store takes writes again
        closer.join(WAIT)
        assert closed.is_set()
    finally:
        held.gate.set()
        held.locker.close()
        rt.close()
    held.assert_failed_and_never_run_again(first.run_id)


def test_a_close_while_the_store_still_fails_says_what_it_leaves(tmp_path: Path) -> None:
    """The store never takes writes again before the close's timeout: the run stays
    unfinished in the store; its caller was told so, and the close says it (one error line
    naming the runs and the ways on)."""
    held = Held(tmp_path / "runs.db")
    rt = Runtime(held.agents(), store=held.store, **QUIET)
    saved = structlog.get_config()
    structlog.reset_defaults()
    try:
        first = held.fail(rt)
        assert "the store keeps the run unfinished" in (first.result(WAIT).error or "")
        held.gate.set()
        with structlog.testing.capture_logs() as logs:
            rt.close(timeout=0.5)
    finally:
        structlog.configure(**saved)
        held.gate.set()
        held.locker.close()
        rt.close()
    [said] = [e for e in logs if "closed while its store still failed" in e["event"]]
    assert said["runs"] == [first.run_id] and said["log_level"] == "error"
    assert "subagents stop RUN" in said["event"]
    held.store.close()
    reopened = SQLiteStore(held.db)
    try:
        record = reopened.get_run(first.run_id)
        assert record is not None and not record.status.terminal  # as the caller was told
    finally:
        reopened.close()


def test_a_close_while_the_store_fails_with_nothing_unfinished_does_not_wait(
    tmp_path: Path,
) -> None:
    """The store fails on a run's admission (its record never written) and still fails as
    the runtime closes: the store keeps no run of this runtime unfinished (the close reads
    it: reads still work), so the close has nothing to record. Its ``StopAll`` is answered
    (nothing left), not refused: before, it was refused with no run named, so the close
    asked again until its whole timeout and then logged that the runtime closed leaving
    runs unfinished (``runs=[]``), which was not so."""
    db = tmp_path / "runs.db"
    store = SQLiteStore(db, busy_timeout=0.05)
    rt = Runtime([FunctionAgent.create("leaf", leaf)], store=store, **QUIET)
    locker = sqlite3.connect(db, isolation_level=None)
    saved = structlog.get_config()
    structlog.reset_defaults()
    try:
        assert rt.run("leaf", "before", wait=WAIT).result == "ok before"
        locker.execute("BEGIN IMMEDIATE")  # the store is locked: every write fails
        during = rt.spawn("leaf", "during")
        with contextlib.suppress(AdmissionError):
            during.result(WAIT)
        supervisor = rt._hosting.supervisor
        assert supervisor is not None
        assert supervisor._ref.ask(Ask(StopAll()), timeout=WAIT) == ()  # nothing left
        with structlog.testing.capture_logs() as logs:
            rt.close(timeout=WAIT)
    finally:
        structlog.configure(**saved)
        locker.close()
        rt.close()
    assert not [e for e in logs if "closed while its store still failed" in e["event"]]
    store.close()
    reopened = SQLiteStore(db)
    try:
        assert not [r for r in reopened.list_runs() if not r.status.terminal]
    finally:
        reopened.close()


def test_a_close_whose_own_stop_finds_the_store_failing_tries_it_again(tmp_path: Path) -> None:
    """The store fails first at the close's own ``StopAll`` (nothing wrote since it broke):
    the close tries it again until its timeout, as for a store that failed before it, and
    a store that takes writes again by then records the run failed. Before, the StopAll's
    ``StoreError`` ended the close ("stopping runs failed"): the run stayed unfinished in the
    store, for the next runtime's restore to run again."""
    held = Held(tmp_path / "runs.db")
    rt = Runtime(held.agents(), store=held.store, **QUIET)
    try:
        first = rt.spawn("holds", "first")
        assert first.wait_admitted() is RunStatus.RUNNING
        held.store.closing = True
        held.locker.execute("BEGIN IMMEDIATE")  # the close's StopAll is the first to fail
        closer, closed = held.close_until_it_tries_again(rt)
        held.gate.set()  # (its agent was stopped: its thread leaves, whatever it returns)
        held.locker.execute("COMMIT")  # the store takes writes again
        closer.join(WAIT)
        assert closed.is_set()
    finally:
        held.gate.set()
        held.locker.close()
        rt.close()
    held.assert_failed_and_never_run_again(first.run_id)


class SlowTry(WatchedStore):
    """A ``WatchedStore`` whose close's try at recording the runs number ``at`` (0: the
    first read of the unfinished runs once ``closing``; 1: the close's first ask again,
    after its ``StopAll`` was refused) waits for ``go_on``: a store that answers only after
    the close's deadline (on a cluster whose head store is lost, a ``ray.get`` of up to
    60 s; a loaded machine: its ask timed out). ``reached``: that try has begun."""

    def __init__(self, path: Path, at: int) -> None:
        super().__init__(path)
        self.at = at
        self.reached, self.go_on = threading.Event(), threading.Event()

    def list_runs(self, **kwargs: Any) -> list[RunRecord]:
        if self.closing and kwargs.get("statuses") is not None and self.tries == self.at:
            self.reached.set()
            self.go_on.wait(WAIT)
        return super().list_runs(**kwargs)


def test_a_close_past_its_deadline_does_not_try_the_store_again(tmp_path: Path) -> None:
    """The close's ``StopAll`` is refused only after the close's timeout (the store was
    slow to answer): the close says what it leaves at once, without another ask (each has
    the supervisor try the store again: on a cluster, another ``ray.get`` of up to 60 s).
    Before, one more ask was always made, whatever the time left."""
    held = Held(tmp_path / "runs.db")
    held.store.close()
    held.store = store = SlowTry(held.db, at=0)
    rt = Runtime(held.agents(), store=store, **QUIET)
    saved = structlog.get_config()
    structlog.reset_defaults()
    try:
        first = held.fail(rt)
        assert (first.result(WAIT).error_kind, first.status) == ("store", RunStatus.FAILED)
        held.gate.set()
        assert rt._hosting.agents_idle(WAIT)  # the stopped agent's last report was sent,
        rt.stats()  # and handled before this ask (its own try at the store is not counted)
        store.closing = True
        with structlog.testing.capture_logs() as logs:
            closed = threading.Event()
            closer = threading.Thread(target=lambda: (rt.close(timeout=0.5), closed.set()))
            closer.start()
            assert store.reached.wait(WAIT)
            overran = threading.Event()  # never set: a wait between looks at the log
            for _ in range(int(WAIT / 0.01)):  # the close's timeout passed (it says so)
                if [e for e in logs if "longer than the close's timeout" in e["event"]]:
                    break
                overran.wait(0.01)
            store.go_on.set()
            closer.join(WAIT)
        assert closed.is_set()
    finally:
        structlog.configure(**saved)
        held.gate.set()
        store.go_on.set()
        held.locker.close()
        rt.close()
    assert [e for e in logs if "longer than the close's timeout" in e["event"]]
    assert store.tries == 1  # the refused StopAll's own try, none after the deadline
    [said] = [e for e in logs if "closed while its store still failed" in e["event"]]
    assert said["runs"] == [first.run_id]


def test_a_recovery_whose_write_fails_is_written_whole_by_the_next_one(tmp_path: Path) -> None:
    """A try at recording the runs once the store seems back decides first (the core ends
    the runs it held, and forgets them) and writes after: when that write fails (still
    locked), the next try, which succeeds, writes the same decision. Before, it decided
    anew, from the store alone: the run was recorded failed, but what only memory knew was
    lost (here: the mail it never read stayed delivered, not a dead letter, as an end
    makes unread mail)."""
    held = Held(tmp_path / "runs.db")
    rt = Runtime(held.agents(), store=held.store, **QUIET)
    try:
        first = held.fail(rt, unread="never read")
        assert first.result(WAIT).error_kind == "store"
        held.gate.set()
        assert rt._hosting.agents_idle(WAIT)
        tries = held.store.list_runs_tries
        rt.stats()  # an ask tries to record the runs first: decided, its write refused
        assert held.store.list_runs_tries > tries  # (it was tried)
        held.locker.execute("COMMIT")  # the store takes writes again
        rt.stats()  # the next try writes
        record = held.store.get_run(first.run_id)
        assert record is not None and record.status is RunStatus.FAILED
        [mail] = [m for m in held.store.mail_for(first.run_id) if m.content == "never read"]
        assert mail.state is MailState.DEAD
    finally:
        held.gate.set()
        held.locker.close()
        rt.close()
    held.store.close()


def test_a_close_whose_ask_again_times_out_says_what_it_leaves(tmp_path: Path) -> None:
    """The close's ``StopAll`` is refused, and its ask again is not answered by the close's
    deadline (the supervisor's try at the store outlasts it): the close says what it leaves
    (the runs of the last refusal), as when the store refuses at the deadline. Before, the
    ask's timeout ended the close with 'stopping runs failed' and no word of the runs left
    unfinished: ``test_a_close_while_the_store_still_fails_says_what_it_leaves`` failed so
    under load (its close of 0.5 s asked again with 0.1 s left)."""
    held = Held(tmp_path / "runs.db")
    held.store.close()
    held.store = store = SlowTry(held.db, at=1)
    rt = Runtime(held.agents(), store=store, **QUIET)
    saved = structlog.get_config()
    structlog.reset_defaults()
    try:
        first = held.fail(rt)
        assert first.result(WAIT).error_kind == "store"
        held.gate.set()
        assert rt._hosting.agents_idle(WAIT)  # the stopped agent's last report was sent,
        rt.stats()  # and handled before this ask (its own try at the store is not counted)
        store.closing = True
        with structlog.testing.capture_logs() as logs:
            closed = threading.Event()
            closer = threading.Thread(target=lambda: (rt.close(timeout=3.0), closed.set()))
            closer.start()
            either = threading.Event()  # the close asked again, or ended without
            threading.Thread(target=lambda: (store.reached.wait(WAIT), either.set())).start()
            threading.Thread(target=lambda: (closed.wait(WAIT), either.set())).start()
            assert either.wait(WAIT)
            # the close's ask again timed out at its deadline; or, its first ask having
            # outlasted the 3 s itself (a very loaded machine), it asked nothing again: the
            # close must say what it leaves either way
            assert closed.wait(WAIT)
            store.go_on.set()
            closer.join(WAIT)
    finally:
        structlog.configure(**saved)
        held.gate.set()
        store.go_on.set()
        held.locker.close()
        rt.close()
    assert not [e for e in logs if e["event"] == "stopping runs failed"]
    [said] = [e for e in logs if "closed while its store still failed" in e["event"]]
    assert said["runs"] == [first.run_id] and said["log_level"] == "error"
