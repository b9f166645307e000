"""SupervisorActor: the one actor that owns run state; thin over SupervisorCore.

It receives every request and report, asks the core to decide, and carries out the decision:
first the store writes (inside one store batch), then, once they are committed, the effects
(``actors.effector``: starting agent actors, telling them things, arming deadlines on the
timer service, handing root outcomes to the Runtime, publishing events). It is also where
the store is read for the core (a restore's snapshot with the leases, the commands other
processes posted, the mail a restarted run sent): the core does no I/O.

Asks and tells: a sender that waits for the answer wraps its message in ``Ask``; the answer,
or the error raised while handling it, goes back to it. Anything else is a tell: a failure
handling it is logged, a run that sent it hears of it (so it does not wait on a tool call
until its deadline), and the supervisor goes on serving. Nothing is guessed from content.

Group commit: reports that nobody waits on (mail between agents, read receipts, waiting
changes, finished runs, a run's last step told with its end...) that arrive while more
messages are already queued are handled in one store transaction, up to ``GROUP_MAX`` of
them, and their effects are carried out only once it is committed. With SQLite a commit
costs far more than the writes in it, so a burst of mail costs one commit, not one per
mail. An ask, or a message not in the list, commits the open group first.

Batches: an agent sends the mail reports of one handling as one ``Batch``; its messages are
handled in order as if they had arrived alone, except that a run of consecutive sends (or
read receipts) goes to the core in one call (one delivery per recipient, one acknowledgement
message per sender, events per step). After a commit, the held Tells to each run go as one
``Batch`` per run (``supervision.coalesce``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from subagents.actors.agent import BehaviourFactory
from subagents.actors.alone import STRAIGHT, last_step_decision, last_steps, receive, straight
from subagents.actors.ask_claims import AskClaims
from subagents.actors.command_poll import CommandPoll
from subagents.actors.deciders import deciders
from subagents.actors.effector import Effector
from subagents.actors.end_race import EndRace
from subagents.actors.group_linger import COMMIT_DUE, NOTHING, GroupLinger, Records, late_reports
from subagents.actors.inbox import FastInboxActor
from subagents.actors.outage import LOST_LEASE, Outage, poll_later
from subagents.actors.pooled import Dispatcher
from subagents.actors.records_written import records_written
from subagents.actors.restored import restored
from subagents.actors.run_status import status_of
from subagents.actors.settle_line import SettleLine
from subagents.actors.spawn_group import decide_together, groupable, spawns_end, step_spawn
from subagents.actors.step_tail import StepTail
from subagents.actors.sweeping import sweep
from subagents.actors.threads import ThreadPool
from subagents.actors.timer import TimerService
from subagents.actors.told_answers import answer_told, failure_reason, rolled_back, write_failed
from subagents.definitions.spec import AgentSpec
from subagents.logs import get_logger
from subagents.messages import (
    ApprovalAsked,
    ApprovalTaken,
    Ask,
    Batch,
    ChildDone,
    Event,
    Inspect,
    Journal,
    LeaseLost,
    MailPosted,
    MailRead,
    Parked,
    Placed,
    PollCommands,
    Restore,
    RunFinished,
    SendMail,
    SlotWanted,
    SpawnRequest,
    SpawnsDecided,
    StatusOf,
    StepTaken,
    Streamed,
    Subscribe,
    Sweep,
    Timeout,
    ToolAnswered,
    ToolCalled,
    ToolStarting,
    ToOutside,
    TreeRecords,
    WaitingChanged,
)
from subagents.store.base import RunStore, StoreError
from subagents.store.fencing import batch_writer
from subagents.supervision.coalesce import coalesce
from subagents.supervision.core import SupervisorCore
from subagents.supervision.effects import (
    Decision,
    Effect,
    TellOutside,
)

log = get_logger("subagents.supervisor")

GROUP_MAX = 100
"""Most messages handled in one store transaction (bounds how long readers wait on it)."""

_GROUPED = frozenset(
    {
        SendMail,
        MailPosted,
        MailRead,
        Journal,
        WaitingChanged,
        RunFinished,
        StepTaken,  # told: a run's last step, with its end (asked, it is answered alone)
        ToolCalled,
        ToolAnswered,
        Timeout,
        ApprovalAsked,
        ApprovalTaken,
        Parked,
        SlotWanted,
        Placed,
        Subscribe,
        Streamed,
    }
)
"""Told reports whose handling may share the open group's transaction."""

