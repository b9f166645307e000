"""A command's attempt to log in to a PostgreSQL store without the runtime's secret: run by
``runtime._server_reach`` in the runs' sandbox and environment, as a run's command would be.

    python -I -c "$(cat .../postgres_probe.py)" '[[host, port, role, database], ...]' LIBPQ

Prints, one per line, each role and route that logged in to one of the databases (the
first that let it in): every role tried may change the store, from any database
(``store.postgres_login.WRITERS``), so a login is enough. Through ``LIBPQ``, the libpq the
runtime's psycopg uses (``store.postgres_login.libpq_path``), with its defaults and no
more, so a password file, a service file or a client certificate the command can read
counts, and a trusting or ``peer`` server counts. By ctypes, not psycopg: importing
psycopg costs ~0.25 s of CPU (~1-2 s at load 12), paid at every start of a runtime with a
PostgreSQL store. Imports the standard library only.
"""

from __future__ import annotations

import ctypes
import json
import sys

TIMEOUT_S = 10
CONNECTION_OK = 0


def logs_in(libpq: ctypes.CDLL, host: str, port: int, role: str, database: str) -> bool:
    options = {
        "host": host,
        "port": str(port),
        "user": role,
        "dbname": database,
        "connect_timeout": str(TIMEOUT_S),
        "application_name": "subagents reach probe",
    }
    keys = (ctypes.c_char_p * (len(options) + 1))(*(k.encode() for k in options), None)
    values = (ctypes.c_char_p * (len(options) + 1))(*(v.encode() for v in options.values()), None)
    conn = libpq.PQconnectdbParams(keys, values, 0)
    if not conn:
        raise MemoryError("libpq could not allocate a connection")
    try:
        return bool(libpq.PQstatus(conn) == CONNECTION_OK)
    finally:
        libpq.PQfinish(conn)


def main(argv: list[str]) -> int:
    libpq = ctypes.CDLL(argv[2])
    libpq.PQconnectdbParams.restype = ctypes.c_void_p
    libpq.PQconnectdbParams.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    libpq.PQstatus.argtypes = [ctypes.c_void_p]
    libpq.PQfinish.argtypes = [ctypes.c_void_p]
    found = set()
    for host, port, role, database in json.loads(argv[1]):
        if (role, host) not in found and logs_in(libpq, host, int(port), role, database):
            found.add((role, host))
            print(f"role {role!r} over {host}:{port} (database {database!r})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
