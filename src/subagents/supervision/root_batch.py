"""A batch's plain roots of one definition admitted in batch steps (``spawn_many``).

``Admission.spawn_all`` admits a batch's requests in order, each by ``Admission.admit``. For
a run of consecutive roots of a definition already found in the batch (``_vetted``), asking
nothing of the policies (no budget, retries, failure mode or shared keys of their own) and
all fitting the slots free now with nobody queued, most of what ``admit`` works out is the
same for each: the definition's slot key and policy, that the run starts at once, that no
queued run is behind its key, the clocks of the decision. This part works those out once for
the run of requests, then admits each in a few calls:

- the checks that can answer differently for each (``root_sibling_refusal``: its fields
  unless the runtime checked them, its run id): a refusal per request, as ever;
- its policy entry (unlimited, the definition's policy: granted once, entered per run);
- its record made started (``Admission._record``'s ``started``), not made queued and
  replaced by its start (``Starts.start``), its deadline from the batch's clock;
- its events (``spawned`` before ``started``), its write and its start's effects, in the
  order ``admit`` + ``Starts.start`` make them;
- the slots: how many fit is read once (``room``), and the admitted runs' counts taken at
  once at the end (``take_many``), as as many ``SlotPool.try_take``s would leave them.

Kept from ``admit``: a bug in one request fails it alone (``Admission._failed``: the runs
before it are kept, the rest of the batch goes the general way), every run's record and
events as a reader sees them, the limits (only as many as fit are taken here; the rest queue
the general way). ``tests/supervision/test_root_batch.py`` admits the same requests as one
batch and one by one and compares records, events, slots and refusals.

Why: a ``spawn_many`` of 1,000 waiting roots spent ~123k instructions of decisions per run,
~100 Python calls spread over ~25 functions (benchmarks/README.md, "Session 28 (e-many20)"):
no one part large enough to cut, only the calls done once per batch instead of per run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import msgspec

from subagents.definitions.spec import AgentSpec
from subagents.logs import get_logger
from subagents.messages import (
    EventKind,
    RunRecord,
    RunStatus,
    SpawnReply,
    SpawnRequest,
    new_id,
)
from subagents.store.writes import SaveRun
from subagents.supervision.admission_checks import Proposal, root_sibling_refusal
from subagents.supervision.effects import ArmDeadline, Decided, StartRun, TellOutside
from subagents.supervision.ledger import TableLedger
from subagents.supervision.lifecycle import Lifecycle
from subagents.supervision.limits import Limits
from subagents.supervision.parking import Parking
from subagents.supervision.policy_book import PolicyBook, PolicyFields
from subagents.supervision.policy_settings import Policy, PolicyError, policy_of
from subagents.supervision.requests import CheckedRoots
from subagents.supervision.run_entry import UNLIMITED, RunEntry
from subagents.supervision.runs import RunState, RunTable
from subagents.supervision.slots import SlotKey, SlotPool


class Admission(Protocol):
    """What of ``admission.Admission`` this part reads (named here, not imported: the
    admission imports this module)."""

    limits: Limits
    closing: bool
    parking: Parking
    slots: SlotPool
    runs: RunTable
    checked: CheckedRoots
    ledger: TableLedger
    policies: PolicyBook
    lifecycle: Lifecycle
    now: Callable[[], float]

    def _record(
        self,
        req: SpawnRequest,
        spec: AgentSpec,
        parent: RunState | None,
        run_id: str,
        now: float,
        policy_fields: PolicyFields,
        started: tuple[RunStatus, float | None, str | None] = ...,
    ) -> RunRecord: ...

    def _failed(
        self, req: SpawnRequest, exc: Exception, held: bool
    ) -> tuple[SpawnReply, Decided]: ...


log = get_logger("subagents.supervisor")

_SPAWNED, _STARTED_EVENT = EventKind.SPAWNED, EventKind.STARTED
_RUNNING, _QUEUED = RunStatus.RUNNING, RunStatus.QUEUED


def plain_root(req: SpawnRequest, agent: str, attempt: int) -> bool:
    """Whether ``req`` is a root of ``agent`` (from ``attempt``) that asks the policies
    nothing of its own (what ``PolicyBook.admit`` would grant it is its definition's alone)
    and continues no run."""
    return (
        req.parent_run_id is None
        and req.agent == agent
        and req.attempt == attempt
        and req.continues is None
        and req.max_retries is None
        and req.on_failure is None
        and not req.share
        and not req.shared
        and req.token_budget is None
        and req.cost_budget_usd is None
    )


def room(slots: SlotPool, key: SlotKey) -> int:
    """How many runs of a root's ``key`` would take a slot now, one after another (each
    ``SlotPool.try_take`` true): none while anybody is queued or wants a slot back."""
    queued, resumes = slots.waiting[1], slots.waiting[0]
    if queued or resumes or key.parent is not None:
        return 0
    free = min(slots.global_limit - slots.in_flight, key.agent_limit - slots.by_agent[key.agent])
    if key.tier is not None and (tier_limit := slots.per_tier.get(key.tier)) is not None:
        free = min(free, tier_limit - slots.by_tier[key.tier])
    return max(free, 0)


def take_many(slots: SlotPool, run_ids: list[str], key: SlotKey) -> None:
    """A slot for each of ``run_ids`` (no more than ``room``), taken at once."""
    if run_ids:
        slots.take_each(run_ids, key)


class _Batch(msgspec.Struct):
    """What every run of the batch's stretch shares, worked out once (``_stretch``)."""

    spec: AgentSpec
    policy: Policy
    key: SlotKey
    end: int
    now: float
    deadline_base: float
    started: tuple[RunStatus, float | None, str | None]


