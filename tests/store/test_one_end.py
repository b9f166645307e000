"""A run's end is written once: an end over another is refused with its whole transaction.

Why (``store.base.AlreadyEnded``): an end whose writer took it for lost (``UnsureWrite``:
PostgreSQL's ``COMMIT`` still on its way, the cluster's head applying a call after its
caller gave up) can land after a recovery recorded the run failed, or the recovery's after
it. Whichever lands first is the run's end; the second is refused, and its events with it,
so a run's events hold one end and its record agrees with them. In every store; through
the supervisor's way of writing (``write_all``) and the methods alike.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
from storekit import event, run

from run_ends import ends_of
from subagents.messages import EventKind, RunRecord, RunStatus
from subagents.store.base import AlreadyEnded, RunStore, StoreError
from subagents.store.errors import OLDER_PROCESS_STOP, SECOND_END
from subagents.store.sqlite import SQLiteStore
from subagents.store.writes import AppendEvent, SaveRun, write_all


def _end(record: RunRecord, status: RunStatus, at: float) -> RunRecord:
    return msgspec.structs.replace(record, status=status, ended_at=at)


def _by_methods(store: RunStore, record: RunRecord, kind: EventKind) -> None:
    with store.batch():
        store.append_event(event(record.run_id, kind))
        store.save_run(run("other"))
        store.save_run(record)


def _by_writes(store: RunStore, record: RunRecord, kind: EventKind) -> None:
    writes = [AppendEvent(event(record.run_id, kind)), SaveRun(run("other")), SaveRun(record)]
    with store.batch():
        write_all(store, writes)


def _a_second_end_is_refused(
    store: RunStore, write: Callable[[RunStore, RunRecord, EventKind], None]
) -> None:
    live = run("r1", status=RunStatus.RUNNING)
    store.save_run(live)
    write(store, _end(live, RunStatus.COMPLETED, 10.0), EventKind.COMPLETED)  # the first end
    store.save_run(run("other", label="before"))
    with pytest.raises(AlreadyEnded, match="ended already") as refused:
        write(store, _end(live, RunStatus.FAILED, 11.0), EventKind.FAILED)
    assert isinstance(refused.value, StoreError)
    kept = store.get_run("r1")
    assert kept is not None and kept.status is RunStatus.COMPLETED and kept.ended_at == 10.0
    ends = ends_of(store, "r1")
    assert ends == [EventKind.COMPLETED]  # the refused end's event went with it
    other = store.get_run("other")
    assert other is not None and other.label == "before"  # (nothing of its batch is kept)


def test_a_second_end_is_refused_with_its_transaction(store: RunStore) -> None:
    """The supervisor's way (``write_all``), in every store."""
    _a_second_end_is_refused(store, _by_writes)


def test_a_second_end_written_by_the_methods_is_refused(durable_store: RunStore) -> None:
    """A batch of the methods (another process's writes: `subagents stop`), in the stores
    whose batch is a transaction (the memory store's is a lock: its all or nothing is
    ``write_all``'s)."""
    _a_second_end_is_refused(durable_store, _by_methods)


def test_nothing_of_a_refused_batch_is_kept(store: RunStore) -> None:
    ended = _end(run("r1"), RunStatus.COMPLETED, 10.0)
    store.save_run(ended)
    writes = [
        SaveRun(run("fresh")),
        AppendEvent(event("fresh")),
        SaveRun(_end(ended, RunStatus.CANCELLED, 12.0)),
    ]
    with pytest.raises(AlreadyEnded), store.batch():
        write_all(store, writes)
    assert store.get_run("fresh") is None and store.events("fresh") == []
    store.save_run(run("after"))  # the store goes on
    assert store.get_run("after") is not None


def test_the_same_end_saved_again_is_no_second_end(store: RunStore) -> None:
    ended = _end(run("r1", status=RunStatus.RUNNING), RunStatus.FAILED, 10.0)
    store.save_run(ended)
    relabelled = msgspec.structs.replace(ended, label="relabelled")
    store.save_run(relabelled)  # its end unchanged
    kept = store.get_run("r1")
    assert kept is not None and kept.status is RunStatus.FAILED and kept.label == "relabelled"


