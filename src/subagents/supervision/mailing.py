"""MailPost: the mails one supervisor message sends, gathered so that they are recorded,
delivered and announced together.

Why: one agent step's sends reach the supervisor as one Batch. Recorded, announced and
delivered one by one, each mail would cost two events, a store call, a delivery and an
acknowledgement, each a message of its own; gathered, a step costs one store call, one
delivery per recipient, one acknowledgement message per sender, and events per step.

Events describe what a step did: the mails one sender sent to one recipient in one go are
one ``mail_sent`` event on the sender and one ``mail_delivered`` on the recipient, whose data
list the mails (``mail_event_data``). A single mail keeps the shape it always had. Dead
letters are not gathered: each is an error its sender must hear of, one event each.

Plain data, no threads: the mail room decides what becomes of each mail and fills a post,
then turns it into writes, events and deliveries.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from subagents.messages import (
    EXTERNAL_SENDER,
    Batch,
    EventKind,
    Mail,
    MailAck,
    MailState,
    SendMail,
)
from subagents.store.writes import AppendEvent, SaveMails, SetMailsState, Write
from subagents.supervision.effects import Decided, Publish, event_of
from subagents.supervision.runs import RunState, RunTable

_SENT, _DELIVERED_EVENT = EventKind.MAIL_SENT, EventKind.MAIL_DELIVERED
_DEAD, _DELIVERED = MailState.DEAD, MailState.DELIVERED
"""Named once: an enum's member read through its class costs Python 3.11's
``EnumType.__getattr__`` slot, ~1.1k instructions (``supervision/starts.py``), a module's
name ~0.1k; two per mail (``announce_one``)."""


def mail_event_data(mail_ids: Sequence[str], who: str, run_id: str) -> dict[str, Any]:
    """The data of a ``mail_sent`` (``who="recipient"``) or ``mail_delivered``
    (``who="sender"``) event about ``mail_ids``.

    One mail: ``{"mail_id", who}``, as always. Several: ``mail_id`` is the first (so a
    reader of single-mail events still finds one), ``mail_ids`` all of them in order and
    ``count`` how many."""
    if len(mail_ids) == 1:
        return {"mail_id": mail_ids[0], who: run_id}
    return {"mail_id": mail_ids[0], who: run_id, "mail_ids": list(mail_ids), "count": len(mail_ids)}


def announce(
    runs: RunTable,
    now: Callable[[], float],
    sender: str,
    recipient: str,
    delivered: bool,
    mail_ids: Sequence[str],
    decided: Decided,
) -> None:
    """The events of the mails ``sender`` sent ``recipient`` (a pair's), each at the
    clock's reading as it is made: ``mail_sent`` on a sending run, ``mail_delivered`` on
    the recipient if they reached it now."""
    sender_state = runs.get(sender)
    if sender_state is not None:
        data = mail_event_data(mail_ids, "recipient", recipient)
        decided.event(_SENT, sender_state.record, now(), data)
    if delivered:
        target = runs.get(recipient)
        assert target is not None
        data = mail_event_data(mail_ids, "sender", sender)
        decided.event(_DELIVERED_EVENT, target.record, now(), data)


def announce_one(
    runs: RunTable,
    ts: float,
    mail: Mail,
    target: RunState,
    decided: Decided,
    publish: bool,
    checked: bool = False,
) -> None:
    """``announce`` of one mail that reached ``target`` (its recipient, looked up already),
    the same events, both at ``ts``: a mail that went straight, heard of alone
    (``MailRoom.posted``: every mail of a ping-pong), needs no pairs grouped nor its
    recipient found again. Unless ``publish``, the events are only kept (nobody is handed
    them: ``Recorded.published``). ``checked``: the mail was recorded by its sender (its ids
    checked to encode and read back), so the events' writes say so (``AppendEvent.checked``:
    their run fields are their runs' records', checked when saved)."""
    sender_state = runs.get(mail.sender)
    writes = decided.writes
    if not publish:
        if sender_state is not None:
            data = {"mail_id": mail.mail_id, "recipient": mail.recipient}
            writes.append(AppendEvent(event_of(_SENT, sender_state.record, ts, data), checked))
        data = {"mail_id": mail.mail_id, "sender": mail.sender}
        writes.append(AppendEvent(event_of(_DELIVERED_EVENT, target.record, ts, data), checked))
        return
    effects = decided.effects
    if sender_state is not None:
        data = {"mail_id": mail.mail_id, "recipient": mail.recipient}
        event = event_of(_SENT, sender_state.record, ts, data)
        writes.append(AppendEvent(event, checked))
        effects.append(Publish(event))
    data = {"mail_id": mail.mail_id, "sender": mail.sender}
    event = event_of(_DELIVERED_EVENT, target.record, ts, data)
    writes.append(AppendEvent(event, checked))
    effects.append(Publish(event))


def event_mail_ids(data: dict[str, Any]) -> list[str]:
    """The ids of the mails a mail event is about, whichever shape it has."""
    ids = data.get("mail_ids")
    if isinstance(ids, list):
        return [str(i) for i in ids]
    mail_id = data.get("mail_id")
    return [] if mail_id is None else [str(mail_id)]


def acks_by_sender(
    msgs: Sequence[SendMail], acks: Sequence[MailAck], answers: Callable[[str, int], bool]
) -> list[tuple[str, Any]]:
    """(sender, message) for each run that sent some of ``msgs``: its acknowledgements, in
    order, as one message (a ``Batch`` when there are several). The outside is not told, nor
    a start that is over of the refusal of what it sent once a later start of its run has
    begun (``answers``: ``RunTable.answers``; only a refusal is checked, since all that
    start sends is refused: nothing more on the path of mail accepted)."""
    if len(msgs) == 1:  # one send: nothing to group
        msg, ack = msgs[0], acks[0]
        sender = msg.sender
        if sender == EXTERNAL_SENDER or (
            ack.error is not None and not answers(sender, msg.attempt)
        ):
            return []
        return [(sender, ack)]
    by_sender: dict[str, list[MailAck]] = {}
    for msg, ack in zip(msgs, acks, strict=True):
        sender = msg.sender
        if sender == EXTERNAL_SENDER or (
            ack.error is not None and not answers(sender, msg.attempt)
        ):
            continue
        its = by_sender.get(sender)
        if its is None:
            by_sender[sender] = [ack]
        else:
            its.append(ack)
    return [
        (sender, its[0] if len(its) == 1 else Batch(messages=tuple(its)))
        for sender, its in by_sender.items()
    ]


class Pair:
    """The mails one sender sent one recipient in one post, for their two events."""

    __slots__ = ("delivered", "mail_ids", "recipient", "sender")

    def __init__(self, sender: str, recipient: str, delivered: bool) -> None:
        self.sender = sender
        self.recipient = recipient
        self.delivered = delivered
        """Delivered now (``mail_delivered`` is due); else held for a queued recipient,
        which is told of it when it starts."""
        self.mail_ids: list[str] = []


def pairs_of(records: Sequence[Mail]) -> list[Pair]:
    """Per (sender, recipient) of ``records``, in the order of their first mail, the ids of
    the mails that were not dead letters: what their events are about."""
    if len(records) == 1:  # one mail: nothing to group
        mail = records[0]
        if mail.state is _DEAD:
            return []
        pair = Pair(mail.sender, mail.recipient, mail.state is _DELIVERED)
        pair.mail_ids.append(mail.mail_id)
        return [pair]
    pairs: dict[tuple[str, str], Pair] = {}
    last: Pair | None = None
    for mail in records:
        state = mail.state
        if state is _DEAD:
            continue
        if last is None or last.sender != mail.sender or last.recipient != mail.recipient:
            key = (mail.sender, mail.recipient)
            last = pairs.get(key)
            if last is None:
                delivered = state is _DELIVERED
                last = pairs[key] = Pair(mail.sender, mail.recipient, delivered)
        last.mail_ids.append(mail.mail_id)
    return list(pairs.values())


class MailPost:
    """The mails of one supervisor message, in order; what they come to (the deliveries per
    recipient, the ids the events of each (sender, recipient) are about) is worked out once
    they are all in."""

    __slots__ = ("_id_prefix", "now", "records")

    def __init__(self, now: float) -> None:
        self.now = now
        """``sent_at`` of every mail of the post: they are sent by one message."""
        self._id_prefix = ""  # made at the first id: mail that went straight needs none
        self.records: list[Mail] = []
        """Every mail, dead letters too: what the store records."""

    def new_id(self) -> str:
        """A mail id as ``messages.new_id("m")`` makes it (time in ms, 40 random bits), the
        time taken once for the post."""
        prefix = self._id_prefix
        if not prefix:
            prefix = self._id_prefix = f"m{int(self.now * 1000):011x}"
        return f"{prefix}{random.getrandbits(40):010x}"

    def add(self, mail: Mail) -> None:
        """Record ``mail``: a ``DELIVERED`` one goes to its recipient now, an ``ACCEPTED``
        one waits for its queued recipient, a ``DEAD`` one is only kept."""
        self.records.append(mail)

    def pairs(self) -> list[Pair]:
        """Per (sender, recipient), in the order of their first mail, the ids of the mails
        that were not dead letters (``pairs_of``)."""
        return pairs_of(self.records)

    def deliveries(self) -> dict[str, list[Mail]]:
        """The ``DELIVERED`` mails per recipient, in order."""
        out: dict[str, list[Mail]] = {}
        for mail in self.records:
            if mail.state is _DELIVERED:
                mails = out.get(mail.recipient)
                if mails is None:
                    out[mail.recipient] = [mail]
                else:
                    mails.append(mail)
        return out


def named_records(
    kept: Sequence[Mail], msgs: Sequence[SendMail], acks: Sequence[MailAck], now: float
) -> list[Write]:
    """The writes, after the mails' own, for mails a sender's record named
    (``SendMail.mail_id``), which the record may have written already as delivered: the
    state of those ``kept`` that are not (a dead letter, a queued recipient's), since the
    store keeps the record's; and ``refused_records``."""
    states: list[Write] = [SetMailsState((m.mail_id,), m.state) for m in kept]
    return states + refused_records(msgs, acks, now)


def refused_records(msgs: Sequence[SendMail], acks: Sequence[MailAck], now: float) -> list[Write]:
    """What the store keeps of the mails of ``msgs`` (answered by ``acks``, in order) that a
    sender's record named (``SendMail.mail_id``) and that were refused: the record may have
    been written after all, as delivered, yet nobody hands the mail to its recipient. Kept
    as dead letters (the mail id is kept once: a record that lands later changes nothing),
    so no recipient restored from the store is handed a refused mail, nor counts it unread.
    (Rare: a node's record whose answer was lost, its sender ended meanwhile.)"""
    refused = [
        msg
        for msg, ack in zip(msgs, acks, strict=True)
        if msg.mail_id is not None and ack.error is not None and not ack.dead_letter
    ]
    if not refused:
        return []
    dead = tuple(
        Mail(
            mail_id=msg.mail_id,
            sender=msg.sender,
            recipient=msg.to,
            content=msg.content,
            reply_to=msg.reply_to,
            sent_at=now,
            state=MailState.DEAD,
            request_id=msg.request_id,
        )
        for msg in refused
        if msg.mail_id is not None
    )
    return [SaveMails(dead), SetMailsState(tuple(m.mail_id for m in dead), MailState.DEAD)]