def admit_roots(
    adm: Admission,
    reqs: Sequence[SpawnRequest],
    first: int,
    vetted: Mapping[tuple[str | None, int, str], tuple[AgentSpec, RunState | None]],
    into: Decided,
) -> tuple[int, list[SpawnReply]]:
    """Admit ``reqs[first:]`` while they are plain roots (``plain_root``) of a definition
    found before in the batch (``vetted``) that start now, into ``into``: where the general
    way takes up again, and their replies (none when this way cannot take even the first:
    the caller admits it the general way)."""
    batch = _stretch(adm, reqs, first, vetted)
    if batch is None:
        return first, []
    replies: list[SpawnReply] = []
    admitted: list[str] = []
    i = first
    try:
        while i < batch.end:
            req = reqs[i]
            i += 1
            held = adm.runs.generation
            try:  # (its checks too: a bug in one fails it alone, as in ``spawn_all``)
                reply = _admit(adm, req, batch, into)
            except Exception as exc:  # a bug: this request alone fails (``_failed``)
                # (the slots of those admitted before it taken before its end is decided)
                take_many(adm.slots, admitted, batch.key)
                admitted = []
                reply, failed = adm._failed(req, exc, held != adm.runs.generation)
                replies.append(reply)
                into.add(failed)
                return i, replies
            if reply.run_id is not None:
                admitted.append(reply.run_id)
            replies.append(reply)
    finally:
        take_many(adm.slots, admitted, batch.key)
    return batch.end, replies


def _stretch(
    adm: Admission,
    reqs: Sequence[SpawnRequest],
    first: int,
    vetted: Mapping[tuple[str | None, int, str], tuple[AgentSpec, RunState | None]],
) -> _Batch | None:
    """What the stretch of plain roots from ``reqs[first]`` shares, or None: none (its
    definition not found before, a budget or bad policy setting in play, no slot free)."""
    head = reqs[first]
    agent, attempt = head.agent, head.attempt
    if adm.closing or type(agent) is not str or type(attempt) is not int:
        return None
    found = vetted.get((None, attempt, agent))
    if found is None:
        return None
    spec = found[0]
    if adm.limits.token_budget is not None or spec.token_budget is not None:
        return None
    try:
        policy = policy_of(spec)
    except PolicyError:  # (each request refused the general way, naming the setting)
        return None
    if policy.cost_budget_usd is not None:
        return None
    key = adm.parking.slot_key(spec, None)
    end, stop = first, min(len(reqs), first + room(adm.slots, key))
    while end < stop and plain_root(reqs[end], agent, attempt):
        end += 1
    if end == first:
        return None
    starts = adm.lifecycle.starts
    now = adm.now()  # the batch's wall clock, read before its monotonic one: no run's
    deadline_base = starts.clock()  # deadline comes before its started_at + its timeout
    started = (_RUNNING, now, starts.answered_by)
    return _Batch(spec, policy, key, end, now, deadline_base, started)


