"""Half a job for test_hostile_ids_crash: repeated_ids_job's boss and lead, the lead's model
giving its calls hostile tool_use ids (IDSET, below) in both turns, the later turn repeating
the earlier's; the process dies (``os._exit``, from a tool) in the later turn.

Usage: hostile_ids_job.py DB MODE IDSET (MODE as repeated_ids_job's: ``repeat`` crashes before
the later turn's spawn and mail run, ``after`` once they ran); or hostile_ids_job.py DB asks
IDSET WORKDIR: repeated_ids_asks_job's child asking its parent about ``note`` under the set's
first id in both turns (the crash before its second ask)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parents[1] / "durability"))
import repeated_ids_asks_job as asks
from repeated_ids_job import SPECS, crash_tool, model

from subagents import Runtime, SQLiteStore

IDSETS: dict[str, tuple[str, str]] = {
    "empty_and_approve": ("", "approve:"),
    "escape_and_turn": ("~", "a@0.1"),
    "fan_and_approve_fan": ("#fan0", "approve:#fan0"),
    "unicode": ("\u00e9\u00e8", "\U0001f600 id"),
    "huge": ("x" * 70_000, "y" * 70_000 + "@1.2"),
    "escaped_look": ("~eA", "eA"),
    "the_boss_ids": ("toolu_boss_0_0", "toolu_boss_1_0"),
    "approve_of_the_other": ("toolu_z", "approve:toolu_z@0.1"),
}
"""Two tool_use ids per set: the lead's spawn and mail of its first turn; its later turn's
spawn and mail repeat them (``repeat``) or take the two swapped (``after``)."""


def hostile_model(mode: str, idset: str) -> Any:
    spawn, mail = IDSETS[idset]
    given = model(mode)
    if mode == "repeat":  # crash, then the spawn and the mail under the first turn's ids
        given.ids = {0: (spawn, mail), 1: ("toolu_crash", spawn, mail)}
    else:  # the spawn and the mail under the ids swapped, then crash
        given.ids = {0: (spawn, mail), 1: (mail, spawn, "toolu_crash")}
    return given


def runtime(store: SQLiteStore, mode: str, idset: str, first_start: bool) -> Runtime:
    return Runtime(
        SPECS,
        model=hostile_model(mode, idset),
        store=store,
        tools=[crash_tool(first_start=first_start)],
        permissions="bypassPermissions",
        command_poll_s=0,
    )


def asks_runtime(db: str, work: Path, idset: str, first_start: bool) -> Runtime:
    """repeated_ids_asks_job's runtime, the child's ``note`` under the set's first id."""
    given = asks.model()
    note = IDSETS[idset][0]
    given.ids = {0: (note,), 1: ("toolu_c", note)}
    return Runtime(
        asks.SPECS,
        model=given,  # type: ignore[arg-type]
        store=SQLiteStore(db),
        tools=[crash_tool(first_start), asks.note_tool(work)],
        workspace=work,
        permissions=asks.PERMISSIONS,
        ask_parent=True,
        approval_wait_s=20,
        command_poll_s=0,
    )


def main(db: str, mode: str, idset: str, *work: str) -> None:
    if mode == "asks":
        rt = asks_runtime(db, Path(work[0]), idset, first_start=True)
        rt.spawn("lead", "go").result(timeout=60)
        raise SystemExit("the crash tool did not stop the process")
    rt = runtime(SQLiteStore(db), mode, idset, first_start=True)
    rt.spawn("boss", "go").result(timeout=60)
    raise SystemExit("the crash tool did not stop the process")


if __name__ == "__main__":
    main(*sys.argv[1:])
