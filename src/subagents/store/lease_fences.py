"""A SQLite lease's fence held in the file's schema: a view that exists exactly while the
lease taken at its epoch is held (schema v17).

Why: the sender's one statement of every durable mail (``store.sqlite_record``) checked the
lease by reading it, a probe of the ``leases`` table by owner and a compare of its epoch,
with the owner and the epoch bound as two more parameters. SQLite already checks something
at the start of every statement, inside its transaction and under its write lock: the
schema's cookie, which any other connection's change of the schema moves, after which the
statement is compiled again against the new schema. So the taking of a lease at epoch ``N``
creates the view ``lease_fence_N`` (``SELECT 1``), every end of that taking (its release,
its takeover by another runtime, the same owner taking its lease again at a later epoch)
drops it in the transaction that ends it, and the sender's statement names the view: while
the lease is held it compiles to a constant (no table read); once another connection ended
the taking, the statement compiled again finds no such view and fails before it writes
anything (``missing``), and the record is made again as statements, whose fence reads the
``leases`` table and says ``Fenced``. The takeover and the statement are serialised by the
write lock as the read was: either the mail commits before the takeover (which sees it) or
the statement starts after and finds the view gone. An epoch is never given twice (a
counter in ``meta``), so the view of an epoch names one owner's one taking.

Only the absence of a view is trusted to mean "not held", never its presence alone; a lease
held without its view (taken by a runtime of before v17) costs its sender the slow path, not
a write. So what must hold is that no lease ends while its view stays: every end goes
through ``ProcessRows`` (which drops the view first), and ``GUARDS``, triggers of the v17
migration, refuse an end that did not (a runtime of before v17 still open on the store
releasing or taking over a lease of v17, or taking an owner's lease again), with a message
that says why, rather than let the stalled taking write on. Views change the schema only
when a lease is taken or ends (a runtime's start and close, a takeover), never per mail.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

PREFIX = "lease_fence_"
"""Every fence's view is named ``PREFIX`` and its epoch."""


def view_of(epoch: int) -> str:
    """The name of the view that fences the lease taken at ``epoch`` (an int: the name is
    written into SQL)."""
    return f"{PREFIX}{int(epoch)}"


def create_sql(epoch: int) -> str:
    """The view of ``epoch``'s taking, made in the transaction that takes the lease."""
    return f"CREATE VIEW IF NOT EXISTS {view_of(epoch)} AS SELECT 1"


def drop_sql(epoch: int) -> str:
    """The view of ``epoch``'s taking gone, in the transaction that ends it (before its row
    goes: ``GUARDS``)."""
    return f"DROP VIEW IF EXISTS {view_of(epoch)}"


def epochs(values: Iterable[object]) -> list[int]:
    """The epochs among ``values`` read from ``leases.epoch`` (NULL where a lease of before
    v10 had none: no view)."""
    return [int(v) for v in values if isinstance(v, int) and not isinstance(v, bool)]


def missing(exc: BaseException | None) -> bool:
    """Whether ``exc`` (a statement's error) is its fence's view not found: the lease it
    names ended since the statement was compiled, or was never given a view."""
    return isinstance(exc, sqlite3.OperationalError) and str(exc).startswith(
        f"no such table: {PREFIX}"
    )


_HELD = (
    f"EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'view' AND name = '{PREFIX}' || OLD.epoch)"
)
"""Whether the view of the lease's taking ``OLD`` exists: read from ``sqlite_master``, the
schema table's name every SQLite knows (``sqlite_schema`` is 3.33's: on an older SQLite,
Ubuntu 20.04's 3.31 or RHEL 8's 3.26, a trigger naming it fails every end of a lease)."""
_REFUSED = (
    "this lease is fenced by its view (schema v17): a subagents of before v17 cannot end it;"
    " stop the older runtime and upgrade it"
)

GUARDS = (
    f"""CREATE TRIGGER IF NOT EXISTS leases_fence_on_delete BEFORE DELETE ON leases WHEN {_HELD}
    BEGIN SELECT RAISE(ABORT, '{_REFUSED}'); END""",
    f"""CREATE TRIGGER IF NOT EXISTS leases_fence_on_epoch BEFORE UPDATE OF epoch ON leases
    WHEN OLD.epoch IS NOT NEW.epoch AND {_HELD}
    BEGIN SELECT RAISE(ABORT, '{_REFUSED}'); END""",
)
"""A lease's row never goes, nor its epoch moves, while its view stays (see the module):
this code drops the view first, in the same transaction; a runtime of before v17 does not,
and is refused. Lease writes are rare (a taking, a release; a renewal sets no epoch)."""
