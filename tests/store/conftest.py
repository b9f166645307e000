"""Fixtures of the store tests: every protocol test runs against the memory, SQLite and
PostgreSQL stores (a real throwaway server, ``tests/pgserver.py``: skipped saying why where
none can start, failed under CI), and against a cluster's store (the head's SQLiteStore
reached through Ray, ``subagents.cluster``) when the ``ray`` tests run."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from storekit import Durable

from subagents.store.base import RunStore
from subagents.store.memory import MemoryStore
from subagents.store.paths import STATE_DIR_ENV
from subagents.store.sqlite import SQLiteStore


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "runs.sqlite3"


@pytest.fixture(
    params=["memory", "sqlite", "postgres", pytest.param("cluster", marks=pytest.mark.ray)]
)
def store(request: pytest.FixtureRequest, db_path: Path) -> Iterator[RunStore]:
    if request.param == "cluster":
        yield from _cluster_store(request, db_path)
        return
    if request.param == "postgres":
        from subagents.store.postgres import PostgresStore

        pg = PostgresStore(request.getfixturevalue("pg_url"))
        yield pg
        pg.close()
        return
    s: RunStore = MemoryStore() if request.param == "memory" else SQLiteStore(db_path)
    yield s
    s.close()


def _cluster_store(request: pytest.FixtureRequest, db_path: Path) -> Iterator[RunStore]:
    """A store actor of this test's own (its own name and file) on the session's cluster."""
    request.getfixturevalue("ray_cluster")
    import ray

    from subagents.cluster.head import head_actor
    from subagents.cluster.remote_store import ClusterStore

    name = f"store-{request.node.name}"
    actor = head_actor(name=name, path=str(db_path))
    s = ClusterStore(actor, name=name)
    try:
        yield s
    finally:
        s.close()
        ray.kill(actor)  # a detached actor outlives its driver unless killed


@pytest.fixture
def sqlite_store(db_path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(db_path)
    yield s
    s.close()


@pytest.fixture(params=["sqlite", "postgres"])
def reopen(
    request: pytest.FixtureRequest,
    db_path: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Callable[[], Durable]]:
    """Opens one durable store, SQLite's file or a PostgreSQL database of its own, again
    at each call (another connection to the same store); all closed at the end. What the
    store keeps beside itself on this machine goes to a temporary state directory."""
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    url = request.getfixturevalue("pg_url") if request.param == "postgres" else None
    opened: list[Durable] = []

    def open_again() -> Durable:
        from subagents.store.postgres import PostgresStore

        store: Durable = PostgresStore(url) if url is not None else SQLiteStore(db_path)
        opened.append(store)
        return store

    yield open_again
    for store in opened:
        store.close()


@pytest.fixture
def durable_store(reopen: Callable[[], Durable]) -> Durable:
    """A SQLite or a PostgreSQL store (the test runs with each)."""
    return reopen()
