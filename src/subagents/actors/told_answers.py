"""The answer owed to whoever asked the supervisor for something by a tell, when it cannot
act on it (its handling failed, or the store did): without one, a run would wait on its
tool call until its deadline, and an outside caller on its spawn forever."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from subagents.messages import (
    MailAck,
    SendMail,
    SpawnReply,
    SpawnRequest,
    StopReply,
    StopRequest,
    StopRequested,
)


def refusal_of(message: Any, reason: str) -> tuple[str | None, Any] | None:
    """``(run_id, reply)`` refusing ``message`` with ``reason``: ``run_id`` None for the
    outside (a root's spawn); None when nobody waits on ``message``."""
    match message:
        case SpawnRequest(parent_run_id=None, request_id=rid):
            return None, SpawnReply(request_id=rid, error=reason)
        case SpawnRequest(parent_run_id=str(run_id), request_id=rid):
            return run_id, SpawnReply(request_id=rid, error=reason)
        case SendMail(sender=run_id, request_id=rid):
            return run_id, MailAck(request_id=rid, error=reason)
        case StopRequest(requester=str(run_id), request_id=rid):
            return run_id, StopReply(request_id=rid, error=reason)
        case StopRequested(requester=str(run_id), request_id=rid):
            return run_id, StopReply(request_id=rid, error=reason)
        case _:
            return None


def failure_reason(exc: BaseException) -> str:
    """What a run (or the outside) that asked by a tell is told when handling it failed (a
    bug): otherwise it would wait on its tool call until its deadline."""
    return f"the supervisor could not handle this request: {type(exc).__name__}: {exc}"


def answer_told(
    message: Any,
    reason: str,
    tell: Callable[[str, Any], None],
    on_outside: Callable[[Any], None],
    answers: Callable[[str, int], bool],
) -> None:
    """Refuse ``message`` with ``reason`` to whoever waits on it: ``tell(run_id, reply)`` for a
    run, ``on_outside(reply)`` for the outside; nothing when nobody waits, nor when the start
    that asked is over and a later start of its run has begun (``answers``:
    ``RunTable.answers``; the reply would settle that start's call with the same key)."""
    refusal = refusal_of(message, reason)
    if refusal is not None:
        run_id, reply = refusal
        if run_id is None:
            on_outside(reply)
        elif answers(run_id, message.attempt):  # (each message refused carries its start)
            tell(run_id, reply)
