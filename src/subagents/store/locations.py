"""Where a durable store is: a SQLite file's path, or a PostgreSQL database's URL.

Why one place: ``Runtime(store=...)``, every CLI command's ``--state`` and the
``SUBAGENTS_STATE`` variable all name a store the same way, and each must open the same
kind of store from the same text. A ``postgresql://`` (or ``postgres://``) URL is a
PostgreSQL database (``store.postgres``, the ``postgres`` extra); anything else is a path.
Nothing here imports a database driver: ``--help`` and a SQLite user never load psycopg.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from subagents.store.paths import default_state_dir, default_store_path

STATE_ENV = "SUBAGENTS_STATE"
"""The store the CLI uses when ``--state`` is not given: a path or a ``postgresql://`` URL
(else the file in the state directory, ``store.paths``)."""

URL_SCHEMES = ("postgresql://", "postgres://")

Location = Path | str
"""A store's place: a path (SQLite), or a URL (a ``str``, PostgreSQL)."""


def is_database_url(location: object) -> bool:
    """Whether ``location`` names a PostgreSQL database rather than a SQLite file."""
    return isinstance(location, str) and location.startswith(URL_SCHEMES)


def redacted(url: str) -> str:
    """``url`` without its password, for messages, logs and listings."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    userinfo, host = parts.netloc.rsplit("@", 1)
    user = userinfo.split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def store_location(text: str) -> Location:
    """``--state``'s value read: a URL as it is, anything else a path."""
    if not text.strip():
        raise ValueError("an empty store location: give a file path or a postgresql:// URL")
    return text if is_database_url(text) else Path(text)


def default_location(env: Mapping[str, str] | None = None) -> Location:
    """The store the CLI opens without ``--state``: ``$SUBAGENTS_STATE``, else the SQLite
    file of the state directory (``store.paths``)."""
    env = os.environ if env is None else env
    given = env.get(STATE_ENV, "").strip()
    if given:
        return store_location(given)
    return default_store_path(env)


def local_folder(location: Location) -> Path:
    """The folder on this machine for what is kept beside the store (the last ``ps``
    listing, detached hosts' logs): a file's own folder; for a database, one folder per
    database under the state directory (``databases/<digest of its URL>``)."""
    if isinstance(location, str):
        digest = hashlib.sha256(redacted(location).encode()).hexdigest()[:16]
        return default_state_dir() / "databases" / digest
    return location.expanduser().parent