@pytest.mark.parametrize("status", [RunStatus.RUNNING, RunStatus.WAITING, RunStatus.QUEUED])
def test_an_end_is_not_undone_by_a_live_save(
    store: RunStore, status: RunStatus, ways: Callable[..., None]
) -> None:
    """A record saved live over a run the store keeps ended (a runtime's step or wait of a
    run another writer ended) is refused with its transaction, by the methods and by
    ``write_all``: before, it was taken and the run was live again, its end erased (the
    one-end rule refused only an end over an end)."""
    live = run("r1", status=RunStatus.RUNNING)
    store.save_run(live)
    store.save_run(_end(live, RunStatus.CANCELLED, 10.0))  # another writer's end
    store.save_run(run("other", label="before"))
    again = msgspec.structs.replace(live, status=status, label="a step")
    with pytest.raises(AlreadyEnded, match=r"its end undone|ended already") as refused:
        ways(store, again)
    assert isinstance(refused.value, StoreError)
    kept = store.get_run("r1")
    assert kept is not None and kept.status is RunStatus.CANCELLED and kept.ended_at == 10.0
    assert kept.label != "a step"
    other = store.get_run("other")
    assert other is not None and other.label == "before"  # (nothing of its batch is kept)
    assert "r1" not in {r.run_id for r in store.list_runs(statuses=[status])}


def _live_by_methods(store: RunStore, record: RunRecord) -> None:
    with store.batch():
        store.save_run(run("other", label="after"))
        store.save_run(record)


def _live_by_writes(store: RunStore, record: RunRecord) -> None:
    with store.batch():
        write_all(store, [SaveRun(run("other", label="after")), SaveRun(record)])


@pytest.fixture(params=["writes", "methods"])
def ways(request: pytest.FixtureRequest, store: RunStore) -> Callable[..., None]:
    """The supervisor's way (``write_all``) and a batch of the methods (the memory store's
    batch is its lock: its all or nothing is ``write_all``'s, so there, the save alone)."""
    from subagents.store.memory import MemoryStore

    if request.param == "writes":
        return _live_by_writes
    if isinstance(store, MemoryStore):
        return lambda s, record: s.save_run(record)
    return _live_by_methods


def test_an_end_waiting_for_the_row_of_an_end_that_lands_is_refused(pg_url: str) -> None:
    """PostgreSQL: an end written while another transaction holds the run's row with an end
    of its own (a late ``COMMIT`` on its way) waits for it, and once that one commits, the
    waiting end is checked against the end that landed (``READ COMMITTED`` reads the row
    again) and refused."""
    from pgserver import wait_for_lock
    from subagents.store.postgres import PostgresStore

    store = PostgresStore(pg_url)
    live = run("r1", status=RunStatus.RUNNING)
    store.save_run(live)
    failed: list[BaseException] = []
    done = threading.Event()

    def recovery() -> None:
        try:
            with store.batch():
                store.append_event(event("r1", EventKind.FAILED))
                store.save_run(_end(live, RunStatus.FAILED, 11.0))
        except BaseException as exc:  # (read by the test)
            failed.append(exc)
        finally:
            done.set()

    late = PostgresStore(pg_url)
    try:
        with late.batch():  # the end on its way: its row written, its COMMIT not yet
            late.append_event(event("r1", EventKind.COMPLETED))
            late.save_run(_end(live, RunStatus.COMPLETED, 10.0))
            assert late.get_run("r1") is not None  # (a read: the held writes go first)
            threading.Thread(target=recovery, daemon=True).start()
            wait_for_lock(pg_url, "the recovery's end waiting for the run's row")
        assert done.wait(60.0), "the recovery's batch"
        assert len(failed) == 1 and isinstance(failed[0], AlreadyEnded), failed
        assert failed[0].key == "r1"
        kept = store.get_run("r1")
        assert kept is not None and kept.status is RunStatus.COMPLETED
        assert ends_of(store, "r1") == [EventKind.COMPLETED]
    finally:
        late.close()
        store.close()


def _ended_run_rewritten_raw(store: RunStore, write: Callable[[], None]) -> str:
    """What a writer that knows nothing of the trigger (a process of before v14) is told
    when it ends an ended run again with ``write``; checks the runtime's own refusal does
    not carry the older process's words."""
    store.save_run(_end(run("r1"), RunStatus.COMPLETED, 10.0))
    with pytest.raises(AlreadyEnded) as own:
        store.save_run(_end(run("r1"), RunStatus.FAILED, 11.0))
    assert "must stop" not in str(own.value), own.value
    with pytest.raises(Exception) as raw:  # the driver's own error: all an older process has
        write()
    return str(raw.value)


OLDER_TOLD = (
    "a process of subagents older than this store's schema (v14 on SQLite, v5 on PostgreSQL)"
    " that sees this must stop: a newer runtime upgraded the store"
)


def test_an_older_process_ending_an_ended_run_is_told_to_stop_sqlite(tmp_path: Path) -> None:
    """A process of before v14, still running when a newer one upgraded the file, saw the
    trigger's words alone as a plain StoreError, and its recovery retried: the trigger's
    message now says what happened and what to do (it is all an older process shows)."""
    path = tmp_path / "runs.sqlite3"
    with SQLiteStore(path) as store, sqlite3.connect(path) as older:

        def write() -> None:
            older.execute("UPDATE runs SET status = 'failed' WHERE run_id = 'r1'")

        said = _ended_run_rewritten_raw(store, write)
    assert said.startswith(SECOND_END) and OLDER_TOLD in said, said


