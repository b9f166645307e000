"""Runs hosted in another process: the two ends of the link between the supervisor and the
agent actors of a node (``subagents.cluster``).

Why here: this is where pykka is, and both ends are about actors. Neither end knows Ray:
what carries their items between processes is given to them (``send`` on the supervisor's
side; ``Outbox.take`` is drained by whoever carries it on the node's side), so the routing
and the bookkeeping are tested in one process, and Ray only moves plain data.

- On the supervisor's side, ``RoutingEffector`` is the ``Effector`` of a runtime whose runs
  live on nodes: a ``StartRun`` goes to the node placement chooses (``place``), and every
  ``Tell`` and ``StopAgent`` for that run follows it there, in order, gathered per node into
  one item list per ``apply`` (one call across the network, not one per effect). It knows
  which node hosts which run's start, so that when a node is lost it can say which runs
  went with it (``lost``).
- On a node's side, ``NodeRuns`` starts and feeds the agent actors of the runs placed there
  (the same ``Effector``, fed by ``deliver``), and gives them, as their supervisor, a
  ``RemoteSupervisor``: its tells and asks are queued in an ``Outbox`` for the supervisor's
  side to collect; the answers to asks come back through ``answer``.
- Mail between two runs of one node goes straight from the sender's actor to the recipient's
  mailbox, as on one machine (``actors/mail_desk.py``), when the runtime's store lets it
  (``NodeMail``): the node keeps a directory of its own started runs, and the supervisor hears
  of the mail after (``MailPosted``, in the outbox, in order with the sender's other reports).
  Where senders record their mail (``RunStore.mail_recording``: SENDER), the sender's record
  crosses to the driver (``RecordMails``, asked: the driver writes it) and the mail is handed
  to its recipient once that answer is back; where the store keeps mail only through the
  supervisor (NONE), it goes by the supervisor, over the link both ways.

Order: items go from the supervisor to a node in the order the supervisor decided them (one
sender, one receiver, calls carried in order), and from a node's agents to the supervisor in
the order they were queued (one outbox, drained by one reader): mail stays ordered per sender.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import msgspec
import pykka

from subagents.actors.agent import BehaviourFactory
from subagents.actors.effector import Effector
from subagents.actors.mail_desk import MailDesk
from subagents.actors.node_specs import KeptSpecs
from subagents.actors.pooled import Dispatcher
from subagents.actors.timer import TimerService
from subagents.blocking import about_to_block
from subagents.definitions.spec import AgentSpec
from subagents.logs import get_logger
from subagents.messages import (
    ActorMessage,
    Ask,
    Batch,
    Event,
    Mail,
    Placed,
    RunFinished,
    ToOutside,
)
from subagents.store.fencing import AttemptOver
from subagents.store.writes import AttemptFence, SaveJournal
from subagents.supervision.effects import Effect, StartRun, StopAgent, Tell
from subagents.supervision.limits import Limits
from subagents.telemetry import FinishedCall

log = get_logger("subagents.cluster")

_ATTEMPT_OVER = f"{AttemptOver.__name__}: "
"""How the driver's answer names a record its attempt fence refused (``ClusterHosting._answer``
answers an error as its type's name and its text)."""


# ---- the node's side ---------------------------------------------------------------------------


class Told(msgspec.Struct, frozen=True, tag=True):
    """A message an agent on a node tells the supervisor (typed: the link carries it as
    msgpack, decoded as this type: ``cluster/wire.py``)."""

    message: ActorMessage | Batch | FinishedCall


class Asked(msgspec.Struct, frozen=True, tag=True):
    """A message an agent on a node asks the supervisor (``Ask`` envelope included); its
    answer goes back as an ``Answer`` with the same ``key``."""

    key: int
    message: Ask | RecordMails | RememberedRules | LeaseLeft


class Answer(msgspec.Struct, frozen=True, tag=True):
    """The supervisor's answer to ``Asked(key)``: its value, or the error it raised."""

    key: int
    value: Any = None
    error: str | None = None


