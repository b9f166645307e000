"""A model that repeats a tool_use id in a later turn, through a crash: the resumed run's
calls are matched to what THEY did, never to what the earlier turn's call of that id did.

A run resumed after a crash is handed the work its calls already did (``resumption``: the
children it spawned, the mail it sent, by request id). When a request id was the tool_use id
alone, a later turn's spawn under an earlier call's id was answered with the earlier child's
outcome (and never spawned), and its mail was never sent. Request ids name the turn
(``behaviour/request_ids.py``). A store written before request ids named the turn is still
taken up: its recovered work is matched to the turn the run resumes in (the old meaning).

Real actors, a real SQLite file, a real crash (the job's process ends with ``os._exit`` in
a tool call, after the tool journal recorded it), taken up by a new runtime."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from fanout_resume_job import SPECS as FAN_OUT_SPECS
from fanout_resume_job import model as fan_out_model
from repeated_ids_asks_job import runtime as asks_runtime
from repeated_ids_job import SPECS, crash_tool, model

from subagents import Runtime, SQLiteStore

JOB = Path(__file__).with_name("repeated_ids_job.py")
SPAWNED = ["lead go", "worker A", "worker B"]  # each once
ASKS_JOB = Path(__file__).with_name("repeated_ids_asks_job.py")
LEGACY = Path(__file__).parent / "data" / "request_ids_v12_after.sql"
"""The ``after`` job's store as main 95e026e left it at the crash (schema v12, request ids
the tool_use ids), dumped as SQL (``sqlite3``'s ``iterdump``)."""
LEGACY_FAN_OUT = Path(__file__).parent / "data" / "fan_out_v12_running.sql"
"""fanout_resume_job's store as main 95e026e left it: the lead's two fan_out children running
(their request ids ``TOOLUSEID#fanN``), dumped the same way."""


def _crash(db: Path, mode: str) -> None:
    proc = subprocess.run(
        [sys.executable, str(JOB), str(db), mode], capture_output=True, timeout=100
    )
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]


def _made(db: Path, dump: Path) -> None:
    """The store file ``db`` made from the SQL ``dump``."""
    made = sqlite3.connect(db)
    try:
        made.executescript(dump.read_text())
    finally:
        made.close()


def _resume(db: Path, mode: str) -> tuple[str, list[str], list[str]]:
    """The job taken up: its result (the boss's, holding the lead's), its children (agent
    and task), the contents of the mail they sent."""
    store = SQLiteStore(db)
    with Runtime(
        SPECS,
        model=model(mode),  # type: ignore[arg-type]
        store=store,
        tools=[crash_tool(first_start=False)],
        permissions="bypassPermissions",
        command_poll_s=0,
    ) as rt:
        [boss] = rt.restore_report.orphans
        outcome = rt.attach(boss).result(timeout=60)
        assert outcome.ok, outcome.error
        children = [r for r in rt.runs() if r.parent_run_id is not None]
        spawned = sorted(f"{r.agent} {r.task}" for r in children)
        sent = sorted(
            m.content for r in children for m in store.mail_for(r.run_id) if m.sender == r.run_id
        )
    return outcome.result or "", spawned, sent


def test_a_later_turn_under_earlier_ids_spawns_and_sends_its_own(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    _crash(db, "repeat")
    result, spawned, sent = _resume(db, "repeat")
    # B spawned, once, and its outcome the answer; the second mail sent, once
    answered = ("done A" in result, "done B" in result)
    assert (spawned, answered, sent) == (SPAWNED, (False, True), ["first", "second"]), result


def test_work_done_before_the_crash_is_not_done_again(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    _crash(db, "after")
    result, spawned, sent = _resume(db, "after")
    assert spawned == SPAWNED
    assert "done B" in result, result
    assert sent == ["first", "second"]


def test_a_store_written_before_request_ids_named_the_turn_is_taken_up(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    _made(db, LEGACY)
    result, spawned, sent = _resume(db, "after")
    assert spawned == SPAWNED
    assert "done B" in result, result
    assert sent == ["first", "second"]


def test_a_later_turn_under_an_earlier_id_asks_its_parent_anew(tmp_path: Path) -> None:
    """Asked of the parent (``ask_parent``): the later call's request is mailed and its own
    answer runs it. Before, the resumed child took the earlier request's mail as this call's
    (recovered by the same request id): nothing was mailed, and the call was refused when
    the wait ran out."""
    work = tmp_path / "work"
    work.mkdir()
    db = tmp_path / "runs.db"
    proc = subprocess.run(
        [sys.executable, str(ASKS_JOB), str(db), str(work)], capture_output=True, timeout=100
    )
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert (work / "notes.txt").read_text() == "one\n"
    with asks_runtime(str(db), work, first_start=False) as rt:
        [lead] = rt.restore_report.orphans
        outcome = rt.attach(lead).result(timeout=60)
        [child] = rt.runs(agent="child")  # (ended: its report was the lead's last mail)
    assert outcome.ok, outcome.error
    assert child.outcome is not None
    assert (work / "notes.txt").read_text() == "one\ntwo\n", child.outcome.result
    assert child.outcome.result == "child: noted two"


def test_a_fan_out_of_a_store_written_before_is_answered_by_the_children_it_has(
    tmp_path: Path,
) -> None:
    """Children of an older store's fan_out, still running at the crash, answer under their
    old request ids: the resumed call (its request id now names the turn) takes them, and
    spawns none again."""
    db = tmp_path / "runs.db"
    _made(db, LEGACY_FAN_OUT)
    with Runtime(FAN_OUT_SPECS, model=fan_out_model(0.05), store=SQLiteStore(db)) as rt:
        [lead] = rt.restore_report.orphans
        outcome = rt.attach(lead).result(timeout=60)
        assert outcome.ok, outcome.error
        assert "done A" in (outcome.result or "") and "done B" in (outcome.result or "")
        assert sorted(r.task for r in rt.runs(agent="worker")) == ["A", "B"]
