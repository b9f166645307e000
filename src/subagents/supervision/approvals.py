"""Durable approvals decided: a run's ask kept as a pending approval, and an answer (given
by any process through the store) told to the run that waits for it.

Pure, as every part of the core: the store's rows are written by the actor from the
``SaveApproval`` returned here; an answer comes as an ``approval`` command, claimed from the
store by the actor with the other commands other processes post, and handed in.
"""

from __future__ import annotations

import msgspec

from subagents.logs import get_logger
from subagents.messages import (
    EXTERNAL_SENDER,
    ApprovalAnswered,
    ApprovalAsked,
    ApprovalRecord,
    ApprovalTaken,
    Command,
    EventKind,
)
from subagents.store.writes import SaveApproval
from subagents.supervision.effects import Decided, Tell
from subagents.supervision.runs import RunTable

log = get_logger("subagents.supervisor")
_answer_decoder = msgspec.json.Decoder(ApprovalAnswered)

Report = ApprovalAsked | ApprovalTaken
"""What a run reports of its approvals: an ask (``asked``), or an answer taken (``taken``)."""


def reported(runs: RunTable, msg: Report, now: float) -> Decided:
    """``asked`` or ``taken``, as ``msg`` is."""
    if isinstance(msg, ApprovalTaken):
        return taken(runs, msg, now)
    return asked(runs, msg, now)


def asked(runs: RunTable, msg: ApprovalAsked, now: float) -> Decided:
    """The ask of a live run kept as a pending approval, and announced (``approval_asked``).
    A report from a run that ended, or from an earlier start of it, is dropped."""
    decided = Decided()
    state = runs.reporting(msg.run_id, msg.attempt)
    if state is None:
        return decided
    record = state.record
    approval = ApprovalRecord(
        approval_id=msg.approval_id,
        run_id=record.run_id,
        root_run_id=record.root_run_id,
        agent=record.agent,
        tool=msg.tool,
        input=msg.input,
        reason=msg.reason,
        requester=record.parent_run_id or EXTERNAL_SENDER,
        tool_use_id=msg.tool_use_id,
        asked_at=now,
        retries=record.retries,
    )
    decided.writes.append(SaveApproval(approval))
    data = {"approval_id": msg.approval_id, "tool": msg.tool, "reason": msg.reason}
    decided.event(EventKind.APPROVAL_ASKED, record, now, data)
    return decided


def answered(runs: RunTable, command: Command, now: float) -> Decided:
    """An answer (an ``approval`` command, posted by whoever answered through the store) told
    to its run if it is live here. The run ignores one it no longer waits for (told twice
    across a restart); an unreadable one is dropped, logged. One for a run that ended first
    (stopped as it was answered) is not acted on: logged, and shown ``void``
    (``store/unacted_approvals.py``: no ``approval_answered`` for it, ``taken``)."""
    decided = Decided()
    state = runs.live(command.run_id)
    if state is None or command.content is None:
        if command.content is not None:
            log.info("approval answer for an ended run", command_id=command.command_id)
        return decided
    try:
        message = _answer_decoder.decode(command.content)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        log.warning("unreadable approval command", command_id=command.command_id, error=str(exc))
        return decided
    decided.effects.append(Tell(command.run_id, message))
    return decided


def taken(runs: RunTable, msg: ApprovalTaken, now: float) -> Decided:
    """The run acts on an answer (``approval_answered``): announced when the run takes it,
    not when it is told, so the event is true of what the run did. A report from a run that
    ended (stopped as the answer reached it), or from an earlier start of it, is dropped:
    that answer was never acted on, and is shown ``void``."""
    decided = Decided()
    state = runs.reporting(msg.run_id, msg.attempt)
    if state is None:
        return decided
    data = {"approval_id": msg.approval_id, "allow": msg.allow, "answer": msg.answer}
    decided.event(EventKind.APPROVAL_ANSWERED, state.record, now, data)
    return decided
