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
    """The run took its answer: its call runs or is refused (data: ``approval_id``,
    ``allow``, ``answer``). None for an answer its run ended before taking (``void``)."""
    MAIL_REFUSED = "mail_refused"
    """Mail posted from another process (``subagents send``, the console) that the run's host
    refused or kept as a dead letter (data: ``command_id``, ``sender``, ``error``, and
    ``mail_id`` when it was kept): the process that posted it has exited, so the run's
    events say what became of it (``subagents log``)."""
    PLACED = "placed"
    """On a Ray cluster, a start of the run was placed on a node (data: ``node``, Ray's node
    id; ``address``, the node's IP; ``attempt``), right after its ``started``."""
    TEXT_DELTA = "text_delta"
    """What the run's model wrote since the last one, as it streams (data: ``turn``, ``seq``,
    ``parts``: ``[{"kind": "text" | "tool_input", "text", "tool"}]``, ``skipped``: characters
    left out to keep it small, ``void``: the attempt that streamed the step so far failed and
    is tried again, so what was shown of it is void). Published, never stored: the step's
    own record says what was written (docs/runtime.md, "Live progress")."""


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


class Preview(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """What a run's model has written so far in the step under way, as streamed: what the
    store keeps of its ``text_delta`` events, one per run, for viewers in other processes
    (``subagents log -f``, ``attach``); dropped once the step is recorded or the run ends."""

    run_id: str
    turn: int
    """The model turn under way (1 for the first of the run's conversation)."""
    text: str
    """The last ``PREVIEW_CHARS`` characters streamed in this step; a tool call's input
    follows a line ``[tool NAME]``."""
    chars: int
    """Characters streamed in this step so far (``text`` ends with the last of them)."""
    seq: int = 0
    voided: int = 0
    """Attempts of this step whose stream broke and was tried again (their text is gone)."""
    tool: str | None = None
    """The tool whose input ``text`` ends in (None: it ends in text)."""
    ts: float = 0.0


PREVIEW_CHARS = 2000
"""The most of a step's streamed text a ``Preview`` keeps (its end)."""
