"""The least an in-memory mail of this design does: ``mail.py``'s ``least_mail`` floor.

The runtime's in-memory ping-pong (``mail.py``, ``pingpong``) is two function agents, each
mail its own step: the sender's function ``ctx.send``s and awaits a ``receive``; its step
ends there, and its actor hands the mail straight to the recipient's actor (one hand-off on
the mail's path), tells the supervisor of it for the record (``MailPosted`` in a ``Batch``,
with the read receipt of the mail the step took) and tells itself the ``MailAck``
(docs/architecture.md, "The mail path"). This module does exactly that with bare parts and
the least bookkeeping, so its rate is what this design can reach on this machine with none
of the runtime's own Python:

- two agent actors, made as the runtime's are (``FastInboxActor``), each driving an
  ``async def`` function as the runtime drives a function agent (``coroutine.send``: a step
  runs until the function awaits a ``receive``), both handled on ONE thread (``Line``): the
  runtime's agents share the dispatcher's threads, and a handling's mail to another run
  goes in line and is taken by the same thread when the handling ends, without a thread
  switch (``actors/handoff.py``: "a ping-pong then ran on one thread"; the runtime's
  in-memory ping-pong measured ~0.15 context switches per mail). A thread per agent, as a
  plain pykka actor has, paid ~4 per mail (more than raw ask's ~2.8) that the design does
  not, and read 0.3-1x raw ask where the line reads 1-4x (interleaved, load ~7-11): a
  "floor" above what the design pays, which would call a goal unreachable that it is not;
- per mail: a ``Mail`` (the runtime's record, its id drawn from a count) made by the
  sender's ``send`` and held until its step ends; then, in the runtime's order, one tell to
  the supervisor (the posted mail and the step's read receipt), one ``Ack`` told to the
  sender itself, and one tell of the mail to its recipient (the hand-off the ping-pong
  waits for); the recipient's actor resumes its function with it;
- a supervisor actor (its own thread, as the runtime's) that records each mail posted (a
  dict by id, as ``MemoryStore`` keeps mail), marks the mail a receipt names read, and
  appends one ``Event`` (``mail_sent``) per mail to a list (the event log).

What it leaves out, all of which the runtime does per mail: the route decision
(``MailRoutes.route``) and the mail's field checks, the core's ``mails_posted`` decision and
its store writes (a ``MemoryStore`` batch and its undo), the ``mail_delivered`` event, the
function's replay journal, a receive's wake (the benchmark's ``receive(timeout=...)``), the
runtime's ``Batch``/``DeliverMail`` messages and the behaviour's inbox, and the dispatcher's
own bookkeeping (its mailboxes' scheduling, the owed nudge, the throughput bound: ``Line``
is one queue and one thread). So its rate is an upper bound of the runtime's ping-pong: if
even it is below a goal on this machine, the goal needs another design (no supervisor tell
per mail, say), not fewer calls.

The durable variant (``commit`` and ``late``, ``mail.py``'s ``least_durable``) adds what a
durable mail of this design must: its sender commits the mail's row (one ``INSERT`` in
autocommit, the durable floor's own statement and file settings) before its step's other
work; and it puts its step's report in a late line (``LateLine``) instead of telling the
supervisor, as the durable design does (``actors/group_linger.py`` ``LateReports``): one
deque for all the agents, the supervisor told ``Due`` by a timer thread ``LINGER_S`` after
the first report of an empty stretch, and taking everything in line before any message it
handles. So an idle supervisor is not woken per mail, as the design's is not; told per mail,
as this floor's supervisor was before, it did more than the design, and an "unreachable"
read from it would not have stood. And its supervisor commits what it took from the line
at once (``group_commit``, session 19), as the design's group commit does: one transaction
on the senders' connection, under the lock they take too (the store's one connection and
lock, ``store/sqlite_tx.py``), with the line's events (one per mail) and its read mails'
state; before, the floor committed nothing on the supervisor's side, and modelled less than
the design. It leaves out the store's fence (the lease and the sender's start checked in the
statement), the journal entries the row carries, the runtime's second event per mail and
the documents' state (the mail's JSON), and the group's fence check. The in-memory variant
tells the supervisor at once (the runtime's in-memory supervisor puts its reports in line
too, ``GroupLinger.after``: that floor still does this one thing more than the design).
"""

from __future__ import annotations

