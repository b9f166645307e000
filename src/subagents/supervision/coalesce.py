"""Coalescing: the effects held back for a group commit, with the Tells to each run merged.

Why: after a group commit the supervisor carries out everything the group decided; in a mail
burst that is many Tells (deliveries to receivers, acknowledgements to senders). Each actor
message costs a queue hand-off and a wake-up of the receiving thread; one ``Batch`` per run
costs that once. A Tell that already carries a Batch (a run's acknowledgements of one step's
sends) is merged flat: a Batch never holds a Batch.

Order: messages to one run keep their order (they end up in one Batch, in order). Tells to
different runs were never ordered relative to each other (separate mailboxes). Publish and
the deadline timers are not ordered relative to Tells either (events and timers are seen by
other threads at any time), so they pass through where they stand. A run's start first lets
go the batch pending for that run only (one decided before a restart's StartRun reaches the
old actor, one decided after it the new start): the batches of other runs wait on behind it.
Why: in a fan-out each child's end tells its parent and starts the next queued child, and a
start letting every batch go had the parent told each end apart, one handling each. Any
other effect (a stop, a message to the outside, a restart) first lets every pending batch
go, so nothing is moved across it: a Tell decided before a run's StopAgent still reaches
that run first.

An acknowledgement of mail (a ``MailAck``, or a run's Batch of them) is a barrier too: it
goes after everything decided before it, deliveries to other runs included. A sender that
has it may take its next mail straight to the recipient's mailbox
(``supervision.mail_routes``); the mail it acknowledges must be there first, or the next
would overtake it.
"""

from __future__ import annotations

from typing import Any

from subagents.messages import Batch, MailAck
from subagents.supervision.effects import (
    ArmDeadline,
    DisarmDeadline,
    Effect,
    Publish,
    StartRun,
    Tell,
)

_PASS_THROUGH = (Publish, ArmDeadline, DisarmDeadline)


def coalesce(effects: list[Effect]) -> list[Effect]:
    """``effects`` with the Tells to each run between two barriers merged into one Tell
    (a ``Batch`` when there are several), released at the next barrier or at the end, runs
    in the order of their first Tell. With fewer than two Tells there is nothing to merge:
    ``effects`` as they are (counted in C: a group of one run's end has one at most)."""
    if list(map(type, effects)).count(Tell) < 2:
        return effects
    out: list[Effect] = []
    pending: dict[str, list[Any]] = {}

    def release() -> None:
        for run_id, messages in pending.items():
            out.append(Tell(run_id, _merged(messages)))
        pending.clear()

    for effect in effects:  # one isinstance per effect while nothing is pending (most)
        if isinstance(effect, Tell):
            if _acknowledges(effect.message):
                release()
                out.append(effect)
                continue
            messages = pending.get(effect.run_id)
            if messages is None:
                pending[effect.run_id] = [effect.message]
            else:
                messages.append(effect.message)
        elif pending and not isinstance(effect, _PASS_THROUGH):
            if type(effect) is StartRun:  # only its own run's batch goes before it
                run_id = effect.record.run_id
                if run_id in pending:
                    out.append(Tell(run_id, _merged(pending.pop(run_id))))
            else:
                release()
            out.append(effect)
        else:  # passes through, or a barrier with nothing pending to let go first
            out.append(effect)
    if pending:
        release()
    return out


def _merged(messages: list[Any]) -> Any:
    """The messages pending for one run as one: alone, as it is; else a ``Batch``, any Batch
    among them (a run's acknowledgements) opened: no nesting."""
    if len(messages) == 1:
        return messages[0]
    flat: list[Any] = []
    for m in messages:
        if isinstance(m, Batch):
            flat.extend(m.messages)
        else:
            flat.append(m)
    return Batch(messages=tuple(flat))


def _acknowledges(message: Any) -> bool:
    """Whether ``message`` acknowledges mail (a sender's acknowledgements come alone, or
    as a Batch of nothing else: ``mailing.acks_by_sender``)."""
    if type(message) is Batch:
        inner = message.messages
        return bool(inner) and type(inner[0]) is MailAck
    return type(message) is MailAck
