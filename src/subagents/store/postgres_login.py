"""How the runtime logged in to its PostgreSQL store, and the logins a run's command could
try without its secret: what ``runtime._server_reach`` has a sandboxed probe attempt before
any run starts.

Why: a PostgreSQL store has no file to keep out of the runs' reach; a run's command with the
network reaches the server like any client, as the same OS user, reading the same files
(``~/.pgpass``, a service file, a client certificate). A session-17 review saw a sandboxed
Bash write ``subagents.runs`` with psycopg through a password-less local login. Whether a
login needs a secret is the server's (``pg_hba.conf``), which nothing here can read; so it
is tried the way a command would: as the store's role and as the OS user's (``peer`` maps
one to the other), over the store's route and every local unix socket of the server's
port (``Login.attempts``), by ``postgres_probe`` in the runs' sandbox and environment.
"""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass, field
from typing import Any

import psycopg

SOCKET_DIRS = ("/var/run/postgresql", "/run/postgresql", "/tmp")
"""Where a local server's unix sockets are (Debian's, and libpq's compiled-in default)."""


@dataclass(frozen=True)
class Login:
    """The runtime's login to its store: the password it used (None: the server asked for
    none), and the logins a command could attempt: ``(host, port, role, database)``."""

    password: str | None = field(repr=False)
    attempts: tuple[tuple[str, int, str, str], ...]


def login_of(conn: psycopg.Connection[Any]) -> Login:
    """How ``conn`` (the store's connection) logged in, and what a command could try."""
    info = conn.info
    routes = [info.host]
    for directory in SOCKET_DIRS:
        if directory != info.host and os.path.exists(f"{directory}/.s.PGSQL.{info.port}"):
            routes.append(directory)
    roles = dict.fromkeys((info.user, getpass.getuser()))
    attempts = tuple((host, info.port, role, info.dbname) for role in roles for host in routes)
    password = info.password if conn.pgconn.used_password else None
    return Login(password or None, attempts)
