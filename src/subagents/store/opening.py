"""Opening the durable store at a location (``store.locations``): a ``PostgresStore`` for a
``postgresql://`` URL, else a ``SQLiteStore``. Apart from ``locations`` because it imports
the stores (and they import ``locations``); psycopg is imported only for a URL.
"""

from __future__ import annotations

from pathlib import Path

from subagents.store.base import RunStore, StoreError
from subagents.store.locations import Location, is_database_url, redacted


def open_location(location: Location, *, create: bool = True) -> RunStore:
    """The store at ``location``: a ``PostgresStore`` for a URL, else a ``SQLiteStore``.
    ``create=False``: a database without a store in it is refused (``StoreError``) rather
    than given one (a file's existence is the caller's to check)."""
    if is_database_url(location):
        try:
            from subagents.store.postgres import PostgresStore
        except ImportError as exc:
            raise StoreError(
                f"{redacted(str(location))}: a PostgreSQL store needs psycopg, which is not"
                f" installed ({exc}): pip install 'subagents[postgres]'"
            ) from exc
        return PostgresStore(str(location), create=create)
    from subagents.store.sqlite import SQLiteStore

    return SQLiteStore(Path(location))
