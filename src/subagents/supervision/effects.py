"""Effects: what a supervisor decision asks the actor to do, and the collector that gathers
them while one message is decided.

A decision produces two lists, in order:
- ``writes`` (``store.writes``): what the store must keep. The actor carries them out at
  once, inside the store batch of the message (or of its group commit);
- ``effects`` (below): what happens to the world: an agent started, told or stopped, a timer
  armed, an event published, an outcome handed to the outside. The actor carries them out
  only once the writes are committed, so nothing is acknowledged before it is durable.

Every part returns what it decides as a ``Decided`` (its writes and effects, in order):
admission, the lifecycle, closing, recovery, stops, requesters, parking, the mail room (its
sending, receipts, hand-over, notices and dead letters), and the run table's changes
(``fire``/``update``: the ``SaveRun`` write; ``placed``). The caller composes the ones it
asks for in the order it decides, and only the core holds the message's ``Effects``
collector, gathering them into it (``Effects.take``). Consecutive read receipts are one write
wherever they meet (``join``). None of them does I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import msgspec

from subagents.definitions.spec import AgentSpec
from subagents.messages import (
    ActorMessage,
    Batch,
    Checkpoint,
    ChildDone,
    Event,
    EventKind,
    Mail,
    MailAck,
    MailState,
    Replay,
    RunRecord,
    SpawnReply,
)
from subagents.store.writes import AppendEvent, SetMailsState, Write
from subagents.supervision.admission_checks import Standing


class StartRun(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Start an agent actor for ``record`` (its ``attempt``-th start in this process)."""

    record: RunRecord
    spec: AgentSpec
    deadline: float
    pending_mail: tuple[Mail, ...] = ()
    recovered: tuple[Replay | SpawnReply | ChildDone | MailAck, ...] = ()
    checkpoint: Checkpoint | None = None
    attempt: int = 1
    standing: Standing = Standing()
    """What the run's offer of the spawn tools reads of the supervisor's state
    (``RunTable.standing``: its ancestors' ``maxDepth``, its tree's runs), copied now: the
    offer runs the admission checks over it (``admission_checks.offer``)."""
    park_at_wait: bool = False
    """Runs of its slot key are queued behind it (``SlotPool.queued_behind``): at its first
    wait it parks by itself, between two messages, and says so with its waiting report
    (``WaitingChanged.parked``): under a limit, each run that waits lends its slot to the
    next without a ``Park``/``Parked`` round trip (``parking.py``)."""


class Tell(msgspec.Struct, frozen=True, gc=False, tag=True):
    """Tell the live run ``run_id`` a message."""

    run_id: str
    message: ActorMessage | Batch


class TellOutside(msgspec.Struct, frozen=True, gc=False, tag=True):
    """Tell the outside (the Runtime), the requester of every root run: a root's outcome
    (``ChildDone``, its ``request_id`` the root's), or why a root run it told the supervisor
    to start was refused (``SpawnReply``)."""

    message: ChildDone | SpawnReply


class StopAgent(msgspec.Struct, frozen=True, gc=False, tag=True):
    run_id: str


class ArmDeadline(msgspec.Struct, frozen=True, gc=False, tag=True):
    """Tell the supervisor ``Timeout(run_id)`` at ``deadline`` (on the monotonic clock)."""

    run_id: str
    deadline: float


class DisarmDeadline(msgspec.Struct, frozen=True, gc=False, tag=True):
    run_id: str


class ScheduleRestart(msgspec.Struct, frozen=True, gc=False, tag=True):
    """Tell the supervisor ``RestartDue(run_id)`` after ``delay_s`` (one timer)."""

    run_id: str
    delay_s: float


class Publish(msgspec.Struct, frozen=True, gc=False, tag=True):
    """Hand ``event`` to the log and the subscribers (it is already in the writes)."""

    event: Event


Effect = (
    StartRun
    | Tell
    | TellOutside
    | StopAgent
    | ArmDeadline
    | DisarmDeadline
    | ScheduleRestart
    | Publish
)


class Decision(msgspec.Struct, gc=False):
    """What one message (or one run of a Batch) came to: the answer for its sender, the
    writes to carry out at once, the effects to carry out once they are committed."""

    reply: Any
    writes: list[Write]
    effects: list[Effect]


