"""DeferredWrites: the small writes of an open SQLite batch, held and sent together.

Why: inside a batch nobody reads what a write returns, and each ``execute`` costs a trip
through the sqlite3 module (a cursor, a statement lookup, binding, and letting go of the GIL
and taking it back, behind whichever thread took it meanwhile). A mail costs four such
writes and a nested batch (a savepoint) per supervisor message. Held here, they go at the
batch's commit, or before anything reads or writes directly, with ``executemany`` per run of
one statement, and a nested batch that nothing flushed while it was open costs no statement.

Order: writes to one table keep their order; writes to different tables in the same stretch
between two savepoint statements may be sent table by table. The store has no foreign keys
and its triggers write only their own table (``leases``' epoch, ``mail``'s receipt: schema
v10, v11), so the tables' contents at commit are the same, and every read flushes first.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable
from typing import Any

Params = tuple[Any, ...]
Entry = tuple[str | None, str, Params | list[Params], str]
"""(table, or None for a savepoint statement that must stay in place; sql; the params of
one row, or a list of rows (``add_rows``); doing)."""


MANY_ROWS: dict[str, tuple[int, str]] = {}
"""A one-row ``INSERT ... VALUES (?, ...)`` -> (n, the same statement with n rows of values):
held rows of it sent n to a statement, not one statement each (``executemany`` runs the
statement once per row: binding, a step that lets go of the GIL and takes it back, and an
``AUTOINCREMENT`` key's ``sqlite_sequence`` row written again). Filled by the tables that
hold many rows per batch (``sqlite_events``: two events per durable mail, the supervisor's)."""


GROUPED: dict[str, Callable[[list[Params]], list[tuple[str, Params]]]] = {}
"""A held statement -> what turns its held rows of one stretch (in order) into the
statements sent instead (``sqlite_event_groups``: a batch's events of one run as one row)."""


def many_rows(sql: str, n: int) -> None:
    """Send ``n`` held rows of ``sql`` (``INSERT ... VALUES (?, ...)``, nothing after its
    values) as one statement (``MANY_ROWS``); the rows left over (fewer than ``n``) as one
    statement of their count (``_joined``)."""
    MANY_ROWS[sql] = (n, _joined(sql, n))


def joined(sql: str, n: int) -> str:
    """``sql`` (``INSERT ... VALUES (?, ...)``) for ``n`` rows (one statement each ``n``)."""
    return _joined(sql, n)


@functools.lru_cache(maxsize=64)
def _joined(sql: str, n: int) -> str:
    """``sql`` (``INSERT ... VALUES (?, ...)``) for ``n`` rows. The rows a group of the
    supervisor's holds past the last whole ``MANY_ROWS`` statement went by ``executemany``,
    a step each (a durable ping-pong's line: ~6 events of ~57, as many statements as the
    16-row ones); as one statement of their count, a statement per count (fewer than ``n``
    of them, each prepared once: sqlite3's statement cache)."""
    head, values = sql.rsplit(" VALUES ", 1)
    return f"{head} VALUES {', '.join([values] * n)}"


class FailedWrite(Exception):
    """A held write failed when sent; ``doing`` says which, ``error`` is SQLite's."""

    def __init__(self, doing: str, error: sqlite3.Error) -> None:
        super().__init__(doing)
        self.doing = doing
        self.error = error


class DeferredWrites:
    """Held writes of one batch; ``flushes`` counts the times some were sent."""

    def __init__(self) -> None:
        self.items: list[Entry | None] = []
        self.flushes = 0

    def __bool__(self) -> bool:
        return bool(self.items)

    def add_rows(self, table: str, sql: str, rows: list[Params], doing: str) -> None:
        """Several rows of one statement as one entry (one step's mail): no entry, and no
        ``doing`` text, per row. ``doing`` names the first row."""
        if rows:
            self.items.append((table, sql, rows, doing))

    def mark(self, sql: str, doing: str) -> tuple[int, int]:
        """Hold a savepoint statement in place; what ``void``/``drop`` take to undo it."""
        self.items.append((None, sql, (), doing))
        return len(self.items) - 1, self.flushes

    def sent_since(self, mark: tuple[int, int]) -> bool:
        """Whether anything (the savepoint statement with it) was sent since ``mark``."""
        return mark[1] != self.flushes

    def void(self, mark: tuple[int, int]) -> None:
        """The savepoint at ``mark`` ended well before it was sent: it need not exist (and
        when nothing was held after it, nothing is held for it: an empty batch sends none)."""
        if mark[0] == len(self.items) - 1:
            self.items.pop()
        else:
            self.items[mark[0]] = None

    def drop(self, mark: tuple[int, int]) -> None:
        """The savepoint at ``mark`` failed before it was sent: forget it and its writes."""
        del self.items[mark[0] :]

    def clear(self) -> None:
        self.items = []

    def flush(self, conn: sqlite3.Connection) -> None:
        """Send every held write, in order (see the module docstring); FailedWrite if one
        fails (the caller aborts the batch: some of the writes may have been applied)."""
        items, self.items = self.items, []
        if not items:
            return
        self.flushes += 1
        stretch: dict[str, list[Entry]] = {}
        for entry in items:
            if entry is None:
                continue
            if entry[0] is None:
                _send_stretch(conn, stretch)
                stretch = {}
                _send(conn, [entry])
            else:
                held = stretch.get(entry[0])
                if held is None:
                    stretch[entry[0]] = [entry]
                else:
                    held.append(entry)
        _send_stretch(conn, stretch)


def _send_stretch(conn: sqlite3.Connection, stretch: dict[str, list[Entry]]) -> None:
    for entries in stretch.values():
        start = 0
        for i in range(1, len(entries) + 1):
            if i == len(entries) or entries[i][1] != entries[start][1]:
                _send(conn, entries[start:i])
                start = i


def _send(conn: sqlite3.Connection, entries: list[Entry]) -> None:
    """One statement for all ``entries`` (they share their sql)."""
    rows: list[Params] = []
    for entry in entries:
        params = entry[2]
        if isinstance(params, list):
            rows.extend(params)
        else:
            rows.append(params)
    sql = entries[0][1]
    sent = len(rows)  # all of them named in an error, whichever statement of them failed
    try:
        if len(rows) == 1 and sql not in GROUPED:
            conn.execute(sql, rows[0])
            return
        grouped = GROUPED.get(sql)
        if grouped is not None:
            for one, params in grouped(rows):
                conn.execute(one, params)
            return
        many = MANY_ROWS.get(sql)
        if many is not None:
            n, joined = many
            whole = len(rows) - len(rows) % n
            for start in range(0, whole, n):
                conn.execute(joined, [value for row in rows[start : start + n] for value in row])
            rows = rows[whole:]
            if len(rows) > 1:  # the rest as one statement too, not a step each
                conn.execute(_joined(sql, len(rows)), [value for row in rows for value in row])
                return
        if len(rows) == 1:
            conn.execute(sql, rows[0])
        elif rows:
            conn.executemany(sql, rows)
    except sqlite3.Error as exc:
        raise FailedWrite(_which(entries[0][3], sent), exc) from exc


def _which(first: str, rows: int) -> str:
    """What failed, for the error message. ``executemany`` does not say which row failed,
    and the failures that matter here (a full disk, an I/O error) roll the transaction back,
    so the rows cannot be tried again one by one: the first is named, with the count."""
    if rows == 1:
        return first
    return f"{first} (or one of the {rows - 1} writes sent with it)"
