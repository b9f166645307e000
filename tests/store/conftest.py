"""Fixtures of the store tests: every protocol test runs against both stores."""

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


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, db_path: Path) -> Iterator[RunStore]:
    s: RunStore = MemoryStore() if request.param == "memory" else SQLiteStore(db_path)
    yield s
    s.close()


@pytest.fixture
def sqlite_store(db_path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(db_path)
    yield s
    s.close()