Answer = TypeVar("Answer")


_READ = MailState.READ
"""Named once: an enum's member read through its class costs Python 3.11's
``EnumType.__getattr__`` slot, ~1.1k instructions (``starts``), a module's name ~0.1k."""


def join(writes: list[Write], more: list[Write]) -> None:
    """Add ``more`` after ``writes``. A read receipt (mail set read) right after a read
    receipt joins it: the receipts of one message that meet (a run of ``MailRead``s) are one
    write, however the parts that made them were composed."""
    if not more:
        return
    head = more[0]
    if type(head) is SetMailsState and head.state is _READ and writes:
        last = writes[-1]
        if type(last) is SetMailsState and last.state is _READ:
            writes[-1] = SetMailsState((*last.mail_ids, *head.mail_ids), _READ)
            if len(more) > 1:
                writes += more[1:]
            return
    writes += more


def event_of(kind: EventKind, record: RunRecord, ts: float, data: dict[str, Any]) -> Event:
    """An event about ``record``'s run at ``ts``."""
    return Event(
        kind=kind,
        run_id=record.run_id,
        agent=record.agent,
        root_run_id=record.root_run_id,
        parent_run_id=record.parent_run_id,
        depth=record.depth,
        ts=ts,
        data=data,
    )


class Decided(msgspec.Struct):
    """What a part decided: the writes and the effects it comes to, in the order it made
    them. Returned to its caller rather than appended to a collector it shares with the other
    parts, so a part's result is a value its caller orders and its tests read. A ``Struct``:
    made in C (a Python ``__init__`` cost about twice as much; most decisions make two)."""

    writes: list[Write] = msgspec.field(default_factory=list)
    effects: list[Effect] = msgspec.field(default_factory=list)

    def add(self, other: Decided) -> Decided:
        """``other`` follows what is here; self, to chain."""
        join(self.writes, other.writes)
        self.effects += other.effects
        return self

    def event(self, kind: EventKind, record: RunRecord, ts: float, data: dict[str, Any]) -> None:
        """An event about ``record``'s run: kept by the store, then published. (``event_of``
        written out: every run's three events came through here, a call each.)"""
        event = Event(
            kind=kind,
            run_id=record.run_id,
            agent=record.agent,
            root_run_id=record.root_run_id,
            parent_run_id=record.parent_run_id,
            depth=record.depth,
            ts=ts,
            data=data,
        )
        self.writes.append(AppendEvent(event))
        self.effects.append(Publish(event))


class Effects:
    """The writes and effects of the message being decided, in the order they were made.

    The core's alone (no part is given it): ``begin`` starts a message, ``take`` gathers
    what its parts decided, and ``decision`` ends it; the core adds its own few writes and
    events (a journal's, a run's waiting) between. ``now`` is the injected wall clock, read
    once per event.
    """

    __slots__ = ("effects", "now", "writes")

    def __init__(self, now: Callable[[], float]) -> None:
        self.now = now
        self.writes: list[Write] = []
        self.effects: list[Effect] = []

    def begin(self) -> None:
        self.writes = []
        self.effects = []

    def decision(self, reply: Any = None) -> Decision:
        return Decision(reply, self.writes, self.effects)

    def take(self, decided: Decided) -> None:
        """Gather what a part decided, after what is here. Nothing here yet (most messages'
        one part: a run's start, its end): the part's lists are taken as they are, not
        copied (a ``Decided`` is its caller's alone, read once)."""
        if self.writes:
            join(self.writes, decided.writes)
        else:
            self.writes = decided.writes
        if decided.effects:
            if self.effects:
                self.effects += decided.effects
            else:
                self.effects = decided.effects

    def gather(self, answered: tuple[Answer, Decided]) -> Answer:
        """Gather what a part decided along with its answer (a reply, ids...); the answer."""
        answer, decided = answered
        self.take(decided)
        return answer

    def event(self, kind: EventKind, record: RunRecord, data: dict[str, Any]) -> None:
        """An event about ``record``'s run: kept by the store, then published."""
        event = event_of(kind, record, self.now(), data)
        self.writes.append(AppendEvent(event))
        self.effects.append(Publish(event))
