"""The session's PostgreSQL server (tests/pgserver.py) gives each test a database of its own
and drops it after the test, sessions still on it or not: the server's files then stay small,
so removing them at the session's end (in the teardown of a worker's last test, under that
test's own timeout) stays short."""

from __future__ import annotations

import pytest

from pgserver import PgServer


def _exists(server: PgServer, name: str) -> bool:
    import psycopg

    with psycopg.connect(server.url(), autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_database WHERE datname = %s", (name,))
        return row.fetchone() == (1,)


def test_a_tests_database_is_dropped_though_a_session_is_still_on_it(
    pg_server: PgServer,
) -> None:
    import psycopg

    url = pg_server.new_database()
    name = url.rsplit("/", 1)[1]
    assert _exists(pg_server, name)
    left_on_it = psycopg.connect(url, autocommit=True)  # as a host a test left running
    try:
        pg_server.drop_database(url)
        assert not _exists(pg_server, name)
        with pytest.raises(psycopg.OperationalError):  # its session was ended (FORCE)
            left_on_it.execute("SELECT 1")
    finally:
        left_on_it.close()
    pg_server.drop_database(url)  # gone already: nothing raised
