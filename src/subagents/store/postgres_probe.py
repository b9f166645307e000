"""A command's attempt to write a PostgreSQL store without the runtime's secret: run by
``runtime._server_reach`` in the runs' sandbox and environment, as a run's command would be.

    python -I -c "$(cat .../postgres_probe.py)" '[[host, port, role, database], ...]'

Prints, one per line, each role and route that logged in to one of the databases (the
first that let it in): every role tried may change the store, from any database
(``store.postgres_login.WRITERS``), so a login is enough. libpq's defaults and no more, so
a password file, a service file or a client certificate the command can read counts, and a
trusting or ``peer`` server counts. Imports psycopg and the standard library only.
"""

from __future__ import annotations

import json
import sys

TIMEOUT_S = 10


def logs_in(host: str, port: int, role: str, database: str) -> bool:
    import psycopg

    try:
        with psycopg.connect(
            host=host,
            port=port,
            user=role,
            dbname=database,
            connect_timeout=TIMEOUT_S,
            application_name="subagents reach probe",
            autocommit=True,
        ) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error:
        return False
    return True


def main(argv: list[str]) -> int:
    found = set()
    for host, port, role, database in json.loads(argv[1]):
        if (role, host) not in found and logs_in(host, int(port), role, database):
            found.add((role, host))
            print(f"role {role!r} over {host}:{port} (database {database!r})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
