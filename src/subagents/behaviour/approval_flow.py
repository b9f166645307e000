"""ParentApprovalFlow: one run's tool calls waiting for its parent's answer, asked to answered.

Why apart from ``LLMBehaviour``: an approval asked of the parent (``parent_approvals``) has
its own life beside the turn: the request is mailed (once, even across a restart), the
mail's acknowledgement names the mail the parent must reply to, and the call is answered by
the parent's reply (run or refused), a failed delivery, or the wait running out. The
behaviour hands each of those events here and hears back only through ``answer`` (a call's
result) and ``fail`` (the run ends); the conversation and the turn stay the behaviour's.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from subagents.behaviour import parent_approvals, request_ids
from subagents.behaviour.parent_approvals import ParentApprovals
from subagents.behaviour.port import AgentEnv, AgentPort
from subagents.behaviour.tool_calls import ToolCalls, ToolCrash
from subagents.behaviour.tools import Tool
from subagents.messages import Mail, MailAck, SendMail, ToolUseBlock
from subagents.tools import ask_user

Answer = Callable[[str, str, bool], None]
"""Answer a tool call: (tool_use id, content, is_error)."""


class ParentApprovalFlow:
    """The approvals of one run asked of its parent; ``calls`` runs or refuses the calls."""

    def __init__(
        self,
        env: AgentEnv,
        port: AgentPort,
        calls: ToolCalls | None,
        answer: Answer,
        fail: Callable[[str, str], None],
    ) -> None:
        self.env = env
        self.port = port
        self.calls = calls
        self.answer = answer
        self.fail = fail
        self.pending = ParentApprovals(port.record.parent_run_id)
        self.sent: set[str] = set()
        """Approval requests an earlier start already mailed (recovered): not sent again."""

    @property
    def waiting(self) -> bool:
        """Whether a call waits for the parent's answer."""
        return bool(self.pending.waiting)

    def ask(self, use: ToolUseBlock, tool: Tool, reason: str, step: int) -> None:
        """Mail the parent an approval request; the call waits for its answer."""
        assert self.calls is not None
        port = self.port
        self.pending.add(use, tool, step)
        key = _key(port, use.id, step)
        if key not in self.sent:
            request = self.calls.request(use, tool, reason)
            port.send_mail(
                SendMail(
                    request_id=key,
                    sender=port.record.run_id,
                    to=port.record.parent_run_id or "",
                    content=(
                        ask_user.question_mail(request.input, request.agent, request.run_id)
                        if tool.name == ask_user.NAME
                        else parent_approvals.request_text(request)
                    ),
                )
            )
        wait = min(self.env.approval_wait_s, max(0.0, port.deadline - time.monotonic()))
        port.wake_after(key, wait)

    def answered_by(self, mail: Mail) -> bool:
        """Whether ``mail`` is the parent's answer to a waiting call; if so it is read (not
        shown as mail) and the call is run or refused."""
        waiting = self.pending.answer_to(mail) if self.pending.waiting else None
        if waiting is None:
            return False
        self.port.mail_read((mail.mail_id,))
        self.port.cancel_wake(_key(self.port, waiting.use.id, waiting.step))
        assert self.calls is not None
        if waiting.tool.name == ask_user.NAME:  # any reply is the answer
            self.calls.session.answers[waiting.use.id] = mail.content
        if waiting.tool.name == ask_user.NAME or parent_approvals.allows(mail.content):
            try:
                content, is_error = self.calls.run_allowed(waiting.use, waiting.tool, waiting.step)
            except ToolCrash as exc:
                self.fail("tool_crashed", str(exc))
                return True
            self.answer(waiting.use.id, content, is_error)
        else:
            reason = f"the parent ({mail.sender_agent or mail.sender}) said: {mail.content}"
            self.answer(waiting.use.id, *self.calls.denied(waiting.tool, reason))
        return True

    def mailed(self, ack: MailAck) -> None:
        """The request's mail was delivered (its id is what the parent replies to), or not:
        then the call is refused at once."""
        use_id = parent_approvals.use_id_of(ack.request_id)
        assert use_id is not None
        if self._waiting_under(ack.request_id) is None:
            return  # an earlier turn's call under the same tool_use id, answered already
        if ack.error is not None or ack.mail_id is None:
            # its timer too: left running, it would refuse a later turn's call under this id
            self.port.cancel_wake(ack.request_id)
            waiting = self.pending.drop(use_id)
            assert waiting is not None and self.calls is not None
            reason = f"the request could not reach the parent: {ack.error}"
            self.answer(use_id, *self.calls.denied(waiting.tool, reason))
            return
        self.pending.acknowledged(use_id, ack.mail_id)

    def timed_out(self, key: str) -> None:
        """The parent did not answer in time: the call is refused, saying so."""
        use_id = parent_approvals.use_id_of(key)
        assert use_id is not None
        if self._waiting_under(key) is not None:
            waiting = self.pending.drop(use_id)
            assert waiting is not None and self.calls is not None
            reason = (
                f"the parent did not answer the request within"
                f" {self.env.approval_wait_s:g} s (a parent waiting for this run's"
                f" result reads no mail until it ends)"
            )
            self.answer(use_id, *self.calls.denied(waiting.tool, reason))

    def _waiting_under(self, key: str) -> parent_approvals.Waiting | None:
        """The call waiting under the approval request id ``key``: None when the call
        waiting under its tool_use id (a model may repeat ids) is another turn's."""
        use_id = parent_approvals.use_id_of(key)
        waiting = self.pending.waiting.get(use_id or "")
        if waiting is None or _key(self.port, waiting.use.id, waiting.step) != key:
            return None
        return waiting


def _key(port: AgentPort, use_id: str, step: int) -> str:
    """The request id of the approval of the call ``use_id`` made at ``step``."""
    return parent_approvals.key(request_ids.of_call(use_id, port.record.retries, step))
