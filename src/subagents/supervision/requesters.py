"""Requesters: the runs a requester asked for, stopped together, and the live records of a
tree, read for views.

Every run has one requester: its parent run, or the outside (``EXTERNAL_SENDER``) for a
root. An embedder (or a function agent) that started many runs wants to end them together,
with one reason, in one decision: no run of the set may start, or report, between two of
their stops. This part finds them in the run table and cancels them through the one cancel
walk (``Lifecycle.cancel``), queued runs first, so that a slot freed by a stop is not handed
to a run about to be stopped too. Pure, like the rest of the core.
"""

from __future__ import annotations

from collections.abc import Callable

from subagents.messages import (
    EXTERNAL_SENDER,
    RunRecord,
    RunStatus,
    StopReply,
    StopRequested,
)
from subagents.supervision.effects import Decided
from subagents.supervision.lifecycle import Lifecycle
from subagents.supervision.runs import RunState, RunTable

QUEUED = RunStatus.QUEUED


class Requesters:
    """Runs by requester: found, stopped together; a tree's live records, for views."""

    def __init__(
        self,
        runs: RunTable,
        lifecycle: Lifecycle,
        read_run: Callable[[str], RunRecord | None],
    ) -> None:
        self.runs = runs
        self.lifecycle = lifecycle
        self.read_run = read_run
        """The record of a run not held in memory (an ended, forgotten tree)."""

    def requested_by(self, requester: str) -> list[RunState]:
        """The live runs ``requester`` (a run id, or ``EXTERNAL_SENDER`` for the roots) has
        requested, queued ones first, each group in the order they were admitted."""
        if requester == EXTERNAL_SENDER:
            found = [s for s in self.runs if s.record.parent_run_id is None]
        else:
            found = [s for r in self.runs.tree.children(requester) if (s := self.runs.get(r))]
        live = [s for s in found if not s.record.status.terminal]
        return sorted(live, key=lambda s: s.record.status is not RunStatus.QUEUED)

    def stop(self, msg: StopRequested) -> tuple[StopReply, Decided]:
        """Cancel every live run ``msg.requested_by`` requested, with its subtree (deepest
        first), all with ``msg.reason``. A run asking may only stop what it, or one of its
        descendants, requested; the outside may stop anything. The reply, and what the
        stops come to."""
        early = self._answer_without_stops(msg)
        if early is not None:
            return early, Decided()
        tops = self.requested_by(msg.requested_by)
        # One walk: a slot one of them frees goes to no run of another, stopped next (a
        # queued one started, a parked one let go on), only to the runs of other trees.
        stopped, decided = self.lifecycle.cancel_each(tops, msg.reason)
        return StopReply(request_id=msg.request_id, stopped=tuple(stopped)), decided

    def _answer_without_stops(self, msg: StopRequested) -> StopReply | None:
        """The reply to ``msg`` when it stops nothing: refused (a run asking for runs not
        below it, or not running; a run unknown or hosted elsewhere), or the requester ended
        (so has everything it requested); None when its runs are to be stopped."""
        reply_id = msg.request_id
        by = msg.requested_by
        if msg.requester is not None:
            if self.runs.reporting(msg.requester, msg.attempt) is None:
                return StopReply(request_id=reply_id, error=f"run {msg.requester} is not running")
            if by != msg.requester and not self.runs.tree.is_descendant(by, msg.requester):
                return StopReply(
                    request_id=reply_id,
                    error=f"runs requested by {by} are not descendants of {msg.requester}; a"
                    " run may only stop its own descendants",
                )
        elif by != EXTERNAL_SENDER and by not in self.runs:
            record = self.read_run(by)
            if record is None:
                return StopReply(request_id=reply_id, error=f"no run with id {by!r}")
            if not record.status.terminal:
                return StopReply(
                    request_id=reply_id,
                    error=f"run {by} is hosted by another runtime: stop the runs it requested"
                    " one by one (each stop is passed on to their host)",
                )
            return StopReply(request_id=reply_id)  # ended: so has everything it requested
        return None

    def tree_records(self, run_id: str) -> tuple[RunRecord, ...]:
        """The records of ``run_id``'s tree held in memory (none when it is not held)."""
        if run_id not in self.runs:
            return ()
        return tuple(self.runs.tree_records(self.runs.tree.root(run_id)))
