"""Effector: the supervisor's hands. It holds the agent actor of every live run and carries
out the effects of a decision: start, tell, stop, arm and disarm timers, publish events,
tell the outside.

Why apart from the supervisor actor: deciding and grouping commits is one concern, reaching
into other actors and threads is another. The supervisor actor hands the Effector the
effects of a decision once the decision's writes are committed; the Effector never sees the
store.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Container, Iterable, Sequence
from typing import Any

import msgspec
import pykka

from subagents.actors.agent import AgentActor, AgentKit, BehaviourFactory
from subagents.actors.deadlines import Deadlines
from subagents.actors.inbox import stop_message
from subagents.actors.lazy_event import LazyEvent
from subagents.actors.mail_desk import MailDesk
from subagents.actors.pooled import Dispatcher
from subagents.actors.pooled_agent import PooledAgentActor
from subagents.actors.threads import NoThread, ThreadPool
from subagents.actors.timer import TimerService
from subagents.definitions.spec import AgentSpec
from subagents.logs import get_logger
from subagents.messages import Event, EventKind, RestartDue, RunFinished, ToOutside
from subagents.supervision.effects import (
    ArmDeadline,
    DisarmDeadline,
    Effect,
    Publish,
    ScheduleRestart,
    StartRun,
    StopAgent,
    Tell,
    TellOutside,
)

log = get_logger("subagents.supervisor")


_UNASKED: Any = object()
"""``apply``'s ``heard`` before its first event: not asked yet."""

NO_THREAD = (
    "its agent could not start: no thread to be had (the process's thread limit: "
    "RLIMIT_NPROC, or the system's threads-max)"
)
"""A run's error when its agent found no thread to start on (``Effector._no_thread``)."""

_STOP = stop_message()
"""pykka's stop message, told to every agent stopped: one immutable (an empty named
tuple) for all, not one made per stop (100,000 at a close)."""


class _Live(msgspec.Struct, frozen=True, gc=False):
    """A live run's agent: its ref, its cancel signal, which start it is. Out of the cyclic
    GC (``gc=False``): nothing it refers to refers back to it, so it is never in a cycle,
    and one is held per live run."""

    ref: pykka.ActorRef[Any]
    cancel: threading.Event
    attempt: int = 1


