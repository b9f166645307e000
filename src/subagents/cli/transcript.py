"""A run's transcript: what happened to it, in order, from what the store keeps.

The store has three views of a run: its events (transitions, steps, tool calls, mail), its
latest conversation checkpoint (every message so far), and its mail. The transcript weaves
them into one ordered list: each model turn (the user message it answered and the assistant's
reply, tool calls included) is placed at the ``step`` event that recorded it; mail events carry
the mail's text; the end carries the outcome. Entries only depend on events already written,
so a follower (``log --follow``) can print new entries as the list grows.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import msgspec

from subagents.messages import (
    EXTERNAL_SENDER,
    ChatMessage,
    Checkpoint,
    Event,
    EventKind,
    Mail,
    MailState,
    RunRecord,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from subagents.supervision.mailing import event_mail_ids

TERMINAL_KINDS = frozenset(
    {
        EventKind.COMPLETED,
        EventKind.FAILED,
        EventKind.CANCELLED,
        EventKind.TIMED_OUT,
        EventKind.BUDGET_EXCEEDED,
    }
)


class Entry(msgspec.Struct, frozen=True, kw_only=True):
    """One line (or block) of a transcript.

    ``kind``: an event kind (``started``, ``step``, ``completed``...), or ``user``,
    ``assistant``, ``tool_use``, ``tool_result`` for the conversation, ``mail_in`` /
    ``mail_out`` for mail, ``mail_pending`` for mail not yet delivered.
    """

    ts: float
    kind: str
    run_id: str
    text: str
    data: dict[str, Any] = msgspec.field(default_factory=dict)


def _turns(checkpoint: Checkpoint | None) -> list[tuple[list[ChatMessage], ChatMessage]]:
    """(user messages, assistant reply) per model turn, in order."""
    turns: list[tuple[list[ChatMessage], ChatMessage]] = []
    users: list[ChatMessage] = []
    for message in checkpoint.messages if checkpoint is not None else ():
        if message.role == "user":
            users.append(message)
        else:
            turns.append((users, message))
            users = []
    return turns


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)


def _message_entries(message: ChatMessage, ts: float, run_id: str) -> list[Entry]:
    out: list[Entry] = []
    texts = [b.text for b in message.content if isinstance(b, TextBlock) and b.text.strip()]
    if texts:
        out.append(Entry(ts=ts, kind=message.role, run_id=run_id, text="\n".join(texts)))
    for block in message.content:
        if isinstance(block, ToolUseBlock):
            out.append(
                Entry(
                    ts=ts,
                    kind="tool_use",
                    run_id=run_id,
                    text=f"{block.name} {_compact(block.input)}",
                    data={"id": block.id, "name": block.name, "input": block.input},
                )
            )
        elif isinstance(block, ToolResultBlock):
            out.append(
                Entry(
                    ts=ts,
                    kind="tool_result",
                    run_id=run_id,
                    text=("error: " if block.is_error else "") + block.content,
                    data={"tool_use_id": block.tool_use_id, "is_error": block.is_error},
                )
            )
    return out


def _who(run_id: str | None, agent: str | None, names: dict[str, str]) -> str:
    if run_id == EXTERNAL_SENDER:
        return "external"
    name = agent or names.get(run_id or "", "")
    return f"{name} ({run_id})" if name else str(run_id)


def transcript(
    record: RunRecord,
    events: Sequence[Event],
    checkpoint: Checkpoint | None,
    mail: Sequence[Mail],
    *,
    names: dict[str, str] | None = None,
    final: bool = True,
) -> list[Entry]:
    """The ordered entries of ``record``'s run. ``names`` maps run ids to agent names (for
    mail); ``final`` adds what no event placed yet (mail still waiting to be delivered)."""
    names = names or {}
    run_id = record.run_id
    turns = _turns(checkpoint)
    mail_by_id = {m.mail_id: m for m in mail}
    placed_mail: set[str] = set()
    shown = 0
    last_tools: set[str] = set()
    out: list[Entry] = []
    for event in events:
        kind, data, ts = event.kind, event.data, event.ts
        if kind is EventKind.STEP:
            step = int(data.get("step", shown + 1))
            while shown < min(step, len(turns)):
                users, reply = turns[shown]
                for message in users:
                    out.extend(_message_entries(message, ts, run_id))
                out.extend(_message_entries(reply, ts, run_id))
                last_tools = {b.name for b in reply.content if isinstance(b, ToolUseBlock)}
                shown += 1
            out.append(_step_entry(event, step, run_id))
        elif kind is EventKind.TOOL_CALL:
            if str(data.get("tool", "?")) not in last_tools:  # else shown as the tool_use
                out.append(_tool_call_entry(event, run_id))
        elif kind in (EventKind.MAIL_SENT, EventKind.MAIL_DELIVERED, EventKind.DEAD_LETTER):
            # an event about several mails (one step's) is shown as one entry per mail:
            # a transcript is read for what was said
            for mail_id in event_mail_ids(data):
                out.append(_mail_entry(event, mail_id, mail_by_id, names))
                placed_mail.add(mail_id)
        elif kind in TERMINAL_KINDS:
            out.append(_end_entry(event, record))
        else:
            out.append(_event_entry(event))
    if final:
        out.extend(
            _pending_mail_entry(m, names, run_id)
            for m in mail
            if m.mail_id not in placed_mail and m.recipient == run_id
        )
    return out


def _step_entry(event: Event, step: int, run_id: str) -> Entry:
    data = event.data
    return Entry(
        ts=event.ts,
        kind="step",
        run_id=run_id,
        text=f"step {step}: {data.get('input_tokens', 0)} tokens in,"
        f" {data.get('output_tokens', 0)} out",
        data=dict(data),
    )


def _tool_call_entry(event: Event, run_id: str) -> Entry:
    data = event.data
    return Entry(
        ts=event.ts,
        kind="tool_call",
        run_id=run_id,
        text=f"{data.get('tool', '?')} {_compact(data.get('input', {}))}",
        data=dict(data),
    )


def _pending_mail_entry(m: Mail, names: dict[str, str], run_id: str) -> Entry:
    """Mail for the run that no event placed yet: still waiting to be delivered."""
    return Entry(
        ts=m.sent_at,
        kind="mail_pending",
        run_id=run_id,
        text=f"from {_who(m.sender, m.sender_agent, names)} ({m.state}): {m.content}",
        data={"mail_id": m.mail_id, "sender": m.sender, "state": str(m.state)},
    )


def _mail_entry(
    event: Event, mail_id: str, mail_by_id: dict[str, Mail], names: dict[str, str]
) -> Entry:
    data = event.data
    if "mail_ids" in data:  # the entry is about this one mail of the event's
        data = {k: v for k, v in data.items() if k not in ("mail_ids", "count")}
        data["mail_id"] = mail_id
    mail = mail_by_id.get(mail_id)
    content = mail.content if mail is not None else "(mail not found)"
    if event.kind is EventKind.MAIL_SENT:
        recipient = str(data.get("recipient", mail.recipient if mail else "?"))
        kind, text = "mail_out", f"to {_who(recipient, None, names)}: {content}"
    elif event.kind is EventKind.MAIL_DELIVERED:
        sender = str(data.get("sender", mail.sender if mail else "?"))
        agent = mail.sender_agent if mail is not None else None
        kind, text = "mail_in", f"from {_who(sender, agent, names)}: {content}"
    else:
        kind = "dead_letter"
        other = data.get("recipient") or data.get("sender") or "?"
        text = f"{mail_id} ({_who(str(other), None, names)}) {_dead_fate(mail)}: {content}"
    return Entry(ts=event.ts, kind=kind, run_id=event.run_id, text=text, data=dict(data))


def _dead_fate(mail: Mail | None) -> str:
    """What became of a dead letter, as the store keeps it now: never read, or read after all
    (docs/runtime.md, "every mail is read or comes back": its run was stopped or timed out
    while the receipt of its last start was on its way; the ``dead_letter`` event and the
    sender's notice say "not known read when the run ended", and the receipt that landed
    after says what happened)."""
    if mail is not None and mail.state is MailState.READ:
        return "was not known read when its run ended; its receipt came after: read"
    return "was never read"


def _end_entry(event: Event, record: RunRecord) -> Entry:
    outcome = record.outcome
    if outcome is not None and outcome.ok:
        text = outcome.result or ""
    elif outcome is not None:
        text = f"{outcome.error_kind}: {outcome.error}"
    else:
        text = str(event.data.get("error") or "")
    return Entry(
        ts=event.ts, kind=str(event.kind), run_id=event.run_id, text=text, data=dict(event.data)
    )


def _event_entry(event: Event) -> Entry:
    data = {k: v for k, v in event.data.items() if v not in (None, "", False)}
    text = ", ".join(f"{k} {v}" for k, v in data.items() if k != "task")
    if event.kind is EventKind.SPAWNED and "task" in data:
        text = f"task: {data['task']}" + (f" ({text})" if text else "")
    return Entry(
        ts=event.ts, kind=str(event.kind), run_id=event.run_id, text=text, data=dict(event.data)
    )
