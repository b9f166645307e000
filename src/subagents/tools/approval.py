"""Approvals: who answers when a permission decision is "ask".

Claude Code asks the person at the terminal. Here the runtime asks an approval handler, a
Python callable given to the Runtime (``Runtime(approve=...)``): ``subagents run`` on a
terminal passes one that asks the person; on a pipe or in CI there is none. Without a
handler an "ask" is a denial whose reason the model sees, so it can choose another way.

The handler is called on the asking agent's thread (other runs go on meanwhile); it returns
True / False, or an ``Approval`` to give the model a reason. An exception from it is a
denial naming the exception, never a crash of the run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from subagents.blocking import about_to_block
from subagents.tools.permissions import Decision


class ApprovalRequest(msgspec.Struct, frozen=True, kw_only=True):
    """A call waiting for someone's yes or no."""

    run_id: str
    agent: str
    tool: str
    input: dict[str, Any]
    reason: str
    """Why it is asked (the permission decision's reason)."""
    tool_use_id: str = ""
    parent_run_id: str | None = None
    workspace: str = ""

    def describe(self) -> str:
        """One paragraph for a person (or a parent agent) to decide on."""
        shown = msgspec.json.encode(self.input).decode()
        if len(shown) > 600:
            shown = shown[:599] + "…"
        return (
            f"{self.agent} ({self.run_id}) wants to call {self.tool} with {shown}"
            f" in {self.workspace or 'the workspace'}: {self.reason}"
        )


class Approval(msgspec.Struct, frozen=True):
    """A handler's answer with a reason for the model."""

    allow: bool
    reason: str = ""


ApprovalHandler = Callable[[ApprovalRequest], "bool | Approval"]


def ask(handler: ApprovalHandler | None, request: ApprovalRequest) -> Decision:
    """The handler's answer as a Decision (deny when there is no handler or it fails)."""
    if handler is None:
        return Decision(
            "deny",
            f"{request.reason}; no one can approve it in this runtime (no approval handler),"
            f" so it was denied. Do the task without it, or say what you would need.",
        )
    about_to_block()  # a person at a terminal, a web hook: the handler may take minutes
    try:
        answer = handler(request)
    except Exception as exc:
        return Decision("deny", f"the approval handler failed ({type(exc).__name__}: {exc})")
    if isinstance(answer, Approval):
        if answer.allow:
            return Decision("allow", answer.reason or "approved")
        return Decision("deny", answer.reason or f"{request.tool} was not approved")
    if answer is True:
        return Decision("allow", "approved")
    if answer is False:
        return Decision("deny", f"{request.tool} was not approved")
    return Decision(
        "deny", f"the approval handler answered {answer!r}, not True, False or an Approval"
    )
