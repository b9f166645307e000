"""The store read into the console's index, then polled for what changed.

Why a feed of events: every change the tree shows (a run admitted, started, waiting, a
step's tokens, its end, the node it was placed on) is written with an event, and the store
numbers events in the order they are appended (``RunStore.events_after``). So a poll asks for the
events after the last number it saw, and reads again only the runs they name: a run that
starts and ends between two polls is not missed, and a store of 100,000 runs costs a poll
no more than one of ten. What no event says, a host that died (its runs now ``orphaned``),
comes from the leases, read again every ``LEASES_EVERY_S``, for the unfinished runs only.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import msgspec

from subagents.cli.state import shown_status
from subagents.console.index import Row, RunIndex
from subagents.messages import EventKind, RunStatus
from subagents.store.base import DamagedRow
from subagents.store.leases import Liveness

if TYPE_CHECKING:
    from subagents.cli.state import InspectedStore
    from subagents.messages import RunRecord

EVENTS_PER_POLL = 5000
APPROVAL_KINDS = frozenset({EventKind.APPROVAL_ASKED, EventKind.APPROVAL_ANSWERED})
LEASES_EVERY_S = 1.0


class Changes(msgspec.Struct, frozen=True, kw_only=True):
    """What one poll found."""

    rows: list[Row]
    """The rows that changed, as they are now."""
    touched: frozenset[str]
    """Every run something was written about (the changed rows' runs included)."""
    approvals: bool = False
    """An approval was asked or answered, or a waiting run ended (the pending approvals
    changed)."""


class StoreFeed:
    """Keeps ``index`` equal to ``store``: ``load`` once, then ``poll`` as often as the
    page should be fresh. One caller at a time (the app's poller)."""

    def __init__(
        self,
        store: InspectedStore,
        index: RunIndex | None = None,
        *,
        leases_every_s: float = LEASES_EVERY_S,
    ) -> None:
        self.store = store
        self.index = index if index is not None else RunIndex()
        self.leases_every_s = leases_every_s
        self.seq = 0
        self.damaged: dict[str, str] = {}
        """Runs whose record does not read (``DamagedRow``), by id: what is wrong. Left out
        of the index, named on the page (``Page.damaged``); one such row made the load fail
        and the console not start, or the poll fail for ever (every page stale)."""
        self._alive: Liveness | None = None
        self._leases_read = 0.0
        self._unfinished: dict[str, RunRecord] = {}
        """The records of the runs not ended, for whom a host's end changes what is shown."""

    def _liveness(self) -> Liveness:
        # read before the runs it judges (cli.state.liveness says why)
        self._alive = Liveness(self.store.leases(), listed=getattr(self.store, "host_listed", None))
        self._leases_read = time.monotonic()
        return self._alive

    def load(self) -> int:
        """Read every run of the store (archived ones too); the number of runs."""
        self.seq = self.store.last_event_seq()  # first: what is appended later comes by poll
        alive = self._liveness()
        damaged: list[DamagedRow] = []
        records = self.store.list_runs(include_archived=True, damaged=damaged)
        self.damaged = {str(d.key): str(d) for d in damaged}
        roots = [r for r in records if r.parent_run_id is None]
        for record in roots:  # roots first: their children's rows carry their creation time
            self._put(record, alive)
        for record in records:
            if record.parent_run_id is not None:
                self._put(record, alive)
        return len(records)

    def _put(self, record: RunRecord, alive: Liveness) -> Row:
        if record.status.terminal:
            self._unfinished.pop(record.run_id, None)
        else:
            self._unfinished[record.run_id] = record
        return self.index.put(record, shown_status(record, alive))

    def poll(self) -> Changes:
        """What changed since the last poll: the rows (each once, as it is now), and every
        run an event was written for (mail delivered, a tool called: its page has more to
        show even when its row shows the same)."""
        changed: dict[str, Row] = {}
        touched: set[str] = set()
        approvals = False
        alive = self._alive
        if alive is None or time.monotonic() - self._leases_read >= self.leases_every_s:
            alive = self._liveness()
            for record in list(self._unfinished.values()):
                row = self.index.rows.get(record.run_id)
                if row is None or row.status != shown_status(record, alive):
                    changed[record.run_id] = self._put(record, alive)
        while True:
            events = self.store.events_after(self.seq, limit=EVENTS_PER_POLL)
            if not events:
                break
            self.seq = events[-1].seq
            named = dict.fromkeys(stored.event.run_id for stored in events)
            touched.update(named)
            approvals = approvals or any(s.event.kind in APPROVAL_KINDS for s in events)
            for run_id in named:
                approvals = self._refresh(run_id, alive, changed) or approvals
            if len(events) < EVENTS_PER_POLL:
                break
        return Changes(
            rows=list(changed.values()),
            touched=frozenset(touched | set(changed)),
            approvals=approvals,
        )

    def _refresh(self, run_id: str, alive: Liveness, changed: dict[str, Row]) -> bool:
        """Whether the run ended after waiting: the asks it kept are no longer pending, and
        no approval event says so (a run stopped or timed out while asking)."""
        try:
            record: RunRecord | None = self.store.get_run(run_id)
        except DamagedRow as exc:  # (left out and named: ``damaged``)
            self.damaged[run_id] = str(exc)
            return False
        self.damaged.pop(run_id, None)
        if record is None:  # deleted meanwhile (the sweeper's retention)
            return False
        earlier = self._unfinished.get(run_id)
        before = self.index.rows.get(run_id)
        row = self._put(record, alive)
        if row != before:
            changed[run_id] = row
        waited = earlier is not None and earlier.status is RunStatus.WAITING
        return waited and record.status.terminal
