"""Which held runs the command poll reads for an end another writer wrote
(``supervision.ends_look.EndsLook``), decided without a thread or a store; and the stores'
word on other writers (``RunStore.ended_by_others``) and their ended ids (``ended_among``)."""

from __future__ import annotations

from pathlib import Path

import two_handles
from subagents.messages import RunRecord, RunStatus
from subagents.store.base import READ_SLICE, RunStore
from subagents.store.sqlite import SQLiteStore
from subagents.supervision.ends_look import GAP_S, RATE, ROUND_S, EndsLook
from two_handles import end_elsewhere

stores = two_handles.stores


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


def test_the_stores_word_decides_what_is_read() -> None:
    """``to_read``: nobody else wrote (empty), nothing; the ends others made, those alone
    (beside a share of a round under way); the store cannot tell (None), a round."""
    look = EndsLook()
    held = ["a", "b", "c"]
    assert look.to_read(held, 0.0, []) == []
    assert look.to_read(held, 1.0, ["b"]) == ["b"]
    assert sorted(look.to_read(held, 2.0, None)) == held
    assert look.to_read(held, 3.0, []) == []


def test_an_end_by_another_handle_is_never_left_out(stores: tuple[RunStore, RunStore]) -> None:
    """``ended_by_others`` on every store with another writer (memory: the program's own
    ``save_run``; SQLite, PostgreSQL: a second connection): after the stranger's end, the
    runtime's handle names it or cannot tell (None), never says nobody ended it; before
    it, a store that can tell (memory, SQLite) says nobody wrote (empty: nothing read)."""
    mine, other = stores
    mine.save_run(RunRecord(run_id="a", root_run_id="a", agent="x", task="t"))
    mine.ended_by_others()  # (the first look: whatever it says)
    quiet = mine.ended_by_others()
    assert quiet == [] or (quiet is None and type(mine).__name__ == "PostgresStore"), quiet
    record = mine.get_run("a")
    assert record is not None
    end_elsewhere(other, record)
    news = mine.ended_by_others()
    assert news is None or news == ["a"], news
    assert mine.ended_among(["a"]) == ["a"]


def test_sqlite_says_when_another_connection_wrote(tmp_path: Path) -> None:
    """``PRAGMA data_version``: this connection's own commits leave it; another's move it
    (``ended_by_others``: None, it cannot tell which; empty, nobody else wrote)."""
    path = tmp_path / "runs.db"
    with SQLiteStore(path) as store, SQLiteStore(path) as other:
        assert store.ended_by_others() is None  # (the first look: not known)
        assert store.ended_by_others() == []
        store.save_run(
            RunRecord(run_id="a", root_run_id="a", agent="x", task="t", status=RunStatus.QUEUED)
        )
        assert store.ended_by_others() == []
        other.save_run(
            RunRecord(run_id="b", root_run_id="b", agent="x", task="t", status=RunStatus.QUEUED)
        )
        assert store.ended_by_others() is None
        assert store.ended_by_others() == []


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
    """``MemoryStore.ended_by_others``: the ends saved through ``save_run`` since the last take
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
    assert store.ended_by_others() == ["b"]
    assert store.ended_by_others() == []
    for i in range(ends_log.ENDS_KEPT + 1):
        store.save_run(record(f"r{i}", RunStatus.FAILED))
    assert store.ended_by_others() is None
    store.save_run(record("d", RunStatus.FAILED))
    assert store.ended_by_others() == ["d"]


def test_a_damaged_record_is_skipped_by_a_look_that_reads_records(tmp_path: Path) -> None:
    """``store.base.ended_in_records`` (``RunStore.ended_among``'s default, a store of
    one's own's): a held run's record that does not read is skipped, the others read one
    by one (the durability test's SQLite store answers by ids, decoding nothing)."""
    from damaged_rows import damage_run
    from subagents.store.base import ended_in_records as _ended

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
