"""Mail a run's actor takes straight to its recipient's mailbox (docs/architecture.md, "The
mail path").

- ``RunDirectory``: the started runs' agent actors by run id, with their start's attempt and
  their tree. The ``Effector`` keeps it on the supervisor's thread (a start lists itself
  from its actor's constructor, before its loop can run: ``RunDirectory.list_start``); every agent
  reads it (one dict, read-mostly: a get or a set is atomic under the GIL).
- ``MailDesk``: what a runtime's agents share for it: the directory, the limits a mail is
  checked against, the run table's generation (``supervision.mail_routes``), and the store's
  write when senders record their mail (``RunStore.mail_recording``): the sender records it,
  one fenced transaction of its own, before any recipient can see it, so a recipient only
  ever acts on recorded mail; with it, the journal entries the sender told and does not
  know committed (``supervision.unsaved_journal``), so a crash never keeps the mail without
  them.
- ``DirectMail``: one run's side of it, asked by its actor when it sends its held reports:
  the mails that may go straight (``MailRoutes``) are recorded, reported to the supervisor
  in their place (``MailPosted``, before any recipient has them: the supervisor hears of a
  mail before it hears of anything a recipient did with it), acknowledged to the sender
  itself (handed to its behaviour at once), then delivered, one ``DeliverMail`` per
  recipient. A record that raised delivers nothing: the mails go by the supervisor, named by
  the ids the record used (it may have been written although its answer was lost). The
  journal reports the record committed are marked so (``Journal.recorded``); the one just
  before the mails' report rides in it instead (``MailPosted.read_mail``: a ping-pong's
  reply was two reports, now one).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
import pykka

from subagents.actors.group_linger import RECORDS_ONLY, LateReports
from subagents.actors.mailbox import Mailbox
from subagents.logs import get_logger
from subagents.messages import (
    Batch,
    DeliverMail,
    Journal,
    Mail,
    MailAck,
    MailPosted,
    MailState,
    RunRecord,
    SendMail,
    SpawnRequest,
    StopRequest,
    StopRequested,
    new_id,
)
from subagents.store.fencing import AttemptOver
from subagents.store.writes import AttemptFence, SaveJournal
from subagents.supervision.effects import StartRun
from subagents.supervision.limits import Limits
from subagents.supervision.mail_routes import MailRoutes
from subagents.supervision.requests import mail_problem
from subagents.supervision.unsaved_journal import UnsavedJournal

log = get_logger("subagents.agent")

_ASKING = (SpawnRequest, StopRequest, StopRequested)
NOTED = frozenset({SendMail, Journal, *_ASKING})
"""What ``DirectMail.post`` takes or notes for later sends: mail, journals, asks."""
_DELIVERED = MailState.DELIVERED
"""Named once: an enum's member read through its class costs Python 3.11's
``EnumType.__getattr__`` slot, ~1.1k instructions (``supervision/starts.py``), a module's
name ~0.1k (a mail made per straight send: ``DirectMail._mail``)."""


@dataclass(frozen=True, slots=True)
class Listed:
    """A started run in the directory: its agent actor, which start, which tree."""

    ref: pykka.ActorRef[Any]
    attempt: int
    root_run_id: str


class RunDirectory:
    """The started, live runs' agent actors by run id (see the module)."""

    __slots__ = ("_runs", "get")

    def __init__(self) -> None:
        self._runs: dict[str, Listed] = {}
        self.get: Callable[[str], Listed | None] = self._runs.get
        """A run's entry, or None: the dict's own ``get`` (one C call, not a method around
        it: a straight mail looks up its sender and its recipient)."""

    def root_of(self, run_id: str) -> str | None:
        listed = self._runs.get(run_id)
        return None if listed is None else listed.root_run_id

    def add(self, run_id: str, listed: Listed) -> None:
        self._runs[run_id] = listed

    def list_start(self, ref: pykka.ActorRef[Any], start: StartRun) -> None:
        """``start``'s agent actor listed, from the actor's constructor: pykka's ``start``
        (and ``PooledActor.start``) runs it before the actor's loop is started, so the run
        is listed before any of its code runs. Listed by the effector after ``start``
        returned, a run's first mail could be flushed before (the start's handling runs at
        once on another thread) and go by the supervisor for want of its sender's entry
        (``DirectMail.post``): under load, mail a crash test forced straight was not."""
        record = start.record
        self._runs[record.run_id] = Listed(ref, start.attempt, record.root_run_id)

    def remove(self, run_id: str, attempt: int = 0) -> None:
        """Unlist ``run_id`` (only its start ``attempt``'s, when given)."""
        listed = self._runs.get(run_id)
        if listed is not None and (not attempt or listed.attempt == attempt):
            del self._runs[run_id]

    def clear(self) -> None:
        self._runs.clear()