def _admit(adm: Admission, req: SpawnRequest, batch: _Batch, into: Decided) -> SpawnReply:
    """One plain root of the batch admitted and started (or refused), into ``into``, in
    the order ``Admission.admit`` and ``Starts.start`` decide a run that starts at once."""
    checked, spec, now = adm.checked, batch.spec, batch.now
    fields_checked = bool(checked.requests) and checked.take(req)
    refusal = root_sibling_refusal(Proposal(req, spec, None), adm.ledger, fields_checked)
    if refusal is not None:
        return _refused(req, refusal.reason, into)
    run_id = req.run_id or new_id("r", now)
    policy = batch.policy
    entry = RunEntry(policy=policy, max_retries=policy.max_retries, budget=UNLIMITED)
    adm.policies.entries[run_id] = entry
    try:
        fields = PolicyFields(None, None, policy.on_failure, {}, None)
        record = adm._record(req, spec, None, run_id, now, fields, batch.started)
        state = RunState(record=record, spec=spec, request_id=req.request_id)
    except BaseException:  # (not held: its policy entry given back, as ``admit`` does)
        adm.policies.forget([run_id])
        raise
    state.attempt = 1
    state.deadline = deadline = batch.deadline_base + record.deadline_s
    runs = adm.runs
    runs.add(state)
    try:
        runs.admitted(state)
        if spec.topics:
            into.add(adm.lifecycle.mail.topics.join(run_id, run_id, spec.topics))
        data: dict[str, Any] = {"task": req.task[:200], "background": record.background}
        if record.detached:  # (refused by its fields, unless filed as checked)
            data["detached"] = True
        into.event(_SPAWNED, record, now, data)
        into.writes.append(SaveRun(record))
        standing = runs.standing(state)  # (nobody queued behind it: ``room``)
        into.effects.append(
            StartRun(record=record, spec=spec, deadline=deadline, attempt=1, standing=standing)
        )
        into.effects.append(ArmDeadline(run_id, deadline))
        into.event(_STARTED_EVENT, record, now, {"model": record.model, "resumed": False})
    except BaseException:  # held, not started: as ``admit`` leaves it when it raises before
        state.attempt, state.deadline = 0, 0.0  # its start (``Admission._failed`` ends it)
        state.record = msgspec.structs.replace(
            record, status=_QUEUED, started_at=None, answered_by=None
        )
        # what it decided is lost, as ``admit``'s own ``Decided`` is (no write, no start
        # of a run that ends failed): the last items here, each of its run
        for items in (into.writes, into.effects):
            while items and _run_of(items[-1]) == run_id:
                items.pop()
        raise
    return SpawnReply(request_id=req.request_id, run_id=run_id)


def _run_of(item: object) -> object:
    """The run a write or an effect made by ``_admit`` is of (only after a bug)."""
    for part in ("record", "event", "subscription"):
        inner = getattr(item, part, None)
        if inner is not None:
            return getattr(inner, "run_id", None)
    return getattr(item, "run_id", None)


def _refused(req: SpawnRequest, reason: str, into: Decided) -> SpawnReply:
    """A root's refusal, as ``Admission.spawn`` answers one (told to the outside)."""
    reply = SpawnReply(request_id=req.request_id, error=reason)
    log.info("spawn refused", agent=req.agent, parent_run_id=None, reason=reason)
    into.effects.append(TellOutside(reply))
    return reply