class RecordMails(msgspec.Struct, frozen=True, tag=True):
    """Asked of the driver by a node's sender, when senders record their mail: write these
    mails to the store (fenced, as a sender on one machine does); answered once they are
    committed, before any recipient is handed them; with them, in the same transaction, the
    journal entries the sender told and does not know committed (``UnsavedJournal``)."""

    mails: tuple[Mail, ...]
    journal: SaveJournal | None = None
    attempt: AttemptFence | None = None
    """The sender's start: the record is refused once it is not its run's (``AttemptFence``)."""


class RememberedRules(msgspec.Struct, frozen=True, tag=True):
    """Asked of the driver by a node's run about to ask for a tool call: the allow rules
    remembered for the tree of ``root_run_id`` (``approve --remember``), read from the
    driver's store as a run on one machine reads them."""

    root_run_id: str


class LeaseLeft(msgspec.Struct, frozen=True, tag=True):
    """Asked of the driver by a node host, again and again: how long its runtime's lease
    line has left (``LeaseLine.left``; None: no line now), for the node's commands to die
    by the same line (``cluster/node_lease.py``)."""


RECORD_TIMEOUT_S = 60.0
"""How long a node's sender waits for the driver to record its mail (then it goes by the
supervisor, named by the same mail ids: the driver may have written it all the same, and a
mail id is kept once, so it is recorded and delivered once)."""


@dataclass(frozen=True)
class NodeMail:
    """How a node's runs take mail to each other (see the module): ``limits``, what a mail
    is checked against; ``senders_record``: the sender's record crosses to the driver
    (``RecordMails``) before the mail is handed over (else the supervisor records it after,
    from ``MailPosted``: a store that keeps nothing past the process), answered within
    ``record_timeout_s``."""

    limits: Limits
    senders_record: bool
    record_timeout_s: float = RECORD_TIMEOUT_S


class Outbox:
    """What a node's agents send the supervisor, queued in order until collected."""

    def __init__(self) -> None:
        self._items: deque[Told | Asked] = deque()
        self._ready = threading.Condition()
        self._closed = False

    def put(self, item: Told | Asked) -> None:
        with self._ready:
            self._items.append(item)
            self._ready.notify()

    def take(self, most: int, timeout: float) -> list[Told | Asked]:
        """Up to ``most`` items, in order; waits up to ``timeout`` s for the first one."""
        with self._ready:
            if not self._items and not self._closed:
                self._ready.wait(timeout)
            n = min(most, len(self._items))
            return [self._items.popleft() for _ in range(n)]

    def close(self) -> None:
        with self._ready:
            self._closed = True
            self._ready.notify_all()


@dataclass
class _Pending:
    done: threading.Event = field(default_factory=threading.Event)
    answer: Answer | None = None


class RemoteSupervisor:
    """What a node's agent actors hold as their supervisor: ``tell`` and ``ask`` as on a
    pykka reference, carried through the ``Outbox``. An ask waits for its ``Answer`` (a
    ``pykka.Timeout`` past ``timeout``, as a local ask would)."""

    def __init__(self, outbox: Outbox, on_told: Callable[[Any], None] | None = None) -> None:
        self._outbox = outbox
        self._on_told = on_told
        self._keys = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        self._lock = threading.Lock()
        self._closed = False

    def tell(self, message: Any) -> None:
        if self._on_told is not None:
            self._on_told(message)
        self._outbox.put(Told(message))

    def ask(self, message: Any, block: bool = True, timeout: float | None = None) -> Any:
        if not block:
            raise TypeError("a remote supervisor is asked blocking")
        pending = _Pending()
        with self._lock:
            if self._closed:
                raise pykka.ActorDeadError("the node's link to the supervisor is closed")
            key = next(self._keys)
            self._pending[key] = pending
        self._outbox.put(Asked(key, message))
        about_to_block()  # the answer crosses to the driver and back: another thread works
        try:
            if not pending.done.wait(timeout):
                raise pykka.Timeout(f"no answer from the supervisor within {timeout} s")
        finally:
            with self._lock:
                self._pending.pop(key, None)
        answer = pending.answer
        assert answer is not None
        if answer.error is not None:
            raise pykka.ActorDeadError(answer.error)
        return answer.value

    def answer(self, answers: Iterable[Answer]) -> None:
        for answer in answers:
            with self._lock:
                pending = self._pending.get(answer.key)
            if pending is not None:
                pending.answer = answer
                pending.done.set()

    def close(self) -> None:
        """No more asks; the ones waiting are answered with an error."""
        with self._lock:
            self._closed = True
            waiting = list(self._pending.items())
        for key, pending in waiting:
            pending.answer = Answer(key, error="the node's link to the supervisor closed")
            pending.done.set()


