"""Admission: whether a spawn becomes a run, and whether it starts now or waits in the queue.

In order: the checks (``admission_checks.CHECKS``: the request itself, the agent, the
requester (live), the spawn rule, depth, ``max_runs_per_tree``, the run id), read over the
supervisor's tables (``ledger.TableLedger``); then the policies and budget (``policy_book``:
they refuse and register at once, so they come after every check); then a concurrency slot
(``slots``, every scope including the parent's children): the run starts at once, or waits in
the FIFO queue (a waiting run lends it a slot: ``parking``), or is refused only when the
queue is at its bound. Rules refuse; concurrency limits queue.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from subagents.definitions.spec import AgentSpec
from subagents.logs import get_logger
from subagents.messages import (
    Checkpoint,
    EventKind,
    RunRecord,
    RunStatus,
    SpawnReply,
    SpawnRequest,
    new_id,
)
from subagents.store.writes import SaveCheckpoint, SaveRun
from subagents.supervision import continuation
from subagents.supervision.admission_checks import (
    Proposal,
    refusal_of,
    root_sibling_refusal,
    sibling_refusal,
)
from subagents.supervision.ceilings import root_ceiling
from subagents.supervision.child_ceilings import ChildCeilings
from subagents.supervision.effects import Decided, Tell, TellOutside
from subagents.supervision.ledger import TableLedger
from subagents.supervision.lifecycle import Lifecycle
from subagents.supervision.limits import Limits
from subagents.supervision.outcomes import End
from subagents.supervision.parking import Parking
from subagents.supervision.policy_book import PolicyBook, PolicyFields, PolicyRefused
from subagents.supervision.requests import CheckedRoots
from subagents.supervision.root_batch import admit_roots
from subagents.supervision.runs import RunState, RunTable
from subagents.supervision.slots import QueueFull, SlotPool
from subagents.supervision.spawn_rules import SpawnRules
from subagents.supervision.transitions import Move

log = get_logger("subagents.supervisor")


class AdmissionError(Exception):
    """A spawn was refused; the message says why."""


CLOSING = "the runtime is closing: no run is admitted once its close has begun"
"""Why a spawn that reaches the supervisor after the close's ``StopAll`` is refused."""

_QUEUED, _SPAWNED, _QUEUED_EVENT = RunStatus.QUEUED, EventKind.SPAWNED, EventKind.QUEUED
NOT_STARTED = (_QUEUED, None, None)  # a record's status, start, answering model (``_record``)
"""Read on every admission (the last on every queued one): an enum's member read through its
class costs Python 3.11's ``EnumType.__getattr__`` slot, ~1.1k instructions (``starts``), a
module's name ~0.1k."""


