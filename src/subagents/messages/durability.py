"""Durability: what the store keeps so that a crash loses nothing: conversation checkpoints
and their deltas, function agents' journals, the leases of live runtimes, and the commands
other processes post to a running runtime.
"""

from __future__ import annotations

import time
from typing import Any, Literal, get_args

import msgspec

from subagents.messages.conversation import ChatMessage, ToolResultBlock
from subagents.messages.records import Usage

CommandKind = Literal["stop", "send", "approval"]
"""``approval``: an answer to a run's pending approval (its ``ApprovalAnswered`` as JSON)."""
"""What another process may ask of a running runtime through the store (``Command``)."""
COMMAND_KINDS: tuple[CommandKind, ...] = get_args(CommandKind)


class Checkpoint(msgspec.Struct, frozen=True, kw_only=True):
    """A run's conversation after a step, enough to resume it without redoing work.

    ``answered`` holds the tool results already in hand for the last assistant turn's
    tool calls, so a resumed run does not run them again.
    """

    run_id: str
    step: int
    messages: tuple[ChatMessage, ...]
    answered: tuple[ToolResultBlock, ...] = ()
    started: tuple[str, ...] = ()
    """The tool_use ids of the last turn's side-effecting calls that began running (the tool
    journal, recorded before each ran). A resumed run does not run a started call that has
    no answer again: the model is told it was interrupted (``tools.journal``)."""
    usage: Usage = Usage()
    ts: float = msgspec.field(default_factory=time.time)

    def with_delta(self, delta: CheckpointDelta) -> Checkpoint:
        """This checkpoint with ``delta`` applied; unchanged if the delta is of another step
        (a step's checkpoint supersedes every delta of the steps before it)."""
        if delta.step != self.step:
            return self
        answered, started = self.answered, self.started
        if delta.answered is not None:
            answered = (*answered, delta.answered)
        if delta.started is not None and delta.started not in started:
            started = (*started, delta.started)
        if delta.ended is not None and delta.ended in started:
            started = tuple(i for i in started if i != delta.ended)
        if answered is self.answered and started is self.started:
            return self
        return msgspec.structs.replace(self, answered=answered, started=started)


class CheckpointDelta(msgspec.Struct, frozen=True, kw_only=True):
    """One tool call's change to its run's checkpoint, within the checkpoint's step: the
    call began (``started``, the tool journal), ended by raising (``ended``), or was
    answered (``answered``).

    Why a delta and not the checkpoint again: a turn of N tool calls would re-save the whole
    conversation 2N times (quadratic in a long turn). A store keeps each delta as a small row
    beside the checkpoint, applies them when it loads it (``Checkpoint.with_delta``), and
    drops them when the next step's checkpoint is saved."""

    run_id: str
    step: int
    started: str | None = None
    ended: str | None = None
    answered: ToolResultBlock | None = None


class Lease(msgspec.Struct, frozen=True, kw_only=True):
    """A runtime's claim that it is alive and hosting its runs (``RunRecord.owner``).

    The hosting runtime renews it every few seconds; once ``expires_at`` has passed without a
    renewal, its unfinished runs are orphaned: ``subagents ps`` says so and ``resume`` may
    take them. ``machine`` names the kernel boot (and the pid and time namespaces) where
    ``pid`` and ``expires_boot`` mean something, so that a reader there can tell at once that
    the process is gone, and time the lease by a clock no step moves (``store.leases``).
    """

    owner: str
    host: str
    pid: int
    machine: str = ""
    started_at: float = 0.0
    renewed_at: float = 0.0
    expires_at: float = 0.0
    expires_boot: float = 0.0
    """``expires_at`` on the writer's boot clock (``CLOCK_BOOTTIME``; 0.0: none): what a
    reader on the same machine decides by, as a step of the wall clock moves nothing of it
    (``store.leases``)."""
    epoch: int = 0
    """Which taking of the lease this is: the store gives each ``acquire_lease`` a number
    never given before (in that store). A write fenced with ``(owner, epoch)`` is refused once
    that lease is released (its runs taken over) or taken again, even under the same owner
    (``store.fencing``)."""


class Command(msgspec.Struct, frozen=True, kw_only=True):
    """A request from another process (the command line) to a running runtime."""

    command_id: int
    kind: CommandKind
    run_id: str
    content: str | None = None
    ts: float = msgspec.field(default_factory=time.time)


def command_request_id(command_id: int) -> str:
    """The request id of the mail a ``send`` command becomes (``Mail.request_id``): how
    the process that posted it finds what became of it (`subagents send --wait`). A
    store never gives a command id twice."""
    return f"command-{command_id}"


class JournalEntry(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """One line of a function agent's journal: a call it made, or a result it saw.

    ``request_id`` is the call's key: the run, its retry generation and the call's position
    (``r...:3``). A *call* entry (``kind`` set) is written when the call is made; ``digest``
    fingerprints its arguments and ``call`` shows it, for the error of a replay that does
    something else at that position. A *result* entry (``observed``) says what the function
    was handed: a mail id (or None for a timeout), the mail ids a mailbox read took, the run
    ids a stop stopped, or the ``error`` it raised. Spawns and mail sent need no result entry
    when they succeed: the child's record and the mail's record say it.

    ``gc=False`` (as Mail): a mail stream makes one per mail; they hold strings, numbers and
    at most a list of strings, so they cannot be part of a reference cycle.
    """

    request_id: str
    kind: str = ""
    call: str = ""
    digest: int = 0
    observed: bool = False
    result: Any = None
    error: str | None = None
