"""``actors.owed``: a recovery owed to the store leaves out the runs the store keeps ended.

Plain data and a real in-memory store, no threads (the runtime's path through it, a
recovery's own write lost unanswered: tests/durability/test_store_failure_unsure.py)."""

from __future__ import annotations

from subagents import MailState, MemoryStore
from subagents.actors.owed import still_owed
from subagents.messages import RunRecord
from subagents.store.writes import SaveRun, SetMailsState, apply_writes
from subagents.supervision.closing import failed_unheld
from subagents.supervision.effects import Decision


def _run(run_id: str) -> RunRecord:
    return RunRecord(run_id=run_id, agent="echo", task="t", root_run_id=run_id)


def test_an_owed_recovery_leaves_out_only_the_runs_the_store_keeps_ended() -> None:
    store = MemoryStore()
    for run_id in ("kept", "absent-no", "open"):
        if run_id != "absent-no":
            store.save_run(_run(run_id))
    apply_writes(store, failed_unheld(_run("kept"), "earlier", 1.0))  # committed before
    mail = SetMailsState(("m1",), state=MailState.DEAD)
    writes = [
        *failed_unheld(_run("kept"), "lost", 2.0),
        mail,
        *failed_unheld(_run("absent-no"), "lost", 2.0),
        *failed_unheld(_run("open"), "lost", 2.0),
    ]
    decision = Decision(("kept", "absent-no", "open"), writes, [])
    owed = still_owed(decision, store, {"open"})
    assert owed.reply == decision.reply
    about = [w.record.run_id for w in owed.writes if isinstance(w, SaveRun)]
    assert about == ["absent-no", "open"]  # the ended one left out, whole
    assert len(owed.writes) == len(writes) - 5 and mail in owed.writes
    unchanged = still_owed(Decision(("open",), writes[6:], []), store, {"open"})
    assert unchanged.writes == writes[6:]


def test_an_owed_recovery_of_more_runs_than_a_read_takes_reads_each_slice() -> None:
    """More ended runs than one read takes (``READ_SLICE``): every slice is read, and the
    runs kept ended in the last one are left out as in the first."""
    from subagents.store.base import READ_SLICE

    store = MemoryStore()
    ids = [f"r{i:05d}" for i in range(2 * READ_SLICE + 7)]
    kept = {ids[0], ids[READ_SLICE + 3], ids[-1]}  # in the first, second and last slice
    for run_id in ids:
        store.save_run(_run(run_id))
    for run_id in kept:
        apply_writes(store, failed_unheld(_run(run_id), "earlier", 1.0))
    writes = [w for run_id in ids for w in failed_unheld(_run(run_id), "lost", 2.0)]
    owed = still_owed(Decision(tuple(ids), writes, []), store, set())
    about = {w.record.run_id for w in owed.writes if isinstance(w, SaveRun)}
    assert about == set(ids) - kept
