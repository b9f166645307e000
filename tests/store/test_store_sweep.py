"""The sweeper: the pure plan, then the SQLite and PostgreSQL stores applying it."""

from __future__ import annotations

import sqlite3
from typing import Any

import msgspec
import pytest
from storekit import Durable, checkpoint, event, mail, outcome, run

from subagents.messages import CheckpointDelta, JournalEntry, Preview, RunStatus
from subagents.store.base import AlreadyEnded
from subagents.store.paths import host_log
from subagents.store.sqlite import SQLiteStore
from subagents.store.sweep import SweepCandidate, SweepPlan, plan_sweep

HOUR = 3600.0
DAY = 86400.0
NOW = 1_000_000.0


def cand(run_id: str, status: RunStatus = RunStatus.COMPLETED, **kw: Any) -> SweepCandidate:
    kw.setdefault("created_at", 0.0)
    return SweepCandidate(run_id=run_id, status=status, **kw)


# ---------------------------------------------------------------------------------------------
# the plan, without SQLite
# ---------------------------------------------------------------------------------------------


def test_finished_runs_are_archived_at_the_bound_and_not_before() -> None:
    plan = plan_sweep(
        [
            cand("old", ended_at=NOW - HOUR),  # exactly at the bound
            cand("young", ended_at=NOW - HOUR + 1),
            cand("no-end", created_at=NOW - 2 * HOUR),  # no ended_at: created_at counts
        ],
        now=NOW,
    )
    assert plan == SweepPlan(archive=("old", "no-end"))


def test_runs_that_have_not_finished_are_never_touched() -> None:
    live = [
        cand(s.value, s, ended_at=0.0, archived_at=0.0)
        for s in (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.WAITING)
    ]
    assert plan_sweep(live, now=NOW, retention_days=0) == SweepPlan()


def test_every_terminal_status_is_archived() -> None:
    terminal = [
        RunStatus.COMPLETED,
        RunStatus.FAILED,
        RunStatus.CANCELLED,
        RunStatus.TIMED_OUT,
        RunStatus.BUDGET_EXCEEDED,
    ]
    plan = plan_sweep([cand(s.value, s, ended_at=0.0) for s in terminal], now=NOW)
    assert plan.archive == tuple(s.value for s in terminal)


def test_cleanup_delete_cleans_keep_preserves_and_none_takes_the_default() -> None:
    runs = [
        cand("del", ended_at=0.0, cleanup="delete"),
        cand("keep", ended_at=0.0, cleanup="keep"),
        cand("unset", ended_at=0.0),
    ]
    assert plan_sweep(runs, now=NOW).clean == ("del",)
    assert plan_sweep(runs, now=NOW, cleanup_default="delete").clean == ("del", "unset")


def test_archive_after_zero_archives_every_finished_run() -> None:
    assert plan_sweep([cand("a", ended_at=NOW)], now=NOW, archive_after_minutes=0).archive == ("a",)


def test_retention_deletes_long_archived_runs_unless_their_outcome_is_undelivered() -> None:
    runs = [
        cand("expired", archived_at=NOW - 7 * DAY),
        cand("recent", archived_at=NOW - 7 * DAY + 1),
        cand("undelivered", archived_at=NOW - 30 * DAY, outcome_undelivered=True),
    ]
    assert plan_sweep(runs, now=NOW) == SweepPlan()  # no retention bound: kept forever
    assert plan_sweep(runs, now=NOW, retention_days=7) == SweepPlan(
        delete=("expired",), held=("undelivered",)
    )


