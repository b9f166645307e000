"""Resumption: what a resumed run must be told instead of redoing work.

A run resumes from its last checkpoint: the conversation up to its last model call, plus the
tool results it already had (``Checkpoint.answered``). Its other pending tool calls may have
had durable effects before the crash or the restart: a child spawned (a run whose
``request_id`` is the tool_use id) or a mail sent (a mail whose ``request_id`` is it). Those
are not done again: the resumed agent is handed the messages it would have received (a
ChildDone for a child that ended, a SpawnReply for one still running, a MailAck for mail sent).
"""

from __future__ import annotations

from collections.abc import Iterable

from subagents.messages import ChildDone, Mail, MailAck, Outcome, RunRecord, SpawnReply

Recovered = SpawnReply | ChildDone | MailAck


def recovered_messages(
    run_id: str, children: Iterable[RunRecord], sent: Iterable[Mail]
) -> tuple[Recovered, ...]:
    """The answers a resumed ``run_id`` gets for calls whose effects already happened."""
    messages: list[Recovered] = []
    for child in children:
        if child.parent_run_id != run_id or child.request_id is None:
            continue
        messages.append(SpawnReply(request_id=child.request_id, run_id=child.run_id, queued=False))
        if child.status.terminal and not child.background:
            outcome = child.outcome or Outcome(
                run_id=child.run_id, status=child.status, error="ended before the restart"
            )
            messages.append(ChildDone(request_id=child.request_id, outcome=outcome))
    for mail in sent:
        if mail.sender == run_id and mail.request_id is not None:
            messages.append(
                MailAck(request_id=mail.request_id, mail_id=mail.mail_id, recipient=mail.recipient)
            )
    return tuple(messages)
