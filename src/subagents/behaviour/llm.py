"""The LLM loop: one model turn per step; tool calls answered; never blocking on a child.

A step is one model call. Its tool calls are dispatched at once: local ones (user tools,
``check_mailbox``, ``load_skill``) run here; spawns, mail and stops go to the supervisor and
the agent returns to its mailbox. When every pending call has its result, the next step sends
all tool_results in one user message (then any unread mail), as the Messages API requires.
"""

from __future__ import annotations

import time
from typing import Any

import msgspec

from subagents.behaviour import parent_approvals
from subagents.behaviour.fanout import FAN_OUT, FanOutCalls, FanOutError, fan_out_schema
from subagents.behaviour.parent_approvals import ParentApprovals
from subagents.behaviour.port import AgentEnv, AgentPort, CallSpan, render_mail
from subagents.behaviour.spawn_policy import spawn_policy_fields
from subagents.behaviour.tool_calls import ToolCalls, ToolCrash
from subagents.behaviour.tools import (
    CHECK,
    LOAD_SKILL,
    RUNTIME_SCHEMAS,
    SEND,
    SPAWN,
    STOP,
    WAIT,
    Tool,
    ToolError,
    spawn_schema,
)
from subagents.isolation.worktrees import WorktreeError
from subagents.mcp.tools import as_tools as mcp_tools
from subagents.messages import (
    ChatMessage,
    Checkpoint,
    ChildDone,
    Continue,
    DeliverMail,
    Mail,
    MailAck,
    SendMail,
    SpawnReply,
    SpawnRequest,
    StepTaken,
    StopReply,
    StopRequest,
    TextBlock,
    ToolAnswered,
    ToolResultBlock,
    ToolSchema,
    ToolUseBlock,
    Wake,
)
from subagents.models.base import ModelError
from subagents.supervision.handdown import first_message_text
from subagents.tools import journal
from subagents.tools.builtin import BUILTIN_NAMES

__all__ = ["LLMBehaviour", "ToolCrash"]


