"""Context handed down from a parent run to a child: shared-context keys and the conversation.

Why here and pure: what a child starts with is decided at admission, from the parent's
record and its last checkpoint. Keeping the rules in plain functions keeps SupervisorCore's
admission short and lets them be tested without threads.

- Shared context: a run carries a dict of named values (``RunRecord.shared``). A root gets
  its values from the caller; a child gets copies of the keys named by its definition's
  ``sharedContext`` and the spawn call's ``share``. Naming a key the parent does not have is
  an error that lists the keys it has.
- ``inherit_messages``: the child starts with its parent's conversation up to the turn that
  spawned it (that turn's tool calls left out, since their results do not exist yet), then
  its own task.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from subagents.messages import ChatMessage, Checkpoint, TextBlock, ToolUseBlock


class HandDownError(ValueError):
    """The context asked for cannot be handed down; the message says what is missing."""


def shared_for_child(
    parent_shared: Mapping[str, Any], keys: Iterable[str], *, parent_label: str
) -> dict[str, Any]:
    """Copies of the named keys of the parent's shared context."""
    wanted = list(dict.fromkeys(keys))
    missing = [k for k in wanted if k not in parent_shared]
    if missing:
        has = ", ".join(sorted(parent_shared)) or "none"
        raise HandDownError(
            f"shared context: {parent_label} has no key {', '.join(map(repr, missing))};"
            f" its keys: {has}"
        )
    # A deep copy through JSON: the child can never alias the parent's values.
    return {k: msgspec.json.decode(msgspec.json.encode(parent_shared[k])) for k in wanted}


def render_shared(shared: Mapping[str, Any]) -> str:
    """Shared context as a model sees it: one ``<shared key=...>`` element per key."""
    from html import escape

    return "\n".join(
        f'<shared key="{escape(k)}">{msgspec.json.encode(v).decode()}</shared>'
        for k, v in shared.items()
    )


def first_message_text(task: str, context: str | None, shared: Mapping[str, Any]) -> str:
    """The text of a run's first user message: context, shared context, then the task."""
    text = task
    if context:
        text = f"<context>\n{context}\n</context>\n\n{text}"
    if shared:
        text = f"{render_shared(shared)}\n\n{text}"
    return text


def inherited_conversation(
    parent: Checkpoint | None, *, run_id: str, first_text: str
) -> Checkpoint:
    """A step-0 checkpoint for a child: its parent's conversation, then its own task."""
    messages = list(parent.messages) if parent is not None else []
    if messages and messages[-1].role == "assistant":
        last = messages.pop()
        if not any(isinstance(b, ToolUseBlock) for b in last.content):
            messages.append(last)
    intro = TextBlock(f"<inherited from your parent's conversation above>\n\n{first_text}")
    if messages and messages[-1].role == "user":
        messages[-1] = ChatMessage("user", (*messages[-1].content, intro))
    else:
        messages.append(ChatMessage("user", (intro,)))
    return Checkpoint(run_id=run_id, step=0, messages=tuple(messages))
