"""Continuing an ended run: whether a run may go on with another's conversation, and the
conversation it starts with.

Why apart and pure: a continued run is an ordinary spawn (admitted, limited, budgeted and
counted in its tree as any other) whose first checkpoint is seeded from the conversation of
the run it continues. What that run was (its record, its last checkpoint) is read from the
store by the supervisor actor before admission, as it reads everything else for the core;
deciding from it is plain code, tested without threads.

The rules (docs/runtime.md, "Continuing a run"):

- the run to continue exists (in this runtime or in the store another process writes), can
  be read (a damaged row refuses this request only), and has ended: completed, failed, timed
  out, cancelled or over its budget; its record is left as it ended, the new run names it in
  ``RunRecord.continues``;
- the new run is of the same agent (a request naming no agent takes that run's; one naming
  another is refused), still defined (admission's own check);
- a run may continue only a run of its own tree (same root): what another tree said is not
  its to read. The outside (the ``Runtime``, the CLI) may continue any run.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from subagents.messages import (
    ChatMessage,
    Checkpoint,
    ContentBlock,
    RunRecord,
    SpawnRequest,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from subagents.supervision.handdown import first_message_text
from subagents.tools import journal

NOT_RUN = "not run: the run ended before this call finished"
"""The answer a continued conversation gets for a tool call its earlier run left unanswered
and never started (a call with side effects is journaled before it runs: not started, it
did not run)."""
ENDED_MID_CALL = "its run ended while the call ran,"
"""Why a journaled call that started and has no answer is interrupted (``journal``): its
effects are unknown, never told as not run (a model would run it again)."""


@dataclass(frozen=True)
class Continued:
    """What the store keeps of a run to continue: its record (None: no such run) and its
    last checkpoint (None: it took no step); ``unreadable``: why they could not be read (a
    row damaged, hand-edited: that run cannot be continued, and nothing else is stopped)."""

    record: RunRecord | None
    checkpoint: Checkpoint | None = None
    unreadable: str | None = None


def with_agent(req: SpawnRequest, continued: Continued) -> SpawnRequest:
    """``req`` naming the continued run's agent when it names none."""
    if req.agent or continued.record is None:
        return req
    return msgspec.structs.replace(req, agent=continued.record.agent)


def refusal(req: SpawnRequest, continued: Continued) -> str | None:
    """Why ``req`` may not continue the run it names (None: it may, as far as that run
    goes; a run's request is also checked by ``outside_tree``)."""
    record, run_id = continued.record, req.continues
    if continued.unreadable is not None:
        return f"run {run_id} cannot be continued: {continued.unreadable}"
    if record is None:
        return f"no run {run_id!r} to continue"
    if not record.status.terminal:
        return (
            f"run {run_id} is {record.status.value}: only an ended run can be continued"
            " (wait for it to end, or stop it)"
        )
    if req.agent != record.agent:
        return f"run {run_id} is a run of {record.agent!r}, not {req.agent!r}"
    return None


def outside_tree(continued: Continued, requester: RunRecord) -> str | None:
    """Why the run ``requester`` may not continue ``continued``: another tree's."""
    record = continued.record
    assert record is not None  # refusal() passed
    if requester.root_run_id == record.root_run_id:
        return None
    return (
        f"run {record.run_id} is not in the tree of {requester.run_id} (its root is"
        f" {record.root_run_id}): a run may continue only runs of its own tree"
    )


def conversation(continued: Continued, *, run_id: str, text: str) -> Checkpoint:
    """The step-0 checkpoint of a run continuing ``continued``: its conversation as it
    ended, then ``text`` as the next user message. A last turn's tool calls left without an
    answer (a run stopped or timed out mid-turn, or its host died) are answered ``NOT_RUN``,
    or interrupted when the journal saw them start (``_unanswered``), so the
    conversation is one a model accepts; a run that took no step contributes its task (and
    its result: a function agent keeps no conversation)."""
    record = continued.record
    assert record is not None  # refusal() passed
    cp = continued.checkpoint
    if cp is not None and cp.messages:
        messages = list(cp.messages)
    else:
        first = first_message_text(record.task, record.context, record.shared)
        messages = [ChatMessage("user", (TextBlock(first),))]
        if record.outcome is not None and record.outcome.result:  # a function agent's
            messages.append(ChatMessage("assistant", (TextBlock(record.outcome.result),)))
    last = messages[-1]
    if last.role == "user":
        messages[-1] = ChatMessage("user", (*last.content, TextBlock(text)))
    else:
        answered = {r.tool_use_id: r for r in cp.answered} if cp is not None else {}
        uses = [b for b in last.content if isinstance(b, ToolUseBlock)]
        started = frozenset(cp.started) if cp is not None else frozenset()
        blocks: list[ContentBlock] = [
            answered.get(u.id) or _unanswered(u, started=u.id in started) for u in uses
        ]
        messages.append(ChatMessage("user", (*blocks, TextBlock(text))))
    return Checkpoint(run_id=run_id, step=0, messages=tuple(messages))


def _unanswered(use: ToolUseBlock, *, started: bool) -> ToolResultBlock:
    """The answer of a last turn's call left without one: ``NOT_RUN``, or, for a call the
    journal saw start (its run stopped, timed out or its host died during it), interrupted
    with its effects unknown, as a resumed run tells it (docs/tools.md, "The tool journal")."""
    if not started:
        return ToolResultBlock(use.id, NOT_RUN, is_error=True)
    said = journal.interrupted_message(use.name, ENDED_MID_CALL)
    return ToolResultBlock(use.id, said, is_error=True)
