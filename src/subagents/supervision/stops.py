"""Stops: a stop request decided, and its reply told to the run that asked.

Why a part of its own: who may stop what is a rule worth reading in one place. The outside
may stop any run: one held here is cancelled through the one cancel walk
(``Lifecycle.cancel``; with its whole tree, or, ``scope="turn"``, without its detached
children), one alive but hosted by another runtime on the same store is passed
on as a command (``PostCommand``), an ended one is an error. A run may stop only its own
descendants, and only while it is itself running. A requesting run is told the reply; a
function agent's stop is journaled with it first, so its replay after a crash gets the answer
instead of stopping an ended run. ``StopRequested`` (all a requester requested) is
``requesters.py``'s; its reply goes back the same way (``answer``). Pure, like the core.
"""

from __future__ import annotations

from collections.abc import Callable

from subagents.messages import JournalEntry, RunRecord, StopReply, StopRequest, StopRequested
from subagents.store.writes import PostCommand, SaveJournal
from subagents.supervision.effects import Decided, Tell
from subagents.supervision.lifecycle import Lifecycle
from subagents.supervision.runs import RunTable


class Stops:
    """The stop requests of runs and of the outside."""

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

    def answer(self, req: StopRequest | StopRequested, reply: StopReply) -> Decided:
        """Tell a requesting run its stop's reply (journaled first, if it asked)."""
        told = Decided()
        if req.requester is None:
            return told
        if req.journal and self.runs.reporting(req.requester, req.attempt) is not None:
            # A function agent's ctx.stop: its answer is journaled with the stop, so a
            # replay after a crash gets it instead of stopping an ended run.
            entry = JournalEntry(
                request_id=req.request_id,
                observed=True,
                result=list(reply.stopped),
                error=reply.error,
            )
            told.writes.append(SaveJournal(req.requester, (entry,)))
        told.effects.append(Tell(req.requester, reply))
        return told

    def one(self, req: StopRequest) -> tuple[StopReply, Decided]:
        """Stop ``req.run_id`` and its subtree (deepest first), if the requester may: the
        outside may stop any run (one another runtime hosts: by a command through the store);
        a run, only its own descendants. An ended run is an error, not a stop. The reply,
        and what the stop comes to."""
        decided = Decided()
        target = self.runs.get(req.run_id)
        if target is None:
            ended = self.read_run(req.run_id)  # a finished tree is forgotten in memory
            if ended is not None and req.requester is None and not ended.status.terminal:
                # alive, but another runtime on this store hosts it: pass the stop on
                scope = "turn" if req.scope == "turn" else None
                decided.writes.append(PostCommand("stop", req.run_id, scope))
                return StopReply(request_id=req.request_id, stopped=(req.run_id,)), decided
            if ended is not None and req.requester is None:
                error = f"run {req.run_id} has already ended ({ended.status})"
            else:
                error = f"no run with id {req.run_id!r}"
            return StopReply(request_id=req.request_id, error=error), decided
        requester = req.requester
        refusal: str | None = None
        if requester is not None and self.runs.reporting(requester, req.attempt) is None:
            refusal = f"run {requester} is not running"
        elif requester is not None and not self.runs.tree.is_descendant(req.run_id, requester):
            refusal = (
                f"run {req.run_id} is not a descendant of {requester}; a run may only"
                " stop its own descendants"
            )
        elif target.record.status.terminal:
            refusal = f"run {req.run_id} has already ended ({target.record.status})"
        if refusal is not None:
            return StopReply(request_id=req.request_id, error=refusal), decided
        tree = req.scope != "turn"
        stopped, cancelled = self.lifecycle.cancel(target, req.reason, tree=tree)
        return StopReply(request_id=req.request_id, stopped=tuple(stopped)), cancelled