class MailDesk:
    """What a runtime's agents share to take mail straight to its recipients."""

    def __init__(
        self,
        *,
        limits: Limits,
        generation: Callable[[], int],
        record: Callable[[Sequence[Mail], SaveJournal | None, AttemptFence], None] | None,
    ) -> None:
        """``generation``: the run table's (read from the agents' threads: one int);
        ``record``: the store's write of mails (fenced), with the sender's journal entries
        not known committed, when senders record their mail (``FencedStore.record_mails``),
        refused unless the sender's start is still its run's (``AttemptFence``); None when
        the supervisor records it, after (``RunStore.mail_recording``)."""
        self.directory = RunDirectory()
        self.limits = limits
        self.generation = generation
        self.record = record
        self.late: LateReports | None = None
        """The one line in which the agents' reports go to the supervisor, in order, where
        senders record their mail and groups linger (``actors/group_linger.py``); set by
        the supervisor; None elsewhere (each report is told)."""


def report(desk: MailDesk | None, supervisor: Any, message: Any, messages: tuple[Any, ...]) -> None:
    """A run's ``message`` (its ``messages`` of one handling) to the supervisor: put in the
    line of the agents' reports where there is one (``MailDesk.late``), the supervisor
    woken at once unless every one of them only records what happened (``RECORDS_ONLY``: it
    takes them within ``LINGER_S``, or before the next message it handles); else told.
    Every report of a run goes this way, so none is decided before one it made earlier (the
    line is taken first). (One function, not one calling a method of the desk: every
    flush of a run's reports comes here.)"""
    late = None if desk is None else desk.late
    if late is None:
        supervisor.tell(message)
        return
    for one in messages:
        if type(one) not in RECORDS_ONLY:
            late.put(message, supervisor)
            return
    late.put(message)


def passes(messages: tuple[Any, ...], direct: DirectMail | None, ended: bool) -> bool:
    """Whether a run's flush of ``messages`` goes through its ``DirectMail`` (``post``): its
    last only with mail (what ``post`` notes of the rest serves later sends); any other once
    it has one, or when it holds what ``post`` takes or notes (``NOTED``). So a waiting run's
    first flush (its ``WaitingChanged`` alone) makes none: two objects fewer per waiting run
    (100,000: ``benchmarks/scale.py``). (One C call each: ``any`` over a generator cost a
    run's end four calls.)"""
    if ended:
        return SendMail in map(type, messages)
    return direct is not None or not NOTED.isdisjoint(map(type, messages))


class Sent:
    """The mails of one flush taken straight to their recipients: their acknowledgements,
    and their delivery."""

    __slots__ = ("acks", "mails", "to")

    def __init__(self) -> None:
        self.mails: list[Mail] = []
        self.acks: list[MailAck] = []
        self.to: dict[str, tuple[Listed, list[Mail]]] = {}

    def add(self, mail: Mail, listed: Listed, request_id: str) -> None:
        self.mails.append(mail)
        self.acks.append(
            MailAck(request_id=request_id, mail_id=mail.mail_id, recipient=mail.recipient)
        )
        its = self.to.get(mail.recipient)
        if its is None:
            self.to[mail.recipient] = (listed, [mail])
        else:
            its[1].append(mail)

    def acknowledgement(self) -> Any:
        """The acknowledgements as one message (a ``Batch`` when there are several)."""
        acks = self.acks
        return acks[0] if len(acks) == 1 else Batch(messages=tuple(acks))

    def deliver(self) -> None:
        """Each recipient's mail as one ``DeliverMail``, put straight in a pooled actor's
        mailbox (``Mailbox.tell``: no envelope, no ``is_alive`` asked; a tell after its
        stop is dropped there). A recipient whose actor has stopped since is the
        supervisor's to settle (a dead letter: ``MailRoom.posted``)."""
        for listed, mails in self.to.values():
            inbox = listed.ref.actor_inbox
            if type(inbox) is Mailbox:
                inbox.tell(DeliverMail(mails=tuple(mails)))
                continue
            try:  # noqa: SIM105 (``contextlib.suppress``: ~0.5 us against ~0.1, once per mail)
                listed.ref.tell(DeliverMail(mails=tuple(mails)))
            except pykka.ActorDeadError:
                pass


