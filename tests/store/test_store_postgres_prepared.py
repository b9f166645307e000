"""PostgreSQL's statements after a failed pipeline: the store's connection must never believe
in a prepared statement the server does not have.

psycopg 3 prepares a statement on its sixth run (``prepare_threshold`` 5): the ``Parse``
goes in the same pipeline as its run, and the name is remembered when it is queued. When an
earlier statement of that pipeline fails, the server skips the rest (that ``Parse`` too),
and psycopg keeps the name; a ``ROLLBACK`` statement clears its cache only the first time
the connection runs one. Every later run of that statement then failed with ``26000:
prepared statement "_pg3_N" does not exist`` for the connection's life. The statement the
store skips most is the ``COMMIT`` (the last of a batch's pipeline, behind its writes): once
it was poisoned, every batch failed, the lease keeper's renewal every 30 s (seen in session
26 after a batch failed on a lock). Against the session's real server, through the store's
own transactions (no mock); the fix: PgTransactions rolls back with psycopg's
``Connection.rollback()``, which forgets the prepared statements every time.
"""

from __future__ import annotations

import msgspec
import psycopg
import pytest
from storekit import LEASE

from pgserver import PgServer
from subagents.messages.records import Outcome, RunStatus
from subagents.store.base import StoreError
from subagents.store.postgres import PostgresStore
from subagents.store.postgres_tx import PgTransactions

_BUMP = "UPDATE public.counter SET n = n + %s WHERE k = 1"


def test_a_statement_skipped_by_a_failed_pipeline_runs_again_after_it(pg_url: str) -> None:
    tx = PgTransactions(pg_url)
    try:
        with tx.batch():
            tx.defer("CREATE TABLE public.counter (k int PRIMARY KEY, n int)", (), "creating")
            tx.defer("INSERT INTO public.counter VALUES (1, 0)", (), "filling")
        # the connection's first ROLLBACK (the one psycopg's cache is cleared by)
        with pytest.raises(StoreError, match="division by zero"), tx.batch():
            tx.defer("SELECT 1 / %s", (0,), "failing")
        for _ in range(5):  # the runs psycopg counts before preparing
            with tx.batch():
                tx.defer(_BUMP, (1,), "bumping")
        # its sixth run, to be prepared, is queued behind a failing write: skipped
        with pytest.raises(StoreError, match="division by zero"), tx.batch():
            tx.defer("SELECT 1 / %s", (0,), "failing")
            tx.defer(_BUMP, (100,), "bumping")
        for _ in range(3):  # and every run after it
            with tx.batch():
                tx.defer(_BUMP, (1,), "bumping")
        assert tx.read("SELECT n FROM public.counter", (), "reading") == [(8,)]
    finally:
        tx.close()


_REFUSE = (
    "CREATE FUNCTION subagents.refuse() RETURNS trigger LANGUAGE plpgsql AS"
    " $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$",
    "CREATE TRIGGER refuse BEFORE INSERT ON subagents.outcomes FOR EACH ROW"
    " WHEN (NEW.run_id LIKE 'refused%') EXECUTE FUNCTION subagents.refuse()",
)
"""A write the server refuses, as a lock timeout or a conflict would: installed by the
server's superuser, on the outcomes of runs named ``refused...``."""


def test_a_lease_renews_after_batches_failed_on_its_connection(
    pg_server: PgServer, pg_url: str
) -> None:
    """The runtime's shape: writes refused by the server (each batch's ``COMMIT`` queued behind
    the refused write, so skipped), then the lease keeper's renewal on the same connection."""
    store = PostgresStore(pg_url)
    try:
        lease = msgspec.structs.replace(LEASE, epoch=store.acquire_lease(LEASE))
        dbname = pg_url.rsplit("/", 1)[1].split("?", 1)[0]
        with psycopg.connect(pg_server.url(dbname), autocommit=True) as admin:
            for statement in _REFUSE:
                admin.execute(statement)
        for i in range(8):  # past psycopg's threshold: the COMMIT is prepared in one of them
            with pytest.raises(StoreError, match="refused by the test"):
                store.save_outcome(Outcome(run_id=f"refused{i}", status=RunStatus.COMPLETED))
        for _ in range(3):
            assert store.renew_lease(lease)
        store.save_outcome(Outcome(run_id="kept", status=RunStatus.COMPLETED))
        assert [o.run_id for o in store.undelivered_outcomes()] == ["kept"]
    finally:
        store.close()
