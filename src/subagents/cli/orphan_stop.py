"""`subagents stop` of an orphaned run: ended in the store now, without resuming its tree.

Why here: no runtime holds an orphaned run, so the command that stops it carries the stop out
itself, in one transaction of the store (a local file, or a PostgreSQL database): it reads
the leases and the run again inside it (a `resume` that took the tree up meanwhile is seen:
the run is hosted again, and the caller posts a stop command for its new host instead), ends
the run and its unfinished subtree as ``supervision.orphan_stops`` decides, and releases the
lapsed lease of the host that held them, so that a host that was only stalled (SIGSTOP, a
frozen VM) finds itself fenced when it wakes and writes nothing over the stop
(``store.fencing``). On PostgreSQL the leases read inside the transaction are the lapsed
ones locked (``FOR UPDATE``, as a restore's takeover locks them), so a resume taking the
tree up at the same moment waits for the stop, or the stop for it. A cluster's store does
not hold a transaction across calls, so there the stop is posted for a `resume` as before.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

from subagents.cli.state import live_statuses

if TYPE_CHECKING:
    from subagents.cli.state import InspectedStore
    from subagents.messages import RunRecord

REASON = "stopped by `subagents stop` while orphaned (its host {host} was gone): not resumed"


def can_end_here(store: InspectedStore) -> bool:
    """Whether this store can end orphaned runs in one transaction here: a local file, or
    a PostgreSQL database (where the leases read inside the batch are the lapsed ones
    locked, as a restore's takeover locks them: ``store.postgres_processes``)."""
    from subagents.store.sqlite import SQLiteStore

    if isinstance(store, SQLiteStore):
        return True
    postgres = sys.modules.get("subagents.store.postgres")  # loaded if the store is one
    return postgres is not None and isinstance(store, postgres.PostgresStore)


def end_orphaned(
    store: InspectedStore, run_id: str, *, turn: bool = False
) -> list[RunRecord] | None:
    """End ``run_id`` and its unfinished subtree if their host is still gone (``turn``: not
    its detached children, nor what is under them: they go on at the next `resume`): the
    runs ended (as recorded now), ``[]`` if it had ended already; None if a host holds it
    again."""
    from subagents.store.leases import Liveness
    from subagents.store.writes import apply_writes
    from subagents.supervision.orphan_stops import end_orphans

    now = time.time()
    with store.batch():
        alive = Liveness(store.leases(), now)
        record = store.get_run(run_id)
        if record is None or record.status.terminal:
            return []
        subtree = _unfinished_subtree(store, record, turn=turn)
        if not all(alive.orphaned(r) for r in subtree):
            return None
        unread = {
            r.run_id: [m for m in store.mail_for(r.run_id) if m.recipient == r.run_id]
            for r in subtree
        }
        reason = REASON.format(host=alive.host(record))
        apply_writes(store, end_orphans(subtree, reason=reason, now=now, unread=unread))
        for owner in sorted({r.owner for r in subtree if r.owner}):
            store.release_lease(owner)
        ended = [store.get_run(r.run_id) for r in subtree]
    return [r for r in ended if r is not None]


def _unfinished_subtree(
    store: InspectedStore, top: RunRecord, *, turn: bool = False
) -> list[RunRecord]:
    """``top`` and its unfinished descendants, parents before children (``turn``: without
    its detached children and their subtrees)."""
    live = store.list_runs(statuses=live_statuses(), root_run_id=top.root_run_id)
    children: dict[str, list[RunRecord]] = {}
    for r in live:
        if r.parent_run_id is not None:
            children.setdefault(r.parent_run_id, []).append(r)
    found, todo = [top], [top.run_id]
    while todo:
        below = [r for r in children.get(todo.pop(), []) if not (turn and r.detached)]
        found += below
        todo += [r.run_id for r in below]
    return found