class DirectMail:
    """One run's mail taken straight to its recipients (see the module)."""

    __slots__ = ("_looked", "attempt", "desk", "fence", "record", "routes")

    def __init__(self, desk: MailDesk, record: RunRecord, attempt: int) -> None:
        self.desk = desk
        self.record = record
        self.attempt = attempt
        self.fence = AttemptFence.of(record)  # its start, as the store tells it apart
        unsaved = UnsavedJournal() if desk.record is not None else None
        self.routes = MailRoutes(record.run_id, record.root_run_id, unsaved)
        self._looked: tuple[str, Listed] | None = None
        """The directory entry ``_root_of`` read last (for ``_straight``)."""

    def saw(self, message: Any) -> None:
        """What the run was told (an acknowledgement, a spawn's or a stop's reply)."""
        self.routes.answered(message)

    def post(
        self, messages: tuple[Any, ...], cancelled: bool
    ) -> tuple[tuple[Any, ...], Sent | None]:
        """``messages`` (a flush's reports, in order) with the mails that may go straight
        recorded and replaced by ``MailPosted`` reports; and those mails, to acknowledge and
        deliver once the reports are told (None: nothing goes straight). ``cancelled``: this
        start is being stopped; its mail goes by the supervisor, which refuses it."""
        desk = self.desk
        routes = self.routes
        if routes.unsaved is not None:  # (only those a sender records can grow)
            routes.bounded()  # (first: the journals held stay bounded on every way out)
        mine = desk.directory.get(self.record.run_id)
        if cancelled or mine is None or mine.attempt != self.attempt:
            self._by_supervisor(messages, desk.generation())
            return messages, None
        generation = desk.generation()
        out: list[Any] = []
        post = Sent()
        group: list[tuple[Mail, int]] | None = None
        for message in messages:
            kind = type(message)
            if kind is SendMail:
                straight = self._straight(message, generation)
                if straight is not None:
                    recipient, listed = straight
                    mail = self._mail(message, recipient)
                    post.add(mail, listed, message.request_id)
                    if group is None:
                        group = []
                        out.append(group)
                    group.append((mail, listed.attempt))
                    continue
                routes.by_supervisor(message, generation)
            elif kind is Journal:
                routes.journal(message)
            elif kind in _ASKING:
                routes.asked(message.request_id)
            group = None
            out.append(message)
        if not post.mails:
            return messages, None
        recorded = desk.record is not None
        carried = False
        if desk.record is not None:
            unsaved = routes.unsaved
            journal = unsaved.carried() if unsaved is not None else None
            try:
                desk.record(post.mails, journal, self.fence)
            except Exception as exc:  # nothing was delivered: the supervisor decides them
                return self._not_recorded(messages, post.mails, exc, generation), None
            if unsaved is not None and journal is not None:
                unsaved.clear()  # committed now, with this flush's reports among them
                carried = True
        return self._told(out, recorded, carried), post

    def _told(self, out: list[Any], recorded: bool, carried: bool) -> tuple[Any, ...]:
        """``out`` (``post``'s reports, each group of straight mails a list) as told: each
        group its ``MailPosted``; a journal the record carried (``carried``) marked
        ``recorded``, or, just before a group, folded into its report (``read_mail``)."""
        # (in place, from the end, not a generator: a journal folded is deleted behind it)
        for i in range(len(out) - 1, -1, -1):
            m = out[i]
            if type(m) is list:
                last = out[i - 1] if i else None
                if carried and type(last) is Journal and last.attempt == self.attempt:
                    out[i] = self._posted(m, recorded, last.read_mail)  # (it rides in it)
                    del out[i - 1]
                else:
                    out[i] = self._posted(m, recorded)
            elif carried and type(m) is Journal:  # committed already: not written again
                out[i] = msgspec.structs.replace(m, recorded=True)
        return tuple(out)

    def _not_recorded(
        self, messages: tuple[Any, ...], mails: Sequence[Mail], exc: Exception, generation: int
    ) -> tuple[Any, ...]:
        """``messages``, whose ``mails`` the record did not keep (``exc``), all sent by the
        supervisor: named by the record's ids (``_named``), unless the record is known to
        have written nothing because its start is over (``AttemptOver``). The supervisor
        refuses those; a mail kept under its send's key (a dead letter) would be handed to
        the run's next start as that send's answer after a restart, which keeps the keys,
        and the send never made (tests/runtime/test_attempt_fence.py)."""
        log.warning("recording mail failed; sent by the supervisor", error=repr(exc))
        if not isinstance(exc, AttemptOver):
            messages = _named(messages, mails)
        self._by_supervisor(messages, generation, told=False)
        return messages

    def _straight(self, msg: SendMail, generation: int) -> tuple[str, Listed] | None:
        """The recipient ``msg`` may be taken straight to, and its directory entry (the one
        the route read: looked up once, ``_root_of``)."""
        if mail_problem(msg, self.desk.limits) is not None:  # the supervisor says why
            return None
        self._looked = None
        recipient = self.routes.route(msg, self._root_of, generation)
        looked = self._looked
        if recipient is None:
            return None
        if looked is None or looked[0] != recipient:  # (the route read another address)
            listed = self.desk.directory.get(recipient)
            return None if listed is None else (recipient, listed)
        return recipient, looked[1]

    def _root_of(self, run_id: str) -> str | None:
        """``RunDirectory.root_of`` for ``MailRoutes.route``, its entry kept for ``_straight``
        (the route's last lookup is of the recipient it answers: one lookup, not two)."""
        listed = self.desk.directory.get(run_id)
        if listed is None:
            self._looked = None
            return None
        self._looked = (run_id, listed)
        return listed.root_run_id

    def _mail(self, msg: SendMail, recipient: str) -> Mail:
        now = time.time()
        return Mail(
            mail_id=new_id("m", now),
            sender=self.record.run_id,
            recipient=recipient,
            content=msg.content,
            sender_agent=self.record.agent,
            reply_to=msg.reply_to,
            sent_at=now,
            state=_DELIVERED,
            request_id=msg.request_id,
        )

    def _posted(
        self, group: list[tuple[Mail, int]], recorded: bool, read_mail: tuple[str, ...] = ()
    ) -> MailPosted:
        """The report of ``group``'s mails; ``read_mail``: the mail of the committed journal
        report just before them, folded in (``MailPosted.read_mail``: the supervisor decides
        it first, as it decided that report; its entries it never wrote again)."""
        mails: tuple[Mail, ...]
        delivered_to: tuple[int, ...]
        if len(group) == 1:  # (most flushes: no generator, no list)
            mail, attempt = group[0]
            mails, delivered_to = (mail,), (attempt,)
        else:
            mails, delivered_to = tuple([m for m, _ in group]), tuple([a for _, a in group])
        return MailPosted(
            run_id=self.record.run_id,
            mails=mails,
            delivered_to=delivered_to,
            recorded=recorded,
            attempt=self.attempt,
            read_mail=read_mail,
        )

    def _by_supervisor(
        self, messages: tuple[Any, ...], generation: int, *, told: bool = True
    ) -> None:
        """``messages`` all go by the supervisor. ``told``: False when ``post`` went through
        them already (a record that failed): their journal reports are held unsaved once,
        and their mail's acknowledgements say nothing of them (an earlier mark than theirs
        is not known)."""
        routes = self.routes
        for message in messages:
            kind = type(message)
            if kind is SendMail:
                routes.by_supervisor(message, generation, None if told else 0)
            elif kind is Journal:
                if told:
                    routes.journal(message)
                else:
                    routes.observed(message.entries)
            elif kind in _ASKING:
                routes.asked(message.request_id)


def _named(messages: tuple[Any, ...], mails: Sequence[Mail]) -> tuple[Any, ...]:
    """``messages`` with each ``SendMail`` of ``mails`` named by its mail's id: a record whose
    answer did not come (a node's, timed out or its link closed) may have been written all
    the same; the supervisor then keeps the mail under that id, so it is kept, and handed to
    its recipient, once (``SendMail.mail_id``)."""
    ids = {mail.request_id: mail.mail_id for mail in mails}
    return tuple(
        msgspec.structs.replace(m, mail_id=ids[m.request_id])
        if type(m) is SendMail and m.request_id in ids
        else m
        for m in messages
    )
