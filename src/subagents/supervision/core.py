"""SupervisorCore: every decision the supervisor makes, as a plain single-threaded class.

The supervisor actor feeds it one message at a time and carries out the effects it returns
(start an agent, tell an agent something, deliver a root outcome, arm or disarm a deadline,
publish an event). Keeping the decisions here means admission, queueing, exactly-once
delivery, mail routing, stops and timeouts are unit tested without threads, and a second
backend could host the same logic.

Invariants kept here:
- a run reaches exactly one terminal status; its outcome is delivered to its requester once
  (late reports for a finished run are discarded);
- every write that one message causes happens inside one ``store.batch()``, before any effect
  that acknowledges it is returned.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import msgspec
import structlog

from subagents.definitions.spec import AgentSpec
from subagents.messages import (
    EXTERNAL_SENDER,
    Checkpoint,
    ChildDone,
    Event,
    EventKind,
    Journal,
    JournalEntry,
    Mail,
    MailAck,
    MailRead,
    MailState,
    Outcome,
    Park,
    Parked,
    RunFinished,
    RunRecord,
    RunStatus,
    SendMail,
    SlotWanted,
    SpawnReply,
    SpawnRequest,
    StepTaken,
    StopReply,
    StopRequest,
    ToolAnswered,
    ToolCalled,
    ToolStarting,
    Unpark,
    Usage,
    WaitingChanged,
    new_id,
)
from subagents.store.base import RunStore
from subagents.supervision.limits import Limits
from subagents.supervision.mailing import MailPost, acks_by_sender, delivery, mail_event_data
from subagents.supervision.policing import PolicyHooks, PolicyRefused, ScheduleRestart
from subagents.supervision.recovery import recovered_messages
from subagents.supervision.requests import mail_problem, request_problem, text_problem
from subagents.supervision.slots import QueueFull, SlotKey, SlotPool
from subagents.supervision.spawn_rules import SpawnRules
from subagents.supervision.tree import RunTree

log = structlog.get_logger("subagents.supervisor")

_STATUS_EVENT = {
    RunStatus.COMPLETED: EventKind.COMPLETED,
    RunStatus.FAILED: EventKind.FAILED,
    RunStatus.CANCELLED: EventKind.CANCELLED,
    RunStatus.TIMED_OUT: EventKind.TIMED_OUT,
    RunStatus.BUDGET_EXCEEDED: EventKind.BUDGET_EXCEEDED,
}


# ---- effects: what the actor must do after a decision ----------------------------------------


@dataclass(frozen=True)
class StartRun:
    record: RunRecord
    spec: AgentSpec
    deadline: float
    pending_mail: tuple[Mail, ...] = ()
    recovered: tuple[Any, ...] = ()
    checkpoint: Checkpoint | None = None
    attempt: int = 1


@dataclass(frozen=True)
class Tell:
    run_id: str
    message: Any


@dataclass(frozen=True)
class DeliverRoot:
    outcome: Outcome


@dataclass(frozen=True)
class StopAgent:
    run_id: str


@dataclass(frozen=True)
class ArmDeadline:
    run_id: str
    deadline: float


@dataclass(frozen=True)
class DisarmDeadline:
    run_id: str


@dataclass(frozen=True)
class Publish:
    event: Event


Effect = (
    StartRun
    | Tell
    | DeliverRoot
    | StopAgent
    | ArmDeadline
    | DisarmDeadline
    | Publish
    | ScheduleRestart
)


@dataclass
class RunState:
    """What the supervisor knows of a live (or just finished) run."""

    record: RunRecord
    spec: AgentSpec
    request_id: str | None
    deadline: float = 0.0
    unread_mail: set[str] = field(default_factory=set)
    checkpoint: Checkpoint | None = None
    attempt: int = 0
    """How many times this run was started in this process (restarts included)."""
    resumes: bool = False
    """This start continues an earlier one (after a crash or a restart)."""
    from_scratch: bool = False
    """The next start begins anew (a retry), ignoring what earlier starts did."""
    started_at_admission: bool = False
    """Admitted in this process and started at once: no mail can wait for it in the store
    (nobody could address it before), so its start and end skip looking (~5 us a run)."""
    park: str | None = None
    """Parking (supervision/slots.py): None, "asked" (told to park, not yet confirmed),
    "parked" (gave its slot back) or "wanting" (parked and queued for a slot again)."""


@dataclass
class RestoreReport:
    """What a restore found: runs resumed, queued again, failed, cancelled; orphaned roots."""

    resumed: list[str] = field(default_factory=list)
    requeued: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    elsewhere: list[str] = field(default_factory=list)
    """Unfinished runs left alone: a live runtime (its lease is alive) hosts them."""
    taken_from: list[str] = field(default_factory=list)
    """The owners whose orphaned runs this restore took over (their leases lapsed)."""


class AdmissionError(Exception):
    """A spawn was refused; the message says why."""


class SupervisorCore(PolicyHooks):
    """Admission, queueing, delivery, mail routing, stops and deadlines."""

    def __init__(
        self,
        *,
        lookup: Callable[[str], AgentSpec | None],
        names: Callable[[], list[str]],
        store: RunStore,
        limits: Limits | None = None,
        default_model: str = "sonnet",
        clock: Callable[[], float] = time.monotonic,
        owner: str | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.lookup = lookup
        self.names = names
        self.store = store
        self.limits = limits or Limits()
        self.default_model = default_model
        self.owner = owner or new_id("o")
        """The id this runtime stamps on the runs it hosts; its lease (``store.leases``) says
        whether it is alive. Given by the Runtime (``host:pid:nonce``)."""
        self.clock = clock
        self.runs: dict[str, RunState] = {}
        self.tree = RunTree()
        self.rules = SpawnRules(self.limits)
        self.slots = SlotPool(
            global_limit=self.limits.max_concurrency,
            per_tier=self.limits.per_tier,
            queue_bound=self.limits.queue_bound,
        )
        self._effects: list[Effect] = []
        self._ended_roots: list[str] = []
        self._routes: dict[tuple[str, str], str] = {}
        """Recipients already resolved, by (sender, address as written): a mail stream
        resolves a name once, not once per mail. Cleared whenever a run is added, ends or is
        forgotten (what a name resolves to can change only then)."""
        self._init_policies(clock, rng)

    # ---- plumbing ----------------------------------------------------------------------------

    @contextmanager
    def _handling(self) -> Iterator[list[Effect]]:
        """Collect effects of one message; commit its writes before they are returned."""
        self._effects = []
        with self.store.batch():
            yield self._effects
            if self.slots.queue_length():
                # Whatever this message changed (a run queued, waiting, ended, parked...), a
                # queued run whose slots only waiting runs hold gets them now: no deadlock.
                self._make_room()
        self._prune()

    def _prune(self) -> None:
        """Forget finished trees: their records live on in the store; memory stays bounded."""
        while self._ended_roots:
            root = self._ended_roots.pop()
            ids = self.tree.subtree(root)
            if any(self.live(r) is not None for r in ids):
                continue
            self._routes.clear()
            self.tree.forget(ids)
            self._forget_policies(ids)
            for r in ids:
                self.runs.pop(r, None)

    def _emit(self, kind: EventKind, state: RunState, **data: Any) -> None:
        r = state.record
        event = Event(
            kind=kind,
            run_id=r.run_id,
            agent=r.agent,
            root_run_id=r.root_run_id,
            parent_run_id=r.parent_run_id,
            depth=r.depth,
            data=data,
        )
        self.store.append_event(event)
        self._effects.append(Publish(event))

    def _update(self, state: RunState, **changes: Any) -> None:
        state.record = msgspec.structs.replace(state.record, **changes)
        self.store.save_run(state.record)

    def live(self, run_id: str) -> RunState | None:
        state = self.runs.get(run_id)
        if state is None or state.record.status.terminal:
            return None
        return state

    # ---- spawn -------------------------------------------------------------------------------

    def spawn(self, req: SpawnRequest) -> tuple[SpawnReply, list[Effect]]:
        """Admit (start or queue) or refuse a run. The reply also goes to a requesting run."""
        with self._handling() as effects:
            try:
                run_id = self._admit(req)
                reply = SpawnReply(
                    request_id=req.request_id,
                    run_id=run_id,
                    queued=self.runs[run_id].record.status is RunStatus.QUEUED,
                )
            except AdmissionError as exc:
                reply = SpawnReply(request_id=req.request_id, error=str(exc))
                log.info(
                    "spawn refused",
                    agent=req.agent,
                    parent_run_id=req.parent_run_id,
                    reason=str(exc),
                )
            if req.parent_run_id is not None:
                effects.append(Tell(req.parent_run_id, reply))
            return reply, effects

    def _admit(self, req: SpawnRequest) -> str:
        problem = request_problem(req, self.limits)  # the same rules for every entry point
        if problem is not None:
            raise AdmissionError(problem)
        spec = self.lookup(req.agent)
        if spec is None:
            known = ", ".join(sorted(self.names())) or "none"
            raise AdmissionError(f"unknown agent {req.agent!r}; known agents: {known}")
        parent: RunState | None = None
        if req.parent_run_id is not None:
            parent = self.reporting(req.parent_run_id, req.attempt)
            if parent is None:
                raise AdmissionError(f"requesting run {req.parent_run_id} is not running")
        # The spawn rules (definitions + depth) refuse; the concurrency limits below queue.
        decision = self.rules.check(
            spec,
            parent.spec if parent is not None else None,
            parent.record.depth if parent is not None else 0,
        )
        if not decision.allowed:
            raise AdmissionError(decision.reason)
        depth = decision.depth
        key = self._slot_key(spec, parent)
        run_id = req.run_id or new_id("r")
        if run_id in self.runs:
            raise AdmissionError(f"run id {run_id} is already in use")
        try:  # budget last, as DESIGN.md orders admission; then bad settings, shared keys
            policy_fields = self._admit_policies(req, spec, parent, run_id)
        except PolicyRefused as exc:
            raise AdmissionError(str(exc)) from None
        starts_now = self.slots.try_take(run_id, key)
        if not starts_now:
            try:
                position = self.slots.enqueue(run_id, key)
            except QueueFull as exc:
                self._forget_policies([run_id])
                raise AdmissionError(str(exc)) from None
        model = req.model or spec.model
        if model in (None, "inherit"):
            model = parent.record.model if parent is not None else None
        record = RunRecord(
            run_id=run_id,
            agent=spec.name,
            task=req.task,
            root_run_id=parent.record.root_run_id if parent is not None else run_id,
            parent_run_id=req.parent_run_id,
            depth=depth,
            context=req.context,
            label=req.label,
            model=model or self.default_model,
            background=req.background,
            created_at=time.time(),
            deadline_s=self.limits.timeout_for(req.timeout, spec.timeout),
            **policy_fields,
            request_id=req.request_id,
            owner=self.owner,
            # the request's choice, else the definition's, else the parent's (a tree is
            # kept or cleaned as a whole unless a definition says otherwise), else keep
            cleanup=req.cleanup
            or spec.cleanup
            or (parent.record.cleanup if parent is not None else None)
            or "keep",
        )
        state = RunState(record=record, spec=spec, request_id=req.request_id)
        state.checkpoint = self._seed(run_id)
        self.runs[run_id] = state
        self.tree.add(run_id, req.parent_run_id)
        self._routes.clear()
        self.store.save_run(record)
        self._emit(EventKind.SPAWNED, state, task=req.task[:200], background=req.background)
        if starts_now:
            state.started_at_admission = True
            self._start(state)
        else:
            self._emit(EventKind.QUEUED, state, position=position)
        return run_id

    def _slot_key(self, spec: AgentSpec, parent: RunState | None) -> SlotKey:
        """The scopes a run of ``spec`` counts in: global, its agent, its tier, its parent's
        children (the parent's ``maxChildren`` up to the cap, else ``max_children``)."""
        if parent is None:
            return SlotKey(agent=spec.name, tier=spec.tier, agent_limit=self.limits.per_agent)
        # ops (issue 15): a definition's maxChildren is honoured up to the runtime's cap
        children = self.limits.children_for(parent.spec.max_children)
        return SlotKey(
            agent=spec.name,
            tier=spec.tier,
            agent_limit=self.limits.per_agent,
            parent=parent.record.run_id,
            children_limit=children,
        )

    def _key_of(self, state: RunState) -> SlotKey:
        parent_id = state.record.parent_run_id
        return self._slot_key(state.spec, self.runs.get(parent_id) if parent_id else None)

    # ---- parking: waiting runs lend their slots to queued ones (supervision/slots.py) --------

    def _idle(self, run_id: str) -> bool:
        """A slot holder the supervisor may ask to park: waiting, with an actor to ask."""
        state = self.runs.get(run_id)
        return (
            state is not None
            and state.record.status is RunStatus.WAITING
            and state.park is None
            and not self._restarting(run_id)
        )

    def _make_room(self) -> None:
        """Ask the waiting runs whose slots queued runs need to park (FIFO order). Called at
        the end of every handled message while runs are queued; looks only when something
        changed that could let it find more (``SlotPool.needs_look``)."""
        if not self.slots.needs_look():
            return
        for run_id in self.slots.park_candidates(self._idle):
            self.slots.parking(run_id)
            self.runs[run_id].park = "asked"
            self._effects.append(Tell(run_id, Park()))

    def _grant(self, state: RunState) -> None:
        """``state`` got a slot from the queue: a parked run goes on, any other starts."""
        if state.park == "wanting":
            state.park = None
            # still waiting as far as the supervisor knows (a function agent says so once):
            # it may be asked to park again, and answers once it is done with what woke it
            self.slots.set_idle(state.record.run_id, state.record.status is RunStatus.WAITING)
            self._emit(EventKind.UNPARKED, state)
            self._effects.append(Tell(state.record.run_id, Unpark()))
        else:
            self._start(state)

    def _start_queued(self) -> None:
        for run_id in self.slots.start_queued():
            self._grant(self.runs[run_id])

    def _restart_when_slotted(self, state: RunState) -> None:
        """Start a restarting run again: at once if it still holds its slot, else (it had
        parked, and failed because a ``fail_parent`` child did) when it gets one back."""
        run_id = state.record.run_id
        state.park = None
        self.slots.not_parking(run_id)
        if self.slots.holds(run_id) or self.slots.want_back(run_id, self._key_of(state)):
            self._start(state)

    def parked(self, msg: Parked) -> list[Effect]:
        """A run gave its slot back: queued runs take it."""
        with self._handling():
            state = self.reporting(msg.run_id, msg.attempt)
            if state is None or state.park != "asked":
                return self._effects
            state.park = "parked"
            self.slots.release(msg.run_id)
            self._emit(EventKind.PARKED, state)
            log.info(  # expected under a tight limit (the demo shows it), not a warning
                "a waiting run lent its slot to a queued run",
                run_id=msg.run_id,
                agent=state.record.agent,
                queued=self.slots.queue_length(),
                limit=self.limits.max_concurrency,
            )
            self._start_queued()
            return self._effects

    def slot_wanted(self, msg: SlotWanted) -> list[Effect]:
        """A parked run received something: it gets a slot again, ahead of new admissions."""
        with self._handling():
            state = self.reporting(msg.run_id, msg.attempt)
            if state is None or state.park != "parked":
                return self._effects
            state.park = "wanting"
            if self.slots.want_back(msg.run_id, self._key_of(state)):
                self._grant(state)
            return self._effects

    def _start(self, state: RunState) -> None:
        """Start (or resume, when it has taken steps before) the run of ``state``."""
        run_id = state.record.run_id
        if state.park is not None:  # a restart: the new actor starts with the slot
            state.park = None
            self.slots.not_parking(run_id)
        if self.slots.has_idle(run_id):
            self.slots.set_idle(run_id, False)  # it works until it says it waits
        state.resumes = state.record.started_at is not None and not state.from_scratch
        state.from_scratch = False
        state.attempt += 1
        state.deadline = self.clock() + state.record.deadline_s
        self._update(state, status=RunStatus.RUNNING, started_at=time.time())
        pending: tuple[Mail, ...] = ()
        if not (state.started_at_admission and state.attempt == 1):
            unread = (MailState.ACCEPTED, MailState.DELIVERED)
            pending = tuple(m for m in self.store.mail_for(run_id, unread) if m.recipient == run_id)
        for mail in pending:
            self.store.set_mail_state(mail.mail_id, MailState.DELIVERED)
            state.unread_mail.add(mail.mail_id)
            if mail.state is MailState.ACCEPTED:  # sent while queued: delivered only now
                self._emit(
                    EventKind.MAIL_DELIVERED, state, mail_id=mail.mail_id, sender=mail.sender
                )
        recovered: tuple[Any, ...] = ()
        if state.record.steps > 0:
            state.checkpoint = self.store.load_checkpoint(run_id)
        if state.resumes:  # what the earlier start already did is not done again
            children = self.store.list_runs(root_run_id=state.record.root_run_id)
            mails = self.store.mail_for(run_id)
            # a function agent also replays its journal (behaviour/function.py)
            journal = self.store.journal_of(run_id)
            recovered = recovered_messages(run_id, children, mails, journal)
        self._effects.append(ArmDeadline(run_id, state.deadline))
        self._effects.append(
            StartRun(
                state.record,
                state.spec,
                state.deadline,
                pending,
                recovered,
                state.checkpoint,
                state.attempt,
            )
        )
        self._emit(
            EventKind.STARTED, state, model=state.record.model, resumed=state.record.steps > 0
        )

    # ---- progress reports from agents --------------------------------------------------------

    def reporting(self, run_id: str, attempt: int) -> RunState | None:
        """The live run a report is from, or None when the run ended or the report comes
        from an earlier start of it (a restarted run's old actor may still be working)."""
        state = self.live(run_id)
        if state is None or (attempt and attempt != state.attempt):
            return None
        return state

    def step_taken(self, msg: StepTaken) -> list[Effect]:
        with self._handling():
            state = self.reporting(msg.run_id, msg.attempt)
            if state is None:
                return self._effects
            self._update(state, steps=msg.step, usage=state.record.usage + msg.usage)
            if msg.checkpoint is not None:
                state.checkpoint = msg.checkpoint
                self.store.save_checkpoint(msg.checkpoint)
            self._mark_read(state, msg.read_mail)
            self._emit(
                EventKind.STEP,
                state,
                step=msg.step,
                input_tokens=msg.usage.total_input_tokens,
                output_tokens=msg.usage.output_tokens,
            )
            self._charge(msg)
            return self._effects

    def tool_answered(self, msg: ToolAnswered) -> list[Effect]:
        """Keep a tool result in the run's checkpoint so a resume does not redo the call."""
        with self._handling():
            state = self.reporting(msg.run_id, msg.attempt)
            if state is not None and state.checkpoint is not None:
                cp = state.checkpoint
                if cp.step == msg.step:
                    cp = msgspec.structs.replace(cp, answered=(*cp.answered, msg.result))
                    state.checkpoint = cp
                    self.store.save_checkpoint(cp)
            if state is not None:
                self._mark_read(state, msg.read_mail)
            return self._effects

    def tool_starting(self, msg: ToolStarting) -> list[Effect]:
        """The tool journal (issue 12): a side-effecting call is about to run. Kept in the
        checkpoint before the agent hears back, so a crash during the call cannot make a
        resumed run do it again (``tools.journal`` decides what the model is told)."""
        with self._handling():
            state = self.reporting(msg.run_id, msg.attempt)
            if state is not None and state.checkpoint is not None:
                cp = state.checkpoint
                started = cp.started
                if msg.ended:  # it raised: known to be over, not "interrupted"
                    started = tuple(i for i in started if i != msg.tool_use_id)
                elif msg.tool_use_id not in started:
                    started = (*started, msg.tool_use_id)
                if cp.step == msg.step and started != cp.started:
                    cp = msgspec.structs.replace(cp, started=started)
                    state.checkpoint = cp
                    self.store.save_checkpoint(cp)
            return self._effects

    def tool_called(self, msg: ToolCalled) -> list[Effect]:
        with self._handling():
            state = self.reporting(msg.run_id, msg.attempt)
            if state is not None:
                self._emit(EventKind.TOOL_CALL, state, tool=msg.tool, input=msg.input)
            return self._effects

    def waiting_changed(self, msg: WaitingChanged) -> list[Effect]:
        with self._handling():
            state = self.reporting(msg.run_id, msg.attempt)
            if state is None:
                return self._effects
            status = RunStatus.WAITING if msg.waiting else RunStatus.RUNNING
            self.slots.set_idle(msg.run_id, msg.waiting)
            if state.record.status is not status:
                self._update(state, status=status)
                if msg.waiting:
                    self._emit(EventKind.WAITING, state)
            return self._effects

    def finished(self, msg: RunFinished) -> list[Effect]:
        """An agent ended by itself. A late report for a finished run is discarded."""
        with self._handling():
            state = self.reporting(msg.run_id, msg.attempt)
            if state is None:
                log.debug("late report discarded", run_id=msg.run_id)
                return self._effects
            too_large = text_problem("the result", msg.result or "", self.limits.max_text_chars)
            if msg.error_kind is None and too_large is not None:
                self._finish(state, RunStatus.FAILED, error_kind="bad_result", error=too_large)
            elif msg.error_kind is None:
                self._finish(state, RunStatus.COMPLETED, result=msg.result, typed=msg.typed)
            elif self.clock() >= state.deadline:
                # A call cut short by the deadline reports before the timer does: same cause.
                self._effects.extend(self._timed_out(state))
            else:
                report = self._try_again(state, msg)
                if report is None:
                    return self._effects  # restarting or retrying
                self._finish(
                    state, RunStatus.FAILED, error_kind=report.error_kind, error=report.error
                )
            self._dead_letters(state, msg.unread_mail)
            return self._effects

    # ---- mail --------------------------------------------------------------------------------

    def send_mail(self, msg: SendMail) -> tuple[MailAck, list[Effect]]:
        """One mail: ``send_mails`` of one (its events keep their per-mail shape)."""
        acks, effects = self.send_mails((msg,))
        return acks[0], effects

    def send_mails(self, msgs: Sequence[SendMail]) -> tuple[list[MailAck], list[Effect]]:
        """Consecutive sends (a run of one Batch: mostly one sender's step) in one go.

        Each mail is routed, recorded and answered on its own: an unknown name fails that mail
        only, an ended recipient makes it a dead letter, a queued one gets it when it starts,
        and order per sender is kept. What they share: the sender is checked once, each
        recipient gets its mails as one delivery, each sender its acknowledgements as one
        Tell, and the events say what the step did (``supervision.mailing``). Every record is
        written in the store batch before any effect is returned (the actor also holds the
        effects until its group commit), so nothing is acknowledged before it is durable."""
        # _handling() written out: this is the hot path of a mail stream
        effects: list[Effect] = []
        self._effects = effects
        with self.store.batch():
            acks = self._route_mails(msgs)
        if len(msgs) == 1:
            if msgs[0].sender != EXTERNAL_SENDER:
                effects.append(Tell(msgs[0].sender, acks[0]))
        else:
            effects.extend(Tell(sender, acked) for sender, acked in acks_by_sender(msgs, acks))
        if self._ended_roots:
            self._prune()
        return acks, effects

    def _resolve_recipient(self, msg: SendMail) -> str:
        """A run id, or an agent name within the sender's root tree. Raises ValueError."""
        key = (msg.sender, msg.to)
        recipient = self._routes.get(key)
        if recipient is None:
            recipient = self._resolve_anew(msg)
            if len(self._routes) >= 4096:  # many distinct addresses: stay bounded
                self._routes.clear()
            self._routes[key] = recipient
        return recipient

    def _resolve_anew(self, msg: SendMail) -> str:
        sender = self.runs.get(msg.sender)
        target = msg.to.strip()
        if not target:
            raise ValueError("no recipient given")
        if target in self.runs or self.store.get_run(target) is not None:
            if sender is not None:
                record = (
                    self.runs[target].record if target in self.runs else self.store.get_run(target)
                )
                assert record is not None
                if record.root_run_id != sender.record.root_run_id:
                    raise ValueError(
                        f"run {target} belongs to another tree; a run can only write to runs of"
                        " its own tree"
                    )
            if target == msg.sender:
                raise ValueError("a run cannot send mail to itself")
            return target
        if sender is None:
            raise ValueError(f"no run with id {target!r}")
        tree = [
            self.runs[r] for r in self.tree.in_root(sender.record.root_run_id) if r in self.runs
        ]
        named = [s for s in tree if s.record.agent == target and s.record.run_id != msg.sender]
        live = [s for s in named if not s.record.status.terminal]
        if len(live) == 1:
            return live[0].record.run_id
        if len(live) > 1:
            candidates = ", ".join(f"{s.record.run_id} ({s.record.status})" for s in live)
            raise ValueError(f"{target!r} is ambiguous: several live runs: {candidates}")
        if len(named) == 1:
            return named[0].record.run_id  # finished: becomes a dead letter, sender is told
        if named:
            ended = ", ".join(f"{s.record.run_id} ({s.record.status})" for s in named)
            raise ValueError(
                f"{target!r} is ambiguous: no live run, several that ended: {ended}; use a run id"
            )
        others = sorted(
            {f"{s.record.agent} ({s.record.run_id})" for s in tree if s.record.run_id != msg.sender}
        )
        listing = ", ".join(others) if others else "none"
        raise ValueError(f"no run named {target!r} in this tree; candidates: {listing}")

    def _route_mail(self, msg: SendMail) -> MailAck:
        """Route, record and deliver one mail (inside an open store batch)."""
        return self._route_mails((msg,))[0]

    def _route_mails(self, msgs: Sequence[SendMail]) -> list[MailAck]:
        """Route, record and deliver ``msgs`` in order (inside an open store batch)."""
        post = MailPost(time.time())
        acks: list[MailAck] = []
        dests: dict[str, tuple[MailState | None, RunRecord | None]] = {}
        checked: tuple[str, int] | None = None
        sender_state: RunState | None = None
        for msg in msgs:
            sender = msg.sender
            if sender == EXTERNAL_SENDER:
                sender_state, checked = None, None
            else:
                if checked is None or checked[0] != sender or checked[1] != msg.attempt:
                    checked = (sender, msg.attempt)
                    sender_state = self.reporting(sender, msg.attempt)
                if sender_state is None:
                    acks.append(
                        MailAck(request_id=msg.request_id, error=f"run {sender} is not running")
                    )
                    continue
            problem = mail_problem(msg, self.limits)  # its types and its size
            if problem is not None:
                acks.append(MailAck(request_id=msg.request_id, error=problem))
                continue
            try:
                recipient = self._resolve_recipient(msg)
            except ValueError as exc:
                acks.append(MailAck(request_id=msg.request_id, error=str(exc)))
                continue
            dest = dests.get(recipient)
            if dest is None:  # what becomes of mail to it cannot change within one message
                dest = dests[recipient] = self._destination(recipient)
            state, record = dest
            if state is None:
                acks.append(
                    self._post_elsewhere(sender, recipient, msg.content, msg.request_id, record)
                )
                continue
            mail = Mail(
                mail_id=post.new_id(),
                sender=sender,
                recipient=recipient,
                content=msg.content,
                sender_agent=sender_state.record.agent if sender_state is not None else None,
                reply_to=msg.reply_to,
                sent_at=post.now,
                state=state,
                request_id=msg.request_id,
            )
            if state is MailState.DEAD:
                acks.append(self._post_into(post, mail, msg.request_id, sender_state, record))
            else:  # _post_into's common case written out: the hot path of a mail stream
                post.add(mail)
                acks.append(
                    MailAck(request_id=msg.request_id, mail_id=mail.mail_id, recipient=recipient)
                )
        self._record_post(post)
        return acks

    def _destination(self, run_id: str) -> tuple[MailState | None, RunRecord | None]:
        """What a mail to ``run_id`` becomes now, and the run's record: ``DELIVERED`` (a live
        run), ``ACCEPTED`` (a queued one: delivered when it starts), ``DEAD`` (ended or
        unknown: a dead letter), or None (alive, but another runtime on this store hosts
        it)."""
        target = self.runs.get(run_id)
        record = target.record if target is not None else self.store.get_run(run_id)
        if record is None or record.status.terminal:
            return MailState.DEAD, record
        if target is None:
            return None, record
        if record.status is RunStatus.QUEUED:
            return MailState.ACCEPTED, record
        return MailState.DELIVERED, record

    def _post(self, mail: Mail, request_id: str) -> MailAck:
        """Record ``mail`` (made by the supervisor itself: a notice) and deliver it (or keep
        it as a dead letter)."""
        post = MailPost(mail.sent_at)
        state, record = self._destination(mail.recipient)
        if state is None:
            ack = self._post_elsewhere(
                mail.sender, mail.recipient, mail.content, request_id, record
            )
        else:
            if state is not mail.state:
                mail = msgspec.structs.replace(mail, state=state)
            ack = self._post_into(post, mail, request_id, self.runs.get(mail.sender), record)
        self._record_post(post)
        return ack

    def _post_into(
        self,
        post: MailPost,
        mail: Mail,
        request_id: str,
        sender_state: RunState | None,
        record: RunRecord | None,
    ) -> MailAck:
        """Add ``mail`` (its state already says what becomes of it) to ``post``."""
        post.add(mail)
        if mail.state is not MailState.DEAD:
            return MailAck(request_id=request_id, mail_id=mail.mail_id, recipient=mail.recipient)
        if sender_state is not None:  # each dead letter is an error its sender hears of
            self._emit(
                EventKind.DEAD_LETTER, sender_state, mail_id=mail.mail_id, recipient=mail.recipient
            )
        status = record.status if record is not None else "unknown"
        return MailAck(
            request_id=request_id,
            mail_id=mail.mail_id,
            recipient=mail.recipient,
            dead_letter=True,
            error=f"run {mail.recipient} has already ended ({status}); the mail was kept as"
            " a dead letter and will not be read",
        )

    def _post_elsewhere(
        self,
        sender: str,
        recipient: str,
        content: str,
        request_id: str,
        record: RunRecord | None,
    ) -> MailAck:
        """Mail to a live run that another runtime on this store hosts: a run's is refused,
        the outside's becomes a command for that runtime."""
        if sender != EXTERNAL_SENDER:
            owner = record.owner if record is not None else "?"
            return MailAck(
                request_id=request_id,
                error=f"run {recipient} is hosted by another runtime ({owner})",
            )
        command_id = self.store.post_command("send", recipient, content)
        return MailAck(request_id=request_id, mail_id=f"command-{command_id}", recipient=recipient)

    def _record_post(self, post: MailPost) -> None:
        """Write the post's records, then its events and its deliveries (one per
        recipient)."""
        records = post.records
        if not records:
            return
        self.store.save_mails(records)
        if len(records) == 1:  # one mail (a step's usual): nothing to group
            mail = records[0]
            if mail.state is MailState.DEAD:
                return
            delivered = mail.state is MailState.DELIVERED
            self._announce(mail.sender, mail.recipient, delivered, (mail.mail_id,))
            if delivered:
                self.runs[mail.recipient].unread_mail.add(mail.mail_id)
                self._effects.append(Tell(mail.recipient, delivery(records)))
            return
        for pair in post.pairs():
            self._announce(pair.sender, pair.recipient, pair.delivered, pair.mail_ids)
        for recipient, mails in post.deliveries().items():
            self.runs[recipient].unread_mail.update([m.mail_id for m in mails])
            self._effects.append(Tell(recipient, delivery(mails)))

    def _announce(
        self, sender: str, recipient: str, delivered: bool, mail_ids: Sequence[str]
    ) -> None:
        """The events of the mails ``sender`` sent ``recipient``: ``mail_sent`` on a sending
        run, ``mail_delivered`` on the recipient if they reached it now."""
        sender_state = self.runs.get(sender)
        if sender_state is not None:
            data = mail_event_data(mail_ids, "recipient", recipient)
            self._emit(EventKind.MAIL_SENT, sender_state, **data)
        if delivered:
            data = mail_event_data(mail_ids, "sender", sender)
            self._emit(EventKind.MAIL_DELIVERED, self.runs[recipient], **data)

    def _mark_read(self, state: RunState, mail_ids: tuple[str, ...]) -> None:
        for mail_id in mail_ids:
            self.store.set_mail_state(mail_id, MailState.READ)
            state.unread_mail.discard(mail_id)

    def journal(self, msg: Journal) -> list[Effect]:
        """A function agent's journal entries of one handling, kept for its replay after a
        crash, and the mail they say it read, marked read in the same transaction (so the
        store never says a mail was read without saying which call read it)."""
        self._effects = []
        state = self.reporting(msg.run_id, msg.attempt)
        with self.store.batch():
            if state is not None and msg.entries:  # an earlier start's entries are void
                self.store.save_journal(msg.run_id, msg.entries)
            if msg.read_mail:
                if state is not None:
                    state.unread_mail.difference_update(msg.read_mail)
                self.store.set_mails_state(msg.read_mail, MailState.READ)
        return self._effects

    def mail_read(self, msg: MailRead) -> list[Effect]:
        return self.mail_reads((msg,))

    def mail_reads(self, msgs: Sequence[MailRead]) -> list[Effect]:
        """Read receipts (a run of one Batch), written in one store call."""
        self._effects = []
        mail_ids: list[str] = []
        runs = self.runs
        for msg in msgs:
            state = runs.get(msg.run_id)
            if state is not None:
                state.unread_mail.difference_update(msg.mail_ids)
            mail_ids.extend(msg.mail_ids)
        with self.store.batch():
            self.store.set_mails_state(mail_ids, MailState.READ)
        return self._effects

    def _dead_letters(self, state: RunState, unread: tuple[str, ...]) -> None:
        """Mail that reached a run (or waited for a queued one) but was never read: the senders
        hear of it, once, whichever way the run ended."""
        run_id = state.record.run_id
        never_started: set[str] = set()
        if not state.started_at_admission:  # else it never waited in the queue for mail
            never_started = {
                m.mail_id
                for m in self.store.mail_for(run_id, [MailState.ACCEPTED])
                if m.recipient == run_id
            }
        leftover = set(unread) | state.unread_mail | never_started
        state.unread_mail.clear()
        if not leftover:
            return
        by_id = {m.mail_id: m for m in self.store.mail_for(run_id)}
        for mail_id in sorted(leftover):
            mail = by_id.get(mail_id)
            if mail is not None and mail.state in (MailState.DEAD, MailState.READ):
                continue  # already returned to its sender, or read after all
            self.store.set_mail_state(mail_id, MailState.DEAD)
            if mail is None:
                continue
            self._emit(EventKind.DEAD_LETTER, state, mail_id=mail_id, sender=mail.sender)
            sender = self.live(mail.sender)
            if sender is not None:
                notice = Mail(
                    mail_id=new_id("m"),
                    sender=state.record.run_id,
                    recipient=mail.sender,
                    sender_agent=state.record.agent,
                    content=(
                        f"[dead letter] your mail {mail_id} to {state.record.agent}"
                        f" ({state.record.run_id}) was not read before it ended"
                        f" ({state.record.status})"
                    ),
                    sent_at=time.time(),
                )
                self._post(notice, new_id("q"))

    # ---- ending runs -------------------------------------------------------------------------

    def _finish(
        self,
        state: RunState,
        status: RunStatus,
        *,
        result: str | None = None,
        error_kind: str | None = None,
        error: str | None = None,
        typed: bool = False,
    ) -> None:
        """Give ``state`` its one terminal status and deliver its outcome once. ``typed``:
        ``result`` is the JSON text of a function agent's value (``Outcome.value``)."""
        record = state.record
        if record.status.terminal:
            return
        self._routes.clear()
        # A run does not outlive its parent: whatever it left running is cancelled first.
        for child_id in reversed(self.tree.children(record.run_id)):
            child = self.live(child_id)
            if child is not None:
                self._cancel_subtree(child, f"its parent {record.agent} ended ({status})")
        outcome = Outcome(
            run_id=record.run_id,
            status=status,
            result=result,
            error_kind=error_kind,
            error=error,
            usage=record.usage,
            steps=record.steps,
            typed=typed,
        )
        self._update(state, status=status, ended_at=time.time(), outcome=outcome)
        self.store.save_outcome(outcome)
        self.slots.release(record.run_id)
        self._effects.append(DisarmDeadline(record.run_id))
        self._emit(_STATUS_EVENT[status], state, error_kind=error_kind, error=error)
        self._deliver(state, outcome)
        self._dead_letters(state, ())
        state.park = None
        self._start_queued()

    def _deliver(self, state: RunState, outcome: Outcome) -> None:
        """Hand ``outcome`` to the requester: the caller, the parent's tool call, or mail."""
        record = state.record
        parent_id = record.parent_run_id
        if parent_id is None:
            self._effects.append(DeliverRoot(outcome))
            self._ended_roots.append(record.run_id)
        else:
            parent = self.runs.get(parent_id)
            if self._fail_parent(state, outcome):
                pass  # the parent failed with this child's reason instead
            elif parent is not None and not parent.record.status.terminal:
                if record.background:
                    report = msgspec.json.encode(
                        {
                            "run_id": record.run_id,
                            "agent": record.agent,
                            "status": str(outcome.status),
                            "result": outcome.result,
                            "error": outcome.error,
                        }
                    ).decode()
                    notice = Mail(
                        mail_id=new_id("m"),
                        sender=record.run_id,
                        recipient=parent_id,
                        sender_agent=record.agent,
                        content=f"[background result] {report}",
                        sent_at=time.time(),
                    )
                    self._post(notice, new_id("q"))
                else:
                    assert state.request_id is not None
                    self._effects.append(
                        Tell(parent_id, ChildDone(request_id=state.request_id, outcome=outcome))
                    )
        self.store.mark_outcome_delivered(record.run_id)

    def _cancel_subtree(self, state: RunState, reason: str) -> list[str]:
        """Cancel ``state`` and its live descendants, deepest first. The ids cancelled."""
        cancelled: list[str] = []
        for run_id in self.tree.deepest_first(state.record.run_id):
            target = self.live(run_id)
            if target is None:
                continue
            self._finish(target, RunStatus.CANCELLED, error_kind="cancelled", error=reason)
            self._effects.append(StopAgent(run_id))
            cancelled.append(run_id)
        return cancelled

    def stop(self, req: StopRequest) -> tuple[StopReply, list[Effect]]:
        """Stop a run and its subtree; a run may only stop its own descendants."""
        with self._handling() as effects:
            reply = self._stop(req)
            if req.requester is not None:
                if req.journal and self.reporting(req.requester, req.attempt) is not None:
                    # A function agent's ctx.stop: its answer is journaled with the stop,
                    # so a replay after a crash gets it instead of stopping an ended run.
                    entry = JournalEntry(
                        request_id=req.request_id,
                        observed=True,
                        result=list(reply.stopped),
                        error=reply.error,
                    )
                    self.store.save_journal(req.requester, (entry,))
                effects.append(Tell(req.requester, reply))
            return reply, effects

    def _stop(self, req: StopRequest) -> StopReply:
        target = self.runs.get(req.run_id)
        if target is None:
            ended = self.store.get_run(req.run_id)  # a finished tree is forgotten in memory
            if ended is not None and req.requester is None and not ended.status.terminal:
                # alive, but another runtime on this store hosts it: pass the stop on
                self.store.post_command("stop", req.run_id)
                return StopReply(request_id=req.request_id, stopped=(req.run_id,))
            if ended is not None and req.requester is None:
                return StopReply(
                    request_id=req.request_id,
                    error=f"run {req.run_id} has already ended ({ended.status})",
                )
            return StopReply(request_id=req.request_id, error=f"no run with id {req.run_id!r}")
        if req.requester is not None and self.reporting(req.requester, req.attempt) is None:
            return StopReply(request_id=req.request_id, error=f"run {req.requester} is not running")
        if req.requester is not None and not self.tree.is_descendant(req.run_id, req.requester):
            return StopReply(
                request_id=req.request_id,
                error=f"run {req.run_id} is not a descendant of {req.requester}; a run may only"
                " stop its own descendants",
            )
        if target.record.status.terminal:
            return StopReply(
                request_id=req.request_id,
                error=f"run {req.run_id} has already ended ({target.record.status})",
            )
        stopped = self._cancel_subtree(target, req.reason)
        return StopReply(request_id=req.request_id, stopped=tuple(stopped))

    def timeout(self, run_id: str) -> list[Effect]:
        """The deadline of ``run_id`` passed: it times out, its descendants are cancelled."""
        with self._handling():
            state = self.live(run_id)
            if state is None:
                return self._effects
            if self.clock() < state.deadline:  # re-armed meanwhile (restart)
                self._effects.append(ArmDeadline(run_id, state.deadline))
                return self._effects
            self._effects.extend(self._timed_out(state))
            return self._effects

    def _timed_out(self, state: RunState) -> list[Effect]:
        run_id = state.record.run_id
        for child_id in self.tree.children(run_id):
            child = self.live(child_id)
            if child is not None:
                self._cancel_subtree(child, f"its ancestor {state.record.agent} timed out")
        self._finish(
            state,
            RunStatus.TIMED_OUT,
            error_kind="timeout",
            error=f"{state.record.agent} ran past its {state.record.deadline_s:g} s timeout",
        )
        return [StopAgent(run_id)]

    def crashed(self, run_id: str, error: str) -> list[Effect]:
        """The agent's actor died outside the behaviour's own error handling."""
        with self._handling():
            state = self.live(run_id)
            if state is not None:
                self._finish(state, RunStatus.FAILED, error_kind="crash", error=error)
                self._effects.append(StopAgent(run_id))
            return self._effects

    def stop_all(self, reason: str = "runtime closed") -> list[Effect]:
        with self._handling():
            # Queued runs first: cancelling a running one frees a slot, and a queued run would
            # otherwise be started (an actor spawned during shutdown) only to be cancelled.
            for run_id in self.slots.queued():
                state = self.live(run_id)
                if state is not None:
                    self._cancel_subtree(state, reason)
            for run_id in list(self.runs):
                state = self.live(run_id)
                if state is not None and state.record.parent_run_id is None:
                    self._cancel_subtree(state, reason)
            for run_id in list(self.runs):  # orphans of an unknown parent, if any
                state = self.live(run_id)
                if state is not None:
                    self._cancel_subtree(state, reason)
            return self._effects

    # ---- restore after a crash or a restart of the process -----------------------------------

    def restore(
        self, live_owners: Collection[str] = (), roots: Collection[str] | None = None
    ) -> tuple[RestoreReport, list[Effect]]:
        """Take up the orphaned runs of the store: queue the queued, resume the running.

        ``live_owners``: the runtimes whose leases are alive (given as data, see
        ``store.leases``): the trees they host are left to them. ``roots``: only these trees
        (all orphans when None). Parents come before children (by depth). A run whose agent
        is no longer defined fails; a child whose parent has ended is cancelled (runs do not
        outlive parents). Root runs come back without a caller: they are reported as orphans
        until someone attaches to them.
        """
        report = RestoreReport()
        with self._handling() as effects:
            unfinished = self.store.list_runs(
                statuses=(RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.WAITING)
            )
            unfinished.sort(key=lambda r: (r.depth, r.created_at))
            hosted_elsewhere = {
                r.root_run_id
                for r in unfinished
                if r.owner in live_owners and r.owner != self.owner
            }
            for record in unfinished:
                if record.run_id in self.runs:
                    continue
                if roots is not None and record.root_run_id not in roots:
                    continue
                if record.root_run_id in hosted_elsewhere:
                    report.elsewhere.append(record.run_id)
                    continue
                if record.owner != self.owner:
                    if record.owner and record.owner not in report.taken_from:
                        report.taken_from.append(record.owner)
                    record = msgspec.structs.replace(record, owner=self.owner)
                    self.store.save_run(record)
                self._restore_one(record, report)
            # Runs that were running want their slots back first (ahead of the queued runs);
            # all start only as far as the limits allow (waiting ones park when needed).
            self._start_queued()
            for outcome in self.store.undelivered_outcomes():
                ended = self.store.get_run(outcome.run_id)
                if ended is not None:
                    live_host = ended.owner in live_owners and ended.owner != self.owner
                    if live_host or (roots is not None and ended.root_run_id not in roots):
                        continue  # its live host delivers it; or a tree not asked for
                if ended is not None and ended.parent_run_id is None:
                    report.orphans.append(ended.run_id)
                elif ended is not None and self.live(ended.parent_run_id or "") is None:
                    self.store.mark_outcome_delivered(outcome.run_id)
                # a live parent gets it through recovered messages when it resumes
            return report, effects

    def _restore_one(self, record: RunRecord, report: RestoreReport) -> None:
        spec = self.lookup(record.agent)
        parent = self.runs.get(record.parent_run_id) if record.parent_run_id else None
        state = RunState(
            record=record,
            spec=spec or AgentSpec(name=record.agent, description="(missing)"),
            request_id=record.request_id,
        )
        self.runs[record.run_id] = state
        self.tree.add(record.run_id, record.parent_run_id)
        self._routes.clear()
        if record.parent_run_id is None:
            report.orphans.append(record.run_id)
        if spec is None:
            self._finish(
                state,
                RunStatus.FAILED,
                error_kind="unknown_agent",
                error=f"agent {record.agent!r} is no longer defined",
            )
            report.failed.append(record.run_id)
            return
        if record.parent_run_id is not None and (parent is None or parent.record.status.terminal):
            self._finish(
                state,
                RunStatus.CANCELLED,
                error_kind="cancelled",
                error="its parent ended before the restart",
            )
            report.cancelled.append(record.run_id)
            return
        key = self._slot_key(spec, parent)
        if record.status is RunStatus.QUEUED:
            # Queued again, started once every running run has its slot back (restore()).
            try:
                self.slots.enqueue(record.run_id, key)
            except QueueFull as exc:
                self._finish(state, RunStatus.FAILED, error_kind="queue_full", error=str(exc))
                report.failed.append(record.run_id)
                return
            report.requeued.append(record.run_id)
        else:
            # It resumes when it has a slot, ahead of the queued runs: more runs may have been
            # live than the limits allow (parked ones), and all would work at once on resume.
            if self.slots.want_back(record.run_id, key):
                self._start(state)
            report.resumed.append(record.run_id)

    def sweep(self, archive_after_minutes: float, retention_days: float | None) -> Any:
        """Run the store's sweeper, if it has one (SQLite does; memory does not need one)."""
        sweep = getattr(self.store, "sweep", None)
        if sweep is None:
            return None
        return sweep(
            now=time.time(),
            archive_after_minutes=archive_after_minutes,
            retention_days=retention_days,
        )

    def take_commands(self) -> list[Effect]:
        """Act on stop/send commands other processes posted through the store."""
        with self._handling():
            hosted = [r for r, state in self.runs.items() if not state.record.status.terminal]
            if not hosted:
                return self._effects
            for command in self.store.take_commands(hosted):
                if command.kind == "stop":
                    target = self.live(command.run_id)
                    if target is not None:
                        self._cancel_subtree(target, "stopped from another process")
                elif command.kind == "send" and command.content is not None:
                    self._route_mail(
                        SendMail(
                            request_id=new_id("q"),
                            sender=EXTERNAL_SENDER,
                            to=command.run_id,
                            content=command.content,
                        )
                    )
            return self._effects

    # ---- views -------------------------------------------------------------------------------

    def subtree_usage(self, run_id: str) -> Usage:
        total = Usage()
        for r in self.tree.subtree(run_id):
            state = self.runs.get(r)
            if state is not None:
                total = total + state.record.usage
        return total
