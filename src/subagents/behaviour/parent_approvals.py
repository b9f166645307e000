"""Approvals routed up the tree: a child run's "ask" goes to its parent agent as mail.

With ``Runtime(ask_parent=True)``, where Claude Code would ask a person about a child's tool
call, the child mails its parent (the agent that asked for its work) a request and waits,
its other calls going on; the parent answers with ``send_message`` to the child,
``reply_to`` the request's mail id, starting with "allow" (or "yes", "approve") to let the
call run; anything else refuses it and is shown to the child's model as the reason. A root
run has no parent: its asks go to the approval handler.

The parent must be able to read mail while the child works: a background spawn, or a
function agent receiving mail. A parent waiting on this child's foreground result reads no
mail until it is done, so the request waits at most ``approval_wait_s`` (default 300 s, and
never past the run's deadline), then is refused saying the parent did not answer: never a
deadlock.

Only a reply from the parent itself answers a request; other mail with that ``reply_to`` is
ordinary mail. Replies are consumed (read receipts are sent), not shown as mail.
"""

from __future__ import annotations

from dataclasses import dataclass

from subagents.behaviour import request_ids
from subagents.messages import Mail, ToolUseBlock
from subagents.tools.approval import ApprovalRequest
from subagents.tools.base import Tool

PREFIX = request_ids.APPROVAL
YES = frozenset({"allow", "allowed", "yes", "y", "approve", "approved", "ok"})


@dataclass
class Waiting:
    """A call waiting for the parent's answer."""

    use: ToolUseBlock
    tool: Tool
    step: int
    mail_id: str | None = None


def request_text(request: ApprovalRequest) -> str:
    """The mail a parent gets: what is asked and how to answer."""
    return (
        f"Permission request: {request.describe()}.\n"
        f"Answer with send_message to {request.run_id}, reply_to this mail's id, and content"
        f" starting with 'allow' to let it run, or 'deny' and a reason to refuse."
    )


def key(call: str) -> str:
    """The request id of the mail (and the wake) of one call's approval; ``call``: the
    call's request id (``request_ids.of_call``: its turn in it, so that a later turn's call
    under the same tool_use id is asked anew, even after a crash)."""
    return PREFIX + call


def use_id_of(request_id: str) -> str | None:
    """The tool_use id whose approval ``request_id`` is; None: not an approval's."""
    return (
        request_ids.use_id_of(request_id[len(PREFIX) :]) if request_id.startswith(PREFIX) else None
    )


def allows(answer: str) -> bool:
    words = answer.strip().lower().replace(",", " ").replace(".", " ").split()
    return bool(words) and words[0].strip(":!") in YES


class ParentApprovals:
    """One run's calls waiting for its parent, by tool_use id."""

    def __init__(self, parent_run_id: str | None) -> None:
        self.parent = parent_run_id
        self.waiting: dict[str, Waiting] = {}

    def add(self, use: ToolUseBlock, tool: Tool, step: int) -> None:
        self.waiting[use.id] = Waiting(use, tool, step)

    def acknowledged(self, use_id: str, mail_id: str) -> None:
        waiting = self.waiting.get(use_id)
        if waiting is not None:
            waiting.mail_id = mail_id

    def answer_to(self, mail: Mail) -> Waiting | None:
        """The call ``mail`` answers (removed from the waiting), or None for other mail."""
        if mail.reply_to is None or mail.sender != self.parent:
            return None
        for use_id, waiting in self.waiting.items():
            if waiting.mail_id == mail.reply_to:
                del self.waiting[use_id]
                return waiting
        return None

    def drop(self, use_id: str) -> Waiting | None:
        return self.waiting.pop(use_id, None)