import collections
import itertools
import queue
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Generator
from typing import Any, cast

import msgspec
import pykka
from pykka._envelope import Envelope

from _common import Rate, mark, rate_of
from subagents.actors.group_linger import LINGER_S
from subagents.actors.inbox import FastInboxActor
from subagents.messages import Event, EventKind, Mail, MailState

WAIT = 120.0


class Deliver(msgspec.Struct, frozen=True, gc=False):
    """A mail handed straight to its recipient's actor (the runtime's ``DeliverMail``)."""

    mail: Mail


class Posted(msgspec.Struct, frozen=True, gc=False):
    """A step's report to the supervisor: the mails it sent, the mails it read."""

    mails: tuple[Mail, ...]
    read: tuple[str, ...]


class Ack(msgspec.Struct, frozen=True, gc=False):
    """The sender's own acknowledgement of its mails (the runtime's ``MailAck``)."""

    mail_ids: tuple[str, ...]


def _named_loop(actor: FastInboxActor, name: str) -> None:
    """The actor's loop on a thread named for its role (``spawn.role_of``, so the calls per
    mail are counted by role as the runtime's are)."""
    threading.Thread(target=actor._actor_loop, name=name, daemon=True).start()


class Due:
    """Told to the supervisor by the late line's timer: take the reports in line."""

    __slots__ = ()


DUE = Due()


class LateLine:
    """The least of the durable design's late line (``LateReports``): agents append their
    reports to one deque (one C call under the GIL) and, when no wake-up is on its way, arm
    one ``LINGER_S`` later on a timer thread of its own (the runtime's ``TimerService``);
    the supervisor takes the whole line when it wakes, before any message it handles."""

    def __init__(self, delay: float = LINGER_S) -> None:
        self.reports: collections.deque[Posted] = collections.deque()
        self.delay = delay
        self.supervisor: pykka.ActorRef[Any] | None = None
        self._due = 0.0
        self._arms: queue.SimpleQueue[float | None] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._time, name="least-timer", daemon=True)
        self._thread.start()

    def put(self, report: Posted) -> None:
        self.reports.append(report)
        now = time.monotonic()
        if self._due <= now:  # (read and set without a lock, as the runtime's)
            self._due = due = now + self.delay
            self._arms.put(due)

    def _time(self) -> None:
        while (due := self._arms.get()) is not None:
            if self._stop.wait(max(0.0, due - time.monotonic())):
                return
            if self.supervisor is not None:
                self.supervisor.tell(DUE)

    def close(self) -> None:
        """Its timer thread ended (joined)."""
        self._stop.set()
        self._arms.put(None)
        self._thread.join(WAIT)


GroupCommit = Callable[[list[Event], list[str]], None]
"""The supervisor's commit of what it took from the late line at once: its events, and the
mails the line's reports read (the durable design's one transaction per lingering group)."""


class Supervisor(FastInboxActor):
    """Records every mail posted, marks the read ones, logs one event per mail."""

    def _start_actor_loop(self) -> None:
        _named_loop(self, "least-supervisor")

    def __init__(self, late: LateLine | None = None, commit: GroupCommit | None = None) -> None:
        super().__init__()
        self.mail: dict[str, Mail] = {}
        self.events: list[Event] = []
        self.late = late
        self.commit = commit

    def on_receive(self, message: Any) -> Any:
        late = self.late
        if late is not None:  # the line first, whatever wakes it (``LateReports.hand``)
            reports = late.reports
            first, read = len(self.events), []
            while reports:
                report = reports.popleft()
                self._record(report)
                read.extend(report.read)
            if self.commit is not None and (len(self.events) > first or read):
                self.commit(self.events[first:], read)  # the line's records: one commit
        if isinstance(message, Posted):
            self._record(message)
        elif not isinstance(message, Due):  # asked once its agents are done
            read = sum(1 for mail in self.mail.values() if mail.state == MailState.READ)
            return {"mails": len(self.mail), "read": read, "events": len(self.events)}
        return None

    def _record(self, message: Posted) -> None:
        for mail in message.mails:
            self.mail[mail.mail_id] = mail
            self.events.append(
                Event(
                    kind=EventKind.MAIL_SENT,
                    run_id=mail.sender,
                    agent="least",
                    root_run_id="root",
                    data={"to": mail.recipient},
                )
            )
        for mail_id in message.read:
            taken = self.mail.get(mail_id)
            if taken is not None:
                self.mail[mail_id] = msgspec.structs.replace(taken, state=MailState.READ)