_SETTLING = frozenset({Journal, WaitingChanged})
_RUNS: dict[type, frozenset[type]] = {
    SendMail: frozenset({SendMail}),
    MailRead: frozenset({MailRead}),
    Journal: _SETTLING,
    WaitingChanged: _SETTLING,
}
"""The consecutive messages of a ``Batch`` decided in one core call with the one of this
type: its sends, its read receipts, or (a function agent's handling that ends in a
``receive``: its journal, then that it waits) its journals and waiting reports."""


def _decide_run(core: SupervisorCore, run: tuple[Any, ...]) -> Decision:
    """One decision on a run of a ``Batch``'s messages (``_RUNS``); the late line's
    ``Records`` are decided and written by ``records_written``."""
    kind = type(run[0])
    if kind is SendMail:
        return core.send_mails(run)
    if kind is MailRead:
        return core.mail_reads(run)
    return _failed_alone(core.settled(run))


def _failed_alone(decision: Decision) -> Decision:
    """A decision whose reply is the reports it left out (a bug in each), each logged."""
    for message, exc in decision.reply:
        name, run_id = type(message).__name__, message.run_id
        log.error("supervisor failed to handle a report", message=name, run_id=run_id, exc_info=exc)
    return decision


class SupervisorActor(FastInboxActor):
    use_daemon_thread = True
    _handle_receive = receive  # (actors/alone: a message alone decided straight)

    def __init__(
        self,
        *,
        core: SupervisorCore,
        store: RunStore,
        timer: TimerService,
        behaviour_for: Callable[[AgentSpec], BehaviourFactory],
        on_outside: Callable[[ToOutside], None],
        on_event: Callable[[Event], None],
        on_thread: Callable[[threading.Thread], None] | None = None,
        pool: ThreadPool | None = None,
        dispatcher: Dispatcher | None = None,
        now: Callable[[], float] = time.time,
        effector: Callable[..., Effector] = Effector,
        claims: AskClaims | None = None,
    ) -> None:
        """``effector``: what carries decisions out (an ``Effector``'s arguments): the
        runtime's own, or one that hosts the runs elsewhere (``actors.remote``). ``claims``:
        those of the asks its callers may give up on (``SupervisorClient.ask_claimed``)."""
        super().__init__()
        self.claims = AskClaims() if claims is None else claims
        self.core = core
        self.store = store
        self.race = EndRace(self, store, batch_writer(store))  # (a decision's writes: ``_write``)
        self.on_outside = on_outside
        self.on_thread = on_thread
        self.now = now
        self.effector = effector(
            supervisor=self.actor_ref,
            timer=timer,
            behaviour_for=behaviour_for,
            on_outside=on_outside,
            on_event=on_event,
            pool=pool,
            dispatcher=dispatcher,
        )
        self.outage = Outage(core, store, on_outside, poll_later(timer, self.actor_ref))
        """Its ``failure``: why nothing is taken on now (the store failed, the lease is lost);
        read as an attribute on every message, not through a property (a call each)."""
        self._deciders = deciders(core, store, self.effector.ended)
        self._group: AbstractContextManager[None] | None = None
        self._held: list[Effect] = []
        self._grouped = 0
        self.settling = SettleLine(self._settle, self.actor_inbox.empty)
        self.linger = GroupLinger(timer, self.actor_ref, store)
        self.late = late_reports(self, timer)  # (after ``linger``: it reads its delay)
        self.tail = StepTail(self, timer)  # (after ``late``: it reads its line)
        self.poll = CommandPoll(core, store, self._lost)  # (``PollCommands``)

    def on_start(self) -> None:
        if self.on_thread is not None:  # so that the runtime can join the thread on close
            self.on_thread(threading.current_thread())

    def on_stop(self) -> None:
        receive(self, COMMIT_DUE)  # the held tail, the reports in line, the open group committed

    # ---- receiving -------------------------------------------------------------------------

    def on_receive(self, message: Any) -> Any:
        """Handle one message. The supervisor must outlive any failure (a store error, a bug):
        a failed ask is raised to its sender; a failed tell is logged, never fatal."""
        message = self.late.hand(self._receive_batch, self._receive, message)  # (group_linger)
        if self.tail._held and message is not NOTHING and message is not COMMIT_DUE:
            self.tail.take()  # a step's rest the line's reports left held: before ``message``
        kind = type(message)
        if kind is Batch:  # an agent's reports of one handling
            self._receive_batch(message.messages)
            return None
        if kind is not Ask and kind is not LeaseLost and message is not COMMIT_DUE:
            self._receive(message, more=False)  # (it has what the settle line holds decided)
            return None
        self._settle()  # the settling reports held are decided before anything else
        if kind is Ask:
            claim = message.claim
            if claim is not None and not self.claims.claim(claim):
                return None  # its caller gave up on it (``actors/ask_claims``): nothing done
            return self._answer(message.message)
        if message is COMMIT_DUE:  # a group nobody waited on (``group_linger``)
            self._commit_group()
        else:  # taken over (its lease lapsed): nothing more, for good
            self._halt(RuntimeError(message.reason), what=LOST_LEASE)
        return None

    def _answer(self, message: Any) -> Any:
        """An ask: the open group is committed first; errors go to the sender."""
        self._commit_group()
        if self.outage.failure is not None and not self._recover():
            return self.outage.refuse_ask(message)
        return self._asked(message)

    def _root_spawns(self, first: SpawnRequest) -> None:
        """Root spawns told one behind another, decided as one group (``actors.spawn_group``);
        a failed decision refuses each of them (``_told_spawns``); the supervisor goes on."""
        try:
            decide_together(self, first, self._asked, self._told_spawns)
        except Exception:  # each one refused, a bug logged (here too: the refusals' own error)
            log.debug("root spawns refused after a failed decision", exc_info=True)

    def _told_spawns(self, told: list[SpawnRequest], failed: BaseException | None) -> None:
        """Told root spawns decided: the outside hears once for all (committed), or each fails."""
        if failed is None:
            self.on_outside(SpawnsDecided(request_ids=tuple([r.request_id for r in told])))
            return
        if self.outage.failure is None:  # a bug, not the store: logged, as for any tell
            log.error("supervisor failed to decide root spawns", exc_info=failed)
        why = f"the supervisor could not handle this request: {type(failed).__name__}: {failed}"
        for message in told:
            self._answer_told(message, self.outage.failure or why)

    def _asked(self, message: Any) -> Any:
        try:
            return self._handle(message, asked=True)
        except StoreError as exc:  # halted before anything else is handled
            self._halt(exc)
            raise

    def _receive_batch(self, messages: tuple[Any, ...], more: bool = False) -> None:
        """A Batch's messages in order (``more``: as ``_receive``'s): each run of consecutive
        SendMails (MailReads; journals, waiting reports: ``_RUNS``) in one core call, a step's
        spawns by up to ``STEP_SPAWNS_MOST`` (the rest held once they queue: ``step_tail``), a
        last step with its end in one (``alone.last_steps``), the rest one by one; ``Records``
        in one core call, after what the settle line held; one only settling its run is held."""
        if self.tail._held and messages:  # a report of the line after a held step (not NOTHING)
            self.tail.take()
        if self.outage.failure is None:
            if type(messages) is Records:  # (``LateReports``)
                self._settle()
                self._in_group(messages, more=more)
                return
            if self.settling.hold(messages, more) or last_steps(self, messages, more):
                return  # (held, or a last step with its end decided; else what was held is decided)
        else:
            self._settle()
        n = len(messages)
        i = 0
        while i < n:
            kind = type(messages[i])
            j = i + 1
            same = _RUNS.get(kind)
            if same is not None:
                while j < n and type(messages[j]) in same:
                    j += 1
            elif step_spawn(messages[i]):
                j = spawns_end(messages, i)
                if j - i > 1 and self.outage.failure is None:
                    self._step_spawns(messages[i:j])
                    i = n if self.tail.hold(messages[j:]) else j  # (held: ``actors.step_tail``)
                    continue
            if (j - i > 1 or same is not None) and self.outage.failure is None:
                self._in_group(messages[i:j], more=more or j < n)  # (none held meanwhile)
            else:
                for k in range(i, j):
                    self._receive(messages[k], more=more or k < n - 1)
            i = j

    def _receive(self, message: Any, *, more: bool) -> None:
        """One told message, as if it had arrived alone; ``more``: the rest of its Batch
        follows, so the open group is not committed yet for want of queued messages."""
        if self.tail._held:  # (as in ``_receive_batch``)
            self.tail.take()
        if self.outage.failure is None:
            if self.settling.hold((message,), more):  # (else it decided what it held)
                return
        else:
            self._settle()
        if self.outage.failure is not None and not (  # a root spawn tries, as an ask does
            (type(message) is PollCommands or groupable(message)) and self._recover()
        ):
            self._refuse_tell(message)
            return
        if not more and type(message) in STRAIGHT and straight(self, message):  # (alone)
            return
        if type(message) in _GROUPED:
            self._in_group((message,), more=more)
            return
        self._commit_group()
        if self.outage.failure is not None:  # that commit failed: nothing more is taken on
            self._refuse_tell(message)
            return
        if groupable(message):  # a root spawn told (``Runtime.spawn``): with those behind it
            self._root_spawns(message)
            return
        try:
            self._handle(message, asked=False)
        except StoreError as exc:
            self._halt(exc)
        except Exception as exc:
            self._told_failed((message,), exc)

    def _step_spawns(self, spawns: tuple[Any, ...]) -> None:
        """Consecutive spawns of one run's step (told ``SpawnRequest``s) admitted as one
        decision, as ``spawn_many`` admits roots: each in order, by ``spawn``'s rules, a
        refused one refusing only itself. Its writes are one transaction and its replies
        to the parent one ``Batch`` (``coalesce``), not one decision, commit and handling
        each (``benchmarks/fanout.py``)."""
        self._commit_group()
        if self.outage.failure is not None:  # that commit failed: nothing more is taken on
            for message in spawns:
                self._refuse_tell(message)
            return
        try:
            decision = self.core.spawn_many(spawns)
            self._write(decision)
        except StoreError as exc:
            self._halt(exc)
            return
        except Exception as exc:  # a bug: as for one spawn, each parent hears of it
            self._told_failed(spawns, exc)
            return
        self._apply(coalesce(decision.effects))

    def _told_failed(self, messages: Sequence[Any], exc: Exception) -> None:
        """Handling a tell failed (a bug): logged, and whoever waits on it is answered."""
        log.exception("supervisor failed to handle a message", message=type(messages[0]).__name__)
        for message in messages:
            self._answer_told(message, failure_reason(exc))

    def _answer_told(self, message: Any, reason: str) -> None:
        answer_told(message, reason, self.effector.tell, self.on_outside, self.core.runs.answers)

    # ---- the store failed ------------------------------------------------------------------

    def _halt(
        self, exc: Exception, lost: Sequence[Effect] = (), what: str = "the run store failed"
    ) -> None:
        """The store failed (or the lease is lost): the open group rolled back, every run
        stopped, every caller told (``actors.outage``). ``lost``: effects held for a group whose
        commit failed (a root that ended in it, its end not committed: its caller told too)."""
        ended = [
            e.message.outcome.run_id
            for e in [*lost, *self._held]
            if isinstance(e, TellOutside) and isinstance(e.message, ChildDone)
        ]
        group, self._group = self._group, None
        rolled_back(group, exc)  # (not left open: a MemoryStore's lock would stay held)
        if self.outage.failure is None:
            self._held, self._grouped = [], 0
        self.outage.begin(exc, what, self.effector.stop_all, ended)

    def _recover(self) -> bool:
        """Whether the supervisor takes work on (again: the store works after failing)."""
        if self.outage.failure is None:
            return True
        decision = self.outage.recover()
        if decision is None:
            return False
        self._apply(decision.effects)
        return True

    def _refuse_tell(self, message: Any) -> None:
        """After a store failure: whoever waits on a tell is told the store's error."""
        self._answer_told(message, self.outage.failure or "the run store failed")

    # ---- group commit ----------------------------------------------------------------------

    def _settle(self) -> None:
        """The held settling reports (``actors.settle_line``) in one core call, in order."""
        if not self.settling.held:
            return
        run = self.settling.take()
        if self.outage.failure is None:
            self._in_group(run, more=False)
            return
        for message in run:  # (the store failed since they were held: as told then)
            self._receive(message, more=True)

    def _open_group(self) -> None:
        if self._group is None:
            group = self.store.batch()
            group.__enter__()
            self._group = group

    def _in_group(self, run: tuple[Any, ...], *, more: bool) -> None:
        """Told reports (one, or a run of one Batch's messages decided in one core call:
        ``_RUNS``) inside the open group, counted as ``len(run)`` messages; ``more``: the Batch
        goes on after them. A run is not split: its events say what the step did."""
        if self._grouped and self._grouped + len(run) > GROUP_MAX:
            self._commit_group()  # what is open goes first, as if the group were full
            if self.outage.failure is not None:  # that commit failed: these are dropped
                return
        try:
            self._open_group()  # may be refused: a full disk, a lease taken (``Fenced``)
            if len(run) == 1:
                self._handle(run[0], asked=False)
            elif type(run) is Records:  # the late line's: each report left out alone
                self._apply(records_written(self.core, self.race.write_all, run))
            elif type(run[0]) is StepTaken:  # a run's last step with its end (``alone``)
                self._carry_out(last_step_decision(self, run[0], run[1]))
            else:
                self._carry_out(_decide_run(self.core, run))
        except StoreError as exc:
            self._halt(exc)
            return
        except Exception as exc:  # a bug: as for one message, each sender hears of it
            self._told_failed(run, exc)
        self._grouped += len(run)
        if self._grouped >= GROUP_MAX or (
            not more and self.actor_inbox.empty() and not self.linger.defer(self._held)
        ):
            self._commit_group()

    def _commit_group(self) -> None:
        """Commit the open group, then carry out the effects held back until it was."""
        group, self._group = self._group, None
        if group is None:
            return
        held, self._held, self._grouped = self._held, [], 0
        try:
            self.race.commit(group, held)  # (an end another writer made first: dropped)
        except Exception as exc:
            self._halt(exc, held)  # nothing held back may be acknowledged: it is not durable
            return
        self._apply(coalesce(held))  # one Batch per run, not one message per Tell

    # ---- deciding --------------------------------------------------------------------------

    def _handle(self, message: Any, *, asked: bool) -> Any:
        """Have ``message`` decided and carry the decision out; the answer for its sender."""
        kind = type(message)  # exact types: none of these is subclassed (test_deciders.py)
        if kind is SendMail:
            decision = self.core.send_mails((message,))
            self._carry_out(decision)
            return decision.reply[0]
        if kind is ToolStarting:  # asked (not grouped): durable before the tool runs
            journaled = self.core.tool_starting(message)  # (refused: the start is over)
            self._carry_out(journaled)
            return journaled.reply  # (an ``ended`` one is told: the answer goes nowhere)
        decided = self._decide(message)
        if decided is None:
            return self._question(message, asked=asked)
        self._carry_out(decided)
        return decided.reply

    def _decide(self, message: Any) -> Decision | None:
        """The core's decision on ``message`` (None: not one it decides: ``deciders``)."""
        decide = self._deciders.get(type(message))
        return None if decide is None else decide(message)

    def _question(self, message: Any, *, asked: bool) -> Any:
        """A message the actor answers itself, reading or sweeping the store or asking the
        core a question (no decision to carry out); anything else is logged and dropped."""
        match message:
            case PollCommands():  # the commands others posted, the ends they wrote
                self._apply(self.poll.take(self.now()))
                return None
            case Restore(roots=roots):
                return self._restore(roots)
            case Inspect(run_id=run_id):
                return self.core.stats(run_id)
            case TreeRecords(run_id=run_id):
                return self.core.tree_records(run_id)
            case StatusOf():
                return status_of(self.core, self.store, message)
            case Sweep():
                return sweep(self.store, self.now(), message, asked=asked)
            case _:
                log.warning("unexpected message", message=type(message).__name__)
                return None

    def _restore(self, roots: frozenset[str] | None) -> Any:
        """Take up the orphaned runs (``actors.restored``); the effects (starts) follow."""
        decision = restored(self.store, self.core, self.now(), roots, self._lost)
        self._apply(decision.effects)
        return decision.reply

    # ---- carrying out ----------------------------------------------------------------------

    def _carry_out(self, decision: Decision) -> None:
        """The writes now (inside the store batch of this message: a savepoint within an
        open group, else a transaction of its own), the effects once they are committed."""
        self._write(decision)
        self._apply(decision.effects)

    def _write(self, decision: Decision) -> None:
        """``decision``'s writes; failing, they lose its effects, but not the answer owed to
        a root's caller (``told_answers.write_failed``: a store failure halts here)."""
        writes = decision.writes
        if writes:
            try:
                self.race.write(decision)  # (an end another writer made first: dropped)
            except Exception as exc:  # the effects are lost, not a root's answer
                self._lost(exc, decision.effects)
                raise

    def _lost(self, exc: Exception, effects: list[Effect]) -> None:
        """A decision's writes and ``effects`` lost: its runs' waiters told (``write_failed``)."""
        told = (self.on_outside, self.effector.tell, self.store, self.core.runs)
        write_failed(exc, effects, self._halt, *told, self._apply, self._handle)

    def _apply(self, effects: list[Effect]) -> None:
        if self._group is not None:  # not committed yet: held back until it is
            self._held.extend(effects)
            return
        self.effector.apply(effects)