class Effector:
    """The live runs' agent actors, and the effects carried out on them and the world."""

    def __init__(
        self,
        *,
        supervisor: pykka.ActorRef[Any],
        timer: TimerService,
        behaviour_for: Callable[[AgentSpec], BehaviourFactory],
        on_outside: Callable[[ToOutside], None],
        on_event: Callable[[Event], None],
        pool: ThreadPool | None,
        dispatcher: Dispatcher | None = None,
        mail: MailDesk | None = None,
        heard: Callable[[], Sequence[Container[EventKind]] | None] | None = None,
    ) -> None:
        """``mail``: the desk through which its agents take mail straight to each other
        (``actors/mail_desk.py``); its directory is kept here, as ``live`` is. ``heard``:
        asked once per ``apply`` that publishes, a cell holding the kinds of event someone
        takes now (``Subscribers.heard``; read again at each event), or None: every event is
        handed to ``on_event`` (as without it)."""
        self.supervisor = supervisor
        self.timer = timer
        self.behaviour_for = behaviour_for
        self.on_outside = on_outside
        """Where root outcomes go, and refusals of root runs told (not asked) to start."""
        self.on_event = on_event
        self.heard = heard
        self.pool = pool
        self.dispatcher = dispatcher
        """When given, agents hold no thread: their mailboxes are drained by its threads."""
        self.live: dict[str, _Live] = {}
        self._start_on: dict[str, Any] = (
            {"dispatcher": dispatcher} if dispatcher is not None else {}
        )
        """Where each agent's loop runs, when on a dispatcher (else ``AgentKit.pool``)."""
        self._actor = PooledAgentActor if dispatcher is not None else AgentActor
        self.mail = mail
        self._kit = AgentKit(
            supervisor, timer, behaviour_for, pool if dispatcher is None else None, mail
        )
        """What every agent actor started here shares (made once, not per start)."""
        self._directory = mail.directory if mail is not None else None
        self.deadlines = Deadlines(timer, supervisor)
        """The runs' deadlines, on the timer only for runs live at the next tick."""
        self._by_type: dict[type, Callable[[Any], None]] = {  # (``Publish``: in ``apply``)
            Tell: self._tell,
            StartRun: self._start,
            StopAgent: self._stop_agent,
            ArmDeadline: self.deadlines.arm,
            ScheduleRestart: self._schedule_restart,
            DisarmDeadline: self.deadlines.disarm,
            TellOutside: self._tell_outside,
        }
        self._by_type_unlisted = {**self._by_type, StopAgent: self._stop_unlisted}
        """The same, for effects that stop runs and start none: ``apply`` unlisted the
        runs they stop first, and nothing lists one again (only a start does), so each stop
        need not unlist its run again (a close stops 100,000 runs in one decision)."""

    def apply(self, effects: Iterable[Effect]) -> None:
        """Carry ``effects`` out in order; one that fails is logged, the rest go on. Each is
        carried out by its type's handler, found by one dict lookup (a ``match`` over the
        eight types tried them in turn: up to eight ``isinstance`` calls per effect). The
        types are listed once (in C) for the two looks ahead below (most decisions stop no
        run and start at most one); the loop reads each effect's again. An event
        (``Publish``: three of a trivial run's seven effects) goes to ``on_event`` straight,
        with no lookup."""
        handlers = self._by_type
        listed = effects if type(effects) is list else list(effects)  # (a decision's are)
        kinds = list(map(type, listed))
        if self._directory is not None and StopAgent in kinds:
            self._unlist_stopping(listed)
            if StartRun not in kinds:
                handlers = self._by_type_unlisted
        if self.dispatcher is not None and kinds.count(StartRun) > 1:
            self._threads_for_starts(listed)
        on_event, heard = self.on_event, _UNASKED
        for effect in listed:  # (``type`` read again, not a ``zip`` with the kinds: its
            try:  # ``strict`` keyword parsed per call cost more, ~1.7k instructions)
                if type(effect) is Publish:  # (half of a run's effects: published straight)
                    if heard is _UNASKED:  # (asked at the first: most decisions publish)
                        heard = self.heard() if self.heard is not None else None
                    if heard is None or effect.event.kind in heard[0]:  # (else: nobody)
                        on_event(effect.event)
                    continue
                handlers[type(effect)](effect)  # (every ``Effect`` type has one: no ``get``)
            except Exception:
                log.exception("effect failed", effect=type(effect).__name__)

    def _threads_for_starts(self, effects: list[Effect]) -> None:
        """When ``effects`` start several runs whose first handling blocks (an LLM run's
        model call: ``LLMFactory.blocks_at_start``), the dispatcher's threads for them made
        ready first (``Dispatcher.ready``): a wave's model calls do not wait for threads
        started one by one as each blocks. A start alone finds the thread its
        predecessor's end freed (``apply`` looks here only for two or more). The behaviour
        of a definition is looked up once for a row of starts of it (``spawn_many``'s batch:
        a thousand starts of one agent)."""
        blocking = 0
        spec: AgentSpec | None = None
        blocks: Callable[[Any], bool] | None = None
        for effect in effects:
            if type(effect) is StartRun:
                if effect.spec is not spec:
                    spec = effect.spec
                    blocks = getattr(self.behaviour_for(spec), "blocks_at_start", None)
                if blocks is not None and blocks(effect.checkpoint):  # (its first handling)
                    blocking += 1
        if blocking > 1:
            assert self.dispatcher is not None
            self.dispatcher.ready(blocking)

    def _unlist_stopping(self, effects: list[Effect]) -> None:
        """The runs ``effects`` stop taken out of the directory first: a run told of a stop
        before it is carried out (a parent's ``ChildDone`` comes before its child's
        ``StopAgent``) must not find the stopped run listed, so its mail to it is refused as
        to any ended run, not taken straight."""
        assert self._directory is not None
        for effect in effects:
            if type(effect) is StopAgent:
                self._directory.remove(effect.run_id)

    def _tell(self, effect: Tell) -> None:
        """``tell`` written out: a child's report to its parent, a spawn's reply, a
        delivery; every run's end tells one (``tell``'s call saved)."""
        live = self.live.get(effect.run_id)
        if live is not None:
            try:  # noqa: SIM105 (not ``contextlib.suppress``: an object, two calls)
                live.ref.tell(effect.message)
            except pykka.ActorDeadError:
                pass

    def _stop_agent(self, effect: StopAgent) -> None:
        # ``apply`` unlisted it before carrying anything out; unlisted again here: a start
        # earlier in the same decision listed it again (a cancel walk starts a queued run
        # into a freed slot and then stops it)
        if self._directory is not None:
            self._directory.remove(effect.run_id)
        self._stop(self.live.pop(effect.run_id, None))

    def _stop_unlisted(self, effect: StopAgent) -> None:
        """``_stop_agent`` of a run ``apply`` unlisted, and no start of its effects listed
        again."""
        self._stop(self.live.pop(effect.run_id, None))

    def _schedule_restart(self, effect: ScheduleRestart) -> None:
        run_id = effect.run_id

        def due(rid: str = run_id, me: pykka.ActorRef[Any] = self.supervisor) -> None:
            with contextlib.suppress(pykka.ActorDeadError):
                me.tell(RestartDue(run_id=rid))

        self.timer.schedule_in(("restart", run_id), effect.delay_s, due)

    def _tell_outside(self, effect: TellOutside) -> None:
        self.on_outside(effect.message)

    def tell(self, run_id: str, message: Any) -> None:
        """Tell the live run ``run_id``'s agent ``message`` (nothing if it is gone)."""
        live = self.live.get(run_id)
        if live is not None:
            try:  # noqa: SIM105 (not ``contextlib.suppress``: an object, two calls)
                live.ref.tell(message)
            except pykka.ActorDeadError:
                pass

    def ended(self, run_id: str, attempt: int) -> None:
        """The agent of ``run_id`` reported its end and stops by itself: forgotten here,
        unless the report comes from an earlier start of a restarted run."""
        live = self.live.get(run_id)
        if live is not None and (not attempt or live.attempt == attempt):
            del self.live[run_id]
            if self._directory is not None:
                self._directory.remove(run_id, live.attempt)

    def stop_all(self) -> None:
        """Stop every agent at once (the store failed, the lease was lost)."""
        if self._directory is not None:
            self._directory.clear()
        self.deadlines.clear()
        for live in self.live.values():
            self._stop(live)
        self.live.clear()

    @staticmethod
    def _stop(live: _Live | None) -> None:
        """Cancel the run's work and tell its actor to stop, without waiting: many runs stop
        at once (a tree, ``StopAll`` at close), each on its own actor's time. A stop message
        told, not ``ref.stop(block=False)``: no two futures per run that nobody reads.
        An actor whose start met the thread limit (``NoThread``: it never ran) has nothing
        to be told: raised, it left ``stop_all``'s other runs live and a store outage's
        ``begin`` never told the roots' callers (tests/runtime/test_thread_limit.py)."""
        if live is not None:
            live.cancel.set()
            try:  # (not ``contextlib.suppress``: an object per stop, 100,000 at a close)
                live.ref.tell(_STOP)
            except pykka.ActorDeadError:
                pass
            except NoThread:  # (its actor never ran: forgotten, as one already stopped)
                log.warning("stopped a run whose actor never had a thread", exc_info=True)

    def _start(self, effect: StartRun) -> None:
        record = effect.record
        earlier = self.live.pop(record.run_id, None)
        if earlier is not None:  # a restart: the earlier start must not go on working
            self._stop(earlier)
        cancel = LazyEvent()  # waited on only by a model call's backoff or delay
        try:  # (the actor lists itself in the mail desk's directory: ``RunDirectory.list_start``)
            ref = self._actor.start(effect, cancel, self._kit, **self._start_on)
        except BaseException as refused:
            if self._directory is not None:
                self._directory.remove(record.run_id, effect.attempt)
            if type(refused) is not NoThread:
                raise
            self._no_thread(effect, refused)
            return
        self.live[record.run_id] = _Live(ref=ref, cancel=cancel, attempt=effect.attempt)

    def _no_thread(self, effect: StartRun, refused: NoThread) -> None:
        """The run's agent found no thread to start on (the process's thread limit): it
        never ran and never will (nothing else tells it), so the run fails, reported as its
        agent would report a failure (as a cluster's unplaced run is: ``remote.py``); the
        supervisor decides the rest (its record and events, its parent, its slot, a
        ``transient`` run's restart: ``no_thread`` is an abnormal exit). Left, it stayed
        RUNNING for ever, its slot held (tests/runtime/test_start_thread_limit.py)."""
        record = effect.record
        log.error("no thread to start a run's agent on", run_id=record.run_id, error=str(refused))
        with contextlib.suppress(pykka.ActorDeadError):
            self.supervisor.tell(
                RunFinished(
                    run_id=record.run_id,
                    error_kind="no_thread",
                    error=NO_THREAD,
                    attempt=effect.attempt,
                )
            )
