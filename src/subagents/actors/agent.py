"""AgentActor: one pykka actor per running run, hosting its behaviour.

Thin on purpose: it implements the AgentPort a behaviour talks to (telling the supervisor, the
timer service or itself) and turns anything the behaviour raises into a failed run, so a bug
or a crashing tool never hangs a requester or leaks a thread.

Per handled message (or ``Batch``, whose messages go to the behaviour in order), the mail
reports the behaviour makes go to the supervisor together when the handling ends, and the
wakes it asks for are armed then (a wake cancelled within the same handling never is).
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable, Mapping
from typing import Any, cast

import msgspec
import pykka

from subagents.actors.agent_start import AgentKit as AgentKit
from subagents.actors.agent_start import Behaviour as Behaviour
from subagents.actors.agent_start import BehaviourFactory as BehaviourFactory
from subagents.actors.agent_start import Started
from subagents.actors.handoff import pay_nudge
from subagents.actors.held_reports import JournalReport, reports_of
from subagents.actors.inbox import FastInboxActor
from subagents.actors.lazy_event import LazyEvent
from subagents.actors.mail_desk import DirectMail, MailDesk, passes, report
from subagents.actors.mail_desk import report as _report
from subagents.actors.wakes import WAKES_DUE, Wakes
from subagents.behaviour.failures import handling_raised
from subagents.behaviour.port import NOT_RUN_STOPPING
from subagents.logs import get_logger
from subagents.messages import (
    ApprovalAsked,
    ApprovalTaken,
    Ask,
    Batch,
    Continue,
    DeliverMail,
    JournalEntry,
    Park,
    Parked,
    RunFinished,
    RunProgress,
    RunRecord,
    SendMail,
    SlotWanted,
    SpawnRequest,
    StatusOf,
    StepTaken,
    StopRequest,
    StopRequested,
    Streamed,
    Subscribe,
    ToolAnswered,
    ToolCalled,
    ToolStarting,
    Unpark,
    WaitingChanged,
)
from subagents.supervision.effects import StartRun
from subagents.supervision.mail_routes import ANSWERS

log = get_logger("subagents.agent")


def _only_records(behaviour: Behaviour, message: Any) -> bool:
    """Whether handling ``message`` now would only record it (no user code, no model call,
    no tool), as the behaviour's ``only_records`` says (a function agent's): a parked run
    takes such a message without asking for its slot. A behaviour without one (the LLM
    loop: a mail taken parked could answer a parent's approval and run the tool) says no."""
    only = getattr(behaviour, "only_records", None)
    return only is not None and bool(only(message))


def _summary(arguments: Mapping[str, Any], limit: int = 300) -> dict[str, Any]:
    """Tool arguments cut short for events and logs."""
    out: dict[str, Any] = {}
    for key, value in arguments.items():
        if isinstance(value, str) and len(value) > limit:
            value = value[:limit] + "…"
        out[key] = value
    return out


def _unrecorded(
    direct: DirectMail | None, desk: MailDesk | None, record: RunRecord, attempt: int
) -> DirectMail | None:
    """A model turn's step asked of the supervisor got no answer in ``ASK_TIMEOUT_S`` (a
    supervisor stalled that long): the run goes on, its step still on its way, not known
    recorded. Its mail then goes by the supervisor, behind the step, until the supervisor
    acknowledges one (``MailRoutes.unsettled``): taken straight, the turn's answer would be
    its own commit, before the turn that decided it, and a crash between the two would keep
    the answer and lose the turn; the resumed run would take the turn again, and a model
    answer it again under a new call id (tests/durability/test_llm_replier_crash.py).
    The run's ``DirectMail`` (made here if it had none: None without a desk)."""
    if desk is None:
        return direct
    if direct is None:
        direct = DirectMail(desk, record, attempt)
    direct.routes.unsettled()
    return direct


def _status_refused(exc: Exception) -> ValueError:
    """Why a status ask got no answer, in words a function's journal keeps (and a replay
    hands it again): no answer in time (a stalled supervisor); on a cluster's node the
    supervisor's refusal, which comes as the ask's error (``ValueError: ...``); otherwise
    the runtime is closing."""
    if isinstance(exc, pykka.Timeout):
        return ValueError(f"no status: the supervisor did not answer within {ASK_TIMEOUT_S:g} s")
    said = str(exc)
    if said.startswith("ValueError: "):
        return ValueError(said.removeprefix("ValueError: "))
    return ValueError("the runtime is closing: no status")


def _not_started(exc: Exception) -> str:
    """Why a side-effecting tool call whose start the supervisor did not record is not run,
    as the model reads it: no answer in time (a stalled supervisor: the run goes on), or
    the runtime closing."""
    if isinstance(exc, pykka.Timeout):
        return (
            f"not run: the supervisor did not record its start within {ASK_TIMEOUT_S:g} s"
            " (a call with side effects runs only once its start is recorded)"
        )
    return NOT_RUN_STOPPING


ASK_TIMEOUT_S = 30.0
"""How long a run waits for the supervisor's answer to what it asks (a model turn's step, a
tool call's start, a status); past it, a step goes on unanswered (``_unrecorded``), a tool
call is not run, a status is refused."""

_LATER = itertools.count()
"""Keys of the calls ``AgentActor.later`` schedules (each its own timer)."""


class AgentActor(FastInboxActor, Started):
    """Runs one run's behaviour; every message it gets goes to the behaviour."""

    use_daemon_thread = True

    _wakes: Wakes | None = None  # made at the first wake asked for (``actors/wakes.py``)
    _reading: list[str] | None = None
    """The mail ids of the read receipt at the end of ``_held``, still growing."""
    _journal: JournalReport | None = None
    """This handling's journal report in ``_held`` (at the place of its first entry)."""
    _ended: bool = False
    _handling: int = 0
    """The thread in a handling of this actor now (0: none): see ``_end``."""
    _parked: list[Any] | None = None
    """While parked (it gave its slot back): what it received meanwhile, held back."""
    _wanting: bool = False
    _parks_at_wait: bool | None = False  # True: it said it waits, parks at the handling's end
    _acks: list[Any] | None = None
    """While ``_settle`` sends the held reports: the acks of mail taken straight, to hand on."""
    _direct: DirectMail | None = None
    """Made at the first flush (most runs never mail: a waiting run costs its objects)."""
    _log: Any = None
    behaviour: Behaviour | None = None

    def __init__(self, start: StartRun, cancel: LazyEvent, kit: AgentKit) -> None:
        """The run ``start`` says (its record, definition, deadline, what a resumed run is
        handed), ``cancel`` set when it must stop, with the parts every agent of the runtime
        shares (``kit``). Three positional arguments: fourteen keywords through pykka's
        ``start`` (and the pooled one's) were re-packed at each hop, ~1.6 us of the
        supervisor's thread per start."""
        super().__init__()
        self._start = start  # (the fields read most copied: ``Started``; same order each)
        self.record, self.spec, self.attempt = start.record, start.spec, start.attempt
        self.cancel = cancel
        self._kit = kit  # one attribute, not four: room for ``Started``'s (test_agent_attributes)
        self._factory = kit.behaviour_for(start.spec)
        self._held: list[Any] = []
        """Mail reports made in this handling, sent to the supervisor when it ends."""
        self._wakes = self._reading = self._journal = self._parked = self._acks = None
        self._direct = self._log = self.behaviour = None  # (each key a handling may set, set
        self._ended = self._wanting = self._parks_at_wait = False  # now, its class default:
        self._handling = 0  # CPython's shared keys, test_agent_attributes)
        if kit.mail is not None:  # last: listed before its loop can run (see ``list_start``)
            kit.mail.directory.list_start(self.actor_ref, start)

    @property
    def log(self) -> Any:
        """This run's logger, its ids bound on first use (``_bound_log``)."""
        if self._log is None:
            self._log = _bound_log(self.record)
        return self._log

    # ---- pykka hooks -------------------------------------------------------------------------

    def _start_actor_loop(self) -> None:
        """On a pooled thread when there is a pool (pykka's hook for actor types that run
        their loop elsewhere): the supervisor, which starts every run, then does not wait
        for a new thread to come up (none to be had: ``FastInboxActor._loop_on``)."""
        pool = self._kit.pool
        if pool is None:
            super()._start_actor_loop()
        else:
            self._loop_on(pool)

    def on_start(self) -> None:
        self._handle(self._begin)  # (most short runs end in it)

    def _begin(self) -> None:
        self.behaviour = self._factory(self)
        start = self._start
        self.behaviour.start(start.checkpoint, start.pending_mail, start.recovered)

    def on_receive(self, message: Any) -> None:
        if self._ended or self.cancel._flag or self.behaviour is None:  # (``_flag``: LazyEvent)
            return
        kind = type(message)
        if kind is DeliverMail and self._parked is None:  # (most: ``_one``'s, without its frame)
            self._handle(self.behaviour.on_message, message)
        elif kind is Batch or message is WAKES_DUE:
            self._handle(self._receive, message)
        else:
            self._handle(self._one, message)

    def _receive(self, message: Any) -> None:
        if isinstance(message, Batch):  # in order, as if sent one by one
            for inner in message.messages:
                if self._ended or self.cancel.is_set():
                    break
                self._one(inner)
        elif message is WAKES_DUE and self._wakes is not None:  # its one timer went off
            for wake in self._wakes.due(self.actor_ref):
                if self._ended or self.cancel.is_set():
                    break
                self._one(wake)
        else:
            self._one(message)

    def _handle(self, work: Callable[..., None], *args: Any) -> None:
        """One handling: ``work``, then ``_settle``, in one ``try`` (not a frame around each
        message and flush): whatever it raises fails the run at once (``handling_raised``),
        its other messages unhandled. A run that ended in it stops its actor when it is over
        (pykka's ``_stop``): no stop message goes round through the mailbox (``_end``)."""
        self._handling = threading.get_ident()
        try:
            work(*args)
            if self._held or self._wakes is not None or self._parks_at_wait:  # (else: no frame)
                self._settle()
        except BaseException as exc:  # (a BaseException too: ``handling_raised``)
            _raised(self, exc)
        finally:
            self._handling = 0
        if self._ended:
            self._stop()

    def _one(self, message: Any, straight: bool = False) -> None:
        """Hand ``message`` to the behaviour, unless this run is parked (supervision/parking.py):
        then held back, its slot asked, until ``Unpark``; ``straight``: a straight mail's ack"""
        assert self.behaviour is not None
        if not straight and self._direct is not None and type(message) in ANSWERS:
            self._direct.saw(message)
        if self._parked is None:
            if type(message) is Park:
                # Between two messages the behaviour is never working: it can always park.
                self._parked = []
                self._tell(Parked(run_id=self.record.run_id, attempt=self.attempt))
            elif type(message) is not Unpark:  # (an Unpark not parked: nothing to do)
                self.behaviour.on_message(message)
        elif type(message) is Unpark:
            held, self._parked, self._wanting = self._parked, None, False
            for inner in held:
                if self._ended or self.cancel.is_set():
                    break
                self._one(inner)  # a Park among them parks it again
        elif not self._parked and _only_records(self.behaviour, message):
            # (nothing held before it: order kept) e.g. one child's end of a gather that
            # still waits: recorded without a slot, not a park and unpark round trip
            self.behaviour.on_message(message)
        else:
            self._parked.append(message)
            if not self._wanting:
                self._wanting = True
                self._tell(SlotWanted(run_id=self.record.run_id, attempt=self.attempt))

    def _settle(self) -> None:
        """The handling of one message (or Batch) is over: arm the wakes still wanted and send
        the mail reports held meanwhile, as one message. A wake asked for and cancelled within
        one handling (a ``receive`` answered by the next mail of the same Batch) never
        reaches the timer service. The acknowledgements of mail that went straight to its
        recipients are handed to the behaviour at once, as a message that had just come
        (no hand-off through this actor's own mailbox); what they lead to settles in turn."""
        while True:
            if self._parks_at_wait:
                _park_at_wait(self)
            if self._wakes is not None and self._wakes.wanted:  # (pykka's ``actor_ref``:
                self._wakes.arm(self._actor_ref, ended=self._ended)  # a property, a call)
            if not self._held:
                return
            self._acks = []
            try:  # a failure to send (no supervisor) fails the run (``_handle``), as any report's
                self.flush_reports()
            finally:
                acks, self._acks = self._acks, None
            if not acks and not self._parks_at_wait:  # (a park put off: ``_park_at_wait``)
                return
            behaviour: Behaviour = self.behaviour  # type: ignore[assignment]  # (no cast)
            for ack in acks:
                if self._ended or self.cancel._flag:
                    return
                if self._parked is None:  # (``_one``'s path for it, without its frame)
                    behaviour.on_message(ack)
                else:
                    self._one(ack, True)

    def on_stop(self) -> None:
        if self._wakes is not None:
            self._wakes.cancel_all()
        close = getattr(self.behaviour, "close", None)
        if close is not None:  # the run is over: what it started (processes) ends with it
            try:
                close()
            except Exception:
                self.log.exception("closing the behaviour failed")
        self.behaviour = None  # it holds this actor (its port): no cycle left for the GC

    # ---- AgentPort ---------------------------------------------------------------------------

    # Every report carries this start's ``attempt``: the supervisor ignores reports from an
    # earlier start of a restarted run, whose actor may still be finishing a call.
    #
    # Told reports (sends, read receipts, spawns, stops, tool calls, answers...) are held
    # until the handling of the current message ends and then go as one message (a
    # ``Batch``), in the order they were made, consecutive read receipts merged into one: a
    # burst of sends costs one hand-off to the supervisor, not one per mail, and the children
    # one turn spawns are all admitted before any of them can act (a child that mails a
    # sibling by name at once finds it; told one by one, the first child could start and
    # mail before the supervisor had the second's request). Whatever is asked (a step, a
    # journaled tool's start) first sends what is held; so does a tool about to run.

    def _tell(self, message: Any) -> None:
        self._reading = None  # a read receipt after this one is a new one, in order
        self._held.append(message)

    def flush_reports(self) -> None:
        pay_nudge()  # a record, an ask may wait: what this turn mailed is taken meanwhile
        held, self._held, self._reading, self._journal = self._held, [], None, None
        if not held:
            return
        kit, record, attempt = self._kit, self.record, self.attempt
        messages = reports_of(held, record.run_id, attempt)
        sent = None
        direct = self._direct
        if kit.mail is not None and passes(messages, direct, self._ended):  # straight
            if direct is None:
                direct = self._direct = DirectMail(kit.mail, record, attempt)
            messages, sent = direct.post(messages, self.cancel._flag)
        one = messages[0] if len(messages) == 1 else Batch(messages=messages)
        report(kit.mail, kit.supervisor, one, messages)  # (in line, in order: mail_desk)
        if sent is not None:  # after the supervisor has them: it hears of mail first
            if self._acks is not None:  # the end of a handling: handed on by ``_settle``
                self._acks.extend(sent.acks)
            else:  # before any answer to them can come
                with contextlib.suppress(pykka.ActorDeadError):
                    self.actor_ref.tell(sent.acknowledgement())
            sent.deliver()

    def request_spawn(self, req: SpawnRequest) -> None:
        self._tell(msgspec.structs.replace(req, attempt=self.attempt))

    def send_mail(self, msg: SendMail) -> None:
        self._reading = None
        if msg.attempt != self.attempt:  # (a first start's is the default: not made twice)
            msg = msgspec.structs.replace(msg, attempt=self.attempt)
        self._held.append(msg)

    def request_stop(self, req: StopRequest | StopRequested) -> None:
        self._tell(msgspec.structs.replace(req, attempt=self.attempt))

    def subscribe(self, msg: Subscribe) -> None:
        self._tell(msgspec.structs.replace(msg, attempt=self.attempt))

    def report_step(self, step: StepTaken, *, wait: bool = True) -> None:
        # Asked, not told: recorded (a budget stop, if it went over, has set ``cancel``) before
        # its tool calls run (no mail of the turn commits before it) and the next model call.
        # The supervisor never asks agents: no deadlock. A last step (``wait`` False) is told.
        step = msgspec.structs.replace(step, attempt=self.attempt)
        if not wait:
            self._tell(step)
            return
        self.flush_reports()  # (what is held goes first; pays a nudge owed: handoff.py)
        try:
            self._kit.supervisor.ask(Ask(step), timeout=ASK_TIMEOUT_S)
        except (pykka.Timeout, pykka.ActorDeadError):  # not known recorded: ``_unrecorded``
            self._direct = _unrecorded(self._direct, self._kit.mail, self.record, self.attempt)

    def report_answer(self, answer: ToolAnswered) -> None:
        self._tell(msgspec.structs.replace(answer, attempt=self.attempt))

    def ask_approval(self, asked: ApprovalAsked) -> None:
        self._tell(msgspec.structs.replace(asked, attempt=self.attempt))

    def approval_taken(self, taken: ApprovalTaken) -> None:
        self._tell(msgspec.structs.replace(taken, attempt=self.attempt))

    def journal_start(self, starting: ToolStarting) -> str | None:
        # Asked, like a step: the call is in the store before it may run (tools.journal).
        self.flush_reports()  # (what is held goes first; pays a nudge owed: handoff.py)
        asked = msgspec.structs.replace(starting, attempt=self.attempt)
        try:
            reply = self._kit.supervisor.ask(Ask(asked), timeout=ASK_TIMEOUT_S)
        except (pykka.ActorDeadError, pykka.Timeout) as exc:
            if isinstance(exc, pykka.Timeout):  # its end follows the ask (inbox: not in line)
                self._kit.supervisor.tell(msgspec.structs.replace(asked, ended=True))  # late: over
            return _not_started(exc)
        if reply is True:
            return None
        # Refused: this start is over (``RunTable.reporting``); it ends as a stopped one does
        # (cancelled, nothing reported), where no stop reaches it (a Ray node taken for lost).
        self.cancel.set()
        self._end(None)
        return NOT_RUN_STOPPING

    def journal_end(self, ended: ToolStarting) -> None:
        self._tell(msgspec.structs.replace(ended, attempt=self.attempt, ended=True))

    def report_tool_call(self, tool: str, arguments: Mapping[str, Any]) -> None:
        self._tell(
            ToolCalled(
                run_id=self.record.run_id,
                tool=tool,
                input=_summary(arguments),
                attempt=self.attempt,
            )
        )

    def ask_status(self, run_id: str) -> RunProgress:
        return _status_asked(self, run_id)

    def later(self, seconds: float, call: Callable[[], None]) -> None:
        self._kit.timer.schedule_in(("later", self.record.run_id, next(_LATER)), seconds, call)

    def report_streamed(self, streamed: Streamed) -> None:
        # At once, not held (the model call goes on), in order with the reports (``report``:
        # told straight, it was decided after the run's end put in line behind it: dropped).
        # Best effort: a runtime closing under a streaming call does not fail the call here
        with contextlib.suppress(pykka.ActorDeadError):
            streamed = msgspec.structs.replace(streamed, attempt=self.attempt)
            report(self._kit.mail, self._kit.supervisor, streamed, (streamed,))

    def mail_read(self, mail_ids: tuple[str, ...]) -> None:
        if self._reading is None:
            self._reading = []
            self._held.append(self._reading)  # a MailRead once flushed
        self._reading.extend(mail_ids)

    def journal(self, entry: JournalEntry, read_mail: tuple[str, ...] = ()) -> None:
        # One journal report per handling, where its first entry was made: later entries
        # join it, so they reach the supervisor *earlier* than the reports made between,
        # never later (an entry must not be recorded after what the function did next).
        report = self._journal
        if report is None:
            report = self._journal = JournalReport()
            self._held.append(report)
        report.entries.append(entry)
        if read_mail:
            report.read_mail.extend(read_mail)

    def set_waiting(self, waiting: bool) -> None:
        parks = self._parks_at_wait  # its start told to park at its first wait: ``_park_at_wait``
        if parks is not None and (waiting or parks) and self._start.park_at_wait:
            self._parks_at_wait = waiting  # (said and unsaid in one handling: nothing told)
            return
        self._tell(WaitingChanged(run_id=self.record.run_id, waiting=waiting, attempt=self.attempt))

    def wake_after(self, key: str, seconds: float) -> None:
        if seconds >= self.record.deadline_s:  # it cannot go off first: not armed (wakes.py)
            return
        if self._wakes is None:
            self._wakes = Wakes(self._kit.timer, self.record.run_id)
        self._wakes.want(key, seconds)  # armed when this handling ends

    def cancel_wake(self, key: str) -> None:
        if self._wakes is not None:
            self._wakes.cancel(key)

    def continue_later(self) -> None:
        self.actor_ref.tell(Continue())

    def finish(self, result: str, typed: bool = False) -> None:
        behaviour = self.behaviour  # (``_unread``, without its frame: every run's end)
        try:
            unread = behaviour.unread_mail() if behaviour is not None else ()
        except Exception:
            unread = ()
        self._end(
            RunFinished(
                run_id=self.record.run_id,
                result=result,
                typed=typed,
                unread_mail=unread,
                attempt=self.attempt,
            )
        )

    def fail(self, kind: str, message: str) -> None:
        self._end(
            RunFinished(
                run_id=self.record.run_id,
                error_kind=kind,
                error=message,
                unread_mail=self._unread(),
                attempt=self.attempt,
            )
        )

    def _unread(self) -> tuple[str, ...]:
        try:
            return self.behaviour.unread_mail() if self.behaviour is not None else ()
        except Exception:
            return ()

    def _end(self, report: RunFinished | None) -> None:
        if self._ended:
            return
        self._ended = True
        if report is not None and not self.cancel.is_set():  # a stopped run's: supervisor's
            if not self._held:  # alone (most ends): ``flush_reports``' result, without it
                pay_nudge()  # (as that would)
                try:  # noqa: SIM105 (as below)
                    _report(self._kit.mail, self._kit.supervisor, report, (report,))
                except pykka.ActorDeadError:  # no supervisor left to hear it
                    pass
            else:  # after what is held, in one message: a last step told and the end are
                self._held.append(report)  # decided in one group, one transaction (_GROUPED)
        if self._held:
            try:  # noqa: SIM105 (``contextlib.suppress``: ~0.5 us against ~0.1, every run's end)
                self.flush_reports()
            except pykka.ActorDeadError:  # no supervisor left to hear it
                pass
        if self._handling != threading.get_ident():  # (else: stopped as ``_handle`` ends)
            self.stop()  # off its handlings (a function's own thread using its context)


def _status_asked(agent: AgentActor, run_id: str) -> RunProgress:
    """``agent``'s run asks where ``run_id`` is; what it holds goes first (as before any ask),
    so that the answer counts the mail its turn sent before it asked."""
    agent.flush_reports()  # (pays a nudge owed: handoff.py)
    try:
        answer = agent._kit.supervisor.ask(
            Ask(StatusOf(run_id=run_id, asker=agent.record.run_id)), timeout=ASK_TIMEOUT_S
        )
    except (pykka.ActorDeadError, pykka.Timeout) as exc:
        raise _status_refused(exc) from None
    return cast(RunProgress, answer)


def _bound_log(r: RunRecord) -> Any:
    """A run's logger, its ids bound. Bound on first use, not in the constructor: most runs
    never log, and binding is on every run's spawn path."""
    return log.bind(
        run_id=r.run_id,
        parent_run_id=r.parent_run_id,
        root_run_id=r.root_run_id,
        agent=r.agent,
        depth=r.depth,
    )


def _park_at_wait(agent: AgentActor) -> None:
    """The handling in which ``agent``'s run said it waits is over, and runs of its slot key
    were queued behind it when it started (``StartRun.park_at_wait``): it parks, as on a
    ``Park`` between two messages, and says so with its waiting report, one message
    (``WaitingChanged.parked``), so the supervisor gives its slot to the queue without asking
    (``Parking.parked_at_wait``). Once per start (``_parks_at_wait`` None after): a later
    wait waits to be asked. Said and unsaid in one handling (``set_waiting``), nothing is.
    Put off while mail it sent in that handling is still held: its ids may come back in this
    ``_settle`` (mail taken straight to its recipients), and a run whose first wait was for
    them (``await ctx.send``) would otherwise lend its slot only to ask for it back at once;
    it parks once they are handed to it, unless it ended meanwhile."""
    if agent._kit.mail is not None and SendMail in map(type, agent._held):
        return
    agent._parks_at_wait = None
    if agent._ended:  # it ended after saying it waits: its end is its report
        return
    parks = agent._parked is None and not agent.cancel.is_set()
    if parks:
        agent._parked = []
    run_id, attempt = agent.record.run_id, agent.attempt
    agent._tell(WaitingChanged(run_id=run_id, waiting=True, attempt=attempt, parked=parks))


def _raised(run: AgentActor, exc: BaseException) -> None:
    """A handling raised ``exc``: the run fails on it, unless it is a stopped run's report
    to a supervisor already stopped (a close): that report is the stop's, not a crash."""
    if type(exc) is pykka.ActorDeadError and run.cancel.is_set():
        run.log.info("a stopped run's reports dropped: its supervisor has stopped")
        run._end(None)
    else:
        handling_raised(run, run.record.agent, exc)
