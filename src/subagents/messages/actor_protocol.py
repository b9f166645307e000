"""The actor protocol: what agents, the supervisor, the timer and the outside tell each other.

Runs are addressed by run_id, never by actor reference, so these stay plain data: every one
round-trips through msgspec (tests/test_messages.py). ``ActorMessage`` is their union (each is
tagged, so the union tells them apart); ``Batch`` carries several in order, ``Ask`` marks the
one whose sender waits for the answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import msgspec

from subagents.messages.conversation import ToolResultBlock
from subagents.messages.durability import Checkpoint, JournalEntry
from subagents.messages.mail import Mail
from subagents.messages.records import Cleanup, OnFailure, Outcome, Usage

StopScope = Literal["tree", "turn"]
"""What a stop ends (``StopRequest.scope``): the run's whole ``tree``, or its ``turn``."""


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
    on_failure: OnFailure | None = None
    max_retries: int | None = None
    shared: dict[str, Any] | None = None
    """Shared-context values for a root run (a child's come from its parent: ``share``)."""
    share: tuple[str, ...] = ()
    """Names of the parent's shared-context keys copied to the child."""
    inherit_messages: bool | None = None
    """Start the child with its parent's conversation so far."""
    cleanup: Cleanup | None = None
    """What the sweeper does with this run once archived: keep its transcript or delete it
    (None: the definition's ``cleanup``, else its parent's, else keep)."""
    attempt: int = 0
    """Which start of the sending run this comes from (0: not from a run's actor)."""
    continues: str | None = None
    """The id of an ended run whose conversation this run goes on with, ``task`` its next
    user message (``Runtime.continue_run``; ``agent`` may be empty: the continued run's)."""
    approvals_in_store: bool = False
    """A root run whose asks (and its tree's) are kept in the store as pending approvals
    (``Runtime(approve="store")``); a child's follows its parent's."""
    detach: bool = False
    """The child outlives its parent: the parent's end (or a stop of its turn) does not
    cancel it (docs/runtime.md, "Children that outlive their parent"). Implies
    ``background``."""


AgentTask = tuple[str, str]
"""``(agent, task)``: a job of ``fan_out`` and ``chain``."""

Job = AgentTask | tuple[str, str, Mapping[str, Any]]
"""A root run asked for in short (``Runtime.spawn_many``): ``(agent, task)`` or
``(agent, task, {spawn keyword: value})``, each made a ``SpawnRequest``."""


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