def test_an_archived_run_is_not_archived_again() -> None:
    assert plan_sweep([cand("a", ended_at=0.0, archived_at=1.0)], now=NOW) == SweepPlan()


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"archive_after_minutes": -1}, "archive_after_minutes .* -1"),
        ({"archive_after_minutes": float("nan")}, "archive_after_minutes .* nan"),
        ({"retention_days": -0.5}, "retention_days .* -0.5"),
        ({"cleanup_default": "shred"}, "cleanup_default .* 'shred'"),
    ],
)
def test_bad_settings_are_refused_by_name(kwargs: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        plan_sweep([], now=NOW, **kwargs)


# ---------------------------------------------------------------------------------------------
# the SQLite and PostgreSQL stores
# ---------------------------------------------------------------------------------------------


JOURNALED = JournalEntry(request_id="x:0", kind="receive", observed=True, result="m1")


def populate(store: Durable) -> None:
    with store.batch():
        for run_id, cleanup in (("keep", "keep"), ("del", "delete")):
            store.save_run(
                run(
                    run_id,
                    created_at=0.0,
                    status=RunStatus.COMPLETED,
                    ended_at=NOW - 2 * HOUR,
                    cleanup=cleanup,
                )
            )
            store.append_event(event(run_id))
            store.save_checkpoint(checkpoint(run_id, 3))
            store.add_to_checkpoint(CheckpointDelta(run_id=run_id, step=3, started="tu9"))
            store.save_journal(run_id, [JOURNALED])
            store.save_outcome(outcome(run_id))
            store.mark_outcome_delivered(run_id)
            store.save_preview(preview(run_id))  # a host killed mid-stream leaves one
        store.save_run(run("live", created_at=1.0, status=RunStatus.RUNNING))
        store.save_preview(preview("live"))
        store.save_checkpoint(checkpoint("live", 1))
        store.save_run(run("young", created_at=2.0, status=RunStatus.FAILED, ended_at=NOW - 60.0))
        store.save_mail(mail("m1", "keep", "live"))
    for run_id in ("keep", "del", "live"):  # as `subagents run --detach` leaves them
        log = host_log(store.path, run_id)
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(f"the host of {run_id}\n")


def preview(run_id: str) -> Preview:
    return Preview(run_id=run_id, turn=1, text="so far", chars=6, ts=1.0)


def delta_rows(store: Durable, run_id: str) -> int:
    """The checkpoint deltas the store keeps of ``run_id``, counted in its tables."""
    query = "SELECT COUNT(*) FROM checkpoint_deltas WHERE run_id = ?"
    if isinstance(store, SQLiteStore):
        conn = sqlite3.connect(store.path)
        try:
            return int(conn.execute(query, (run_id,)).fetchone()[0])
        finally:
            conn.close()
    return int(store._tx.read(query.replace("?", "%s"), (run_id,), "counting")[0][0])


def test_sweep_archives_and_cleans(durable_store: Durable) -> None:
    populate(durable_store)
    report = durable_store.sweep(now=NOW)
    assert report.archived == ("del", "keep")  # creation order, then id
    assert report.cleaned == ("del",)
    assert report.deleted == () and report.held == ()
    # archived runs leave the listings but stay readable
    assert [r.run_id for r in durable_store.list_runs()] == ["live", "young"]
    assert [r.run_id for r in durable_store.list_runs(include_archived=True)] == [
        "del",
        "keep",
        "live",
        "young",
    ]
    assert [r.run_id for r in durable_store.list_runs(statuses=[RunStatus.COMPLETED])] == []
    assert durable_store.get_run("del") is not None
    # keep preserves the transcript, delete removes it; live runs are untouched
    kept = msgspec.structs.replace(checkpoint("keep", 3), started=("tu9",))
    assert durable_store.load_checkpoint("keep") == kept
    assert durable_store.events("keep") == [event("keep")]
    assert durable_store.journal_of("keep") == [JOURNALED]
    assert durable_store.load_checkpoint("del") is None
    assert delta_rows(durable_store, "del") == 0 and delta_rows(durable_store, "keep") == 1
    assert durable_store.events("del") == []
    assert durable_store.journal_of("del") == []
    assert durable_store.load_checkpoint("live") == checkpoint("live", 1)
    assert set(durable_store.previews(["keep", "del", "live"])) == {"keep", "live"}
    # the host log goes with the transcript (a kept run's and a live run's stay)
    assert not host_log(durable_store.path, "del").exists()
    assert host_log(durable_store.path, "keep").read_text() == "the host of keep\n"
    assert host_log(durable_store.path, "live").exists()
    # a second sweep at the same instant has nothing to do
    assert durable_store.sweep(now=NOW).archived == ()


def test_sweep_deletes_runs_past_retention_whole(durable_store: Durable) -> None:
    populate(durable_store)
    durable_store.save_outcome(outcome("young"))  # undelivered
    durable_store.sweep(now=NOW)
    durable_store.sweep(now=NOW + HOUR)  # archives "young"
    report = durable_store.sweep(now=NOW + 10 * DAY, retention_days=7)
    assert report.deleted == ("del", "keep")
    assert report.held == ("young",)
    for run_id in ("keep", "del"):
        assert durable_store.get_run(run_id) is None
        assert durable_store.events(run_id) == []
        assert durable_store.load_checkpoint(run_id) is None
        assert durable_store.journal_of(run_id) == []
        assert delta_rows(durable_store, run_id) == 0
        assert durable_store.previews([run_id]) == {}
        assert not host_log(durable_store.path, run_id).exists()
    assert host_log(durable_store.path, "live").exists()
    assert durable_store.mail_for("live") == []
    assert durable_store.get_run("young") is not None
    assert [o.run_id for o in durable_store.undelivered_outcomes()] == ["young"]
    assert [r.run_id for r in durable_store.list_runs(include_archived=True)] == ["live", "young"]


def test_sweep_purges_taken_commands_and_keeps_pending_ones(durable_store: Durable) -> None:
    taken = durable_store.post_command("stop", "a")
    assert [c.command_id for c in durable_store.take_commands()] == [taken]
    pending = durable_store.post_command("stop", "b")
    import time

    assert durable_store.sweep(now=time.time() + 2 * HOUR).commands_purged == 1
    assert [c.command_id for c in durable_store.take_commands()] == [pending]


def test_an_archived_run_stays_archived_saved_again(durable_store: Durable) -> None:
    populate(durable_store)
    durable_store.sweep(now=NOW)
    listed = [r.run_id for r in durable_store.list_runs()]
    restarted = run("keep", created_at=0.0, status=RunStatus.RUNNING, restarts=1)
    with pytest.raises(AlreadyEnded):  # an end is not undone (SQLite v16, PostgreSQL v6)
        durable_store.save_run(restarted)
    assert [r.run_id for r in durable_store.list_runs()] == listed
    # a finished run saved again (its end as kept) stays archived
    ended = NOW - 2 * HOUR
    durable_store.save_run(
        run("del", created_at=0.0, status=RunStatus.COMPLETED, ended_at=ended, label="relabelled")
    )
    assert "del" not in [r.run_id for r in durable_store.list_runs()]


def test_sweep_settings_are_checked_before_anything_changes(durable_store: Durable) -> None:
    populate(durable_store)
    with pytest.raises(ValueError, match="retention_days"):
        durable_store.sweep(now=NOW, retention_days=-1)
    with pytest.raises(ValueError, match="cleanup_default"):
        durable_store.sweep(now=NOW, cleanup_default="shred")  # type: ignore[arg-type]
    assert len(durable_store.list_runs()) == 4
    untouched = msgspec.structs.replace(checkpoint("del", 3), started=("tu9",))
    assert durable_store.load_checkpoint("del") == untouched
    assert host_log(durable_store.path, "del").exists()
