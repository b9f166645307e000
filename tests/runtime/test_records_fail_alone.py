"""A report of the late line that the store fails to write (a bug in a store, not a full
disk) is left out alone, as a told report always was (``test_supervisor_survives.py``):
the reports decided with it as one ``Records`` (``LateReports.hand``,
``SupervisorCore.recorded``) are still written, and so is what they come to.

The failure is real: a store (SQLite; memory) whose journal write raises for one entry; the reports
are put in the real supervisor's line as its agents put theirs (``mail_desk.report``), and an
ask takes them (its group committed first)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from subagents import FunctionAgent, Runtime
from subagents.behaviour.function import AgentContext
from subagents.messages import Batch, Inspect, Journal, JournalEntry
from subagents.store.base import RunStore
from subagents.store.memory import MemoryStore
from subagents.store.sqlite import SQLiteStore

WAIT = 60.0


class JournalWriteFails(SQLiteStore):
    """Its write of a journal holding the entry ``BAD`` raises (the others are written)."""

    BAD = "bad:1"

    def save_journal(self, run_id: str, entries: Sequence[JournalEntry]) -> None:
        if any(e.request_id == self.BAD for e in entries):
            raise RuntimeError("the journal write broke")
        super().save_journal(run_id, entries)


class MemoryJournalWriteFails(MemoryStore):
    """The same in memory, where the supervisor records straight mail after it and the
    agents' reports go in the line too (``late_reports``)."""

    def save_journal(self, run_id: str, entries: Sequence[JournalEntry]) -> None:
        if any(e.request_id == JournalWriteFails.BAD for e in entries):
            raise RuntimeError("the journal write broke")
        super().save_journal(run_id, entries)


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
def test_a_report_whose_write_fails_leaves_the_others_of_its_line_written(
    tmp_path: Path, kind: str
) -> None:
    started = {"a": threading.Event(), "b": threading.Event()}

    async def waiter(ctx: AgentContext) -> str:
        started[ctx.task].set()  # (its start is decided: its reports are its own now)
        await ctx.receive(timeout=WAIT)  # (live until the close stops it)
        return "done"

    store: RunStore = (
        JournalWriteFails(tmp_path / "r.db") if kind == "sqlite" else MemoryJournalWriteFails()
    )
    with Runtime([FunctionAgent.create("waiter", waiter)], store=store) as rt:
        a = rt.spawn("waiter", "a").run_id
        b = rt.spawn("waiter", "b").run_id
        assert started["a"].wait(WAIT) and started["b"].wait(WAIT)
        ref: Any = rt._supervisor._ref  # type: ignore[attr-defined]
        supervisor = ref._actor_weakref()  # (pykka holds its actor weakly)
        late = supervisor.late
        bad = JournalEntry(request_id=JournalWriteFails.BAD, kind="note")
        good = [JournalEntry(request_id=f"good:{i}", kind="note") for i in range(3)]
        late.put(Journal(run_id=b, entries=(good[0],)))
        late.put(Batch(messages=(Journal(run_id=a, entries=(bad,)),)))
        late.put(Journal(run_id=b, entries=(good[1],)))
        late.put(Journal(run_id=a, entries=(good[2],)))
        rt._supervisor.ask(Inspect(run_id=b), timeout=WAIT)  # takes the line, commits
        kept = {e.request_id for r in (a, b) for e in store.journal_of(r)}
        assert {e.request_id for e in good} <= kept  # the others of its line: written
        assert JournalWriteFails.BAD not in kept
