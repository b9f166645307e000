"""Events: what happened to a run, as subscribers, logs and the store see it."""

from __future__ import annotations

import enum
import time
from typing import Any

import msgspec


class EventKind(enum.StrEnum):
    SPAWNED = "spawned"
    QUEUED = "queued"
    STARTED = "started"
    STEP = "step"
    TOOL_CALL = "tool_call"
    MAIL_SENT = "mail_sent"
    MAIL_DELIVERED = "mail_delivered"
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"
    BUDGET_EXCEEDED = "budget_exceeded"
    RESTARTED = "restarted"
    DEAD_LETTER = "dead_letter"
    PARKED = "parked"
    """A waiting run gave its concurrency slot to a queued run (supervision/parking.py)."""
    UNPARKED = "unparked"
    """A parked run took a slot again, to go on with what woke it."""
    APPROVAL_ASKED = "approval_asked"
    """A tool call waits for a person's answer, kept in the store (data: ``approval_id``,
    ``tool``, ``reason``): ``subagents approvals`` lists it."""
    APPROVAL_ANSWERED = "approval_answered"
    """Its answer reached the run (data: ``approval_id``, ``allow``, ``answer``)."""
    PLACED = "placed"
    """On a Ray cluster, a start of the run was placed on a node (data: ``node``, Ray's node
    id; ``address``, the node's IP; ``attempt``), right after its ``started``."""


class Event(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """Something that happened to a run; what subscribers, logs and the store see."""

    kind: EventKind
    run_id: str
    agent: str
    root_run_id: str
    parent_run_id: str | None = None
    depth: int = 0
    ts: float = msgspec.field(default_factory=time.time)
    data: dict[str, Any] = msgspec.field(default_factory=dict)


class StoredEvent(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """An event as the store keeps it: with its place in the store's one order of every
    run's events (``seq``, growing), so a reader that follows every run (`subagents events`,
    `ps --watch`, the console) asks for what came after the last it saw."""

    seq: int
    event: Event
