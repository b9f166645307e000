"""SupervisorActor: the one actor that owns run state; thin over SupervisorCore.

It receives every request and report, asks the core what to do, and carries out the effects:
starting agent actors, telling them things, arming deadlines on the timer service, handing
root outcomes to the Runtime, and publishing events to the log and to subscribers.

Group commit: reports that nobody waits on (mail between agents, read receipts, waiting
changes, finished runs...) that arrive while more messages are already queued are handled in
one store transaction, up to ``GROUP_MAX`` of them, and their effects (acknowledgements,
deliveries, starts) are carried out only once it is committed. With SQLite a commit costs far
more than the writes in it, so a burst of mail costs one commit, not one per mail. Anything
asked (a reply is awaited) or not in the list commits the open group first.

Batches: an agent sends the mail reports of one handling as one ``Batch``; its messages are
handled in order as if they had arrived alone (the group stays open until the last), except
that a run of consecutive sends (or read receipts) goes to the core in one call
(``SupervisorCore.send_mails``): one delivery per recipient, one acknowledgement message per
sender and events per step, not per mail, all in one transaction. After a
commit, the held Tells to each run go as one ``Batch`` per run (``supervision.coalesce``), so
a burst of mail costs a few actor messages, not four per mail.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, cast

import pykka
import structlog

from subagents.actors.agent import AgentActor, BehaviourFactory
from subagents.actors.inbox import FastInboxActor
from subagents.actors.threads import ThreadPool
from subagents.actors.timer import TimerService
from subagents.definitions.spec import AgentSpec
from subagents.messages import (
    EXTERNAL_SENDER,
    Batch,
    Event,
    Journal,
    MailAck,
    MailRead,
    Outcome,
    Parked,
    PollCommands,
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
    Timeout,
    ToolAnswered,
    ToolCalled,
    ToolStarting,
    WaitingChanged,
)
from subagents.store.base import StoreError
from subagents.store.leases import live_owners
from subagents.supervision.coalesce import coalesce
from subagents.supervision.core import (
    ArmDeadline,
    DeliverRoot,
    DisarmDeadline,
    Effect,
    Publish,
    StartRun,
    StopAgent,
    SupervisorCore,
    Tell,
)
from subagents.supervision.policing import RestartDue, ScheduleRestart

log = structlog.get_logger("subagents.supervisor")


@dataclass(frozen=True)
class Query:
    """Read supervisor state on its own thread: ``fn(core)`` is the answer."""

    fn: Callable[[SupervisorCore], Any]


@dataclass(frozen=True)
class SpawnAndTell:
    """Admit a root run without an ask: ``refused(reason)`` is called (on the supervisor's
    thread) if it is refused; its outcome reaches the Runtime as any root's does. What
    ``Runtime.run`` sends: it waits for the outcome anyway, so waiting for the admission too
    would cost a future and a thread hand-off per run for nothing."""

    request: SpawnRequest
    refused: Callable[[str], None]


@dataclass(frozen=True)
class Restore:
    """Take up the store's orphaned runs (answered with a RestoreReport): those whose host's
    lease lapsed (``store.leases``); ``roots``: only these trees."""

    roots: frozenset[str] | None = None


@dataclass(frozen=True)
class LeaseLost:
    """This runtime's lease lapsed and another process took its runs over: it must stop
    hosting them at once, writing nothing more (told by the Runtime's lease keeper)."""

    reason: str


@dataclass(frozen=True)
class Sweep:
    """Archive finished runs (and delete old ones) if the store keeps them for long."""

    archive_after_minutes: float = 60.0
    retention_days: float | None = None


GROUP_MAX = 100
"""Most messages handled in one store transaction (bounds how long readers wait on it)."""

_GROUPED = (
    SendMail,
    MailRead,
    Journal,
    WaitingChanged,
    RunFinished,
    ToolCalled,
    ToolAnswered,
    Timeout,
    Parked,
    SlotWanted,
)


def _is_ask(message: Any) -> bool:
    """Messages only the outside sends, always with ``ask``: their errors go to the caller."""
    if isinstance(message, Query | Restore | StopAll | Sweep):
        return True
    if isinstance(message, SpawnRequest):
        return message.parent_run_id is None
    if isinstance(message, StopRequest):
        return message.requester is None
    if isinstance(message, SendMail):
        return message.sender == EXTERNAL_SENDER
    return False


@dataclass(frozen=True)
class StopAll:
    reason: str = "runtime closed"


@dataclass
class _Live:
    ref: pykka.ActorRef[Any]
    cancel: threading.Event
    attempt: int = 1


class SupervisorActor(FastInboxActor):
    use_daemon_thread = True

    def __init__(
        self,
        *,
        core: SupervisorCore,
        timer: TimerService,
        behaviour_for: Callable[[AgentSpec], BehaviourFactory],
        on_root_outcome: Callable[[Outcome], None],
        on_event: Callable[[Event], None],
        on_thread: Callable[[threading.Thread], None] | None = None,
        pool: ThreadPool | None = None,
    ) -> None:
        super().__init__()
        self.pool = pool
        self.core = core
        self.timer = timer
        self.behaviour_for = behaviour_for
        self.on_root_outcome = on_root_outcome
        self.on_event = on_event
        self.on_thread = on_thread
        self.live: dict[str, _Live] = {}
        self.store_failure: str | None = None
        self._group: AbstractContextManager[None] | None = None
        self._held: list[Effect] = []
        self._grouped = 0

    def on_receive(self, message: Any) -> Any:
        """Handle one message. The supervisor must outlive any failure (a store error, a bug):
        a failed ask is raised to its caller; a failed tell is logged, never fatal."""
        if isinstance(message, Batch):  # an agent's reports of one handling: always told
            self._receive_batch(message.messages)
            return None
        if isinstance(message, LeaseLost):  # ops (issue 15): nothing more may be written
            self._lease_lost(message.reason)
            return None
        return self._receive(message, more=False)

    def _receive_batch(self, messages: tuple[Any, ...]) -> None:
        """The messages of a Batch in order: each run of consecutive SendMails (or
        MailReads) in one core call, anything else one by one."""
        n = len(messages)
        i = 0
        while i < n:
            kind = type(messages[i])
            j = i + 1
            if kind is SendMail or kind is MailRead:
                while j < n and type(messages[j]) is kind:
                    j += 1
            if j - i > 1 and self.store_failure is None:
                self._in_group_run(messages[i:j], more=j < n)
            else:
                for k in range(i, j):
                    self._receive(messages[k], more=k < n - 1)
            i = j

    def _receive(self, message: Any, *, more: bool) -> Any:
        """One message, as if it had arrived alone; ``more``: the rest of its Batch follows,
        so the open group is not committed yet for want of queued messages."""
        if self.store_failure is not None:
            return self._refuse(message)
        if isinstance(message, _GROUPED) and not _is_ask(message):
            self._in_group(message, more=more)
            return None
        self._commit_group()
        if self.store_failure is not None:  # that commit failed: nothing more is taken on
            return self._refuse(message)
        try:
            return self._handle(message)
        except StoreError as exc:
            self._halt(exc)
            if _is_ask(message):
                raise
            return None
        except Exception as exc:
            if _is_ask(message):
                raise
            log.exception("supervisor failed to handle a message", message=type(message).__name__)
            self._answer_failure(message, exc)
            return None

    def _halt(
        self, exc: Exception, lost: Sequence[Effect] = (), what: str = "the run store failed"
    ) -> None:
        """The store failed (disk full, file gone, read-only...): what is in memory can no
        longer be made durable, so no run may go on as if it were. Every live run's agent is
        stopped and every waiting caller is told, with the store's error; the store keeps the
        last committed state, from which a runtime started later resumes.

        ``lost``: effects held for a group whose commit failed. A root that ended in that
        group is no longer among the core's runs, and its end was not committed: its caller
        is told of the store's failure too, not left waiting."""
        if self.store_failure is not None:
            return
        self.store_failure = f"{what}: {exc}"
        log.error(f"{what}: every run is stopped", error=str(exc))
        ended = [e.outcome.run_id for e in [*lost, *self._held] if isinstance(e, DeliverRoot)]
        self._group, self._held, self._grouped = None, [], 0
        for live in self.live.values():
            live.cancel.set()
            with contextlib.suppress(pykka.ActorDeadError):
                live.ref.stop(block=False)
        self.live.clear()
        roots = [s.record.run_id for s in self.core.runs.values() if s.record.parent_run_id is None]
        for run_id in dict.fromkeys([*ended, *roots]):
            self.on_root_outcome(
                Outcome(
                    run_id=run_id,
                    status=RunStatus.FAILED,
                    error_kind="store",
                    error=self.store_failure,
                )
            )

    def _lease_lost(self, reason: str) -> None:
        """Another process took this runtime's runs over (its lease had lapsed): the open
        group is rolled back, not committed, and everything stops as for a store failure."""
        group, self._group = self._group, None
        if group is not None:
            with contextlib.suppress(Exception):
                group.__exit__(RuntimeError, RuntimeError(reason), None)
        self._halt(RuntimeError(reason), what="this runtime lost its lease")

    def _refuse(self, message: Any) -> Any:
        """After a store failure: asks get the store's error, everything else is dropped."""
        if _is_ask(message) and not isinstance(message, StopAll | Query):
            raise StoreError(self.store_failure or "the run store failed")
        if isinstance(message, StopAll):
            return []
        if isinstance(message, SpawnAndTell):
            message.refused(self.store_failure or "the run store failed")
        if isinstance(message, Query):
            return message.fn(self.core)
        return None

    def on_start(self) -> None:
        if self.on_thread is not None:  # so that the runtime can join the thread on close
            self.on_thread(threading.current_thread())

    def _answer_failure(self, message: Any, exc: Exception) -> None:
        """A run that asked for something must hear back even when handling it failed:
        otherwise it waits on its tool call until its deadline."""
        reason = f"the supervisor could not handle this request: {type(exc).__name__}: {exc}"
        match message:
            case SpawnRequest(parent_run_id=str(run_id), request_id=rid):
                reply: Any = SpawnReply(request_id=rid, error=reason)
            case SendMail(sender=run_id, request_id=rid):
                reply = MailAck(request_id=rid, error=reason)
            case StopRequest(requester=str(run_id), request_id=rid):
                reply = StopReply(request_id=rid, error=reason)
            case _:
                return
        live = self.live.get(run_id)
        if live is not None:
            with contextlib.suppress(pykka.ActorDeadError):
                live.ref.tell(reply)

    def on_stop(self) -> None:
        self._commit_group()

    def _open_group(self) -> None:
        if self._group is None:
            group = self.core.store.batch()
            group.__enter__()
            self._group = group

    def _in_group_run(self, run: tuple[Any, ...], *, more: bool) -> None:
        """Consecutive SendMails (or MailReads) of one Batch, told (never asked): one core
        call inside the open group, counted as ``len(run)`` messages; ``more``: the Batch goes
        on after them. The run is not split, so that its events say what the step did (one
        per recipient, see ``supervision.mailing``): a step's sends are one transaction."""
        if self._grouped and self._grouped + len(run) > GROUP_MAX:
            self._commit_group()  # what is open goes first, as if the group were full
            if self.store_failure is not None:  # that commit failed: these are dropped
                return
        self._open_group()
        try:
            if type(run[0]) is SendMail:
                self._apply(self.core.send_mails(run)[1])
            else:
                self._apply(self.core.mail_reads(run))
        except StoreError as exc:
            self._halt(exc)
            return
        except Exception as exc:  # a bug: as for one message, each sender hears of it
            log.exception("supervisor failed to handle a message", message=type(run[0]).__name__)
            for message in run:
                self._answer_failure(message, exc)
        self._grouped += len(run)
        if self._grouped >= GROUP_MAX or (not more and self.actor_inbox.empty()):
            self._commit_group()

    def _in_group(self, message: Any, *, more: bool = False) -> None:
        """Handle a report inside the open group; commit when nothing else is queued."""
        self._open_group()
        try:
            self._handle(message)
        except StoreError as exc:
            self._halt(exc)
            return
        except Exception as exc:
            log.exception("supervisor failed to handle a message", message=type(message).__name__)
            self._answer_failure(message, exc)
        self._grouped += 1
        if self._grouped >= GROUP_MAX or (not more and self.actor_inbox.empty()):
            self._commit_group()

    def _commit_group(self) -> None:
        """Commit the open group, then carry out the effects held back until it was."""
        group, self._group = self._group, None
        if group is None:
            return
        held, self._held, self._grouped = self._held, [], 0
        try:
            group.__exit__(None, None, None)
        except Exception as exc:
            self._halt(exc, held)  # nothing held back may be acknowledged: it is not durable
            return
        self._apply(coalesce(held))  # one Batch per run, not one message per Tell

    def _handle(self, message: Any) -> Any:
        core = self.core
        match message:
            case SendMail():  # the two most frequent first: a match tries cases in order
                ack, effects = core.send_mail(message)
                self._apply(effects)
                return ack
            case MailRead():
                self._apply(core.mail_read(message))
            case Journal():
                self._apply(core.journal(message))
            case SpawnRequest():
                reply, effects = core.spawn(message)
                self._apply(effects)
                return reply
            case SpawnAndTell(request=request, refused=refused):
                try:
                    reply, effects = core.spawn(request)
                except Exception as exc:  # the caller must hear, whatever went wrong
                    refused(f"the supervisor could not admit the run: {exc}")
                    raise
                self._apply(effects)
                if reply.error is not None:
                    refused(reply.error)
            case StepTaken():
                self._apply(core.step_taken(message))
            case ToolCalled():
                self._apply(core.tool_called(message))
            case ToolAnswered():
                self._apply(core.tool_answered(message))
            case ToolStarting():  # asked (not grouped): durable before the tool runs
                self._apply(core.tool_starting(message))
                return True  # (an ``ended`` one is told; the answer goes nowhere)
            case PollCommands():
                self._apply(core.take_commands())
            case Sweep():
                return core.sweep(message.archive_after_minutes, message.retention_days)
            case Restore(roots=roots):
                # ops (issue 15): liveness is read here, in the same transaction as the
                # takeover, and handed to the core as data; the leases of the owners taken
                # over are released, so that a stalled host learns it lost them
                with core.store.batch():
                    alive = live_owners(core.store.leases(), time.time())
                    report, effects = core.restore(alive, roots)
                    for owner in report.taken_from:
                        core.store.release_lease(owner)
                self._apply(effects)
                return report
            case WaitingChanged():
                self._apply(core.waiting_changed(message))
            case Parked():
                self._apply(core.parked(message))
            case SlotWanted():
                self._apply(core.slot_wanted(message))
            case RunFinished():
                live = self.live.get(message.run_id)
                if live is not None and (not message.attempt or live.attempt == message.attempt):
                    del self.live[message.run_id]  # not a report from an earlier start
                self._apply(core.finished(message))
            case StopRequest():
                stop_reply, effects = core.stop(message)
                self._apply(effects)
                return stop_reply
            case RestartDue(run_id=run_id):
                self._apply(core.restart_due(run_id))
            case Timeout(run_id=run_id):
                self._apply(core.timeout(run_id))
            case Query(fn=fn):
                return fn(core)
            case StopAll(reason=reason):
                refs = [live.ref for live in self.live.values()]
                self._apply(core.stop_all(reason))
                return refs
            case _:
                log.warning("unexpected message", message=type(message).__name__)
        return None

    def _apply(self, effects: list[Effect]) -> None:
        if self._group is not None:  # not committed yet: held back until it is
            self._held.extend(effects)
            return
        for effect in effects:
            try:
                self._apply_one(effect)
            except Exception:
                log.exception("effect failed", effect=type(effect).__name__)

    def _apply_one(self, effect: Effect) -> None:
        match effect:
            case Publish(event=event):
                self.on_event(event)
            case Tell(run_id=run_id, message=msg):
                live = self.live.get(run_id)
                if live is not None:
                    with contextlib.suppress(pykka.ActorDeadError):
                        live.ref.tell(msg)
            case StartRun():
                self._start(effect)
            case StopAgent(run_id=run_id):
                live = self.live.pop(run_id, None)
                if live is not None:
                    live.cancel.set()
                    with contextlib.suppress(pykka.ActorDeadError):
                        live.ref.stop(block=False)
            case ArmDeadline(run_id=run_id, deadline=deadline):
                me = self.actor_ref

                def fire(rid: str = run_id) -> None:
                    with contextlib.suppress(pykka.ActorDeadError):
                        me.tell(Timeout(run_id=rid))

                self.timer.schedule(("deadline", run_id), deadline, fire)
            case ScheduleRestart(run_id=run_id, delay_s=delay_s):
                me = self.actor_ref

                def due(rid: str = run_id) -> None:
                    with contextlib.suppress(pykka.ActorDeadError):
                        me.tell(RestartDue(run_id=rid))

                self.timer.schedule_in(("restart", run_id), delay_s, due)
            case DisarmDeadline(run_id=run_id):
                self.timer.cancel(("deadline", run_id))
            case DeliverRoot(outcome=outcome):
                self.on_root_outcome(outcome)

    def _start(self, effect: StartRun) -> None:
        record: RunRecord = effect.record
        earlier = self.live.pop(record.run_id, None)
        if earlier is not None:  # a restart: the earlier start must not go on working
            earlier.cancel.set()
            with contextlib.suppress(pykka.ActorDeadError):
                earlier.ref.stop(block=False)
        cancel = threading.Event()
        ref = AgentActor.start(
            record=record,
            spec=effect.spec,
            deadline=effect.deadline,
            cancel=cancel,
            supervisor=self.actor_ref,
            timer=self.timer,
            behaviour=self.behaviour_for(effect.spec),
            checkpoint=effect.checkpoint,
            pending_mail=effect.pending_mail,
            recovered=effect.recovered,
            attempt=effect.attempt,
            pool=self.pool,
        )
        self.live[record.run_id] = _Live(ref=ref, cancel=cancel, attempt=effect.attempt)


class ActorGone(RuntimeError):
    """The supervisor actor has stopped."""


class SupervisorClient:
    """The supervisor actor behind plain methods and the project's own errors.

    What the Runtime holds instead of a pykka reference, so that nothing above ``actors/``
    depends on pykka types (DESIGN.md): another actor backend would provide the same client.
    """

    def __init__(self, ref: pykka.ActorRef[Any]) -> None:
        self._ref = ref

    @classmethod
    def start(cls, **kwargs: Any) -> SupervisorClient:
        """Start a SupervisorActor (``SupervisorActor.__init__``'s arguments)."""
        return cls(SupervisorActor.start(**kwargs))

    def ask(self, message: Any, timeout: float = 30.0) -> Any:
        """Send ``message`` and wait for the answer (``ActorGone``, ``TimeoutError``)."""
        try:
            return self._ref.ask(message, timeout=timeout)
        except pykka.ActorDeadError:
            raise ActorGone("the supervisor has stopped") from None
        except pykka.Timeout:
            raise TimeoutError(f"the supervisor did not answer within {timeout} s") from None

    def tell(self, message: Any) -> bool:
        """Send ``message`` without waiting; False when the supervisor has stopped."""
        try:
            self._ref.tell(message)
        except pykka.ActorDeadError:
            return False
        return True

    def close(self, timeout: float) -> None:
        """Cancel every run, stop every agent actor, then the supervisor, within ``timeout``."""
        deadline = time.monotonic() + timeout
        refs: list[pykka.ActorRef[Any]] = []
        try:
            refs = list(cast(list[Any], self._ref.ask(StopAll(), timeout=timeout)))
        except Exception:
            log.exception("stopping runs failed")
        for ref in [*refs, self._ref]:
            with contextlib.suppress(pykka.ActorDeadError, pykka.Timeout):
                ref.stop(block=True, timeout=max(0.1, deadline - time.monotonic()))
