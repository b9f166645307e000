"""Every message the actors exchange is plain data: it round-trips through msgspec (JSON and
MessagePack) to an equal value, with no hooks. So nothing of the protocol carries a callable
or an actor reference, and any of it can cross a process or machine boundary.

The samples are checked against the ``ActorMessage`` union, and the union against the
package: every tagged Struct a module of ``subagents/messages/`` defines, and every message
type the actors match on, must be in it. So a new message type without a sample here fails a
test, instead of going unchecked.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path
from typing import Any, get_args

import msgspec
import pytest

import subagents
from subagents import messages
from subagents.definitions.spec import AgentSpec
from subagents.messages import (
    ActorMessage,
    ApprovalAnswered,
    ApprovalAsked,
    ApprovalRecord,
    ApprovalTaken,
    Ask,
    Batch,
    ChatMessage,
    Checkpoint,
    CheckpointDelta,
    ChildDone,
    Continue,
    DeliverMail,
    Event,
    EventKind,
    HostLost,
    Inspect,
    Journal,
    JournalEntry,
    LeaseLost,
    Mail,
    MailAck,
    MailPosted,
    MailRead,
    MailState,
    Outcome,
    Park,
    Parked,
    Placed,
    PollCommands,
    Preview,
    Replay,
    RestartDue,
    Restore,
    RestoreReport,
    RunFinished,
    RunRecord,
    RunStatus,
    RunUsage,
    SendMail,
    SlotWanted,
    SpawnMany,
    SpawnReply,
    SpawnRequest,
    SpawnsDecided,
    StatusOf,
    StepTaken,
    StopAll,
    StopReply,
    StopRequest,
    StopRequested,
    Streamed,
    StreamedPart,
    Subscribe,
    Subscription,
    SupervisorStats,
    Sweep,
    TextBlock,
    Timeout,
    ToolAnswered,
    ToolCalled,
    ToolResultBlock,
    ToolStarting,
    ToolUseBlock,
    TreeRecords,
    TreeUsage,
    Unpark,
    Usage,
    WaitingChanged,
    Wake,
)
from subagents.store.snapshot import RestoreSnapshot, UnfinishedRun
from subagents.store.writes import (
    AddToCheckpoint,
    AppendEvent,
    DropPreview,
    DropSubscriptions,
    OutcomeDelivered,
    PostCommand,
    ReleaseLease,
    SaveApproval,
    SaveCheckpoint,
    SaveJournal,
    SaveMails,
    SaveOutcome,
    SavePreview,
    SaveRun,
    SaveSubscription,
    SetMailsState,
    Write,
)
from subagents.supervision.admission_checks import Standing
from subagents.supervision.effects import (
    ArmDeadline,
    DisarmDeadline,
    Effect,
    Publish,
    ScheduleRestart,
    StartRun,
    StopAgent,
    Tell,
    TellOutside,
)
from subagents.supervision.spawn_rules import DepthBound

USAGE = Usage(input_tokens=3, output_tokens=4, cost_usd=0.25, model_calls=1)
OUTCOME = Outcome(
    run_id="r1", status=RunStatus.FAILED, error_kind="crash", error="boom", usage=USAGE, steps=2
)
MAIL = Mail(
    mail_id="m1",
    sender="r1",
    recipient="r2",
    content="hello",
    sender_agent="lead",
    reply_to="m0",
    sent_at=12.5,
    state=MailState.DELIVERED,
    request_id="toolu_1",
)
CHECKPOINT = Checkpoint(
    run_id="r1",
    step=2,
    messages=(
        ChatMessage(role="user", content=(TextBlock("the task"),)),
        ChatMessage(
            role="assistant",
            content=(TextBlock("on it"), ToolUseBlock(id="toolu_1", name="t", input={"a": [1]})),
        ),
    ),
    answered=(ToolResultBlock(tool_use_id="toolu_1", content="ok"),),
    usage=USAGE,
    ts=99.0,
)
RECORD = RunRecord(
    run_id="r2",
    agent="worker",
    task="part A",
    root_run_id="r1",
    parent_run_id="r1",
    depth=1,
    status=RunStatus.RUNNING,
    tool_calls=4,
    started_at=3.0,
    outcome=None,
    usage=USAGE,
    shared={"k": {"nested": [1, 2]}},
)
EVENT = Event(kind=EventKind.STEP, run_id="r1", agent="lead", root_run_id="r1", ts=5.0, data={})
ACTORS = Path(subagents.__file__).parent / "actors"

MESSAGES: dict[type[Any], Any] = {
    SpawnRequest: SpawnRequest(
        request_id="toolu_2",
        agent="worker",
        task="part A",
        parent_run_id="r1",
        timeout=30.0,
        token_budget=1000,
        shared={"k": 1},
        share=("k",),
        attempt=1,
    ),
    SpawnMany: SpawnMany(
        requests=(SpawnRequest(request_id="r7", agent="worker", task="part B", run_id="r7"),)
    ),
    SpawnReply: SpawnReply(request_id="toolu_2", run_id="r2", queued=True),
    SpawnsDecided: SpawnsDecided(request_ids=("r7", "r8")),
    ChildDone: ChildDone(request_id="toolu_2", outcome=OUTCOME),
    StepTaken: StepTaken(
        run_id="r1", step=2, usage=USAGE, checkpoint=CHECKPOINT, read_mail=("m1",), attempt=1
    ),
    ToolCalled: ToolCalled(run_id="r1", tool="t", input={"a": 1}, attempt=1),
    ToolAnswered: ToolAnswered(
        run_id="r1", step=2, result=ToolResultBlock(tool_use_id="toolu_1", content="x")
    ),
    SendMail: SendMail(request_id="toolu_3", sender="r1", to="worker", content="hi"),
    MailAck: MailAck(request_id="toolu_3", mail_id="m1", recipient="r2"),
    DeliverMail: DeliverMail(mails=(MAIL, MAIL)),
    MailPosted: MailPosted(run_id="r1", mails=(MAIL,), delivered_to=(2,), recorded=True, attempt=1),
    MailRead: MailRead(run_id="r2", mail_ids=("m1",), attempt=2),
    Journal: Journal(
        run_id="r1",
        entries=(
            JournalEntry(request_id="r1:0:1", kind="send", call="send(...)", digest=7),
            JournalEntry(request_id="r1:0:2", observed=True, result=["m1", "m2"]),
        ),
        read_mail=("m1", "m2"),
        attempt=1,
    ),
    StopRequest: StopRequest(request_id="x1", run_id="r2", requester="r1", reason="enough"),
    StopReply: StopReply(request_id="x1", stopped=("r2",)),
    Subscribe: Subscribe(run_id="r1", topic="reviews", subscribe=False, attempt=2),
    WaitingChanged: WaitingChanged(run_id="r1", waiting=True, attempt=1),
    RunFinished: RunFinished(run_id="r2", error_kind="crash", error="e", unread_mail=("m1",)),
    Park: Park(),
    Parked: Parked(run_id="r1", attempt=2),
    SlotWanted: SlotWanted(run_id="r1", attempt=2),
    Unpark: Unpark(),
    PollCommands: PollCommands(),
    Continue: Continue(),
    Wake: Wake(key="wait-1"),
    Timeout: Timeout(run_id="r2"),
    RestartDue: RestartDue(run_id="r2"),
    HostLost: HostLost(run_ids=("r1", "r2"), node="n1", reason="its host died"),
    Placed: Placed(run_id="r1", attempt=2, node="n1", address="10.0.0.5"),
    ToolStarting: ToolStarting(run_id="r1", step=2, tool_use_id="toolu_9", tool="Bash"),
    Restore: Restore(roots=frozenset({"r1", "r7"})),
    LeaseLost: LeaseLost(reason="the lease of h:1:ab lapsed"),
    Sweep: Sweep(archive_after_minutes=5.0, retention_days=2.0),
    StopAll: StopAll(reason="closing"),
    Inspect: Inspect(run_id="r1"),
    StopRequested: StopRequested(
        request_id="x2", requested_by="r1", requester="r1", reason="enough", journal=True
    ),
    TreeRecords: TreeRecords(run_id="r1"),
    ApprovalAsked: ApprovalAsked(
        run_id="r1",
        approval_id="ap1",
        tool="Bash",
        input={"command": "make"},
        reason="Bash needs approval in default mode",
        tool_use_id="tu1",
        attempt=1,
    ),
    ApprovalAnswered: ApprovalAnswered(approval_id="ap1", allow=True, answer="go"),
    ApprovalTaken: ApprovalTaken(run_id="r1", approval_id="ap1", allow=True, attempt=1),
    Streamed: Streamed(
        run_id="r1",
        turn=2,
        seq=3,
        parts=(StreamedPart(kind="tool_input", text='{"a', tool="Read"),),
        skipped=4,
        attempt=1,
    ),
    StatusOf: StatusOf(run_id="r2", asker="r1"),
}

OTHERS: list[Any] = [
    Batch(messages=(MESSAGES[SendMail], MESSAGES[MailRead], MESSAGES[DeliverMail])),
    Ask(MESSAGES[StepTaken]),
    Ask(MESSAGES[Inspect]),
    RestoreReport(resumed=["r1"], orphans=["r1"], elsewhere=["r9"], taken_from=["h:1:ab"]),
    SupervisorStats(in_flight=2, peak=3, queued=1, hosted=2, spent=USAGE),
    TreeUsage(
        run_id="r1",
        status=RunStatus.RUNNING,
        runs=1,
        live=1,
        steps=2,
        tool_calls=3,
        usage=USAGE,
        per_run=(
            RunUsage(run_id="r1", agent="worker", status=RunStatus.RUNNING, steps=2, usage=USAGE),
        ),
    ),
]
"""The envelopes and the answers the supervisor gives to asks."""

EFFECTS: list[Effect] = [
    StartRun(
        record=RECORD,
        spec=AgentSpec(name="worker", description="works", tools=("Read",), max_turns=3),
        deadline=7.5,
        pending_mail=(MAIL,),
        recovered=(
            Replay(entries=MESSAGES[Journal].entries, mails=(MAIL,), agents={"r2": "worker"}),
            MESSAGES[SpawnReply],
            MESSAGES[ChildDone],
            MESSAGES[MailAck],
        ),
        checkpoint=CHECKPOINT,
        attempt=2,
        standing=Standing(ancestors=(DepthBound("lead", 1, 0),), tree_runs=3),
    ),
    Tell("r1", MESSAGES[ChildDone]),
    TellOutside(MESSAGES[ChildDone]),
    TellOutside(MESSAGES[SpawnReply]),
    StopAgent("r2"),
    ArmDeadline("r2", 10.0),
    DisarmDeadline("r2"),
    ScheduleRestart("r2", 0.05),
    Publish(EVENT),
]
WRITES: list[Write] = [
    SaveRun(RECORD),
    AppendEvent(EVENT),
    SaveCheckpoint(CHECKPOINT),
    AddToCheckpoint(CheckpointDelta(run_id="r1", step=3, started="toolu_9")),
    AddToCheckpoint(
        CheckpointDelta(run_id="r1", step=3, answered=ToolResultBlock("toolu_9", "ok", False))
    ),
    SaveMails((MAIL,)),
    SetMailsState(("m1", "m2"), MailState.READ),
    SaveOutcome(OUTCOME),
    OutcomeDelivered("r1"),
    PostCommand("send", "r2", "hi"),
    SaveJournal("r1", MESSAGES[Journal].entries),
    ReleaseLease("h:1:ab"),
    SaveApproval(
        ApprovalRecord(
            approval_id="ap1",
            run_id="r1",
            root_run_id="r1",
            agent="worker",
            tool="Bash",
            input={"command": "make"},
            reason="asked",
            requester="external",
            tool_use_id="tu1",
            asked_at=1.0,
        )
    ),
    SaveSubscription(Subscription(run_id="r1", root_run_id="r0", topic="reviews")),
    DropSubscriptions("r1", ("reviews",)),
    DropSubscriptions("r1"),
    SavePreview(Preview(run_id="r1", turn=2, text="so far [tool Read] {", chars=40, tool="Read")),
    DropPreview("r1"),
]
SNAPSHOT = RestoreSnapshot(
    unfinished=(
        UnfinishedRun(
            record=RECORD,
            checkpoint=CHECKPOINT,
            inbox=(MAIL,),
            tree=(RECORD,),
            mails=(MAIL,),
            journal=MESSAGES[Journal].entries,
        ),
    ),
    live_owners=frozenset({"host:1:ab"}),
    undelivered=(RECORD,),
)


def _messages_modules() -> list[Any]:
    """Every module of the ``subagents.messages`` package (one per protocol)."""
    return [
        importlib.import_module(f"{messages.__name__}.{info.name}")
        for info in pkgutil.iter_modules(messages.__path__)
    ]


def _defined_in_messages() -> dict[str, type]:
    """Every class a module of the package defines, by name (re-exported or not)."""
    return {
        name: value
        for module in _messages_modules()
        for name, value in vars(module).items()
        if isinstance(value, type) and value.__module__ == module.__name__
    }


def test_the_package_re_exports_every_name_of_its_modules() -> None:
    """``from subagents.messages import X`` works for every public name of every protocol
    module, and names the same object: code never needs to know which module holds X."""
    modules = _messages_modules()
    assert len(modules) >= 7  # the walk finds the protocol modules
    defined = {
        (module, name) for module in modules for name in _top_level_names(module) if name[0] != "_"
    }
    assert len(defined) > 60
    missing = {
        f"{module.__name__}.{name}"
        for module, name in defined
        if getattr(messages, name, None) is not getattr(module, name)
    }
    assert missing == set()
    assert sorted(messages.__all__) == sorted(name for _, name in defined)


def _top_level_names(module: Any) -> set[str]:
    """The names ``module``'s source binds at its top level (not those it imports)."""
    names: set[str] = set()
    for node in ast.parse(Path(module.__file__).read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def test_every_actor_message_type_has_a_sample() -> None:
    assert set(get_args(ActorMessage)) == set(MESSAGES)
    for kind, sample in MESSAGES.items():
        assert type(sample) is kind


def test_every_tagged_struct_of_the_messages_module_is_an_actor_message() -> None:
    """Enumerated from the package, not listed: a message type added to a module of
    ``subagents/messages/`` (they are tagged, so a union can tell them apart) but left out of
    ``ActorMessage`` fails here."""
    tagged = {
        value
        for value in _defined_in_messages().values()
        if issubclass(value, msgspec.Struct) and value.__struct_config__.tag is not None
    }
    # the tagged Structs that are not messages on their own, each round-tripped elsewhere here
    not_told = {
        Ask,  # the envelope of an ask (OTHERS)
        Batch,  # holds actor messages in order (OTHERS)
        Replay,  # handed to a behaviour at its start, inside StartRun (EFFECTS)
        TextBlock,  # content blocks of a conversation (CHECKPOINT, inside StepTaken)
        ToolUseBlock,
        ToolResultBlock,
    }
    assert tagged - not_told == set(get_args(ActorMessage))


def test_every_message_type_an_actor_matches_on_is_an_actor_message() -> None:
    """The actors' ``case X():`` patterns name the messages they receive: each is in
    ``ActorMessage`` (and so has a sample above), or is an envelope (``Ask``, ``Batch``)."""
    union = {kind.__name__ for kind in get_args(ActorMessage)} | {"Ask", "Batch"}
    defined = set(_defined_in_messages())
    matched: dict[str, set[str]] = {}
    for path in sorted(ACTORS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            for name in _message_types_told_apart(node):
                if name in defined:
                    matched.setdefault(name, set()).add(path.name)
    # the walk finds each way: a case pattern, a dispatch table's key, a type(...) is check
    assert "Parked" in matched and "RunFinished" in matched and "Unpark" in matched
    missing = {name: files for name, files in matched.items() if name not in union}
    assert missing == {}, f"matched by actors but not in ActorMessage: {missing}"


def _message_types_told_apart(node: ast.AST) -> list[str]:
    """The names an actor tells a message's type apart by at ``node``: ``case X():``, a
    dispatch table's key (``{X: ...}``, ``actors/deciders.py``) or ``type(m) is X``."""
    match node:
        case ast.MatchClass(cls=ast.Name(id=name)):
            return [name]
        case ast.Dict(keys=keys):
            return [k.id for k in keys if isinstance(k, ast.Name)]
        case ast.Compare(
            left=ast.Call(func=ast.Name(id="type")),
            ops=[ast.Is() | ast.IsNot()],
            comparators=[ast.Name(id=name)],
        ):
            return [name]
        case _:
            return []


def _roundtrips(value: Any, as_type: Any) -> None:
    for encode, decode in (
        (msgspec.json.encode, msgspec.json.decode),
        (msgspec.msgpack.encode, msgspec.msgpack.decode),
    ):
        assert decode(encode(value), type=as_type) == value


@pytest.mark.parametrize("message", list(MESSAGES.values()), ids=lambda m: type(m).__name__)
def test_every_actor_message_round_trips_alone_and_as_any_actor_message(message: Any) -> None:
    _roundtrips(message, type(message))
    _roundtrips(message, ActorMessage)  # tagged: the union tells them apart


@pytest.mark.parametrize("value", OTHERS, ids=lambda m: type(m).__name__)
def test_envelopes_and_answers_round_trip(value: Any) -> None:
    _roundtrips(value, type(value))


def test_the_answer_to_tree_records_is_plain_data() -> None:
    _roundtrips((RECORD, RECORD), tuple[RunRecord, ...])


@pytest.mark.parametrize("effect", EFFECTS, ids=lambda e: type(e).__name__)
def test_every_effect_of_a_decision_is_plain_data(effect: Any) -> None:
    _roundtrips(effect, Effect)


@pytest.mark.parametrize("write", WRITES, ids=lambda w: type(w).__name__)
def test_every_store_write_of_a_decision_is_plain_data(write: Any) -> None:
    _roundtrips(write, Write)


def test_every_kind_of_store_write_has_a_sample() -> None:
    assert {type(w) for w in WRITES} == set(get_args(Write))


def test_the_restore_snapshot_handed_to_the_core_is_plain_data() -> None:
    _roundtrips(SNAPSHOT, RestoreSnapshot)


def test_a_batch_never_needs_a_hook_for_what_it_holds() -> None:
    batch = OTHERS[0]
    decoded = msgspec.json.decode(msgspec.json.encode(batch), type=Batch)
    assert [type(m) for m in decoded.messages] == [SendMail, MailRead, DeliverMail]


_TERMINAL_IN_A_FRESH_PROCESS = """
import pickle, sys
statuses = pickle.loads(sys.stdin.buffer.read())
print(",".join(f"{s.value}={int(s.terminal)}" for s in statuses))
"""


def test_every_run_status_knows_whether_it_is_terminal_wherever_it_is_decoded() -> None:
    """``RunStatus.terminal`` is an attribute set on each member when ``messages.records`` is
    imported (not a property): every member has it, it says whether the member is in
    ``TERMINAL_STATUSES``, and a member that arrives another way (msgspec JSON and
    msgpack, as the store and the cluster's links carry records; pickle into a fresh
    process that imported nothing but the messages, as Ray's workers do) is that member,
    with it."""
    import pickle
    import subprocess
    import sys

    from subagents.messages import TERMINAL_STATUSES, RunStatus

    expected = {s.value: s in TERMINAL_STATUSES for s in RunStatus}
    assert sum(expected.values()) == len(TERMINAL_STATUSES) >= 1
    assert not all(expected.values())
    for status in RunStatus:
        assert status.terminal is expected[status.value], status
        for coded in (msgspec.json, msgspec.msgpack):
            decoded = coded.decode(coded.encode(status), type=RunStatus)
            assert decoded is status and decoded.terminal is expected[status.value]
    child = subprocess.run(
        [sys.executable, "-c", _TERMINAL_IN_A_FRESH_PROCESS],
        input=pickle.dumps(list(RunStatus)),
        capture_output=True,
        timeout=120,
        check=True,
    )
    seen = dict(pair.split("=") for pair in child.stdout.decode().strip().split(","))
    assert seen == {value: str(int(terminal)) for value, terminal in expected.items()}


def test_a_model_responses_text_and_tool_calls_are_its_blocks_in_order() -> None:
    """``ModelResponse.text`` joins its texts by lines, ``tool_uses`` keeps its calls in
    order (read on every step: plain loops, so this pins what they give)."""
    text, use = messages.TextBlock, messages.ToolUseBlock
    a, b = use(id="t1", name="Read", input={}), use(id="t2", name="Bash", input={"c": "ls"})
    mixed = messages.ModelResponse(content=(text("one"), a, text("two"), b), stop_reason="x")
    assert mixed.text == "one\ntwo"
    assert mixed.tool_uses == (a, b)
    alone = messages.ModelResponse(content=(text("only"),), stop_reason="end_turn")
    assert alone.text == "only" and alone.tool_uses == ()
    empty = messages.ModelResponse(content=(), stop_reason="end_turn")
    assert empty.text == "" and empty.tool_uses == ()
