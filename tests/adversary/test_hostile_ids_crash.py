"""A model whose tool_use ids are hostile (empty, huge, unicode, ``~``, ``@``, ``#fan0``,
``approve:``, another run's), repeated in a later turn, through a crash (``os._exit`` in a
tool of that turn) and a resume by a new runtime on the same SQLite file: every child
spawned once, every mail sent once, each call answered with its own work.

tests/durability/test_repeated_ids_crash.py holds the same with plain ids; here the ids are
what ``behaviour/request_ids.py`` escapes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hostile_ids_job import IDSETS, asks_runtime, runtime

from subagents import SQLiteStore

JOB = Path(__file__).with_name("hostile_ids_job.py")
SPAWNED = ["lead go", "worker A", "worker B"]
REPEATED = ["approve_of_the_other", "empty_and_approve", "escaped_look", "fan_and_approve_fan"]
SWAPPED = ["escape_and_turn", "huge", "the_boss_ids", "unicode"]
ASKED = ["escape_and_turn", "escaped_look"]
"""Which of IDSETS each test takes (each crash costs a process and a resume, seconds each in
CI): every set through a crash once. Seen with ``request_ids._written`` not escaping: the
repeated and swapped tests fail for approve_of_the_other, empty_and_approve,
escape_and_turn, escaped_look and fan_and_approve_fan (not for huge, the_boss_ids,
unicode); the asked test only for escape_and_turn and escaped_look."""


def _crash(db: Path, mode: str, idset: str, *work: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(JOB), str(db), mode, idset, *map(str, work)],
        capture_output=True,
        timeout=100,
    )
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]


def _resume(db: Path, mode: str, idset: str) -> tuple[str, list[str], list[str]]:
    store = SQLiteStore(db)
    with runtime(store, mode, idset, first_start=False) as rt:
        [boss] = rt.restore_report.orphans
        outcome = rt.attach(boss).result(timeout=60)
        assert outcome.ok, outcome.error
        children = [r for r in rt.runs() if r.parent_run_id is not None]
        spawned = sorted(f"{r.agent} {r.task}" for r in children)
        sent = sorted(
            m.content for r in children for m in store.mail_for(r.run_id) if m.sender == r.run_id
        )
    return outcome.result or "", spawned, sent


@pytest.mark.parametrize("idset", REPEATED)
def test_a_later_turn_under_hostile_earlier_ids_spawns_and_sends_its_own(
    tmp_path: Path, idset: str
) -> None:
    db = tmp_path / "runs.db"
    _crash(db, "repeat", idset)
    result, spawned, sent = _resume(db, "repeat", idset)
    answered = ("done A" in result, "done B" in result)
    assert (spawned, answered, sent) == (SPAWNED, (False, True), ["first", "second"]), result


@pytest.mark.parametrize("idset", SWAPPED)
def test_hostile_ids_work_done_before_the_crash_is_not_done_again(
    tmp_path: Path, idset: str
) -> None:
    db = tmp_path / "runs.db"
    _crash(db, "after", idset)
    result, spawned, sent = _resume(db, "after", idset)
    assert (spawned, "done B" in result, sent) == (SPAWNED, True, ["first", "second"]), result


@pytest.mark.parametrize("idset", ASKED)
def test_a_later_turn_under_a_hostile_earlier_id_asks_its_parent_anew(
    tmp_path: Path, idset: str
) -> None:
    """Asked of the parent (``ask_parent``, request ids ``approve:CALL``): the later call is
    asked and run once on its own answer; the earlier answer approves nothing more."""
    work = tmp_path / "work"
    work.mkdir()
    db = tmp_path / "runs.db"
    _crash(db, "asks", idset, work)
    assert (work / "notes.txt").read_text() == "one\n"
    with asks_runtime(str(db), work, idset, first_start=False) as rt:
        [lead] = rt.restore_report.orphans
        outcome = rt.attach(lead).result(timeout=60)
        [child] = rt.runs(agent="child")
    assert outcome.ok, outcome.error
    assert child.outcome is not None
    assert (work / "notes.txt").read_text() == "one\ntwo\n", child.outcome.result
    assert child.outcome.result == "child: noted two"


def test_every_hostile_id_set_goes_through_a_crash() -> None:
    assert sorted(REPEATED + SWAPPED) == sorted(IDSETS)