def test_an_older_process_ending_an_ended_run_is_told_to_stop_postgres(pg_url: str) -> None:
    import psycopg

    from subagents.store.postgres import PostgresStore

    store = PostgresStore(pg_url)
    try:
        with psycopg.connect(pg_url, autocommit=True) as older:

            def write() -> None:
                older.execute("UPDATE subagents.runs SET status = 'failed' WHERE run_id = 'r1'")

            said = _ended_run_rewritten_raw(store, write)
    finally:
        store.close()
    assert said.startswith("run r1 ended already (completed)") and OLDER_TOLD in said, said


def _kept_refused(store: RunStore) -> str:
    """The runtime's own refusal of a second end, in a store whose trigger is of before
    session 27 (its message shorter): still an ``AlreadyEnded``, the first end kept."""
    store.save_run(_end(run("r1"), RunStatus.COMPLETED, 10.0))
    with pytest.raises(AlreadyEnded, match="ended already") as refused:
        store.save_run(_end(run("r1"), RunStatus.FAILED, 11.0))
    kept = store.get_run("r1")
    assert kept is not None and kept.status is RunStatus.COMPLETED
    return str(refused.value)


def test_a_store_upgraded_before_session_27_is_known_by_its_shorter_message_sqlite(
    tmp_path: Path,
) -> None:
    """A v14 file an older runtime upgraded keeps the trigger's message of then (the
    migration is not run again): the runtime knows it all the same."""
    path = tmp_path / "runs.sqlite3"
    SQLiteStore(path).close()
    with sqlite3.connect(path) as conn:  # the trigger as session 26's v13_to_v14 made it
        _session_26_trigger(conn)
    conn.close()
    with SQLiteStore(path) as store:
        said = _kept_refused(store)
    assert said.endswith(f": {SECOND_END}: the run ended already"), said


def test_a_store_upgraded_before_session_27_is_known_by_its_shorter_message_postgres(
    pg_url: str,
) -> None:
    import psycopg

    from subagents.store.postgres import PostgresStore

    PostgresStore(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:  # session 26's v5 function
        conn.execute(
            """CREATE OR REPLACE FUNCTION subagents.refuse_second_end() RETURNS trigger
            LANGUAGE plpgsql AS $$
            BEGIN
                RAISE EXCEPTION 'run % ended already (%): a second end (%) is refused, and'
                    ' nothing of its transaction is kept', OLD.run_id, OLD.status, NEW.status
                    USING ERRCODE = 'SA001', DETAIL = OLD.run_id;
            END $$"""
        )
    store = PostgresStore(pg_url)
    try:
        said = _kept_refused(store)
    finally:
        store.close()
    assert "is refused, and nothing of its transaction is kept)" in said, said


def test_the_v15_upgrade_gives_a_store_of_session_26_the_message_telling_older_processes_to_stop(
    tmp_path: Path,
) -> None:
    """A v14 file upgraded by session 26's code has the trigger's shorter message; the v15
    upgrade (when an older process may still be running) makes it again with today's."""
    from subagents.store.migrations import END_KEPT_SAYS, _literal
    from subagents.store.schema import set_schema_version

    path = tmp_path / "runs.sqlite3"
    SQLiteStore(path).close()
    with sqlite3.connect(path) as conn:  # back to v14 as session 26 left it
        _session_26_trigger(conn)
        set_schema_version(conn, 14)
    conn.close()
    SQLiteStore(path).close()  # upgrades to v15
    with sqlite3.connect(path) as conn:
        (sql,) = conn.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = 'runs_one_end'"
        ).fetchone()
    conn.close()
    assert _literal(END_KEPT_SAYS) in sql, sql  # (its quotes doubled; made again since)
    assert END_KEPT_SAYS.startswith(SECOND_END) and END_KEPT_SAYS.endswith(OLDER_PROCESS_STOP)


def _session_26_trigger(conn: sqlite3.Connection) -> None:
    """``runs_one_end`` as session 26's ``v13_to_v14`` made it (its shorter message)."""
    from subagents.store.migrations import _ended, _literal

    conn.execute("DROP TRIGGER runs_one_end")
    conn.execute(
        f"""CREATE TRIGGER runs_one_end BEFORE UPDATE ON runs
        WHEN {_ended("old")} AND {_ended("new")}
            AND (new.status IS NOT old.status OR new.ended_at IS NOT old.ended_at)
        BEGIN SELECT RAISE(ABORT, {_literal(SECOND_END)}); END"""
    )
