"""Every message, event and record of subagents, as frozen msgspec Structs.

Why one module: these types are the vocabulary shared by every layer (models, store,
behaviour, actors, runtime, command). pykka does not copy messages between threads, so
everything that crosses a thread boundary must be immutable; and a distributed backend or the
SQLite store must be able to encode it, so everything here is a msgspec Struct that
``msgspec.json.encode`` handles without custom hooks.

This module is pure data: no threads, no I/O.
"""

from __future__ import annotations

import enum
import random
import time
from typing import Any, Literal

import msgspec

# ---------------------------------------------------------------------------------------------
# Usage and cost
# ---------------------------------------------------------------------------------------------


class Usage(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """Tokens (and an estimated cost) consumed by one model call, one run or a subtree."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    cost_usd: float = 0.0
    model_calls: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_creation_input_tokens=self.cache_creation_input_tokens
            + other.cache_creation_input_tokens,
            cache_read_input_tokens=self.cache_read_input_tokens + other.cache_read_input_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
            model_calls=self.model_calls + other.model_calls,
        )

    @property
    def total_input_tokens(self) -> int:
        """All input counters added, as the Messages API bills them."""
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens

    @property
    def total_tokens(self) -> int:
        return self.total_input_tokens + self.output_tokens


# ---------------------------------------------------------------------------------------------
# Conversation: the Model protocol's request and response
# ---------------------------------------------------------------------------------------------


class TextBlock(msgspec.Struct, frozen=True, tag="text", tag_field="type"):
    text: str


class ToolUseBlock(msgspec.Struct, frozen=True, tag="tool_use", tag_field="type"):
    id: str
    name: str
    input: dict[str, Any]


class Attachment(msgspec.Struct, frozen=True, omit_defaults=True):
    """An image or a PDF a tool shows the model beside its text (Read of a PNG, a notebook's
    plots): the Messages API's ``image``/``document`` content of a tool result, base64."""

    kind: Literal["image", "document"]
    media_type: str
    """``image/png``, ``image/jpeg``, ``image/gif``, ``image/webp`` or ``application/pdf``."""
    data: str
    """The bytes, base64-encoded."""


class ToolResultBlock(
    msgspec.Struct, frozen=True, tag="tool_result", tag_field="type", omit_defaults=True
):
    tool_use_id: str
    content: str
    is_error: bool = False
    attachments: tuple[Attachment, ...] = ()
    """Images or documents shown after ``content`` (models that cannot see them get the text)."""


ContentBlock = TextBlock | ToolUseBlock | ToolResultBlock


class ChatMessage(msgspec.Struct, frozen=True):
    """One message of a conversation, in the Messages API's shape."""

    role: Literal["user", "assistant"]
    content: tuple[ContentBlock, ...]

    @property
    def text(self) -> str:
        """The text blocks of this message, joined."""
        return "\n".join(b.text for b in self.content if isinstance(b, TextBlock))


class ToolSchema(msgspec.Struct, frozen=True):
    """A tool as a model sees it: name, description and a JSON schema of its input."""

    name: str
    description: str
    input_schema: dict[str, Any]


class ModelRequest(msgspec.Struct, frozen=True, kw_only=True):
    """What an agent asks of a model for one step.

    ``agent`` and ``run_id`` are not sent to any API; they let offline backends pick a script
    and let backends bind log lines to the run.
    """

    model: str
    system: str
    messages: tuple[ChatMessage, ...]
    tools: tuple[ToolSchema, ...] = ()
    max_tokens: int = 4096
    agent: str = ""
    run_id: str = ""


StopReason = Literal[
    "end_turn",
    "tool_use",
    "max_tokens",
    "stop_sequence",
    "pause_turn",
    "refusal",
    "model_context_window_exceeded",
]


class ModelResponse(msgspec.Struct, frozen=True, kw_only=True):
    """One model turn: content blocks, why it stopped, what it cost."""

    content: tuple[ContentBlock, ...]
    stop_reason: str
    usage: Usage = Usage()
    model: str = ""

    @property
    def text(self) -> str:
        return "\n".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def tool_uses(self) -> tuple[ToolUseBlock, ...]:
        return tuple(b for b in self.content if isinstance(b, ToolUseBlock))


# ---------------------------------------------------------------------------------------------
# Runs
# ---------------------------------------------------------------------------------------------


class RunStatus(enum.StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"
    BUDGET_EXCEEDED = "budget_exceeded"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_STATUSES


TERMINAL_STATUSES = frozenset(
    {
        RunStatus.COMPLETED,
        RunStatus.FAILED,
        RunStatus.CANCELLED,
        RunStatus.TIMED_OUT,
        RunStatus.BUDGET_EXCEEDED,
    }
)


class Outcome(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """How a run ended: its one terminal status, its result or its error.

    ``result`` is text: what an LLM agent answered, what a function agent returned if it
    returned a string, else the JSON text of the value it returned. ``typed`` says which:
    then ``value`` decodes it, so a function agent's ``42`` is ``42`` again (and a dict a
    dict), in memory, through the store and after a restart alike. The value is kept once,
    as its text, so a typed result costs no more to store than a text one.
    """

    run_id: str
    status: RunStatus
    result: str | None = None
    error_kind: str | None = None
    error: str | None = None
    usage: Usage = Usage()
    steps: int = 0
    typed: bool = False
    """``result`` is the JSON text of a value a function agent returned (``value``)."""

    @property
    def ok(self) -> bool:
        return self.status is RunStatus.COMPLETED

    @property
    def value(self) -> Any:
        """The run's value: what a function agent returned, decoded from its JSON (lists,
        dicts, numbers, booleans, None: a returned Struct or dataclass comes back as a dict,
        see ``value_as``); the text for any other result; None for a run that did not
        complete. Decoded on each access: keep it in a variable rather than asking twice."""
        if self.result is None or self.status is not RunStatus.COMPLETED:
            return None
        if not self.typed:
            return self.result
        return msgspec.json.decode(self.result) if self.result else None

    def value_as(self, type: Any) -> Any:
        """The value decoded as ``type`` (a Struct, a dataclass, ``list[int]``...);
        ``msgspec.ValidationError`` if it does not fit."""
        if self.result is None or self.status is not RunStatus.COMPLETED:
            return msgspec.convert(None, type)
        if not self.typed:
            return msgspec.convert(self.result, type)
        return msgspec.json.decode(self.result or "null", type=type)


class PermissionGrant(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """What one requester of a run was allowed, as its definition said when it spawned the
    run. A run's effective permissions are its own (the runtime's, tightened by its
    definition) intersected with every grant of its ``ceiling``: permissions only narrow down
    the tree (``supervision.ceilings``, applied by ``tools.permissions``). Kept in the run's
    record, so a run restored after a crash, or hosted on another node, keeps them without
    its parent."""

    agent: str
    run_id: str
    mode: str | None = None
    """The requester's ``permissionMode`` (None: its definition set none)."""
    tools: tuple[str, ...] | None = None
    """Its ``tools`` (None: every tool)."""
    disallowed_tools: tuple[str, ...] = ()
    network: str | None = None
    """Its definition's ``network`` ("off" turns it off for every run below it too)."""


class RunRecord(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """The durable record of one run: one execution of one agent on one task.

    ``gc=False`` (also on Outcome and Usage, as on Mail): every live run holds two (the
    supervisor's and the store's), and each full pass of the cyclic GC walked them; they
    hold strings, numbers, these structs and JSON-like ``shared`` data, never themselves."""

    run_id: str
    agent: str
    task: str
    root_run_id: str
    parent_run_id: str | None = None
    depth: int = 0
    context: str | None = None
    label: str | None = None
    model: str | None = None
    status: RunStatus = RunStatus.QUEUED
    background: bool = False
    created_at: float = 0.0
    started_at: float | None = None
    ended_at: float | None = None
    deadline_s: float = 300.0
    outcome: Outcome | None = None
    usage: Usage = Usage()
    steps: int = 0
    tool_calls: int = 0
    """Tool calls its model made (spawns and mail included), as reported by its agent."""
    restarts: int = 0
    cleanup: Literal["keep", "delete"] = "keep"
    request_id: str | None = None
    """The requester's handle for this run (the parent's tool_use id); recovery after a
    crash matches children to the parent's pending tool calls by it."""
    owner: str | None = None
    """The process hosting this run (``host:pid``); another runtime on the same store
    leaves it alone while that process lives."""
    node: str | None = None
    """On a Ray cluster: the node (Ray's node id) its latest start was placed on; None on one
    machine (docs/cluster.md)."""
    # supervision policies (docs/supervision.md)
    token_budget: int | None = None
    cost_budget_usd: float | None = None
    on_failure: Literal["report", "retry", "fail_parent"] = "report"
    retries: int = 0
    shared: dict[str, Any] = msgspec.field(default_factory=dict)
    ceiling: tuple[PermissionGrant, ...] = ()
    """What its requesters were allowed, root first: it may never do more (set at admission
    from its parent's record and definition, never recomputed)."""


# ---------------------------------------------------------------------------------------------
# Mail
# ---------------------------------------------------------------------------------------------


class MailState(enum.StrEnum):
    ACCEPTED = "accepted"
    DELIVERED = "delivered"
    READ = "read"
    DEAD = "dead"


EXTERNAL_SENDER = "external"
"""The sender id of mail sent from outside any run (the Runtime caller, the command)."""


class Mail(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One message from one run (or the outside) to another run.

    ``gc=False`` (also on Event and DeliverMail): not tracked by the cyclic garbage
    collector. They cannot be part of a reference cycle (frozen, plain data) and a mail
    stream makes several per mail (benchmarks/README.md, "Findings").
    """

    mail_id: str
    sender: str
    recipient: str
    content: str
    sender_agent: str | None = None
    reply_to: str | None = None
    sent_at: float = 0.0
    state: MailState = MailState.ACCEPTED
    request_id: str | None = None
    """The sender's tool_use id, so a resumed sender does not send the same mail twice."""


# ---------------------------------------------------------------------------------------------
# Events
# ---------------------------------------------------------------------------------------------


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


def new_id(prefix: str = "", now: float | None = None) -> str:
    """A short, sortable, unique id: time in ms (hex) plus 40 random bits.

    ``now``: the wall-clock time to stamp (the supervisor passes its injected clock's). The
    bits come from ``random``, not ``secrets``: ids need to be unique, not unguessable, and
    ``secrets`` makes a system call per id (see benchmarks/README.md, "Findings").
    """
    ms = int((time.time() if now is None else now) * 1000)
    return f"{prefix}{ms:011x}{random.getrandbits(40):010x}"


# ---------------------------------------------------------------------------------------------
# Durability: checkpoints and commands from other processes
# ---------------------------------------------------------------------------------------------


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
    take them. ``machine`` names the kernel (and pid namespace) where ``pid`` means something,
    so that a reader there can tell at once that the process is gone (``store.leases``).
    """

    owner: str
    host: str
    pid: int
    machine: str = ""
    started_at: float = 0.0
    renewed_at: float = 0.0
    expires_at: float = 0.0
    epoch: int = 0
    """Which taking of the lease this is: the store gives each ``acquire_lease`` a number
    never given before (in that store). A write fenced with ``(owner, epoch)`` is refused once
    that lease is released (its runs taken over) or taken again, even under the same owner
    (``store.fencing``)."""


class Command(msgspec.Struct, frozen=True, kw_only=True):
    """A request from another process (the command line) to a running runtime."""

    command_id: int
    kind: Literal["stop", "send"]
    run_id: str
    content: str | None = None
    ts: float = msgspec.field(default_factory=time.time)


# ---------------------------------------------------------------------------------------------
# The actor protocol: what agents and the supervisor tell each other.
# Runs are addressed by run_id, never by actor reference, so these stay plain data.
# ---------------------------------------------------------------------------------------------


class SpawnRequest(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """A run (or the outside, ``parent_run_id=None``) asks for a new run."""

    request_id: str
    agent: str
    task: str
    parent_run_id: str | None = None
    context: str | None = None
    label: str | None = None
    model: str | None = None
    timeout: float | None = None
    token_budget: int | None = None
    background: bool = False
    run_id: str | None = None
    # supervision policies (docs/supervision.md); None = the definition's setting
    cost_budget_usd: float | None = None
    on_failure: Literal["report", "retry", "fail_parent"] | None = None
    max_retries: int | None = None
    shared: dict[str, Any] | None = None
    """Shared-context values for a root run (a child's come from its parent: ``share``)."""
    share: tuple[str, ...] = ()
    """Names of the parent's shared-context keys copied to the child."""
    inherit_messages: bool | None = None
    """Start the child with its parent's conversation so far."""
    cleanup: Literal["keep", "delete"] | None = None
    """What the sweeper does with this run once archived: keep its transcript or delete it
    (None: the definition's ``cleanup``, else its parent's, else keep)."""
    attempt: int = 0
    """Which start of the sending run this comes from (0: not from a run's actor)."""


class SpawnMany(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """The outside asks for many root runs at once (``Runtime.spawn_many``): admitted in
    one decision and one store commit, each by the rules of a lone ``SpawnRequest``; the
    answer is a ``SpawnReply`` per request, in order (a refusal refuses that one only)."""

    requests: tuple[SpawnRequest, ...]


class SpawnReply(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """The supervisor's answer to a spawn: admitted (with its run id) or refused (why)."""

    request_id: str
    run_id: str | None = None
    error: str | None = None
    queued: bool = False


class ChildDone(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """The outcome of a foreground child, delivered to its requester exactly once."""

    request_id: str
    outcome: Outcome


class StepTaken(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """An agent finished one model call: its usage and the conversation checkpoint."""

    run_id: str
    step: int
    usage: Usage
    checkpoint: Checkpoint | None = None
    read_mail: tuple[str, ...] = ()
    """Mail shown to the model in the message this checkpoint now holds."""
    attempt: int = 0
    """Which start of the sending run this comes from (0: not from a run's actor)."""


class ToolCalled(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    run_id: str
    tool: str
    input: dict[str, Any]
    attempt: int = 0
    """Which start of the sending run this comes from (0: not from a run's actor)."""


class ToolStarting(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """A side-effecting tool call is about to run: asked, so that it is in the run's
    checkpoint (``Checkpoint.started``) before the call can do anything. Read-only and
    idempotent calls are not recorded first: running them again after a crash is harmless,
    and they do not pay the round trip."""

    run_id: str
    step: int
    tool_use_id: str
    tool: str
    ended: bool = False
    """Told instead when the call ended by raising (the run fails): its end is known, so a
    restart runs it again rather than calling it interrupted."""
    attempt: int = 0
    """Which start of the sending run this comes from (0: not from a run's actor)."""


class SendMail(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """A run (or the outside, ``sender=EXTERNAL_SENDER``) sends mail to a run id or name."""

    request_id: str
    sender: str
    to: str
    content: str
    reply_to: str | None = None
    attempt: int = 0
    """Which start of the sending run this comes from (0: not from a run's actor)."""


class MailAck(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Mail accepted (``mail_id``) or refused (``error``), after it was recorded."""

    request_id: str
    mail_id: str | None = None
    recipient: str | None = None
    error: str | None = None
    dead_letter: bool = False


class DeliverMail(msgspec.Struct, frozen=True, kw_only=True, gc=False, tag=True):
    """Mail for one run, in the order sent: every mail the supervisor hands a recipient in
    one go (one, or a step's several). The one delivery form: a batch of one is a batch."""

    mails: tuple[Mail, ...]


class MailRead(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    run_id: str
    mail_ids: tuple[str, ...]
    attempt: int = 0
    """Which start of the sending run this comes from (0: not from a run's actor)."""


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


class Journal(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """A function agent's journal entries of one handling, and the mail they read (marked
    read in the same transaction as the entries that say who read it)."""

    run_id: str
    entries: tuple[JournalEntry, ...] = ()
    read_mail: tuple[str, ...] = ()
    attempt: int = 0
    """Which start of the sending run this comes from (0: not from a run's actor)."""


class Replay(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """What a resumed function agent replays before it goes on: its journal, and the mail
    it had read (a replayed ``receive`` hands the same mail again)."""

    entries: tuple[JournalEntry, ...]
    mails: tuple[Mail, ...] = ()
    """The mail its results name, and the mail it sent."""
    agents: dict[str, str] = msgspec.field(default_factory=dict)
    """The agent of each run of its tree, by run id (a send may name its recipient so)."""


class StopRequest(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Stop a run and its subtree. ``requester`` None = the outside (always allowed)."""

    request_id: str
    run_id: str
    requester: str | None = None
    reason: str = "stopped"
    attempt: int = 0
    """Which start of the sending run this comes from (0: not from a run's actor)."""
    journal: bool = False
    """Keep the reply in the requester's journal, in the transaction that stops the run (a
    function agent's ``ctx.stop``): a replay after a crash then gets the same answer instead
    of stopping a run that has already ended."""


class StopRequested(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Stop every live run that ``requested_by`` requested, each with its subtree, with one
    ``reason`` (answered with a ``StopReply``). ``requested_by`` is a run id (its children)
    or ``EXTERNAL_SENDER`` (the root runs this runtime hosts). ``requester`` None = the
    outside (always allowed); a run may only stop what it, or a descendant of it, requested.
    """

    request_id: str
    requested_by: str
    requester: str | None = None
    reason: str = "stopped"
    attempt: int = 0
    """Which start of the sending run this comes from (0: not from a run's actor)."""
    journal: bool = False
    """Keep the reply in the requester's journal with the stop (as ``StopRequest.journal``)."""


class StopReply(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    request_id: str
    stopped: tuple[str, ...] = ()
    error: str | None = None


class WaitingChanged(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """An agent went back to its mailbox with calls pending (``waiting``) or resumed."""

    run_id: str
    waiting: bool
    attempt: int = 0
    """Which start of the sending run this comes from (0: not from a run's actor)."""


# ---- parking: a waiting run lends its concurrency slot (supervision/parking.py) --------------


class Park(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Supervisor -> agent: a queued run needs your slot; give it back if you are waiting.

    The agent handles it between two messages, so it is never working then: it answers
    ``Parked`` and from then on holds back whatever it receives until ``Unpark``."""


class Parked(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Agent -> supervisor: this run gave its slot back (it does nothing until ``Unpark``)."""

    run_id: str
    attempt: int = 0


class SlotWanted(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Agent -> supervisor: a parked run received something; it wants its slot back."""

    run_id: str
    attempt: int = 0


class Unpark(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Supervisor -> agent: your slot is back; handle what you held back, in order."""


class RunFinished(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """An agent ended on its own: a result, or an error of some kind."""

    run_id: str
    result: str | None = None
    typed: bool = False
    """``result`` is the JSON text of a returned value (``Outcome.typed``)."""
    error_kind: str | None = None
    error: str | None = None
    unread_mail: tuple[str, ...] = ()
    attempt: int = 0
    """Which start of the sending run this comes from (0: not from a run's actor)."""


class ToolAnswered(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """A tool call of the current step got its result: added to the run's checkpoint, so a
    resumed run does not run it again."""

    run_id: str
    step: int
    result: ToolResultBlock
    read_mail: tuple[str, ...] = ()
    """Mail this result shows (check_mailbox / wait_for_message): read once it is kept."""
    attempt: int = 0
    """Which start of the sending run this comes from (0: not from a run's actor)."""


class Batch(msgspec.Struct, frozen=True, tag=True):
    """Several messages for one actor, handled in order as if they had been sent one by one.

    Why: every actor message costs a queue hand-off, a wake-up and a GIL switch, far more
    than handling a small report. An agent's mail reports made in one handling (a burst of
    sends, its read receipts) and the supervisor's replies to one run after a group commit
    (deliveries, acknowledgements) travel as one Batch instead of one message each. A Batch
    never holds a Batch.
    """

    messages: tuple[ActorMessage, ...]


class PollCommands(msgspec.Struct, frozen=True, tag=True):
    """Time to take the stop/send commands other processes posted through the store."""


class Continue(msgspec.Struct, frozen=True, tag=True):
    """An agent tells itself to take its next step (so mail and stops interleave)."""


class Wake(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """A timer woke an agent (``wait_for_message`` ran out)."""

    key: str


class Timeout(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """A run's deadline passed (from the timer service to the supervisor)."""

    run_id: str


class RestartDue(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """The backoff of a restarting run is over (timer service -> supervisor)."""

    run_id: str


class HostLost(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """The process that hosted these runs' agents is gone (a cluster node's host died, its
    node left): each is started again elsewhere from what the store keeps, as a new attempt
    (cluster -> supervisor). Not the runs' doing: no restart is counted against them."""

    run_ids: tuple[str, ...]
    node: str = ""
    reason: str = ""


class Placed(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """A cluster's effector placed the start ``attempt`` of ``run_id`` on ``node`` (Ray's
    node id; ``address``: its IP): kept on the run's record and told as an event (cluster ->
    supervisor). Placement is not the supervisor's decision; it only records it."""

    run_id: str
    attempt: int
    node: str
    address: str = ""


class Restore(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Take up the store's orphaned runs (answered with a ``RestoreReport``): those whose
    host's lease lapsed (``store.leases``); ``roots``: only these trees."""

    roots: frozenset[str] | None = None


class LeaseLost(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """This runtime's lease lapsed and another process took its runs over: the supervisor
    must stop hosting them at once, writing nothing more (told by the lease keeper)."""

    reason: str


class Sweep(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Archive finished runs (and delete old ones) if the store keeps them for long."""

    archive_after_minutes: float = 60.0
    retention_days: float | None = None


class StopAll(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Cancel every run (the runtime closes); answered with the ids cancelled."""

    reason: str = "runtime closed"


class Inspect(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Ask the supervisor for a ``SupervisorStats`` (for tests, tools and dashboards);
    ``run_id``: also what that run's subtree has spent, as its budget ledger counts it."""

    run_id: str | None = None


class TreeRecords(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Ask the supervisor for the records of ``run_id``'s tree that it holds in memory (a
    tuple of ``RunRecord``, empty when it holds none): the freshest there are, ahead of
    anything a group commit has not written yet. A view over a live tree (``Runtime.usage``)
    lays them over the store's records of the same tree."""

    run_id: str


ActorMessage = (
    SpawnRequest
    | SpawnReply
    | ChildDone
    | StepTaken
    | ToolCalled
    | ToolAnswered
    | ToolStarting
    | SendMail
    | MailAck
    | DeliverMail
    | MailRead
    | Journal
    | StopRequest
    | StopRequested
    | StopReply
    | WaitingChanged
    | RunFinished
    | Park
    | Parked
    | SlotWanted
    | Unpark
    | PollCommands
    | Continue
    | Wake
    | Timeout
    | RestartDue
    | HostLost
    | Placed
    | Restore
    | LeaseLost
    | Sweep
    | StopAll
    | SpawnMany
    | Inspect
    | TreeRecords
)
"""Every message an actor of the runtime receives (a ``Batch`` holds any of them)."""


class Ask(msgspec.Struct, frozen=True, tag=True):
    """The envelope of a message whose sender waits for the answer.

    Why an envelope: whether a failure goes back to the sender or is logged and survived
    must not be guessed from a message's content. An ``Ask`` gets its answer, or the error
    raised while handling it; anything else is a tell: a failure handling it is logged, the
    run that sent it (if any) is told, and the receiver goes on serving.
    """

    message: ActorMessage


# ---- answers the supervisor gives to asks ---------------------------------------------------


class RestoreReport(msgspec.Struct, kw_only=True):
    """What a restore found: runs resumed, queued again, failed, cancelled; orphaned roots."""

    resumed: list[str] = msgspec.field(default_factory=list)
    requeued: list[str] = msgspec.field(default_factory=list)
    failed: list[str] = msgspec.field(default_factory=list)
    cancelled: list[str] = msgspec.field(default_factory=list)
    orphans: list[str] = msgspec.field(default_factory=list)
    elsewhere: list[str] = msgspec.field(default_factory=list)
    """Unfinished runs left alone: a live runtime (its lease is alive) hosts them."""
    taken_from: list[str] = msgspec.field(default_factory=list)
    """The owners whose orphaned runs this restore took over (their leases lapsed)."""


class SupervisorStats(msgspec.Struct, frozen=True, kw_only=True):
    """The supervisor's counters at one moment (the answer to ``Inspect``)."""

    in_flight: int
    """Runs holding a concurrency slot (running or waiting)."""
    peak: int
    """The most runs that ever held a slot at once."""
    queued: int
    """Runs waiting for a slot."""
    hosted: int
    """Live runs this supervisor hosts."""
    spent: Usage | None = None
    """What ``Inspect.run_id``'s subtree has spent, as its budget ledger counts it (None
    when no run was named; nothing for a run the ledger does not hold)."""


class RunUsage(msgspec.Struct, frozen=True, kw_only=True):
    """What one run has used so far (one line of a ``TreeUsage``)."""

    run_id: str
    agent: str
    status: RunStatus
    parent_run_id: str | None = None
    depth: int = 0
    steps: int = 0
    tool_calls: int = 0
    usage: Usage = Usage()


class TreeUsage(msgspec.Struct, frozen=True, kw_only=True):
    """What a run and every run under it have used so far, live or ended: the subtree's
    totals and one ``RunUsage`` per run (the run first, then its descendants, parents
    before children). ``live``: how many of them have not ended yet."""

    run_id: str
    status: RunStatus
    runs: int = 0
    live: int = 0
    steps: int = 0
    tool_calls: int = 0
    usage: Usage = Usage()
    per_run: tuple[RunUsage, ...] = ()

    @property
    def tokens(self) -> int:
        """Every token billed: input (with cache reads and writes) plus output."""
        return self.usage.total_tokens

    @property
    def cost_usd(self) -> float:
        return self.usage.cost_usd

    @property
    def model_calls(self) -> int:
        return self.usage.model_calls


class TreeNode(msgspec.Struct, frozen=True, kw_only=True):
    """One run in an execution tree view, with its subtree's totals."""

    run_id: str
    agent: str
    status: RunStatus
    depth: int
    steps: int
    usage: Usage
    subtree_usage: Usage
    task: str = ""
    result: str | None = None
    error: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    children: tuple[TreeNode, ...] = ()
    orphaned: bool = False
    """Unfinished and its host is gone (set by views that read the store's leases)."""
