"""Which held runs the command poll reads for an end another writer wrote
(``actors.ends_elsewhere.EndsLook``), decided without a thread or a store; and the SQLite
store's word on whether another connection wrote (``written_elsewhere``)."""

from __future__ import annotations

from pathlib import Path

from subagents.actors.ends_elsewhere import GAP_S, RATE, ROUND_S, EndsLook
from subagents.messages import RunRecord, RunStatus
from subagents.store.base import READ_SLICE
from subagents.store.sqlite import SQLiteStore


def _rounds(look: EndsLook, held: list[str], start: float, step: float, written: bool) -> list[str]:
    """What ``look`` reads at polls every ``step`` from ``start`` until it reads nothing."""
    read: list[str] = []
    now = start
    while due := look.due(held, now, written and not read):
        read += due
        now += step
        assert len(read) <= 10 * len(held), "the looks never end"
    return read


def test_a_few_runs_are_all_read_at_one_poll() -> None:
    look = EndsLook()
    held = ["a", "b", "c"]
    assert sorted(look.due(held, 0.0, True)) == held


def test_nothing_is_read_while_nobody_else_wrote() -> None:
    """A round read, then no other writer: nothing more (a runtime alone on its file)."""
    look = EndsLook()
    held = ["a", "b"]
    assert look.due(held, 0.0, True)
    assert look.due(held, 1.0, False) == []
    assert look.due(held, 2.0, False) == []
    assert sorted(look.due(held, 3.0, True)) == held


def test_a_write_seen_within_the_gap_is_not_lost() -> None:
    """A poll soon after the last (a listener's) reads nothing, but the write it was told of
    makes the next poll past the gap read every held run."""
    look = EndsLook()
    held = ["a", "b"]
    assert look.due(held, 0.0, True)
    assert look.due(held, GAP_S / 2, True) == []
    assert sorted(look.due(held, GAP_S * 2, False)) == held


def test_many_runs_are_read_a_share_a_poll_each_once_a_round() -> None:
    """More runs than a slice (as many as a round of ``ROUND_S`` reads at ``RATE``): each
    poll reads its share of the round by the time since the last; every run is read once,
    all of them within a round of polls."""
    held = [f"r{i}" for i in range(int(RATE * ROUND_S))]
    look = EndsLook()
    read = look.due(held, 0.0, True)
    assert READ_SLICE <= len(read) < len(held)
    polls = 0
    step = ROUND_S / 4
    while due := look.due(held, (polls + 1) * step, False):
        read += due
        polls += 1
        assert polls <= 100, "the looks never end"
    assert sorted(read) == sorted(held)
    assert polls <= 4, "a round took more than ROUND_S"


def test_more_runs_than_the_rate_make_a_longer_round() -> None:
    """A round over more runs than ``RATE`` a second lasts long enough to read them at it."""
    size = int(RATE * ROUND_S * 4)
    held = [f"r{i}" for i in range(size)]
    look = EndsLook()
    look.due(held, 0.0, True)
    share = look.due(held, 1.0, False)
    assert len(share) == RATE


def test_a_write_during_a_round_reads_every_run_again_after_it() -> None:
    """Another writer wrote while a round was under way: the runs already read are read
    again (their end may have landed after their read)."""
    held = [f"r{i}" for i in range(4 * READ_SLICE)]
    look = EndsLook()
    first = look.due(held, 0.0, True)
    assert len(first) < len(held)
    look.due(held, 1.0, True)  # (written meanwhile)
    rest = _rounds(look, held, 2.0, 1.0, written=False)
    assert set(first) <= set(rest), "the runs read before the write were not read again"


def test_sqlite_says_when_another_connection_wrote(tmp_path: Path) -> None:
    """``PRAGMA data_version``: this connection's own commits leave it; another's move it."""
    path = tmp_path / "runs.db"
    with SQLiteStore(path) as store, SQLiteStore(path) as other:
        assert store.written_elsewhere()  # (the first look: not known)
        assert not store.written_elsewhere()
        store.save_run(
            RunRecord(run_id="a", root_run_id="a", agent="x", task="t", status=RunStatus.QUEUED)
        )
        assert not store.written_elsewhere()
        other.save_run(
            RunRecord(run_id="b", root_run_id="b", agent="x", task="t", status=RunStatus.QUEUED)
        )
        assert store.written_elsewhere()
        assert not store.written_elsewhere()