class _Receive:
    """What a function awaits for its next mail: the step ends there."""

    def __await__(self) -> Generator[_Receive, Mail, Mail]:
        mail = yield self
        return mail


_MAIL_IDS = itertools.count()


class Context:
    """The least ``AgentContext``: ``send`` holds a mail for the step's end, ``receive``."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.held: list[Mail] = []

    def send(self, to: str, content: str) -> None:
        mail_id = f"m-{next(_MAIL_IDS)}"
        self.held.append(
            Mail(
                mail_id=mail_id,
                sender=self.run_id,
                recipient=to,
                content=content,
                sent_at=time.time(),
            )
        )

    def receive(self) -> _Receive:
        return _Receive()


Function = Callable[[Context], Coroutine[Any, Any, Any]]


class Line:
    """The least of the dispatcher's line: one thread (an agents' role) takes the agents'
    messages in the order put. A handling that tells another agent puts it here, and the
    same thread takes it when that handling ends: no thread switch between the two agents,
    as ``actors/handoff.py`` hands a ping-pong's turns."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[Agent, Envelope[Any]] | None] = queue.SimpleQueue()
        self.failed: BaseException | None = None  # the first tell whose handling raised
        self._thread = threading.Thread(target=self._take, name="least-agent-line", daemon=True)
        self._thread.start()

    def put(self, agent: Agent, envelope: Envelope[Any]) -> None:
        self._queue.put((agent, envelope))

    def _take(self) -> None:
        while (item := self._queue.get()) is not None:
            agent, envelope = item
            try:  # (pykka's loop body for one message)
                response = agent._handle_receive(envelope.message)
            except Exception as error:  # kept, the line goes on: stops and asks still answered
                if envelope.reply_to is not None:
                    envelope.reply_to.set_exception()
                elif self.failed is None:
                    self.failed = error
                continue
            if envelope.reply_to is not None:
                envelope.reply_to.set(response)

    def close(self) -> None:
        """Its thread ended (joined: none of its calls is left to land in a later count)."""
        self._queue.put(None)
        self._thread.join(WAIT)


class _LineInbox:
    """An agent's inbox that is its place in the ``Line`` (pykka asks an inbox for ``put``,
    ``get`` and ``empty``; only ``put`` is used: the line's thread takes the messages)."""

    def __init__(self, line: Line, agent: Agent) -> None:
        self._line, self._agent = line, agent

    def put(self, envelope: Envelope[Any]) -> None:
        self._line.put(self._agent, envelope)

    def get(self, block: bool = True, timeout: float | None = None) -> Envelope[Any]:
        raise RuntimeError("a least agent's messages are taken by its line")

    def empty(self) -> bool:
        return True


class Agent(FastInboxActor):
    """One run's actor: drives its function a step at a time, posts a step's mail; handled
    on the agents' ``Line``, not a thread of its own."""

    def _start_actor_loop(self) -> None:
        """No loop of its own: its messages are the line's (nothing to do on start)."""

    def __init__(
        self,
        run_id: str,
        function: Function,
        supervisor: pykka.ActorRef[Any],
        directory: dict[str, pykka.ActorRef[Any]],
        done: threading.Event,
        line: Line,
        commit: Callable[[Mail], None] | None = None,
        late: LateLine | None = None,
    ) -> None:
        super().__init__()
        self.actor_inbox = _LineInbox(line, self)
        self._actor_ref = pykka.ActorRef(self)  # (a ref reads the inbox once, when made)
        self.commit, self.late = commit, late
        self.context = Context(run_id)
        self.coroutine = function(self.context)
        self.supervisor, self.directory, self.done = supervisor, directory, done
        self.unacked: set[str] = set()

    def on_receive(self, message: Any) -> None:
        if isinstance(message, Deliver):
            self._step(message.mail, (message.mail.mail_id,))
        elif isinstance(message, Ack):
            self.unacked.difference_update(message.mail_ids)
        else:  # "start": the function's first step
            self._step(None, ())

    def _step(self, value: Mail | None, read: tuple[str, ...]) -> None:
        ended = False
        try:
            self.coroutine.send(value)
        except StopIteration:
            ended = True
        held, self.context.held = self.context.held, []
        if held or read:
            self._post(held, read)
        if ended:
            self.done.set()

    def _post(self, held: list[Mail], read: tuple[str, ...]) -> None:
        """A step's end: (durable) each mail committed by its sender, then the supervisor
        told (or the report put in the late line), the sender's own ack, each mail
        delivered."""
        if self.commit is not None:
            for mail in held:
                self.commit(mail)
        if self.late is not None:
            self.late.put(Posted(tuple(held), read))
        else:
            self.supervisor.tell(Posted(tuple(held), read))
        ids = tuple(mail.mail_id for mail in held)
        self.unacked.update(ids)
        self.actor_ref.tell(Ack(ids))
        for mail in held:
            self.directory[mail.recipient].tell(Deliver(mail))


