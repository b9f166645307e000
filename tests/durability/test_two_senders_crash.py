"""Two senders racing to one function agent: a crash replay follows what it was handed.

``two_senders_job.py`` forces, with real synchronization, mail committed in one order and
handed over in the other: "A" (``first``'s) is committed, then "B" (``second``'s), and B is
handed to ``replier`` first. ``replier`` receives B and answers it straight ("re B", its own
commit), and the job is SIGKILLed there, the supervisor's group holding the receive's journal
entry and B's read receipt lingering for minutes (actors/group_linger.py). The resumed
``replier`` must replay receiving B, its answer already sent, then answer A: it returns
"B,A", every mail once. (Before the fix the receive's entry was lost with the group while
the answer it decided was kept: the replayed receive took A, the first unread in commit
order, the replayed send found "re B" under its key, and B was answered twice, A never.)
"""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path

import msgspec
from job_kit import kill_at, start_job

from subagents.messages import MailState, RunStatus
from subagents.store.opening import open_location

JOB = Path(__file__).with_name("two_senders_job.py")


def _start(db: Path, out: Path, *extra: str) -> subprocess.Popen[bytes]:
    return start_job(JOB, db, out, *extra)


def _killed_after_the_answer(db: Path, out: Path) -> None:
    """The first run, killed once ``replier`` has answered B; checks the race happened."""
    proc = _start(db, out, "600")
    kill_at(proc, b"replied\n")
    store = open_location(db)
    try:
        runs = {r.agent: r for r in store.list_runs()}
        # committed A, then B, then the answer to B (``mail_for``: in commit order)
        mail = store.mail_for(runs["replier"].run_id)
        assert [m.content for m in mail] == ["A", "B", "re B"], mail
        # A was never handed over, B was read: a replay taking the first committed unread
        # mail would take A. (Not asserted: that the supervisor's record of B, its events,
        # was not committed before the kill. It often is not, but a message that commits at
        # once (a run starting to wait) handled after B's record was put in line commits
        # it: seen 1 in 80 at load ~20.)
        states = {m.content: m.state for m in mail}
        assert states["A"] is not MailState.READ and states["B"] is MailState.READ, states
    finally:
        store.close()


def _resumed_exactly(db: Path, out: Path) -> None:
    """The run after the kill: ``replier`` replays receiving B and its answer, then answers
    A; every mail is kept once and read."""
    proc = _start(db, out)
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err.decode()[-3000:]
    result = msgspec.json.decode(out.read_bytes())
    store = open_location(db)
    try:
        runs = {r.agent: r for r in store.list_runs()}
        replier = runs["replier"]
        assert replier.outcome is not None
        assert (replier.status, replier.outcome.result) == (RunStatus.COMPLETED, "B,A"), (
            replier.outcome,
            err.decode()[-3000:],
        )
        assert result == {"status": "completed", "result": "re A|re B"}
        root = runs["root"].run_id  # (the replier's end is mailed to it: not counted)
        mail = [m for m in store.mail_for(replier.run_id) if root not in (m.sender, m.recipient)]
        assert Counter(m.content for m in mail) == Counter(["A", "B", "re B", "re A"])
        assert {m.state for m in mail} == {MailState.READ}
        to = {m.content: m.recipient for m in mail}
        assert to["re A"] == runs["first"].run_id and to["re B"] == runs["second"].run_id
        assert {r.status for r in runs.values()} == {RunStatus.COMPLETED}
    finally:
        store.close()


def test_a_replayed_receive_is_handed_the_mail_it_was_handed_not_the_first_committed(
    tmp_path: Path,
) -> None:
    db, out = tmp_path / "runs.db", tmp_path / "out.json"
    _killed_after_the_answer(db, out)
    _resumed_exactly(db, out)


def test_a_carry_committed_whose_answer_was_lost_is_written_twice_and_replayed_once(
    tmp_path: Path,
) -> None:
    """The record of "re B" (with the receive's entry it carries) commits, then raises, as a
    cluster node's record whose answer was lost does: the answer goes by the supervisor under
    the same mail id, and the supervisor writes the journal report again (it was not marked
    recorded). The store keeps "re B" once and the receive's entry twice; the resumed replier
    replays it once and answers A, each mail once."""
    db, out = tmp_path / "runs.db", tmp_path / "out.json"
    assert _receives_of_b_kept(db, out, "lost") == 2  # the carry's and the supervisor's
    _resumed_exactly(db, out)


def test_a_carry_that_failed_leaves_its_entries_to_the_supervisor(tmp_path: Path) -> None:
    """The record of "re B" raises before writing anything: its journal report is not
    marked recorded, so the supervisor writes the receive's entry (once) with the answer it
    now sends, and the resumed replier replays it. (Marked recorded all the same, the entry
    would be written by nobody: the replay would take A, as before the fix.)"""
    db, out = tmp_path / "runs.db", tmp_path / "out.json"
    assert _receives_of_b_kept(db, out, "failed") == 1
    _resumed_exactly(db, out)


def _receives_of_b_kept(db: Path, out: Path, mode: str) -> int:
    """The first run in ``mode``, killed once ``replier`` has answered B (by the supervisor,
    its record having raised): how many entries of the journal say a receive took B."""
    proc = _start(db, out, "600", mode)
    kill_at(proc, b"replied\n")
    store = open_location(db)
    try:
        replier = next(r.run_id for r in store.list_runs() if r.agent == "replier")
        mail = {m.content: m for m in store.mail_for(replier)}
        assert [m.content for m in store.mail_for(replier)] == ["A", "B", "re B"]
        return sum(
            1
            for e in store.journal_of(replier)
            if e.kind == "receive" and e.result == mail["B"].mail_id
        )
    finally:
        store.close()
