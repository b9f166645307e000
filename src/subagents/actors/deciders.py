"""Which of the core's decisions each message the supervisor decides is given to.

Why a table: the supervisor's thread takes every message of every run (a trivial run brings
it a spawn ask and a finish, and any run its mail, steps and tool calls); a ``match`` over
the twenty-odd kinds of message tries each case in turn, one ``isinstance`` per case
(``RunFinished`` was the fourteenth). A dict keyed by the message's exact type finds its
decider in one look-up. Exact types are enough: no message type the supervisor decides is
subclassed (each is a final ``msgspec.Struct``), so ``type(message)`` is the class a
``case`` would have matched. A type that is not in the table is not decided: the actor
answers it itself or drops it (``SupervisorActor._question``).

Some decisions need what the store holds first (a continued run's record and checkpoint, a
restarted run's earlier mail and journal): their deciders read it, on the supervisor's
thread, as the ``match`` did.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from subagents.messages import (
    ApprovalAsked,
    ApprovalTaken,
    HostLost,
    Journal,
    MailPosted,
    MailRead,
    Parked,
    Placed,
    RestartDue,
    RunFinished,
    SlotWanted,
    SpawnMany,
    SpawnRequest,
    StepTaken,
    StopAll,
    StopRequest,
    StopRequested,
    Streamed,
    Subscribe,
    Timeout,
    ToolAnswered,
    ToolCalled,
    WaitingChanged,
)
from subagents.store.base import DamagedRow, RunStore
from subagents.supervision.continuation import Continued
from subagents.supervision.core import SupervisorCore
from subagents.supervision.effects import Decision

Decider = Callable[[Any], Decision | None]


def deciders(
    core: SupervisorCore, store: RunStore, ended: Callable[[str, int], None]
) -> dict[type, Decider]:
    """Message type -> what decides it (the decision, or None: a message it does not decide,
    as a ``SpawnRequest`` whose ``continues`` is neither None nor a run id). ``ended``: told
    of each run's end (its attempt) before the core decides it (``Effector.ended``)."""

    def spawn(message: SpawnRequest) -> Decision | None:
        run_id = message.continues
        if run_id is None:
            return core.spawn(message)
        if not isinstance(run_id, str):
            return None
        try:
            read = Continued(store.get_run(run_id), store.load_checkpoint(run_id))
        except DamagedRow as exc:  # this request is refused, no run stopped (a store that
            read = Continued(None, unreadable=str(exc))  # fails to read halts, as it did)
        return core.spawn(message, read)  # the run it continues, read for it

    def finished(message: RunFinished) -> Decision:
        ended(message.run_id, message.attempt)
        return core.finished(message)

    def restart_due(message: RestartDue) -> Decision:  # what its earlier start did, read for it
        run_id = message.run_id
        return core.restart_due(run_id, store.mail_for(run_id), store.journal_of(run_id))

    def host_lost(message: HostLost) -> Decision:  # as RestartDue, for each run
        reads = {r: (store.mail_for(r), store.journal_of(r)) for r in message.run_ids}
        return core.host_lost(message.run_ids, message.reason, reads)

    table: dict[type, Callable[[Any], Decision | None]] = {
        MailPosted: core.mails_posted,
        MailRead: lambda message: core.mail_reads((message,)),
        Journal: core.journal,
        SpawnRequest: spawn,
        SpawnMany: lambda message: core.spawn_many(message.requests),
        StepTaken: core.step_taken,
        ToolCalled: core.tool_called,
        ApprovalAsked: core.approval_report,
        ApprovalTaken: core.approval_report,
        ToolAnswered: core.tool_answered,
        WaitingChanged: core.waiting_changed,
        Parked: core.parked,
        SlotWanted: core.slot_wanted,
        RunFinished: finished,
        StopRequest: core.stop,
        StopRequested: core.stop_requested,
        Subscribe: core.subscribe,
        Timeout: lambda message: core.timeout(message.run_id),
        RestartDue: restart_due,
        Placed: core.placed,
        Streamed: core.progress.streamed,
        HostLost: host_lost,
        StopAll: lambda message: core.stop_all(message.reason),
    }
    return table
