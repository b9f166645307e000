"""StoreApprovalFlow: one run's tool calls waiting for an answer kept in the store.

With ``Runtime(approve="store")`` (``subagents run --detach``) an ask is not put to a callable
on the agent's thread: it is reported (``port.ask_approval``) and kept by the supervisor as a
pending approval, and the call waits like a spawn's, holding no thread, the run's other calls
going on; the run's deadline bounds the wait. Whoever opens the store answers it
(``Runtime.answer``, ``subagents approve``/``deny``); the answer comes back as
``ApprovalAnswered`` and the call is run (its journal entry first, so it runs once) or
refused. After a restart the unanswered call asks again under the same id: a pending ask
stays pending, an answered one is told again. An answer the flow does not wait for (told
twice) is ignored.
"""

from __future__ import annotations

from collections.abc import Callable

from subagents.behaviour.parent_approvals import Waiting
from subagents.behaviour.port import AgentPort
from subagents.behaviour.tool_calls import ToolCalls, ToolCrash
from subagents.behaviour.tools import Tool
from subagents.messages import (
    ApprovalAnswered,
    ApprovalAsked,
    ApprovalTaken,
    ToolUseBlock,
    approval_id_for,
)
from subagents.tools import ask_user


class StoreApprovalFlow:
    """The calls of one run waiting for an answer kept in the store, by approval id."""

    def __init__(
        self,
        port: AgentPort,
        calls: ToolCalls | None,
        answer: Callable[[str, str, bool], None],
        fail: Callable[[str, str], None],
    ) -> None:
        self.port = port
        self.calls = calls
        self.answer = answer
        """Answer a tool call: (tool_use id, content, is_error)."""
        self.fail = fail
        self.waiting: dict[str, Waiting] = {}

    def ask(self, use: ToolUseBlock, tool: Tool, reason: str, step: int) -> None:
        """Report the ask (kept as a pending approval); the call waits for its answer."""
        assert self.calls is not None
        request = self.calls.request(use, tool, reason)
        record = self.port.record
        approval_id = approval_id_for(record.run_id, use.id, record.retries, step)
        self.waiting[approval_id] = Waiting(use, tool, step)
        self.port.log.info("approval asked", approval_id=approval_id, tool=tool.name)
        self.port.ask_approval(
            ApprovalAsked(
                run_id=request.run_id,
                approval_id=approval_id,
                tool=request.tool,
                input=request.input,
                reason=request.reason,
                tool_use_id=use.id,
            )
        )

    def answered(self, message: ApprovalAnswered) -> None:
        """The answer: the call runs (a question gets its answer text) or is refused."""
        waiting = self.waiting.pop(message.approval_id, None)
        if waiting is None:
            return  # not waited for (told again after a restart's ask): already handled
        taken = ApprovalTaken(
            run_id=self.port.record.run_id,
            approval_id=message.approval_id,
            allow=message.allow,
            answer=message.answer,
        )
        self.port.approval_taken(taken)  # (before the call: its ``approval_answered``)
        assert self.calls is not None
        use, tool = waiting.use, waiting.tool
        if not message.allow:
            why = message.answer or f"{tool.name} was not approved"
            self.answer(use.id, *self.calls.denied(tool, f"{why} (answered through the store)"))
            return
        if tool.name == ask_user.NAME:
            self.calls.session.answers[use.id] = message.answer or ""
        try:
            content, is_error = self.calls.run_allowed(use, tool, waiting.step)
        except ToolCrash as exc:
            self.fail(exc.kind, str(exc))
            return
        self.answer(use.id, content, is_error)