class SpawnsDecided(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """The supervisor decided these root spawns, told to it (``Runtime.spawn``, ``run``),
    in one group: their records are committed (a refusal was told on its own, before).
    One per group, not per run: it releases the caller's window (``runtime/_spawn_window``)."""

    request_ids: tuple[str, ...]


class ChildDone(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """The outcome of a foreground child, delivered to its requester exactly once."""

    request_id: str
    outcome: Outcome


ToOutside = ChildDone | SpawnReply | SpawnsDecided
"""What the supervisor tells the requester of root runs, the Runtime (``RootWaiters.told``):
a root's outcome, a root spawn refused, the root spawns told to it decided."""


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


class StreamedPart(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A piece of what a model wrote: ``text``, or the JSON ``tool_input`` of a ``tool``."""

    kind: str
    text: str
    tool: str | None = None


class Streamed(msgspec.Struct, frozen=True, kw_only=True, gc=False, tag=True):
    """What a run's model wrote since its last ``Streamed``, coalesced on the run's thread
    (``behaviour/streaming.py``): published as a ``text_delta`` event, kept only as the
    run's ``Preview`` until its step is recorded. ``void``: the attempt under way failed (it
    is tried again, or the step fails): what was streamed of it since the last void is void."""

    run_id: str
    turn: int
    seq: int
    parts: tuple[StreamedPart, ...] = ()
    skipped: int = 0
    """Characters streamed since the last one and left out (it keeps the end)."""
    void: bool = False
    attempt: int = 0


class StatusOf(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Ask the supervisor where a run is (a ``RunProgress``, or a ``ValueError`` naming why
    not): ``asker``, a run that may ask only about runs of its own tree; None, the outside."""

    run_id: str
    asker: str | None = None


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
    mail_id: str | None = None
    """The id its sender's record of it used (``actors/mail_desk.py``: a record whose answer
    was not seen, which may have been written all the same): the supervisor keeps the mail
    under it, so a record made twice is kept once (``RunStore.save_mails``). None: the
    supervisor names the mail."""


class MailAck(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Mail accepted (``mail_id``) or refused (``error``), after it was recorded."""

    request_id: str
    mail_id: str | None = None
    recipient: str | None = None
    error: str | None = None
    dead_letter: bool = False
    recipients: tuple[str, ...] | None = None
    """Mail to a topic (``recipient`` is then ``topic:NAME``): the runs it went to, one mail
    each (``mail_id`` is the first's; none: nobody is subscribed, nothing was sent)."""


class Subscribe(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """A run subscribes to a topic of its tree (``subscribe`` False: unsubscribes), told
    with its other reports; mail to ``topic:NAME`` sent after it reaches the run."""

    run_id: str
    topic: str
    subscribe: bool = True
    attempt: int = 0
    """Which start of the sending run this comes from (0: not from a run's actor)."""


class DeliverMail(msgspec.Struct, frozen=True, kw_only=True, gc=False, tag=True):
    """Mail for one run, in the order sent: every mail the supervisor hands a recipient in
    one go (one, or a step's several). The one delivery form: a batch of one is a batch."""

    mails: tuple[Mail, ...]


class MailPosted(msgspec.Struct, frozen=True, kw_only=True, gc=False, tag=True):
    """Mail a run took straight to its recipients' mailboxes (``actors/mail_desk.py``), told
    to the supervisor before any recipient could see it, with the run's other reports, for
    the record: the recipients' inboxes, the mail events, read receipts and dead letters.

    ``delivered_to``: per mail, the start (``attempt``) of its recipient it was handed to (a
    restart since gets it again). ``recorded``: the sender has already written the mails to
    the store (``RunStore.mail_recording``; else the supervisor writes them)."""

    run_id: str
    mails: tuple[Mail, ...]
    delivered_to: tuple[int, ...]
    recorded: bool = False
    attempt: int = 0
    """Which start of the sending run this comes from (0: not from a run's actor)."""
    read_mail: tuple[str, ...] = ()
    """The mail the sender's journal report just before these mails said it read, that
    report folded in (``actors/mail_desk.py``: a ``Journal`` its sender committed with these
    mails, ``recorded``, which the supervisor only takes out of its run's inbox; decided
    first, as that report was: ``Recorded.posted``). Why: a durable ping-pong's every reply
    was two reports, ``[Journal(recorded), MailPosted]`` (198 of 200 flushes): one now."""


class MailRead(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    run_id: str
    mail_ids: tuple[str, ...]
    attempt: int = 0
    """Which start of the sending run this comes from (0: not from a run's actor)."""


class Journal(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """A function agent's journal entries of one handling, and the mail they read (marked
    read in the same transaction as the entries that say who read it)."""

    run_id: str
    entries: tuple[JournalEntry, ...] = ()
    read_mail: tuple[str, ...] = ()
    attempt: int = 0
    """Which start of the sending run this comes from (0: not from a run's actor)."""
    recorded: bool = False
    """Its entries are committed already, by its sender with the mail it took straight in
    the same report (``actors/mail_desk.py``): the supervisor does not write them again."""


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
    scope: StopScope = "tree"
    """``tree``: the run and every descendant, detached ones included; ``turn``: the run
    (and the children that end with it), its detached children go on."""
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
    parked: bool = False
    """It waits and has parked already (its start was told to: ``StartRun.park_at_wait``):
    its slot is given back with this report, as with a ``Parked`` answer, without a ``Park``
    asked first (supervision/parking.py)."""


# ---- parking: a waiting run lends its concurrency slot (supervision/parking.py) --------------


class Park(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Supervisor -> agent: a queued run needs your slot; give it back if you are waiting.

    The agent handles it between two messages, so it is never working then: it answers
    ``Parked`` and from then on holds back what it receives until ``Unpark`` (but what its
    behaviour would only record: ``only_records``)."""


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


class ApprovalAsked(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """A run's tool call needs a person's answer and its approvals go to the store
    (``Runtime(approve="store")``): the supervisor keeps it as a pending approval
    (``ApprovalRecord``); the call waits for ``ApprovalAnswered``. Asked again with the same
    ``approval_id`` after a restart, the kept one (and its answer, if any) stands."""

    run_id: str
    approval_id: str
    tool: str
    input: dict[str, Any]
    reason: str
    tool_use_id: str
    attempt: int = 0


class ApprovalAnswered(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Someone answered a run's pending approval (from any process, through the store)."""

    approval_id: str
    allow: bool
    answer: str | None = None
    """The reason given (for ``AskUserQuestion``, the answer text)."""


class ApprovalTaken(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """A run acted on an answer through the store (its call about to run, or refused): the
    run's ``approval_answered`` event. Reported by the run, not announced when the answer is
    told to it, so a run stopped before acting on it (its late report dropped, as any report
    of an ended start) has none, and the answer is shown ``void``
    (``store/unacted_approvals.py``)."""

    run_id: str
    approval_id: str
    allow: bool
    answer: str | None = None
    attempt: int = 0


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
    | SpawnsDecided
    | ChildDone
    | StepTaken
    | ToolCalled
    | ToolAnswered
    | ToolStarting
    | SendMail
    | MailAck
    | DeliverMail
    | MailPosted
    | MailRead
    | Journal
    | StopRequest
    | StopRequested
    | StopReply
    | Subscribe
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
    | ApprovalAsked
    | ApprovalAnswered
    | ApprovalTaken
    | Streamed
    | StatusOf
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
    claim: int | None = None
    """The ask's claim (``actors/ask_claims``): the supervisor decides it only if its caller
    still waits, and the caller knows which happened. None: an ask like any other."""