class NodeRuns:
    """The agent actors of the runs placed on one node, and their link to the supervisor."""

    def __init__(
        self,
        behaviour_for: Callable[[AgentSpec], BehaviourFactory],
        mail: NodeMail | None = None,
    ) -> None:
        """``mail``: mail between this node's runs goes straight (None: by the supervisor)."""
        self.outbox = Outbox()
        self.supervisor = RemoteSupervisor(self.outbox, on_told=self._told)
        self._record_timeout_s = RECORD_TIMEOUT_S if mail is None else mail.record_timeout_s
        self.desk = (
            None
            if mail is None
            else MailDesk(
                limits=mail.limits,
                # the run table's generation is the driver's: a name resolved there is never
                # known here to be still right, so only mail to a run id goes straight
                generation=itertools.count().__next__,
                record=self._record if mail.senders_record else None,
            )
        )
        self.timer = TimerService(name="subagents-node-timer")
        # as in one process: a few threads drain the agents that have messages, so a run
        # waiting for mail, children or its next step holds no thread (actors/pooled.py)
        self.dispatcher = Dispatcher(name="subagents-node-dispatch")
        self.effector = Effector(
            supervisor=cast(pykka.ActorRef[Any], self.supervisor),
            timer=self.timer,
            behaviour_for=behaviour_for,
            on_outside=_nowhere,
            on_event=_nowhere,
            pool=None,
            dispatcher=self.dispatcher,
            mail=self.desk,
        )
        self._specs = KeptSpecs()  # one definition object per definition: its caches hit
        self._lock = threading.RLock()
        """Over the effector (``deliver``, ``_told``): re-entered when a start in ``deliver``
        reports its run's end at once (no thread for its agent: ``Effector._no_thread``
        tells the supervisor, whose ``_told`` comes back here); a plain lock deadlocked."""

    def _record(
        self, mails: Sequence[Mail], journal: SaveJournal | None, attempt: AttemptFence
    ) -> None:
        """A sender's mails (and ``journal``) written by the driver (``RecordMails``), if its
        start ``attempt`` is still its run's; raises if they were not (the sender then sends
        them by the supervisor)."""
        record = RecordMails(tuple(mails), journal, attempt)
        try:
            self.supervisor.ask(record, timeout=self._record_timeout_s)
        except pykka.ActorDeadError as exc:  # the driver's error, as text (``Answer.error``)
            refused = str(exc)
            if refused.startswith(_ATTEMPT_OVER):  # nothing written: the mail is not named
                raise AttemptOver(refused.removeprefix(_ATTEMPT_OVER)) from None
            raise

    def remembered(self, root_run_id: str) -> tuple[str, ...]:
        """The allow rules remembered for a tree, asked of the driver (``RememberedRules``).
        None can be read (the link closed, the store failed): none, so the call is asked
        as it would be without a rule: never more allowed than on one machine."""
        try:
            rules = self.supervisor.ask(RememberedRules(root_run_id), timeout=RECORD_TIMEOUT_S)
        except Exception as exc:
            log.warning("remembered rules not read; the call is asked", error=repr(exc))
            return ()
        return tuple(str(rule) for rule in rules)

    def lease_left(self, timeout: float) -> float | None:
        """How long the driver's lease line has left as the driver read it (``LeaseLeft``):
        seconds, None when it keeps none; raises when no answer came within ``timeout``."""
        left = self.supervisor.ask(LeaseLeft(), timeout=timeout)
        return None if left is None else float(left)

    def deliver(self, effects: Sequence[Effect]) -> None:
        """Carry out what the supervisor decided for runs on this node, in order."""
        with self._lock:
            self.effector.apply(self._specs.same(effects))

    def _told(self, message: Any) -> None:
        if type(message) is Batch and message.messages:  # an end goes last, after its
            message = message.messages[-1]  # handling's reports (``AgentActor._end``)
        if isinstance(message, RunFinished):  # the agent stops by itself: forget it
            with self._lock:
                self.effector.ended(message.run_id, message.attempt)

    def live(self) -> list[str]:
        with self._lock:
            return list(self.effector.live)

    def close(self) -> None:
        with self._lock:
            self.effector.stop_all()
        self.supervisor.close()
        self.outbox.close()
        self.timer.stop()
        self.dispatcher.close(timeout=5.0)


