"""How the runtime logged in to its PostgreSQL store, and the logins a run's command could
try without its secret: what ``runtime._server_reach`` has a sandboxed probe attempt before
any run starts.

Why: a PostgreSQL store has no file to keep out of the runs' reach; a run's command with the
network reaches the server like any client, as the same OS user, reading the same files
(``~/.pgpass``, a service file, a client certificate). A session-17 review saw a sandboxed
Bash write ``subagents.runs`` with psycopg through a password-less local login. Whether a
login needs a secret is the server's (``pg_hba.conf``, by role, database and address),
which nothing here can read; so it is tried the way a command would, for every role that
could change the store (``WRITERS``: the store's own, a superuser, one that may create roles
or set passwords, one that may write, own or trigger on a table of the store's schema, or
become one that may) and in every database the server lets one connect to: a login
anywhere is enough, for any role may set its own password there and then log in to the
store with it. Over the store's route, the loopback addresses when the server is this
machine's, and every local unix socket of the server's port (``Login.attempts``), by
``postgres_probe`` in the runs' sandbox and environment.
"""

from __future__ import annotations

import ctypes.util
import os
from dataclasses import dataclass, field
from typing import Any

import psycopg

from subagents.store.base import StoreError
from subagents.store.postgres_schema import SCHEMA

SOCKET_DIRS = ("/var/run/postgresql", "/run/postgresql", "/tmp")
"""Where a local server's unix sockets are (Debian's, and libpq's compiled-in default)."""

LOOPBACK = ("localhost", "127.0.0.1", "::1")
"""This machine's names: a server reached by one of them or by a unix socket is tried over
both loopback addresses too (pg_hba.conf may trust TCP logins and not socket ones, or
``::1`` and not ``127.0.0.1``)."""

WRITERS = """
SELECT r.rolname FROM pg_roles r
WHERE r.rolcanlogin AND (
    r.rolsuper OR r.rolcreaterole OR pg_has_role(r.oid, current_user, 'MEMBER')
    OR EXISTS (
        SELECT 1 FROM pg_namespace n
        WHERE n.nspname = %(schema)s AND pg_has_role(r.oid, n.nspowner, 'MEMBER'))
    OR EXISTS (
        SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = %(schema)s AND c.relkind IN ('r', 'p')
        AND (pg_has_role(r.oid, c.relowner, 'MEMBER') OR has_table_privilege(
            r.oid, c.oid, 'INSERT, UPDATE, DELETE, TRUNCATE, TRIGGER'))))
ORDER BY r.rolname <> current_user, r.rolname
"""
"""The login roles that could change the store: what the probe tries to log in as."""
DATABASES = (
    "SELECT datname FROM pg_database WHERE datallowconn"
    " ORDER BY datname <> current_database(), datname"
)
"""Every database a login may open (pg_hba.conf may trust a role in one of them only)."""


@dataclass(frozen=True)
class Login:
    """The runtime's login to its store: the password it used (None: the server asked for
    none), and the logins a command could attempt: ``(host, port, role, database)``."""

    password: str | None = field(repr=False)
    attempts: tuple[tuple[str, int, str, str], ...]
    libpq: str
    """The libpq the runtime's psycopg uses (``libpq_path``): the probe logs in through it."""


def libpq_path() -> str:
    """The file of the libpq this process loaded with psycopg (its own copy for
    ``psycopg[binary]``, the system's otherwise); else the system's by its soname.
    ``StoreError`` when there is none: without it no probe runs (a refusal)."""
    with open("/proc/self/maps", encoding="utf-8") as maps:
        for line in maps:
            name = line.rsplit(None, 1)[-1]
            if os.path.basename(name).startswith("libpq") and ".so" in name:
                return name
    found = ctypes.util.find_library("pq")
    if found is None:
        raise StoreError("no libpq to check the store's logins with (psycopg's nor the system's)")
    return found


def login_of(conn: psycopg.Connection[Any]) -> Login:
    """How ``conn`` (the store's connection, outside a transaction) logged in, and what a
    command could try."""
    info = conn.info
    routes = [info.host]
    if info.host.startswith("/") or info.host in LOOPBACK:  # a server of this machine
        routes += [address for address in LOOPBACK[1:] if address != info.host]
    for directory in SOCKET_DIRS:
        if directory != info.host and os.path.exists(f"{directory}/.s.PGSQL.{info.port}"):
            routes.append(directory)
    roles = [row[0] for row in conn.execute(WRITERS, {"schema": SCHEMA}).fetchall()]
    databases = [row[0] for row in conn.execute(DATABASES).fetchall()]
    attempts = tuple(
        (host, info.port, role, db) for role in roles for host in routes for db in databases
    )
    password = info.password if conn.pgconn.used_password else None
    return Login(password or None, attempts, libpq_path())
