"""Every message, event and record of subagents, as frozen msgspec Structs, one module per
protocol:

- ``records``: a run's record, its outcome, its usage, its status; ids;
- ``conversation``: content blocks, chat messages, the Model protocol's request and response;
- ``mail``: mail between runs;
- ``events``: what happened to a run;
- ``durability``: checkpoints and their deltas, journals, leases, commands from other processes;
- ``actor_protocol``: what the actors tell each other (``ActorMessage``, ``Batch``, ``Ask``);
- ``approvals``: asks kept in the store until someone answers them (durable approvals);
- ``answers``: the supervisor's answers to asks and the runtime's views of a tree.

Every name is re-exported here: import from ``subagents.messages``.

Why Structs: these types are the vocabulary shared by every layer (models, store, behaviour,
actors, runtime, command). pykka does not copy messages between threads, so everything that
crosses a thread boundary must be immutable; and a distributed backend or the SQLite store
must be able to encode it, so everything here is a msgspec Struct that ``msgspec.json.encode``
handles without custom hooks. A Struct that refers to another module's type imports it at
run time (not under ``TYPE_CHECKING``): msgspec resolves annotations from the module's
globals when it first encodes or decodes.

Pure data: no threads, no I/O.
"""

from __future__ import annotations

from subagents.messages.actor_protocol import (
    ActorMessage,
    AgentTask,
    ApprovalAnswered,
    ApprovalAsked,
    Ask,
    Batch,
    ChildDone,
    Continue,
    DeliverMail,
    HostLost,
    Inspect,
    Job,
    Journal,
    LeaseLost,
    MailAck,
    MailRead,
    Park,
    Parked,
    Placed,
    PollCommands,
    Replay,
    RestartDue,
    Restore,
    RunFinished,
    SendMail,
    SlotWanted,
    SpawnMany,
    SpawnReply,
    SpawnRequest,
    StepTaken,
    StopAll,
    StopReply,
    StopRequest,
    StopRequested,
    Sweep,
    Timeout,
    ToolAnswered,
    ToolCalled,
    ToolStarting,
    TreeRecords,
    Unpark,
    WaitingChanged,
    Wake,
)
from subagents.messages.answers import (
    RestoreReport,
    RunUsage,
    SupervisorStats,
    TreeNode,
    TreeUsage,
)
from subagents.messages.approvals import (
    ApprovalRecord,
    ApprovalStatus,
    approval_id_for,
)
from subagents.messages.conversation import (
    Attachment,
    AttachmentKind,
    ChatMessage,
    ContentBlock,
    ModelRequest,
    ModelResponse,
    StopReason,
    TextBlock,
    ToolResultBlock,
    ToolSchema,
    ToolUseBlock,
)
from subagents.messages.durability import (
    COMMAND_KINDS,
    Checkpoint,
    CheckpointDelta,
    Command,
    CommandKind,
    JournalEntry,
    Lease,
)
from subagents.messages.events import (
    Event,
    EventKind,
    StoredEvent,
)
from subagents.messages.mail import (
    EXTERNAL_SENDER,
    Mail,
    MailState,
)
from subagents.messages.records import (
    CLEANUPS,
    ON_FAILURE,
    TERMINAL_STATUSES,
    Cleanup,
    OnFailure,
    Outcome,
    PermissionGrant,
    RunRecord,
    RunStatus,
    Usage,
    new_id,
)

__all__ = [
    "CLEANUPS",
    "COMMAND_KINDS",
    "EXTERNAL_SENDER",
    "ON_FAILURE",
    "TERMINAL_STATUSES",
    "ActorMessage",
    "AgentTask",
    "ApprovalAnswered",
    "ApprovalAsked",
    "ApprovalRecord",
    "ApprovalStatus",
    "Ask",
    "Attachment",
    "AttachmentKind",
    "Batch",
    "ChatMessage",
    "Checkpoint",
    "CheckpointDelta",
    "ChildDone",
    "Cleanup",
    "Command",
    "CommandKind",
    "ContentBlock",
    "Continue",
    "DeliverMail",
    "Event",
    "EventKind",
    "HostLost",
    "Inspect",
    "Job",
    "Journal",
    "JournalEntry",
    "Lease",
    "LeaseLost",
    "Mail",
    "MailAck",
    "MailRead",
    "MailState",
    "ModelRequest",
    "ModelResponse",
    "OnFailure",
    "Outcome",
    "Park",
    "Parked",
    "PermissionGrant",
    "Placed",
    "PollCommands",
    "Replay",
    "RestartDue",
    "Restore",
    "RestoreReport",
    "RunFinished",
    "RunRecord",
    "RunStatus",
    "RunUsage",
    "SendMail",
    "SlotWanted",
    "SpawnMany",
    "SpawnReply",
    "SpawnRequest",
    "StepTaken",
    "StopAll",
    "StopReason",
    "StopReply",
    "StopRequest",
    "StopRequested",
    "StoredEvent",
    "SupervisorStats",
    "Sweep",
    "TextBlock",
    "Timeout",
    "ToolAnswered",
    "ToolCalled",
    "ToolResultBlock",
    "ToolSchema",
    "ToolStarting",
    "ToolUseBlock",
    "TreeNode",
    "TreeRecords",
    "TreeUsage",
    "Unpark",
    "Usage",
    "WaitingChanged",
    "Wake",
    "approval_id_for",
    "new_id",
]