def _agents(rounds: int, marks: dict[str, float]) -> tuple[Function, Function]:
    async def ponger(ctx: Context) -> None:
        for _ in range(rounds):
            mail = await ctx.receive()
            ctx.send(mail.sender, "pong")

    async def pinger(ctx: Context) -> None:
        mark(marks, "start")
        to = "ponger"
        for _ in range(rounds):
            ctx.send(to, "ping")
            mail = await ctx.receive()
            to = mail.sender
        mark(marks, "end")

    return ponger, pinger


def least_mail_pingpong(
    n: int,
    commit: Callable[[Mail], None] | None = None,
    late: bool = False,
    group_commit: GroupCommit | None = None,
    marks: dict[str, float] | None = None,
) -> tuple[Rate, dict[str, int]]:
    """n / 2 rounds of the least ping-pong; its rate, and what the supervisor recorded.
    ``commit``: the durable design's floor, each mail committed by its sender's thread
    before anything else of its step's end (as a store whose senders record their mail);
    ``late``: the steps' reports put in a late line the supervisor takes within
    ``LINGER_S``, as the durable design puts them (``LateLine``); ``group_commit``: what
    the supervisor took from the line at once, committed (``GroupCommit``); ``marks``: where
    its start and end are noted (``durable_anatomy.py`` passes one that notes more)."""
    rounds = n // 2
    marks = {} if marks is None else marks
    ponger, pinger = _agents(rounds, marks)
    lateline = LateLine() if late else None
    supervisor, line = Supervisor.start(lateline, group_commit), Line()
    if lateline is not None:
        lateline.supervisor = supervisor
    directory: dict[str, pykka.ActorRef[Any]] = {}
    done = {"ponger": threading.Event(), "pinger": threading.Event()}
    refs = [
        Agent.start(name, function, supervisor, directory, done[name], line, commit, lateline)
        for name, function in (("ponger", ponger), ("pinger", pinger))
    ]
    directory.update(zip(("ponger", "pinger"), refs, strict=True))
    try:
        for ref in refs:
            ref.tell("start")
        for name, event in done.items():
            if not event.wait(WAIT):
                raise RuntimeError(
                    f"the least ping-pong's {name} did not finish in {WAIT:g} s"
                ) from line.failed
        recorded = cast(dict[str, int], supervisor.ask("count", timeout=WAIT))
    finally:
        for agent in refs:
            agent.stop()
        line.close()
        if lateline is not None:
            lateline.close()
        supervisor.stop()
    if recorded["mails"] != 2 * rounds:
        raise RuntimeError(f"the least ping-pong recorded {recorded} of {2 * rounds} mails")
    return rate_of(marks, 2 * rounds), recorded


def least_calls_per_mail(n: int) -> dict[str, float]:
    """The Python and builtin calls per mail of the least ping-pong by role, counted as
    ``mail.calls_per_mail`` counts the runtime's (a profile hook on every thread, the
    difference of ``n`` and ``2n`` mails): the calls the design cannot skip, to set beside
    the runtime's on the same roles."""
    from spawn import Calls  # (spawn imports the runtime; only the count needs it)

    counts = []
    for mails in (n, 2 * n):
        calls = Calls()
        threading.setprofile(calls.hook)
        sys.setprofile(calls.hook)
        calls.counting = True
        try:
            least_mail_pingpong(mails)
        finally:
            calls.counting = False
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type,unused-ignore]  # (unset)
        counts.append(calls.by_role)
    roles = sorted(set(counts[0]) | set(counts[1]))
    per = {role: round((counts[1][role] - counts[0][role]) / n, 1) for role in roles}
    per["all"] = round(sum(per.values()), 1)
    return per
