"""``subagents log``'s read of a run that ends between its two reads (the record, then the
events): the end must be printed with its result, as the store keeps it.

``test_cli_processes.py::test_log_follow_prints_until_the_run_ends`` failed so twice under
load (CI, PostgreSQL): the record read running, the events read with the end; the end was
printed with no result, and ``--follow``, having printed it, never printed it again.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from damaged_rows import run
from subagents.cli.log_cmd import read
from subagents.messages import Event, EventKind, Outcome, RunRecord, RunStatus
from subagents.store.sqlite import SQLiteStore


class EndsBetweenReads(SQLiteStore):
    """A real store whose run ends (its record and its end event, as the runtime's one
    write does) right after a reader has read the record and before it reads the events."""

    def __init__(self, path: Path, ended: RunRecord, end: Event) -> None:
        super().__init__(path)
        self._end: tuple[RunRecord, Event] | None = (ended, end)

    def events(self, run_id: str) -> list[Event]:
        if self._end is not None:
            ended, end = self._end
            self._end = None
            with self.batch():
                self.save_run(ended)
                self.append_event(end)
        return super().events(run_id)


def test_an_end_written_between_the_record_and_the_events_is_read_with_its_result(
    tmp_path: Path,
) -> None:
    working = run("r-1", 1.0, status=RunStatus.RUNNING)
    outcome = Outcome(run_id="r-1", status=RunStatus.COMPLETED, result="the answer")
    ended = msgspec.structs.replace(working, status=RunStatus.COMPLETED, outcome=outcome)
    end = Event(kind=EventKind.COMPLETED, run_id="r-1", agent="quick", root_run_id="r-1", ts=2.0)
    path = tmp_path / "runs.db"
    with SQLiteStore(path) as plain:
        plain.save_run(working)
        plain.append_event(
            Event(kind=EventKind.STARTED, run_id="r-1", agent="quick", root_run_id="r-1", ts=1.5)
        )
    with EndsBetweenReads(path, ended, end) as store:
        record, entries = read(store, "r-1", final=False)
    assert record.status is RunStatus.COMPLETED  # the record the end was written with
    assert [(e.kind, e.text) for e in entries][-1] == ("completed", "the answer")
