"""`ps --watch` over a store with a damaged runs row: the listing names it (stderr) and the
watch goes on, printing the other runs' changes; a change of the damaged run (read to print
its row) is left out as the listing left it out, not the watch's end; Ctrl-C exits 1, as
`ps` does for a damaged row. Before, the watch printed the listing and exited 1 at once,
watching nothing. Through the real command in
a subprocess, on a store file damaged by SQLite itself."""

from __future__ import annotations

import msgspec
from clikit import Cli
from test_cli_damaged_listing import BAD, GOOD, damaged
from test_cli_operator import Lines

from subagents.messages import Event, EventKind, RunStatus
from subagents.store.sqlite import SQLiteStore

__all__ = ["damaged"]  # (the fixture, imported for this module's test)


def test_ps_watch_names_a_damaged_run_and_goes_on_watching(damaged: Cli) -> None:
    watcher = Lines(damaged.start("ps", "--watch", "--json"))
    listed = watcher.until(lambda lines: "]" in lines, "the listing")
    assert BAD not in "\n".join(listed) and GOOD in "\n".join(listed)
    with SQLiteStore(damaged.state) as store:
        store.append_event(Event(kind=EventKind.STEP, run_id=BAD, agent="quick", root_run_id=BAD))
        record = store.get_run(GOOD)
        assert record is not None
        store.save_run(msgspec.structs.replace(record, status=RunStatus.COMPLETED))
        store.append_event(
            Event(kind=EventKind.COMPLETED, run_id=GOOD, agent="quick", root_run_id=GOOD)
        )

    def good_completed(lines: list[str]) -> bool:
        rows = [msgspec.json.decode(line) for line in lines if line.startswith("{")]
        return any(r["run_id"] == GOOD and r["status"] == "completed" for r in rows)

    watcher.until(good_completed, "the other run's change, after the damaged run's")
    code, err = watcher.interrupt()
    assert code == 1, err
    assert err.count(f"cannot read runs row '{BAD}'") == 1, err  # named once, not per change
    assert "Traceback" not in err
