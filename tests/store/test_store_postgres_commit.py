"""PostgreSQL's lost ``COMMIT``: a connection that dies with its ``COMMIT`` sent and before
the answer does not know the batch's fate (``UnsureWrite``), and a transaction the server
ended mid-batch is never finished on a new connection.

Against the session's real server, through a real TCP proxy that cuts the connection at the
``COMMIT`` (tests/tcp_cut.py): after the server committed (its answer dropped), or before
the ``COMMIT`` reached it. The runtime's side (a root's end in such a batch told as the
store keeps it): tests/durability/test_store_failure_pg_commit.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from storekit import run

from pgserver import PgServer
from polling import wait_until
from subagents.store.base import StoreError, UnsureWrite
from subagents.store.postgres import PostgresStore
from tcp_cut import CommitCutter


@pytest.fixture
def cutter(pg_server: PgServer) -> Iterator[CommitCutter]:
    proxy = CommitCutter(("127.0.0.1", pg_server.port))
    yield proxy
    proxy.close()


@pytest.mark.parametrize("applied", [True, False], ids=["applied", "not applied"])
def test_a_commit_whose_answer_is_lost_is_a_write_of_unknown_fate(
    pg_url: str, cutter: CommitCutter, applied: bool
) -> None:
    store = PostgresStore(cutter.url(pg_url))
    direct = PostgresStore(pg_url)
    try:
        cutter.arm(b"lost-marker", applied=applied)
        lost = pytest.raises(UnsureWrite, match="may or may not have been committed")
        with lost as raised, store.batch():
            store.save_run(run("r-lost", task="lost-marker"))
        assert cutter.cut.is_set()
        assert "the database is unreachable" in str(raised.value)
        kept = direct.get_run("r-lost")
        assert (kept is not None) is applied  # what the server did, which the client cannot know
        store.save_run(run("r-after"))  # the next call connects again
        assert direct.get_run("r-after") is not None
    finally:
        store.close()
        direct.close()


def test_a_write_the_server_refused_at_the_commit_is_known_rolled_back(pg_url: str) -> None:
    """A failure the server answered (here a lock it waited for too long: an operational
    error, as a full disk is) leaves the connection whole: the batch is known rolled back
    (a plain ``StoreError``), not a write of unknown fate. Before, every operational error
    at the commit was said to be of unknown fate."""
    import psycopg

    store = PostgresStore(pg_url)
    store.save_run(run("r1"))
    try:
        with psycopg.connect(pg_url) as holder, holder.transaction():
            holder.execute("SELECT 1 FROM subagents.runs WHERE run_id = 'r1' FOR UPDATE")
            store._tx.connection().execute("SET lock_timeout = '50ms'")
            refused = pytest.raises(StoreError, match="batch rolled back")
            with refused as raised, store.batch():
                store.save_run(run("r2"))
                store.save_run(run("r1", task="changed"))  # waits for the row: refused
        assert not isinstance(raised.value, UnsureWrite)
        assert "waited too long for a lock" in str(raised.value)
        assert store.get_run("r2") is None
    finally:
        store.close()


def test_a_transaction_the_server_ended_mid_batch_commits_nothing(
    pg_server: PgServer, pg_url: str
) -> None:
    """The server ends a batch's session after its first statements went (a restart, an
    administrator, the idle-in-transaction timeout of a stalled host) and before its
    ``COMMIT``: nothing of the batch is committed, and the batch says so. Before, the batch's
    end connected again, sent the rest of it there without its ``BEGIN`` (each write
    committed alone) and returned as if the whole batch had committed (the test: "DID NOT
    RAISE")."""
    store = PostgresStore(pg_url)
    try:
        ended = pytest.raises(StoreError, match="closed the connection mid-batch")
        with ended as raised, store.batch():
            store.save_run(run("r1"))
            assert store.get_run("r1") is not None  # sent: BEGIN, r1, the read
            pid = store._tx._conn.info.backend_pid  # type: ignore[union-attr]
            with pg_server.admin() as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
                wait_until(
                    lambda: (
                        not admin.execute(
                            "SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)
                        ).fetchall()
                    ),
                    "the batch's session ended by the server",
                )
            store.save_run(run("r2"))  # held: sent with the COMMIT
        assert not isinstance(raised.value, UnsureWrite)  # the COMMIT never went
        assert store.get_run("r1") is None and store.get_run("r2") is None
    finally:
        store.close()