def _nowhere(_message: ToOutside | Event) -> None:
    """Nothing on a node tells the outside or publishes: the supervisor's side does."""


# ---- the supervisor's side ---------------------------------------------------------------------


class RoutingEffector(Effector):
    """The ``Effector`` of a runtime whose runs are hosted on nodes (see the module)."""

    def __init__(
        self,
        *,
        place: Callable[[StartRun, str | None], str | None],
        send: Callable[[str, list[Effect]], None],
        on_ended: Callable[[str], None],
        address_of: Callable[[str], str] = lambda _node: "",
        **kwargs: Any,
    ) -> None:
        """``place(start, parent_node)``: the node for a start, or None when no live node
        can take it now but one that could is expected back (the start waits for
        ``placeable``); a start no node will ever take is ``place``'s to refuse (raising:
        the run fails with the reason). Each start placed is told to the supervisor
        (``Placed``, with the node's address, ``address_of(node)``; those of one ``apply``
        in one ``Batch``): the run's record and events say which node it is on."""
        super().__init__(**kwargs)
        self._place = place
        self._send = send
        self._on_ended = on_ended
        self._address_of = address_of
        self.where: dict[str, tuple[str, int]] = {}
        """run id -> (its node, its start's attempt)."""
        self.waiting: dict[str, StartRun] = {}
        """Starts no live node can take yet (their node's host is coming back)."""
        self.held: dict[str, list[Effect]] = {}
        """What was told to a waiting start's run meanwhile: sent after its start."""
        self._lock = threading.Lock()

    def apply(self, effects: Iterable[Effect]) -> None:
        outgoing: dict[str, list[Effect]] = {}
        local: list[Effect] = []
        placed: list[Placed] = []
        for effect in effects:
            node = self._route(effect, placed)
            if node is None:
                local.append(effect)
            elif node:  # "": a run hosted nowhere (ended, lost): nothing to tell it
                outgoing.setdefault(node, []).append(effect)
        if placed:  # before the starts are sent: ahead of anything they can report
            self._placed(placed)
        if local:
            super().apply(local)
        for node, items in outgoing.items():
            try:
                self._send(node, items)
            except Exception:
                log.exception("sending to a node failed", node=node, items=len(items))

    def _route(self, effect: Effect, placed: list[Placed]) -> str | None:
        """The node ``effect`` goes to; None for one carried out here; "" for one to drop
        (a tell or stop for a run hosted nowhere). A start placed adds its ``Placed`` to
        ``placed``."""
        match effect:
            case StartRun(record=record, attempt=attempt):
                with self._lock:
                    before = self.where.pop(record.run_id, None)
                    parent = record.parent_run_id
                    parent_node = self.where.get(parent, (None, 0))[0] if parent else None
                    if before is not None:  # a restart: the earlier start goes
                        self._on_ended(before[0])
                    self.waiting.pop(record.run_id, None)
                    self.held.pop(record.run_id, None)
                    # placed and recorded under the lock: ``lost`` never misses a start
                    try:
                        node = self._place(effect, parent_node)
                    except Exception as exc:
                        node = None
                        refused: Exception | None = exc
                    else:
                        refused = None
                        if node is None:
                            self.waiting[record.run_id] = effect
                        else:
                            self.where[record.run_id] = (node, attempt)
                if before is not None:
                    with contextlib.suppress(Exception):
                        self._send(before[0], [StopAgent(record.run_id)])
                if refused is not None:
                    self._refuse(effect, refused)
                elif node:
                    address = self._address_of(node)
                    placed.append(
                        Placed(run_id=record.run_id, attempt=attempt, node=node, address=address)
                    )
                return node or ""
            case Tell(run_id=run_id):
                with self._lock:
                    found = self.where.get(run_id)
                    if found is None and run_id in self.waiting:  # goes with its start
                        self.held.setdefault(run_id, []).append(effect)
                return found[0] if found is not None else ""
            case StopAgent(run_id=run_id):
                with self._lock:
                    self.waiting.pop(run_id, None)
                    self.held.pop(run_id, None)
                    found = self.where.pop(run_id, None)
                if found is None:
                    return ""
                self._on_ended(found[0])
                return found[0]
        return None

    def _placed(self, placed: list[Placed]) -> None:
        """Tell the supervisor where the starts of one ``apply`` went (into its inbox, ahead
        of anything they can report): one message for all of them, a ``Batch`` (a fan-out's
        100 starts were 100 turns of the supervisor, one each)."""
        if self.supervisor is None:
            return
        message = placed[0] if len(placed) == 1 else Batch(tuple(placed))
        with contextlib.suppress(pykka.ActorDeadError):
            self.supervisor.tell(message)

    def _refuse(self, start: StartRun, exc: Exception) -> None:
        """No node will take ``start``: its run fails with the reason, reported as its
        agent would report a failure (the supervisor decides the rest: retries, parent)."""
        log.warning("run not placed", run_id=start.record.run_id, error=str(exc))
        with contextlib.suppress(pykka.ActorDeadError):
            self.supervisor.tell(
                RunFinished(
                    run_id=start.record.run_id,
                    error_kind="placement",
                    error=str(exc),
                    attempt=start.attempt,
                )
            )

    def placeable(self) -> None:
        """A node (came back and) can take runs: the waiting starts are placed again."""
        with self._lock:
            waiting, self.waiting = list(self.waiting.values()), {}
            held, self.held = self.held, {}
        for start in waiting:
            self.apply([start, *held.get(start.record.run_id, [])])

    def tell(self, run_id: str, message: Any) -> None:
        with self._lock:
            found = self.where.get(run_id)
        if found is not None:
            self._send(found[0], [Tell(run_id, message)])

    def ended(self, run_id: str, attempt: int) -> None:
        with self._lock:
            found = self.where.get(run_id)
            if found is None or (attempt and found[1] != attempt):
                return
            del self.where[run_id]
        self._on_ended(found[0])

    def stop_all(self) -> None:
        with self._lock:
            where, self.where = self.where, {}
            self.waiting.clear()
            self.held.clear()
        by_node: dict[str, list[Effect]] = {}
        for run_id, (node, _attempt) in where.items():
            by_node.setdefault(node, []).append(StopAgent(run_id))
            self._on_ended(node)
        for node, items in by_node.items():
            with contextlib.suppress(Exception):
                self._send(node, items)

    def lost(self, node: str, forget: Callable[[], None] = lambda: None) -> list[str]:
        """``node`` is gone with what it hosted: the runs whose start was there, forgotten
        here (the supervisor starts them again elsewhere). ``forget`` (taking the node out
        of placement) runs under the same lock as placing a start: no start is placed on
        the node after the list is made."""
        with self._lock:
            forget()
            gone = [run_id for run_id, (n, _a) in self.where.items() if n == node]
            for run_id in gone:
                del self.where[run_id]
        return gone

    def node_of(self, run_id: str) -> str | None:
        with self._lock:
            found = self.where.get(run_id)
        return found[0] if found is not None else None
