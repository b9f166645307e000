"""Fixtures of the store tests: every protocol test runs against both stores, and against a
cluster's store (the head's SQLiteStore reached through Ray, ``subagents.cluster``) when the
``ray`` tests run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from subagents.store.base import RunStore
from subagents.store.memory import MemoryStore
from subagents.store.sqlite import SQLiteStore


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "runs.sqlite3"


@pytest.fixture(params=["memory", "sqlite", pytest.param("cluster", marks=pytest.mark.ray)])
def store(request: pytest.FixtureRequest, db_path: Path) -> Iterator[RunStore]:
    if request.param == "cluster":
        yield from _cluster_store(request, db_path)
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