class LLMBehaviour:
    """The conversation of one run and the bookkeeping of its pending tool calls."""

    def __init__(self, env: AgentEnv, port: AgentPort) -> None:
        self.env = env
        self.port = port
        self.messages: list[ChatMessage] = []
        self.turns = 0
        self.inbox: list[Mail] = []
        self.read_in_message: list[str] = []
        self.order: list[str] = []
        self.results: dict[str, ToolResultBlock | None] = {}
        self.background: dict[str, bool] = {}
        self.waiting_mail: str | None = None
        self.waiting = False
        self.ended = False
        self.fan_outs = FanOutCalls()
        # fan_out children an earlier start already spawned (their answers are recovered)
        self.already_spawned: set[str] = set()
        # the run's MCP tools (its servers started now, on this run's thread) join the others
        self.mcp = env.mcp_for(port.spec, deadline=port.deadline, cancel=port.cancel)
        self.tools: dict[str, Tool] = dict(env.tools)
        self.mcp_names: tuple[str, ...] = ()
        if self.mcp is not None and env.mcp is not None:
            found = {n: t for n, t in mcp_tools(env.mcp, self.mcp).items() if n not in self.tools}
            self.tools.update(found)
            self.mcp_names = tuple(found)
        self.schemas = self._offered_tools()
        self.tool_spans: dict[str, CallSpan] = {}
        """Traced tool calls not answered yet (``env.tracer``), by tool_use id."""
        self.calls: ToolCalls | None = None
        self.setup_error: str | None = None
        """Why this run's tools could not be set up (a bad permissionMode, rule or hook)."""
        self.setup_kind = "bad_definition"
        self.stop_hook_active = False
        self.approvals = ParentApprovals(port.record.parent_run_id)
        self.sent_approvals: set[str] = set()
        """Approval requests an earlier start already mailed (recovered): not sent again."""
        self.environment = ""
        """Appended to the system prompt when the agent has file or shell tools."""
        try:
            self.calls = ToolCalls(env, port)
        except ValueError as exc:
            self.setup_error = str(exc)
        except WorktreeError as exc:  # isolation: worktree outside a git repository...
            self.setup_kind, self.setup_error = "worktree", str(exc)
        else:
            if any(s.name in BUILTIN_NAMES for s in self.schemas):
                self.environment = self.calls.environment()

    # ---- what the agent is offered -----------------------------------------------------------

    def _allows(self, name: str) -> bool:
        return self.port.spec.allows_tool(name)

    def _offered_tools(self) -> tuple[ToolSchema, ...]:
        spec, record = self.port.spec, self.port.record
        schemas: list[ToolSchema] = []
        # Which agents the spawn tools may name: the spawn rules decide, the same ones that
        # admission applies (a model ignoring the enum is refused there, naming the rule).
        offer = self.env.spawn_rules.offer(spec, record.depth, self.env.agents())
        if offer.agents:
            schemas.append(spawn_schema(offer.agents))
            if offer.fan_out:
                schemas.append(fan_out_schema(list(offer.agents)))
        for name, schema in RUNTIME_SCHEMAS.items():
            if name == LOAD_SKILL and self.env.skills is None:
                continue
            if self._allows(name):
                schemas.append(schema)
        for name, tool in self.env.tools.items():
            if self._allows(name):
                schemas.append(tool.schema)
        # MCP tools were chosen for this definition by the hub (mcp/selection.py)
        schemas.extend(self.tools[name].schema for name in self.mcp_names)
        return tuple(schemas)

    # ---- entry points ------------------------------------------------------------------------

    def start(
        self,
        checkpoint: Checkpoint | None,
        pending_mail: tuple[Mail, ...],
        recovered: tuple[Any, ...] = (),
    ) -> None:
        """Begin with the task, or resume from ``checkpoint`` after a crash or a restart.

        On resume, tool calls already answered are not run again, and calls whose effects
        already happened (a child spawned, a mail sent) get the ``recovered`` answers instead.
        """
        self.inbox.extend(pending_mail)
        if self.setup_error is not None:
            self._fail(self.setup_kind, self.setup_error)
            return
        if checkpoint is not None and checkpoint.messages:
            self.messages = list(checkpoint.messages)
            self.turns = checkpoint.step
            last = self.messages[-1]
            if last.role == "assistant":
                uses = [b for b in last.content if isinstance(b, ToolUseBlock)]
                if not uses:  # its last answer was in: it had ended
                    self.ended = True
                    self.port.finish(self._closing(last.text))
                    return
                answered = {r.tool_use_id: r for r in checkpoint.answered}
                done = {getattr(m, "request_id", None) for m in recovered}
                self.already_spawned = {r for r in done if r and FanOutCalls.owns(r)}
                self.sent_approvals = {r for r in done if r and parent_approvals.use_id_of(r)}
                self._dispatch_all(
                    uses, answered=answered, skip=done, started=set(checkpoint.started)
                )
                for message in recovered:
                    self.on_message(message)
                if self.approvals.waiting and self.inbox:  # an answer came before the crash
                    inbox, self.inbox = self.inbox, []
                    self._take_mail(tuple(inbox))
                return
        else:
            record = self.port.record
            text = first_message_text(record.task, record.context, record.shared)
            blocks: list[Any] = [TextBlock(text)]
            blocks.extend(TextBlock(render_mail(m)) for m in self._take_inbox())
            self.messages = [ChatMessage("user", tuple(blocks))]
        self._step()

    def on_message(self, message: Any) -> None:
        if self.ended:
            return
        match message:
            case Continue():
                self._next_step()
            case SpawnReply() | ChildDone() if FanOutCalls.owns(message.request_id):
                self._fan_out_answer(message)
            case MailAck(request_id=rid) if parent_approvals.use_id_of(rid) is not None:
                self._approval_mailed(message)
            case Wake(key=key) if parent_approvals.use_id_of(key) is not None:
                self._approval_timed_out(key)
            case SpawnReply(request_id=rid, run_id=run_id, error=error, queued=queued):
                if error is not None:
                    self._answer(rid, error, is_error=True)
                elif self.background.get(rid):
                    self._answer(rid, _json({"run_id": run_id, "queued": queued}))
            case ChildDone(request_id=rid, outcome=outcome):
                body: dict[str, Any] = {
                    "result": outcome.result,
                    "run_id": outcome.run_id,
                    "status": str(outcome.status),
                    "usage": {
                        "input_tokens": outcome.usage.total_input_tokens,
                        "output_tokens": outcome.usage.output_tokens,
                    },
                }
                if outcome.error is not None:
                    body["error"] = outcome.error
                self._answer(rid, _json(body), is_error=not outcome.ok)
            case MailAck(request_id=rid, mail_id=mail_id, recipient=to, error=error):
                if error is not None:
                    self._answer(rid, error, is_error=True)
                else:
                    self._answer(rid, _json({"mail_id": mail_id, "to": to}))
            case StopReply(request_id=rid, stopped=stopped, error=error):
                if error is not None:
                    self._answer(rid, error, is_error=True)
                else:
                    self._answer(rid, _json({"stopped": list(stopped)}))
            case DeliverMail(mails=mails):
                self._take_mail(mails)
            case Wake(key=key):
                if key == self.waiting_mail:
                    self.waiting_mail = None
                    self._answer(key, "no mail arrived before the timeout")
            case _:
                self.port.log.warning("unexpected message", message=type(message).__name__)

    def _take_mail(self, mails: tuple[Mail, ...]) -> None:
        """New mail: a parent's answer to an approval request is taken here (read, not
        shown as mail); the rest goes to the inbox."""
        kept: list[Mail] = []
        for mail in mails:
            waiting = self.approvals.answer_to(mail) if self.approvals.waiting else None
            if waiting is None:
                kept.append(mail)
                continue
            self.port.mail_read((mail.mail_id,))
            self.port.cancel_wake(parent_approvals.key(waiting.use.id))
            if parent_approvals.allows(mail.content):
                self._run_approved(waiting)
            else:
                reason = f"the parent ({mail.sender_agent or mail.sender}) said: {mail.content}"
                assert self.calls is not None
                self._answer(waiting.use.id, *self.calls.denied(waiting.tool, reason))
            if self.ended:
                return
        if kept:
            self.inbox.extend(kept)
            self._mail_arrived()

    def _run_approved(self, waiting: parent_approvals.Waiting) -> None:
        assert self.calls is not None
        try:
            content, is_error = self.calls.run_allowed(waiting.use, waiting.tool, waiting.step)
        except ToolCrash as exc:
            self._fail("tool_crashed", str(exc))
            return
        self._answer(waiting.use.id, content, is_error)

    def _approval_mailed(self, ack: MailAck) -> None:
        use_id = parent_approvals.use_id_of(ack.request_id)
        assert use_id is not None
        if ack.error is not None or ack.mail_id is None:
            waiting = self.approvals.drop(use_id)
            if waiting is not None:
                assert self.calls is not None
                reason = f"the request could not reach the parent: {ack.error}"
                self._answer(use_id, *self.calls.denied(waiting.tool, reason))
            return
        self.approvals.acknowledged(use_id, ack.mail_id)

    def _approval_timed_out(self, key: str) -> None:
        use_id = parent_approvals.use_id_of(key)
        assert use_id is not None
        waiting = self.approvals.drop(use_id)
        if waiting is not None:
            assert self.calls is not None
            reason = (
                f"the parent did not answer the request within"
                f" {self.env.approval_wait_s:g} s (a parent waiting for this run's"
                f" result reads no mail until it ends)"
            )
            self._answer(use_id, *self.calls.denied(waiting.tool, reason))

    def _ask_parent(self, use: ToolUseBlock, tool: Tool, reason: str) -> None:
        """Mail the parent an approval request; the call waits for its answer."""
        assert self.calls is not None
        port = self.port
        self.approvals.add(use, tool, self.turns)
        key = parent_approvals.key(use.id)
        if key not in self.sent_approvals:
            request = self.calls.request(use, tool, reason)
            port.send_mail(
                SendMail(
                    request_id=key,
                    sender=port.record.run_id,
                    to=port.record.parent_run_id or "",
                    content=parent_approvals.request_text(request),
                )
            )
        wait = min(self.env.approval_wait_s, max(0.0, port.deadline - time.monotonic()))
        port.wake_after(key, wait)

    def _mail_arrived(self) -> None:
        """Answer a ``wait_for_message`` call waiting for mail, with everything unread."""
        if self.waiting_mail is not None:
            key, self.waiting_mail = self.waiting_mail, None
            self.port.cancel_wake(key)
            text, is_error, read = self._render_inbox()
            self._answer(key, text, is_error, read)

    def unread_mail(self) -> tuple[str, ...]:
        return tuple(m.mail_id for m in self.inbox)

    # ---- steps -------------------------------------------------------------------------------

    def _step(self) -> None:
        port = self.port
        if port.cancel.is_set() or self.ended:
            return
        max_turns = self.env.max_turns
        if port.spec.max_turns is not None:
            max_turns = min(max_turns, port.spec.max_turns)
        if self.turns >= max_turns:
            self._fail("max_turns", f"{port.record.agent} reached its limit of {max_turns} turns")
            return
        from subagents.messages import ModelRequest

        request = ModelRequest(
            model=port.record.model or "",
            system=self.env.system_prompt(port.spec) + self.environment,
            messages=tuple(self.messages),
            tools=self.schemas,
            max_tokens=self.env.max_tokens,
            agent=port.record.agent,
            run_id=port.record.run_id,
        )
        traced = self.env.tracer.model_call(port.record, request) if self.env.tracer else None
        try:
            response = self.env.model.complete(request, deadline=port.deadline, cancel=port.cancel)
        except ModelError as exc:
            if traced is not None:
                traced.end(error=f"{exc.kind}: {exc.message}")
            if not port.cancel.is_set():
                self._fail(f"model_{exc.kind}", exc.message)
            return
        except BaseException as exc:
            if traced is not None:
                traced.end(error=f"{type(exc).__name__}: {exc}")
            raise
        if traced is not None:
            traced.end(response=response)
        if port.cancel.is_set():
            return
        self.turns += 1
        self.messages.append(ChatMessage("assistant", response.content))
        checkpoint = Checkpoint(
            run_id=port.record.run_id, step=self.turns, messages=tuple(self.messages)
        )
        uses = list(response.tool_uses)
        port.report_step(
            StepTaken(
                run_id=port.record.run_id,
                step=self.turns,
                usage=response.usage,
                checkpoint=checkpoint,
                read_mail=tuple(self.read_in_message),
            ),
            wait=bool(uses),  # no tool call: the run ends here, nothing to hold back
        )
        self.read_in_message = []
        if port.cancel.is_set():
            return  # stopped while the step was recorded (over budget): no tool runs
        if uses:
            self._dispatch_all(uses, answered={})
            return
        if response.stop_reason == "refusal":
            self._fail("model_refusal", response.text or "the model refused")
            return
        if response.stop_reason == "max_tokens":
            port.log.warning("answer cut at max_tokens", max_tokens=self.env.max_tokens)
        if self.calls is not None:
            go_on = self.calls.stop_hook(self.stop_hook_active)
            if go_on is not None and not port.cancel.is_set():
                # a Stop hook blocked the end: the model hears why and takes another turn
                self.stop_hook_active = True
                self.messages.append(
                    ChatMessage("user", (TextBlock(f"Stop hook feedback: {go_on}"),))
                )
                self._step()
                return
        self.ended = True
        port.finish(self._closing(response.text))

    def _dispatch_all(
        self,
        uses: list[ToolUseBlock],
        answered: dict[str, ToolResultBlock],
        skip: set[str | None] | None = None,
        started: set[str] | None = None,
    ) -> None:
        self.order = [u.id for u in uses]
        self.results = {u.id: answered.get(u.id) for u in uses}
        self.background = {
            u.id: bool(u.input.get("background", False))
            for u in uses
            if u.name == SPAWN and isinstance(u.input, dict)
        }
        for use in uses:
            if self.results[use.id] is not None or (skip and use.id in skip):
                continue  # answered, or its effect happened, before a restart: not run again
            if started and journal.interrupted(self.tools.get(use.name), use.id in started):
                # began before a crash and never answered: not run twice, the model is told
                self.port.report_tool_call(use.name, use.input)
                self._set(use.id, journal.interrupted_message(use.name), True)
                continue
            try:
                self._dispatch(use)
            except ToolCrash as exc:
                self._fail("tool_crashed", str(exc))
                return
            if self.ended:
                return
        self._maybe_continue()

    def _dispatch(self, use: ToolUseBlock) -> None:
        port, record = self.port, self.port.record
        args = use.input if isinstance(use.input, dict) else {}
        port.report_tool_call(use.name, args)
        if self.env.tracer is not None:  # ended when its result is set (_set)
            self.tool_spans[use.id] = self.env.tracer.tool_call(record, use.id, use.name, args)
        offered = {s.name for s in self.schemas}
        if use.name not in offered:
            why = self.mcp.failure_for(use.name) if self.mcp is not None else None
            self._set(use.id, why or f"tool {use.name!r} is not available to {record.agent}", True)
            return
        try:
            if use.name == SPAWN:
                self.background[use.id] = bool(args.get("background", False))
                port.request_spawn(
                    SpawnRequest(
                        request_id=use.id,
                        agent=_required_str(args, "agent"),
                        task=_required_str(args, "task"),
                        parent_run_id=record.run_id,
                        context=_optional_str(args, "context"),
                        label=_optional_str(args, "label"),
                        model=_optional_str(args, "model"),
                        timeout=_optional_float(args, "timeout"),
                        background=self.background[use.id],
                        **spawn_policy_fields(args),
                    )
                )
            elif use.name == FAN_OUT:
                try:
                    requests = self.fan_outs.start(use.id, args, record.run_id)
                except FanOutError as exc:
                    raise ToolError(str(exc)) from None
                for request in requests:
                    if request.request_id not in self.already_spawned:  # else: recovered
                        port.request_spawn(request)
            elif use.name == SEND:
                port.send_mail(
                    SendMail(
                        request_id=use.id,
                        sender=record.run_id,
                        to=_required_str(args, "to"),
                        content=_required_str(args, "content"),
                        reply_to=_optional_str(args, "reply_to"),
                    )
                )
            elif use.name == STOP:
                port.request_stop(
                    StopRequest(
                        request_id=use.id,
                        run_id=_required_str(args, "run_id"),
                        requester=record.run_id,
                        reason=f"stopped by {record.agent} ({record.run_id})",
                    )
                )
            elif use.name == CHECK:
                self._set(use.id, *self._render_inbox())
            elif use.name == WAIT:
                given = _optional_float(args, "timeout")
                timeout = 30.0 if given is None else given  # 0 means: do not wait
                if timeout < 0:
                    raise ToolError(f"argument 'timeout' must be >= 0 seconds, got {timeout:g}")
                if self.inbox:
                    self._set(use.id, *self._render_inbox())
                elif self.waiting_mail is not None:
                    # one waiter per turn: a second would overwrite the first, never answered
                    raise ToolError("already waiting for mail in this turn; wait once per turn")
                else:
                    self.waiting_mail = use.id
                    port.wake_after(use.id, timeout)
            elif use.name == LOAD_SKILL:
                name = _required_str(args, "name")
                assert self.env.skills is not None
                try:
                    self._set(use.id, self.env.skills.render(name), False)
                except KeyError:
                    known = ", ".join(self.env.skills.names()) or "none"
                    raise ToolError(f"unknown skill {name!r}; known skills: {known}") from None
            else:  # a Tool (user, built-in, MCP): the one path of tool_calls.ToolCalls
                tool: Tool = self.tools[use.name]
                assert self.calls is not None
                decision = self.calls.decide(use, tool, parent_may_answer=True)
                if decision.behavior == "ask":  # a child whose asks go to its parent
                    self._ask_parent(use, tool, decision.reason)
                elif not decision.allowed:
                    self._set(use.id, *self.calls.denied(tool, decision.reason))
                else:
                    self._set(use.id, *self.calls.run_allowed(use, tool, self.turns))
        except ToolError as exc:
            self._set(use.id, str(exc), True)

    def _fan_out_answer(self, message: SpawnReply | ChildDone) -> None:
        """A child of a ``fan_out`` call answered: start the next link, or answer the call."""
        use_id, result, next_request = self.fan_outs.on_message(message)
        if next_request is not None and next_request.request_id not in self.already_spawned:
            self.port.request_spawn(next_request)
        if result is not None:
            self._answer(use_id, result)

    def _set(self, use_id: str, content: str, is_error: bool, read: tuple[str, ...] = ()) -> None:
        if use_id in self.results and self.results[use_id] is None:
            traced = self.tool_spans.pop(use_id, None)
            if traced is not None:
                traced.end(error=content if is_error else None)
            result = ToolResultBlock(use_id, content, is_error)
            self.results[use_id] = result
            self.port.report_answer(
                ToolAnswered(
                    run_id=self.port.record.run_id,
                    step=self.turns,
                    result=result,
                    read_mail=read,
                )
            )

    def _answer(
        self, use_id: str, content: str, is_error: bool = False, read: tuple[str, ...] = ()
    ) -> None:
        self._set(use_id, content, is_error, read)
        self._maybe_continue()

    def _maybe_continue(self) -> None:
        if self.ended or not self.order:
            return
        if all(self.results[u] is not None for u in self.order):
            if self.waiting:
                self.waiting = False
                self.port.set_waiting(False)
            self.port.continue_later()
        elif not self.waiting:
            self.waiting = True
            self.port.set_waiting(True)

    def _next_step(self) -> None:
        if not self.order or any(self.results[u] is None for u in self.order):
            return
        blocks: list[Any] = [self.results[u] for u in self.order]
        blocks.extend(TextBlock(render_mail(m)) for m in self._take_inbox())
        self.messages.append(ChatMessage("user", tuple(blocks)))
        self.order, self.results = [], {}
        self._step()

    # ---- mail --------------------------------------------------------------------------------

    def _take_inbox(self) -> list[Mail]:
        """Unread mail for the next user message; it counts as read once that message is
        checkpointed (the ids ride on the next StepTaken), so a crash before cannot lose it."""
        taken, self.inbox = self.inbox, []
        self.read_in_message.extend(m.mail_id for m in taken)
        return taken

    def _render_inbox(self) -> tuple[str, bool, tuple[str, ...]]:
        """Unread mail as a tool result: (text, is_error, ids read with it)."""
        mails, self.inbox = self.inbox, []
        if not mails:
            return "no new mail", False, ()
        return "\n".join(render_mail(m) for m in mails), False, tuple(m.mail_id for m in mails)

    def _fail(self, kind: str, message: str) -> None:
        self.ended = True
        self.port.fail(kind, self._closing(message))

    def _closing(self, text: str) -> str:
        """The run ends with ``text``: a worktree it changed is kept, and ``text`` says where
        (an unchanged one is removed)."""
        report = self.env.end_workspace(self.port.record)
        note = report.note() if report is not None else ""
        return f"{text}\n\n{note}" if note else text

    def close(self) -> None:
        """The run's actor stopped: end what its tools started, its worktree (a stopped or
        timed out run's changes are kept and logged), and the spans of calls never answered
        (a span not ended is never exported: a stopped run's calls would vanish from its
        trace)."""
        if self.calls is not None:
            self.calls.close()
        self.env.end_workspace(self.port.record)
        spans, self.tool_spans = self.tool_spans, {}
        why = "cancelled" if self.port.cancel.is_set() else "unanswered"
        for span in spans.values():
            span.end(error=f"{why}: the run ended before the call answered")


def _json(value: Any) -> str:
    return msgspec.json.encode(value).decode()


def _required_str(args: dict[str, Any], key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ToolError(f"missing or empty required argument {key!r}")
    return value


def _optional_str(args: dict[str, Any], key: str) -> str | None:
    value = args.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ToolError(f"argument {key!r} must be a string, got {type(value).__name__}")
    return value


def _optional_float(args: dict[str, Any], key: str) -> float | None:
    value = args.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ToolError(f"argument {key!r} must be a number, got {value!r}")
    return float(value)