class Admission:
    """Admits, queues or refuses spawns; holds the concurrency slots and the queue."""

    def __init__(
        self,
        runs: RunTable,
        now: Callable[[], float],
        lifecycle: Lifecycle,
        policies: PolicyBook,
        slots: SlotPool,
        parking: Parking,
        *,
        limits: Limits,
        lookup: Callable[[str], AgentSpec | None],
        names: Callable[[], list[str]],
        default_model: str,
        owner: str,
        runtime_mode: str | None = None,
    ) -> None:
        self.runs = runs
        self.now = now
        self.lifecycle = lifecycle
        self.policies = policies
        self.slots = slots
        self.parking = parking
        self.rules = SpawnRules(limits)
        self.ceilings = ChildCeilings()  # a step's children share their parent's
        self.ledger = TableLedger(runs, self.rules, names)
        self.limits = limits
        self.lookup = lookup
        self.names = names
        self.default_model = default_model
        self.owner = owner
        self.runtime_mode = runtime_mode
        """The runtime's permission mode, kept in each root's ceiling (``root_ceiling``)."""
        self._root_ceiling = root_ceiling(runtime_mode, owner)
        """Every root's ceiling, the same for each (made once, not per spawn)."""
        self._default_timeout = limits.timeout_for()
        """A run's timeout when neither its request nor its definition sets one (most)."""
        self.checked = CheckedRoots(limits)
        """The root requests the runtime checked before telling them (``RootRuns``)."""
        self._vetted: (
            dict[tuple[str | None, int, str], tuple[AgentSpec, RunState | None]] | None
        ) = None
        """While ``spawn_all`` admits a batch: the requesters and agents (parent run id, None
        for a root; attempt, agent name) that passed every check in it, with the definition
        and the requester found; a sibling of theirs is asked only ``SIBLING_CHECKS``, a
        root of an agent found before only ``ROOT_SIBLING_CHECKS`` (``spawn_many``'s
        1,000 roots of one agent look it up once)."""
        self.closing = False
        """The runtime's close has cancelled every run (``SupervisorCore.stop_all``): what
        reaches the supervisor after it (a spawn told by a thread that passed the runtime's
        open check before the close) is refused, else its run would start after the close
        and stay unfinished in the store, for the next runtime to take up and run again."""

    def spawn_all(self, reqs: Sequence[SpawnRequest]) -> tuple[list[SpawnReply], Decided]:
        """``spawn`` each of ``reqs`` in order (a run admitted earlier counts against the
        limits of the later ones): their replies, and what admitting them comes to."""
        decided = Decided()
        replies: list[SpawnReply] = []
        self._vetted = {}
        try:
            runs = self.runs
            vetted = self._vetted
            i, count = 0, len(reqs)
            while i < count:
                req = reqs[i]
                if vetted and req.parent_run_id is None:  # (``root_batch``: in batch steps)
                    i, batched = admit_roots(self, reqs, i, vetted, decided)
                    if batched:
                        replies += batched
                        vetted = self._vetted
                        continue
                i += 1
                held = runs.generation  # (it changes when a run is held: ``_failed``)
                try:
                    reply, admitted = self.spawn(req)
                except Exception as exc:  # a bug, not a refusal: this request alone fails
                    reply, admitted = self._failed(req, exc, held != runs.generation)
                    vetted = self._vetted  # (made anew by ``_failed``)
                replies.append(reply)
                decided.add(admitted)
        finally:
            self._vetted = None
        return replies, decided

    def _failed(self, req: SpawnRequest, exc: Exception, held: bool) -> tuple[SpawnReply, Decided]:
        """A request of a batch whose admission raised (a bug, not a refusal): answered with
        the error as a refusal is (to its requesting run, or to the outside), so that the
        batch's other runs are still decided, written and answered. Before, the exception
        lost the whole decision, while the runs admitted before it in the batch stayed in
        memory, never written nor started nor answered, holding their slots. If it raised
        once its own run was held (``runs.add``: ``held``, the run table changed), that run
        is admitted and ends failed at once, with the error (recorded so, its slot freed):
        memory keeps no run the store has not. In a batch, what was vetted before is not
        reused for the rest (its run's end may have ended its requester, ``fail_parent``,
        or made it go again)."""
        log.exception("spawn failed", agent=req.agent, parent_run_id=req.parent_run_id)
        if self._vetted is not None:
            self._vetted = {}
        why = f"the supervisor could not handle this request: {type(exc).__name__}: {exc}"
        decided = Decided()
        left = self._left_by(req) if held else None
        if left is not None:
            try:
                ended = self.lifecycle.finish(left, End(Move.FAILED, "supervisor", why))
            except Exception:  # (left as it was: answered with the error, below)
                log.exception("a run left by a failed spawn could not be ended")
            else:
                reply = SpawnReply(request_id=req.request_id, run_id=left.run_id)
                # (its ``spawned`` was in the decision lost with the error: said before
                # its end, as for every run, not a run ending that was never begun)
                spawned = {"task": left.record.task[:200], "background": left.record.background}
                decided.event(EventKind.SPAWNED, left.record, self.now(), spawned)
                if req.parent_run_id is not None:  # (its reply before its end)
                    decided.effects.append(Tell(req.parent_run_id, reply))
                decided.add(ended)
                return reply, decided
        reply = SpawnReply(request_id=req.request_id, error=why)
        if req.parent_run_id is None:
            decided.effects.append(TellOutside(reply))
        else:
            decided.effects.append(Tell(req.parent_run_id, reply))
        return reply, decided

    def spawn_one(
        self, req: SpawnRequest, continued: continuation.Continued | None = None
    ) -> tuple[SpawnReply, Decided]:
        """``spawn`` of a request decided alone (a root told with none behind it, a step's
        one spawn, a continuation): answered as a batch's is when its admission raises
        (``_failed``), so that no run is left held that the store has not."""
        runs = self.runs
        held = runs.generation
        try:
            return self.spawn(req, continued)
        except Exception as exc:  # a bug, not a refusal
            return self._failed(req, exc, held != runs.generation)

    def _left_by(self, req: SpawnRequest) -> RunState | None:
        """The unfinished run a failed admission of ``req`` left held: the last one held
        with its request id and its requester (request ids are the requester's: another
        parent's child may have the same) (a scan of the held runs: only after a bug)."""
        found = None
        for state in self.runs:
            if (
                state.request_id == req.request_id
                and state.record.parent_run_id == req.parent_run_id
                and not state.record.status.terminal
            ):
                found = state
        return found

    def spawn(
        self, req: SpawnRequest, continued: continuation.Continued | None = None
    ) -> tuple[SpawnReply, Decided]:
        """Admit (start or queue) or refuse a run: the reply, and what admitting it comes to.
        The reply goes to a requesting run too, and a refusal to the outside (a root run
        told, not asked, hears of it so). ``continued``: what the store keeps of the run
        ``req.continues`` names."""
        try:
            record, decided = self.admit(req, continued)
            reply = SpawnReply(
                request_id=req.request_id,
                run_id=record.run_id,
                queued=record.status is _QUEUED,
            )
        except AdmissionError as exc:
            decided = Decided()
            reply = SpawnReply(request_id=req.request_id, error=str(exc))
            log.info(
                "spawn refused",
                agent=req.agent,
                parent_run_id=req.parent_run_id,
                reason=str(exc),
            )
            if req.parent_run_id is None:
                decided.effects.append(TellOutside(reply))
        parent_id = req.parent_run_id
        if parent_id is not None and self.runs.answers(parent_id, req.attempt):
            decided.effects.append(Tell(parent_id, reply))
        return reply, decided

    def admit(
        self, req: SpawnRequest, continued: continuation.Continued | None = None
    ) -> tuple[RunRecord, Decided]:
        """Admit ``req``: the run's record as admitting it left it (started, or queued) and
        what admitting it comes to (its record kept, its events, its start if a slot is
        free); or raise ``AdmissionError`` naming the refusal, with nothing decided."""
        if self.closing:
            raise AdmissionError(CLOSING)
        if req.continues is not None:
            continued = self._continued(req.continues, continued)
            req = continuation.with_agent(req, continued)
            why = continuation.refusal(req, continued)
            if why is not None:
                raise AdmissionError(why)
        spec, parent = self._proposed(req)
        if continued is not None and parent is not None:
            why = continuation.outside_tree(continued, parent.record)
            if why is not None:
                raise AdmissionError(why)
        key = self.parking.slot_key(spec, parent)
        now = self.now()
        run_id = req.run_id or new_id("r", now)
        try:  # budget last, as DESIGN.md orders admission; then bad settings, shared keys
            policy_fields = self.policies.admit(req, spec, parent, run_id)
        except PolicyRefused as exc:
            raise AdmissionError(str(exc)) from None
        starts_now = self.slots.try_take(run_id, key)
        try:
            position = 0 if starts_now else self.slots.enqueue(run_id, key)
            state, seed = self._state(req, spec, parent, run_id, now, policy_fields, continued)
        except BaseException as exc:  # refused (a full queue), or a bug: before the run is
            self.slots.release(run_id)  # held, what it took is given back (a slot taken
            self.policies.forget([run_id])  # would be held for ever by a run that is not)
            if isinstance(exc, QueueFull):
                raise AdmissionError(str(exc)) from None
            raise
        record = state.record
        self.runs.add(state)
        self.runs.admitted(state)
        decided = Decided()
        if not starts_now:  # one started at once is saved by its start: the started record
            decided.writes.append(SaveRun(record))
        if spec.topics:  # its definition's: from its admission (mail while it queues waits)
            decided.add(self.lifecycle.mail.topics.join(run_id, record.root_run_id, spec.topics))
        if seed is not None:  # durable with the record: a resume before a step has it
            decided.writes.append(SaveCheckpoint(seed))
        # a root's ceiling is the runtime's own grant: it narrows nothing (``ceilings``)
        narrowing = self.ceilings.narrowed(spec, record.ceiling) if parent is not None else None
        data: dict[str, Any] = {"task": req.task[:200], "background": record.background}
        if record.detached:
            data["detached"] = True
        if narrowing is not None:
            data["permissions"] = narrowing
        decided.event(_SPAWNED, record, now, data)  # (the decision's clock read)
        if starts_now:
            self.lifecycle.start(state, into=decided)
        else:
            decided.event(_QUEUED_EVENT, record, now, {"position": position})  # (one clock)
        return state.record, decided

    def _state(
        self,
        req: SpawnRequest,
        spec: AgentSpec,
        parent: RunState | None,
        run_id: str,
        now: float,
        policy_fields: PolicyFields,
        continued: continuation.Continued | None,
    ) -> tuple[RunState, Checkpoint | None]:
        """The state of a run being admitted, not held yet, and the conversation it is
        seeded with when it continues another (None: it does not)."""
        record = self._record(req, spec, parent, run_id, now, policy_fields)
        state = RunState(record=record, spec=spec, request_id=req.request_id)
        state.checkpoint = policy_fields.seed
        seed = None
        if req.continues is not None and continued is not None:
            seed = continuation.conversation(continued, run_id=run_id, text=req.task)
            state.checkpoint = state.saved = self.policies.reseed(run_id, seed)
        return state, seed

    def _continued(
        self, run_id: str, read: continuation.Continued | None
    ) -> continuation.Continued:
        """The run to continue: its record as this runtime holds it (fresher than the
        store's), else as read from the store for this request."""
        held = self.runs.get(run_id)
        if read is None:
            read = continuation.Continued(None)
        if held is not None and (held.saved is not None or read.unreadable is None):
            return continuation.Continued(held.record, held.saved or read.checkpoint)
        return read  # (held without a checkpoint of its own: what the store could not read)

    def _proposed(self, req: SpawnRequest) -> tuple[AgentSpec, RunState | None]:
        """The definition and the live requester ``req`` names, once every check passed.
        In a batch (``spawn_all``), a request whose requester and agent passed every check
        before it in the batch is asked only the checks that may answer differently for it
        (``SIBLING_CHECKS``): within one decision nothing changes the definition found or
        the requester's standing, and the definition read once is the batch's (a reload
        between two lookups of one batch could not split it)."""
        vetted = self._vetted
        key: tuple[str | None, int, str] | None = None
        parent_id = req.parent_run_id
        if (  # the key's parts of their types only: a bad request hashes nothing it holds
            vetted is not None
            and (parent_id is None or isinstance(parent_id, str))
            and isinstance(req.agent, str)
            and type(req.attempt) is int
        ):
            key = (parent_id, req.attempt, req.agent)
            found = vetted.get(key)
            if found is not None:
                if parent_id is None:  # a root of an agent found before in this batch
                    checked = bool(self.checked.requests) and self.checked.take(req)
                    refusal = root_sibling_refusal(Proposal(req, *found), self.ledger, checked)
                else:
                    refusal = sibling_refusal(Proposal(req, *found), self.ledger)
                if refusal is not None:
                    raise AdmissionError(refusal.reason)
                return found
        spec = self.lookup(req.agent) if isinstance(req.agent, str) else None
        parent: RunState | None = None
        checked = False
        if isinstance(req.parent_run_id, str):
            parent = self.runs.reporting(req.parent_run_id, req.attempt)
        elif self.checked.requests:  # (a root the runtime checked: not again)
            checked = self.checked.take(req)
        refusal = refusal_of(Proposal(req, spec, parent), self.ledger, checked)
        if refusal is not None:
            raise AdmissionError(refusal.reason)
        assert spec is not None  # known_agent passed
        if vetted is not None and key is not None and (parent is not None or parent_id is None):
            vetted[key] = (spec, parent)
        return spec, parent

    def _record(
        self,
        req: SpawnRequest,
        spec: AgentSpec,
        parent: RunState | None,
        run_id: str,
        now: float,
        policy_fields: PolicyFields,
        started: tuple[RunStatus, float | None, str | None] = NOT_STARTED,
    ) -> RunRecord:
        """The record of a run just admitted. Made in two calls of at most 15 keywords
        each: CPython 3.11 compiles a call of more (this one had 23) into a dict built
        and unpacked per call, ~8k instructions more per admitted run (callgrind: 15.3k
        for the one call, 7.3k for these two; benchmarks/README.md, session 20).
        ``started`` (running, its start time, who answers its asks): the record of a run
        that starts in its admission's decision, made started (``root_batch``), not queued
        and replaced by its start (``RunTable.fire_started``)."""
        model = req.model or spec.model
        if model in (None, "inherit"):
            model = parent.record.model if parent is not None else None
        record = RunRecord(  # (the fields' order: each keyword found at its first look)
            run_id=run_id,
            agent=spec.name,
            task=req.task,
            root_run_id=parent.record.root_run_id if parent is not None else run_id,
            parent_run_id=req.parent_run_id,
            depth=parent.record.depth + 1 if parent is not None else 0,
            context=req.context,
            label=req.label,
            model=model or self.default_model,
            background=req.background or req.detach,
            created_at=now,
            deadline_s=self._default_timeout
            if req.timeout is None and spec.timeout is None
            else self.limits.timeout_for(req.timeout, spec.timeout),
            # the request's choice, else the definition's, else the parent's (a tree is
            # kept or cleaned as a whole unless a definition says otherwise), else keep
            cleanup=req.cleanup
            or spec.cleanup
            or (parent.record.cleanup if parent is not None else None)
            or "keep",
            request_id=req.request_id,
            owner=self.owner,
        )
        status, started_at, answered_by = started
        return msgspec.structs.replace(
            record,
            status=status,
            started_at=started_at,
            answered_by=answered_by,
            token_budget=policy_fields.token_budget,
            cost_budget_usd=policy_fields.cost_budget_usd,
            on_failure=policy_fields.on_failure,
            shared=policy_fields.shared,
            ceiling=self.ceilings.ceiling(parent.record, parent.spec)
            if parent is not None
            else self._root_ceiling,
            continues=req.continues,
            approvals_in_store=parent.record.approvals_in_store
            if parent is not None
            else req.approvals_in_store,
            detached=req.detach,
        )
