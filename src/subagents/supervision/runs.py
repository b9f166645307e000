"""The runs the supervisor holds in memory: their state, their tree, their status changes.

Why in memory: every decision reads what it needs from here, never from the store. The store
is written (``store.writes``) but only read by the actor, which hands the core what it could
not know (a restore's snapshot, the mail a restarted run already sent, the record of a run it
does not hold). A finished tree is forgotten once nothing in it is live (``prune``), so
memory follows the live runs, not the history.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence, Set
from dataclasses import dataclass, field
from typing import Any

import msgspec

from subagents.definitions.spec import AgentSpec
from subagents.messages import (
    Checkpoint,
    CheckpointDelta,
    EventKind,
    JournalEntry,
    Mail,
    Outcome,
    Placed,
    Preview,
    RunRecord,
    RunStatus,
    Usage,
)
from subagents.store.writes import AddToCheckpoint, SaveRun
from subagents.supervision.admission_checks import Standing
from subagents.supervision.effects import Decided
from subagents.supervision.spawn_rules import DepthBound
from subagents.supervision.transitions import Move, next_status
from subagents.supervision.tree import RunTree


@dataclass(frozen=True)
class ResumeReads:
    """What a resumed run's earlier starts did, read from the store for its start: its mail
    so far, a function agent's journal, and (from a restore) its root's tree."""

    mails: Sequence[Mail] = ()
    journal: Sequence[JournalEntry] = ()
    tree: Sequence[RunRecord] | None = None
    deadline: float | None = None
    """The deadline its start keeps (a run moved off a lost host: a move does not lengthen
    its timeout); None: its timeout runs from the start."""


@dataclass(eq=False, slots=True)
class RunState:
    """What the supervisor knows of a live (or just finished) run. (Slotted: no ``__dict__``,
    one object less per live run for the cyclic GC to walk.)"""

    record: RunRecord
    spec: AgentSpec
    request_id: str | None
    deadline: float = 0.0
    """When it times out, on the monotonic clock (set at each start)."""
    inbox: dict[str, Mail] = field(default_factory=dict)
    """Its unread mail by id, in arrival order: delivered to its agent (``delivered``), or
    kept for it while it is queued (``accepted``, handed over when it starts)."""
    checkpoint: Checkpoint | None = None
    """The conversation its next start begins with (inherited messages, or ``saved``)."""
    saved: Checkpoint | None = None
    """The last checkpoint the store keeps for it (what a resume starts from)."""
    attempt: int = 0
    """How many times this run was started in this process (restarts included)."""
    over: int = 0
    """The number of its start a restart or a retry ended (``RunTable.update``): until its
    next start, what that start still reports is discarded (``reporting``)."""
    resumes: bool = False
    """This start continues an earlier one (after a crash or a restart)."""
    from_scratch: bool = False
    """The next start begins anew (a retry), ignoring what earlier starts did."""
    park: str | None = None
    """Parking (``parking``): None, "asked", "parked" or "wanting"."""
    preview: Preview | None = None
    """What its model has streamed of the step under way, as the store keeps it
    (``progress``); None when it is not streaming."""
    last_tool: tuple[str, dict[str, Any]] | None = None
    """The last tool it called and the input's summary (``ToolCalled``), for its status."""
    reads: ResumeReads | None = None
    """What a resume that waits for a slot will be handed when it starts: read by the
    actor when it was due (a restore's snapshot, a restart's or a move's mail and journal).
    Set only while the run has no agent (its start is still to come)."""
    run_id: str = field(init=False)
    """Its record's ``run_id``, which never changes: kept as a field (a property read it
    through the record ~10 times per decision on the hottest paths)."""
    parent_id: str | None = field(init=False)
    root_id: str = field(init=False)
    depth: int = field(init=False)
    """Its place in the tree (its record's, which never change): the ``RunTree`` of its
    table reads them here, so a run held is in the tree without an entry of its own there."""

    def __post_init__(self) -> None:
        record = self.record
        self.run_id = record.run_id
        self.parent_id = record.parent_run_id
        self.root_id = record.root_run_id
        self.depth = record.depth

    def between_starts(self) -> bool:
        """A restart or a retry ended its start, and the next has not begun (``over``)."""
        return self.over != 0 and self.over == self.attempt

    def add_to_checkpoint(self, delta: CheckpointDelta) -> AddToCheckpoint | None:
        """One tool call's change to the run's checkpoint: applied here; the write of it as
        a small row (not the whole checkpoint again: a long turn would cost quadratic
        writes), or None when it changed nothing (or the run keeps none)."""
        cp = self.checkpoint
        if cp is None:
            return None
        changed = cp.with_delta(delta)
        if changed is cp:
            return None
        self.checkpoint = self.saved = changed
        return AddToCheckpoint(delta)


