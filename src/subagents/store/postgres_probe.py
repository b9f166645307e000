"""A command's attempt to write a PostgreSQL store without the runtime's secret: run by
``runtime._server_reach`` in the runs' sandbox and environment, as a run's command would be.

    python -I -c "$(cat .../postgres_probe.py)" '[[host, port, role, database], ...]'

Prints, one per line, each attempt that logged in and may write the store's runs (a row of
``subagents.runs`` it could insert, change or delete): libpq's defaults and no more, so a
password file, a service file or a client certificate the command can read counts, and a
trusting or ``peer`` server counts. Imports psycopg and the standard library only.
"""

from __future__ import annotations

import json
import sys

CAN_WRITE = (
    "SELECT coalesce(has_table_privilege(to_regclass('subagents.runs'),"
    " 'INSERT, UPDATE, DELETE'), false)"
)
TIMEOUT_S = 10


def can_write(host: str, port: int, role: str, database: str) -> bool:
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
            row = conn.execute(CAN_WRITE).fetchone()
    except psycopg.Error:
        return False
    return bool(row and row[0])


def main(argv: list[str]) -> int:
    for host, port, role, database in json.loads(argv[1]):
        if can_write(host, int(port), role, database):
            print(f"role {role!r} over {host}:{port}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