ENDED = (0, 7, 499, 500, 999, 1199)
"""The ended runs of ``test_sqlite_names_the_ended_among_ids``: at each statement's edges."""


def test_sqlite_names_the_ended_among_ids(tmp_path: Path) -> None:
    """``SQLiteStore.ended_among``: the ids of those kept ended (by the status column, no
    record decoded), over more ids than one statement takes; nothing of the live ones or
    of those not in the store."""
    with SQLiteStore(tmp_path / "runs.db") as store, store.batch():
        for i in range(1200):
            status = RunStatus.CANCELLED if i in ENDED else RunStatus.WAITING
            ended_at = 1.0 if status.terminal else None
            record = RunRecord(
                run_id=f"r{i}", root_run_id=f"r{i}", agent="x", task="t", status=status,
                ended_at=ended_at,
            )  # fmt: skip
            store.save_run(record)
    with SQLiteStore(tmp_path / "runs.db") as store:
        ids = [f"r{i}" for i in range(1200)] + ["missing"]
        assert sorted(store.ended_among(ids)) == sorted(f"r{i}" for i in ENDED)
        assert store.ended_among([]) == []


def test_postgres_names_the_ended_among_ids(pg_url: str) -> None:
    """``PostgresStore.ended_among``: the ids of those kept ended, nothing of the others
    (live, or not in the store)."""
    from subagents.store.postgres import PostgresStore

    with PostgresStore(pg_url) as store:
        for run_id, status in (("a", RunStatus.WAITING), ("b", RunStatus.CANCELLED)):
            ended_at = 1.0 if status.terminal else None
            record = RunRecord(
                run_id=run_id, root_run_id=run_id, agent="x", task="t", status=status,
                ended_at=ended_at,
            )  # fmt: skip
            store.save_run(record)
        assert store.ended_among(["a", "b", "c"]) == ["b"]
        assert store.ended_among([]) == []


def test_a_memory_store_keeps_the_ends_saved_through_save_run() -> None:
    """``MemoryStore.ends_log``: the ends saved through ``save_run`` since the last take
    (not a live save, not the runtime's batch writes); past ``ENDS_KEPT``, None."""
    from subagents.store import ends_log, memory
    from subagents.store.writes import SaveRun, write_all

    store = memory.MemoryStore()

    def record(run_id: str, status: RunStatus) -> RunRecord:
        ended_at = 1.0 if status.terminal else None
        return RunRecord(
            run_id=run_id, root_run_id=run_id, agent="x", task="t", status=status,
            ended_at=ended_at,
        )  # fmt: skip

    store.save_run(record("a", RunStatus.WAITING))
    store.save_run(record("b", RunStatus.CANCELLED))
    write_all(store, [SaveRun(record("c", RunStatus.COMPLETED))])  # (the runtime's way)
    assert store.ends_log.take() == ["b"]
    assert store.ends_log.take() == []
    for i in range(ends_log.ENDS_KEPT + 1):
        store.save_run(record(f"r{i}", RunStatus.FAILED))
    assert store.ends_log.take() is None
    store.save_run(record("d", RunStatus.FAILED))
    assert store.ends_log.take() == ["d"]


def test_a_damaged_record_is_skipped_by_a_look_that_reads_records(tmp_path: Path) -> None:
    """``ends_elsewhere._ended`` (the look of a store with no ``ended_among``: a cluster's,
    a memory store's): a held run's record that does not read is skipped, the others read
    one by one (the durability test's SQLite store answers by ids, decoding nothing)."""
    from damaged_rows import damage_run
    from subagents.actors.ends_elsewhere import _ended

    path = tmp_path / "runs.db"
    with SQLiteStore(path) as store:
        for run_id, status in (("a", RunStatus.WAITING), ("b", RunStatus.CANCELLED)):
            ended_at = 1.0 if status.terminal else None
            record = RunRecord(
                run_id=run_id, root_run_id=run_id, agent="x", task="t", status=status,
                ended_at=ended_at,
            )  # fmt: skip
            store.save_run(record)
        store.save_run(RunRecord(run_id="c", root_run_id="c", agent="x", task="t"))
        damage_run(path, "c")
        assert _ended(store, ["a", "c", "b", "missing"]) == ["b"]
