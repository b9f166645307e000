"""The restore snapshot: what the store holds of the runs a crashed (or closed) runtime left
unfinished, read in one go for the supervisor to take them up.

Why a snapshot: the supervisor's decisions do no I/O (``supervision/``). The actor reads this
before asking the core to restore, and hands it over whole.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from subagents.messages import (
    Checkpoint,
    JournalEntry,
    Mail,
    MailState,
    RunRecord,
    RunStatus,
    Subscription,
)
from subagents.store.base import RunStore
from subagents.store.leases import restarting_owners

UNFINISHED = (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.WAITING)


class UnfinishedRun(msgspec.Struct, frozen=True, kw_only=True):
    """One unfinished run as the store keeps it."""

    record: RunRecord
    checkpoint: Checkpoint | None = None
    """Its last checkpoint (a run with steps resumes from it)."""
    inbox: tuple[Mail, ...] = ()
    """Mail to it not read yet (accepted while queued, or delivered), in the order sent."""
    tree: tuple[RunRecord, ...] = ()
    """The runs of its root's tree, ended or not (a resumed run is told what became of its
    children; a function agent's replay names runs by agent)."""
    mails: tuple[Mail, ...] = ()
    """Its mail, sent and received (a resumed run does not send again what it sent; a
    function agent's replay hands again what it had read)."""
    journal: tuple[JournalEntry, ...] = ()
    """A function agent's journal (what its replay follows)."""


class RestoreSnapshot(msgspec.Struct, frozen=True, kw_only=True):
    unfinished: tuple[UnfinishedRun, ...] = ()
    """Parents before children (by depth, then age)."""
    live_owners: frozenset[str] = frozenset()
    """The runtimes whose leases are alive (``store.leases``): the trees they host are left
    to them."""
    restarting: frozenset[str] = frozenset()
    """The owners whose leases are dead but whose host is being started again (a detached
    tree's host that Ray still lists, ``store.leases.restarting_owners``): their trees are left
    to its new process, as a live owner's are."""
    undelivered: tuple[RunRecord, ...] = ()
    """Runs that ended but whose outcome never reached their requester."""
    ended_ancestors: tuple[RunRecord, ...] = ()
    """The ended ancestors of the unfinished detached runs (which outlived their parents),
    parents before children: held again so that the tree, its depth bounds and budgets
    stay whole above them."""
    subscriptions: tuple[Subscription, ...] = ()
    """The topic subscriptions of the unfinished runs, in the order made."""
    tree_runs: dict[str, int] = msgspec.field(default_factory=dict)
    """How many runs the store holds of each unfinished run's tree, by root (read only when
    asked, ``count_trees``: ``Limits.max_runs_per_tree`` counts a tree's runs across a
    restore)."""


def read_snapshot(
    store: RunStore,
    live_owners: frozenset[str],
    *,
    count_trees: bool = False,
    listed: Callable[[str], bool] | None = None,
) -> RestoreSnapshot:
    """Read the store's unfinished runs, given the owners alive (read by the caller from the
    store's leases, in the same transaction); ``count_trees``: their trees' sizes too;
    ``listed``: whether a restartable host is still listed where it runs (a cluster's store
    can tell, ``host_listed``), to find the owners being restarted."""
    records = store.list_runs(statuses=UNFINISHED)
    records.sort(key=lambda r: (r.depth, r.created_at))
    trees: dict[str, list[RunRecord]] = {}
    unfinished: list[UnfinishedRun] = []
    for record in records:
        run_id = record.run_id
        inbox = tuple(
            m
            for m in store.mail_for(run_id, (MailState.ACCEPTED, MailState.DELIVERED))
            if m.recipient == run_id
        )
        tree: tuple[RunRecord, ...] = ()
        mails: tuple[Mail, ...] = ()
        journal: tuple[JournalEntry, ...] = ()
        if record.started_at is not None:  # it resumes: what its earlier start did
            known = trees.get(record.root_run_id)
            if known is None:
                known = trees[record.root_run_id] = store.list_runs(root_run_id=record.root_run_id)
            tree = tuple(known)
            mails = tuple(store.mail_for(run_id))
            journal = tuple(store.journal_of(run_id))
        # a continued run has one from its admission (its seed), steps or not
        checkpoint = (
            store.load_checkpoint(run_id)
            if record.steps > 0 or record.continues is not None
            else None
        )
        unfinished.append(
            UnfinishedRun(
                record=record,
                checkpoint=checkpoint,
                inbox=inbox,
                tree=tree,
                mails=mails,
                journal=journal,
            )
        )
    ended = [r for o in store.undelivered_outcomes() if (r := store.get_run(o.run_id))]
    ancestors = _ended_ancestors(store, records)
    sizes: dict[str, int] = {}
    if count_trees:
        for root in {r.root_run_id for r in records}:
            known = trees.get(root)
            sizes[root] = len(known if known is not None else store.list_runs(root_run_id=root))
    return RestoreSnapshot(
        unfinished=tuple(unfinished),
        live_owners=live_owners,
        restarting=restarting_owners([r.owner for r in (*records, *ended)], live_owners, listed),
        undelivered=tuple(ended),
        ended_ancestors=ancestors,
        subscriptions=tuple(store.subscriptions([r.run_id for r in records])) if records else (),
        tree_runs=sizes,
    )


def _ended_ancestors(store: RunStore, records: list[RunRecord]) -> tuple[RunRecord, ...]:
    """The ended runs above the unfinished detached runs whose parents ended, parents
    first (none when no detached run outlived its parent: the usual case reads nothing)."""
    unfinished = {r.run_id for r in records}
    found: dict[str, RunRecord] = {}
    for record in records:
        above = record.parent_run_id if record.detached else None
        while above is not None and above not in unfinished and above not in found:
            ancestor = store.get_run(above)
            if ancestor is None:
                break
            found[above] = ancestor
            above = ancestor.parent_run_id
    return tuple(sorted(found.values(), key=lambda r: (r.depth, r.created_at)))