class RunTable:
    """The runs in memory by id, their tree, and the one way to change a run's record."""

    def __init__(self) -> None:
        self._runs: dict[str, RunState] = {}
        """A run's one record here: its tree reads the runs' places from it (``RunTree``),
        so forgetting a run is one pop."""
        self.tree = RunTree(self._runs)
        self.generation = 0
        """Bumped whenever a run is added, ends or is forgotten: what a mail address
        resolves to can change only then (the mail room caches resolutions per
        generation)."""
        self.ended_roots: list[str] = []
        """Roots that ended since the last ``prune``."""
        self._live: set[str] = set()
        """The ids of the held runs that have not ended, kept as their statuses change, not
        rebuilt by a scan of every held run (100,000 waiting runs: ~10 ms), as each ask for
        them did (the store's command poll, every half second, asked for them until it took
        every held run's commands: ``held``)."""
        self._admitted: dict[str, int] = {}
        """How many runs each held root's tree has admitted, ended ones included
        (``max_runs_per_tree``): counted at admission, recounted from the store on a
        restore, dropped with the tree."""
        self.spent_before: dict[str, Usage] = {}
        """What the ended, not held, descendants of a restored run with a budget spent
        (``restored_spend``): set by a restore, taken when its budget is rebuilt."""

    # ---- reading -------------------------------------------------------------------------

    def __contains__(self, run_id: object) -> bool:
        return run_id in self._runs

    def __iter__(self) -> Iterator[RunState]:
        return iter(list(self._runs.values()))

    def get(self, run_id: str | None) -> RunState | None:
        return self._runs.get(run_id) if run_id is not None else None

    def live(self, run_id: str | None) -> RunState | None:
        """The run if it is held and has not ended."""
        state = self._runs.get(run_id) if run_id is not None else None
        if state is None or state.record.status.terminal:
            return None
        return state

    def reporting(self, run_id: str, attempt: int) -> RunState | None:
        """The live run a report is from, or None when the run ended or the report comes
        from an earlier start of it (a restarted run's old actor may still be working; a
        run waiting for a slot to start again, ``reads``, or for its restart's backoff to
        end, ``over``, has no agent of its own yet, so whatever is reported in its name
        comes from a start that is over)."""
        state = self.live(run_id)
        if state is None or state.reads is not None or (attempt and attempt != state.attempt):
            return None
        if state.between_starts():
            return None
        return state

    def answers(self, run_id: str, attempt: int) -> bool:
        """Whether a reply to what start ``attempt`` of ``run_id`` asked (a spawn, a mail, a
        stop) is told to the run: not once a later start of it has begun. A reply is
        addressed by run id and a restart keeps the run's call keys (``run_id:N``): told, the
        refusal of the old start's request would settle the new start's call with the same
        key. The old start's actor was stopped by then (at the latest as the new one
        started; a ``fail_parent`` restart stops it with the decision): it reads nothing
        more. Before the next start (a backoff) the reply is told, to a run that has no
        agent: nobody receives it. (0: not from a start, e.g. a message made without one.
        A request of bad types is answered as ever: its refusal names what was wrong.)"""
        if type(run_id) is not str or type(attempt) is not int:
            return True
        state = self._runs.get(run_id)
        return state is None or attempt >= state.attempt or not attempt

    def hosted(self) -> Set[str]:
        """The ids of the live runs held here: a read-only view, current until the next
        change (copy it to keep it)."""
        return self._live

    def held(self) -> Set[str]:
        """The ids of every run held here: the live ones, and the ended ones of a tree not
        forgotten yet (something in it is live): a read-only view, current until the next
        change."""
        return self._runs.keys()

    def ancestors(self, state: RunState) -> tuple[DepthBound, ...]:
        """``state``'s ancestors whose definitions set ``maxDepth``, root first: each bounds
        the levels below it (``SpawnRules``). A live run's ancestors are all here (a tree is
        forgotten only once nothing in it is live; a restart cancels a run whose parent
        ended)."""
        chain: list[DepthBound] = []
        above = self._runs.get(state.record.parent_run_id or "")
        while above is not None:
            if above.spec.max_depth is not None:
                chain.append(DepthBound.of(above.spec, above.record.depth))
            above = self._runs.get(above.record.parent_run_id or "")
        chain.reverse()
        return tuple(chain)

    def tree_runs(self, root_run_id: str) -> int:
        """How many runs the tree of ``root_run_id`` has admitted (restarts count once)."""
        return self._admitted.get(root_run_id, 0)

    def standing(self, state: RunState) -> Standing:
        """What ``state``'s offer reads of this table, copied for its start (``StartRun``).
        A root has no ancestors: only its tree's count is read (most runs are roots)."""
        if state.record.parent_run_id is None:
            return Standing(tree_runs=self._admitted.get(state.record.root_run_id, 0))
        return Standing(
            ancestors=self.ancestors(state), tree_runs=self.tree_runs(state.record.root_run_id)
        )

    def tree_records(self, root_run_id: str) -> list[RunRecord]:
        """The records of the runs of ``root_run_id``'s tree held here."""
        return [s.record for r in self.tree.in_root(root_run_id) if (s := self._runs.get(r))]

    # ---- changing ------------------------------------------------------------------------

    def add(self, state: RunState) -> None:
        self._runs[state.run_id] = state
        if state.parent_id is not None:  # (a root is in the tree by being held)
            self.tree.add(state.run_id, state.parent_id)
        self.generation += 1
        if state.record.status.terminal:
            self._live.discard(state.run_id)
        else:
            self._live.add(state.run_id)

    def admitted(self, state: RunState) -> None:
        """``state`` was just admitted: one run more in its tree."""
        root = state.record.root_run_id
        self._admitted[root] = self._admitted.get(root, 0) + 1

    def recount(self, root_run_id: str, runs: int) -> None:
        """A restored tree has admitted ``runs`` runs (the store's records of it); a count
        already held is kept if higher."""
        self._admitted[root_run_id] = max(runs, self._admitted.get(root_run_id, 0))

    def update(self, state: RunState, **changes: Any) -> SaveRun:
        """Change ``state``'s record (anything but its status: ``fire``); the write that
        has the store keep it, for the caller to add to its decision."""
        if "status" in changes:
            raise ValueError(
                f"run {state.run_id}: a status changes only by a move of the lifecycle table"
                " (RunTable.fire)"
            )
        state.record = msgspec.structs.replace(state.record, **changes)
        if "restarts" in changes or "retries" in changes:
            # a restart or a retry was decided: the start under way is over, though its
            # thread may still work (a parent failed by its child); its store record is
            # refused by the same counts (``store.writes.AttemptFence``)
            state.over = state.attempt
        return SaveRun(state.record)

    def fire(self, state: RunState, move: Move, **changes: Any) -> SaveRun:
        """``move`` happened to ``state``'s run: it takes the status the lifecycle table
        (``transitions.LIFECYCLE``) gives, with ``changes`` to the rest of its record; the
        one write that has the store keep it, for the caller to add to its decision.
        ``IllegalTransition``, with nothing changed, for a move the table has no entry for
        from its status. A run's start and end change their fields through ``fire_started``
        and ``fire_ended``: the same move with its fields by name (a ``**`` splat into
        ``structs.replace`` costs about four times the replace; the hot moves skip it)."""
        status = next_status(state.run_id, state.record.status, move)
        if changes:
            record = msgspec.structs.replace(state.record, status=status, **changes)
        else:  # (waiting, working: the move alone)
            record = msgspec.structs.replace(state.record, status=status)
        return self._moved(state, record)

    def fire_started(
        self, state: RunState, move: Move, started_at: float, answered_by: str | None
    ) -> SaveRun:
        """``fire`` for a start: ``move`` with the run's first start time and who answers
        its asks. (``_moved`` written out here and in ``fire_ended``: a call each, on every
        run's start and end.)"""
        status = next_status(state.run_id, state.record.status, move)
        record = state.record = msgspec.structs.replace(
            state.record, status=status, started_at=started_at, answered_by=answered_by
        )
        if status.terminal:
            self._live.discard(state.run_id)
        else:
            self._live.add(state.run_id)
        return SaveRun(record)

    def fire_ended(
        self, state: RunState, status: RunStatus, ended_at: float, outcome: Outcome
    ) -> SaveRun:
        """``fire`` for an end: to ``status``, the one its move gives (``next_status``: its
        caller's, made before any change), with the run's end time and its outcome."""
        record = state.record = msgspec.structs.replace(
            state.record, status=status, ended_at=ended_at, outcome=outcome
        )
        if status.terminal:
            self._live.discard(state.run_id)
        else:
            self._live.add(state.run_id)
        return SaveRun(record)

    def _moved(self, state: RunState, record: RunRecord) -> SaveRun:
        """``record``, with its new status, is ``state``'s now; the write that keeps it."""
        state.record = record
        if record.status.terminal:
            self._live.discard(state.run_id)
        else:
            self._live.add(state.run_id)
        return SaveRun(record)

    def placed(self, message: Placed, now: Callable[[], float]) -> Decided:
        """A cluster placed the start ``message.attempt`` of its run on ``message.node``: on
        the run's record, and an event (at ``now()``). Word about an earlier start, or an
        ended run, is dropped (nothing decided)."""
        decided = Decided()
        node, address, attempt = message.node, message.address, message.attempt
        state = self.reporting(message.run_id, attempt)
        if state is None:
            return decided
        if state.record.node != node:
            decided.writes.append(self.update(state, node=node))
        data = {"node": node, "address": address, "attempt": attempt}
        decided.event(EventKind.PLACED, state.record, now(), data)
        return decided

    def ended(self, state: RunState) -> None:
        """``state`` has just ended: addresses may resolve differently; a root's tree can
        be forgotten once nothing in it is live."""
        self.generation += 1
        if state.record.parent_run_id is None:
            self.ended_roots.append(state.run_id)
        else:
            # a run that outlived its root (a detached one, or below one): its end may be
            # what the root's tree waited for to be forgotten
            root = self._runs.get(state.record.root_run_id)
            if root is not None and root.record.status.terminal:
                self.ended_roots.append(root.run_id)

    def forget_all(self) -> list[str]:
        """Forget every held run, none of which is live any more (the runtime closed them
        all, ``closing.close_all``): what ``prune`` would forget, tree by tree, once it had
        been told of each end; the ids forgotten."""
        if self._live:
            raise ValueError(f"{len(self._live)} held runs are still live: nothing forgotten")
        forgotten = list(self._runs)
        self._runs.clear()
        self.tree = RunTree(self._runs)
        self.ended_roots.clear()
        self._admitted.clear()
        self.spent_before.clear()
        self.generation += 1
        return forgotten

    def forget(self, run_ids: Collection[str]) -> None:
        """Forget ``run_ids``, live or not, as if never held: runs a restore took up whose
        takeover the store did not keep (``Recovery.untake``)."""
        if not run_ids:
            return
        self.tree.forget(list(run_ids))
        for run_id in run_ids:
            state = self._runs.pop(run_id, None)
            self._live.discard(run_id)
            self.spent_before.pop(run_id, None)
            if state is not None and state.record.parent_run_id is None:
                self._admitted.pop(run_id, None)
        self.ended_roots = [r for r in self.ended_roots if r not in run_ids]
        self.generation += 1

    def prune(self) -> list[str]:
        """Forget the trees of ended roots in which nothing is live; the ids forgotten.
        Their records live on in the store. A run's tree place and state are its one
        record here (``RunState``): a tree of one run is one pop."""
        forgotten: list[str] = []
        runs, live, parents = self._runs, self._live, self.tree.parents
        while self.ended_roots:
            root = self.ended_roots.pop()
            if root not in parents:  # most trees: one run
                if root in live:
                    continue
                ids = [root]
            else:
                ids = self.tree.subtree(root)
                if any(r in live for r in ids):
                    continue
                self.tree.forget(ids)  # (it reads their places: before they are dropped)
            self._admitted.pop(root, None)
            for r in ids:
                runs.pop(r, None)
            forgotten += ids
        if forgotten:
            self.generation += 1
        return forgotten
