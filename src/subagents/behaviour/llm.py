"""The LLM loop: one model turn per step; tool calls answered; never blocking on a child.

A step is one model call. Its tool calls are dispatched at once: local ones (user tools,
``check_mailbox``, ``load_skill``) run here; spawns, mail and stops go to the supervisor and
the agent returns to its mailbox. When every pending call has its result, the next step sends
all tool_results in one user message (then any unread mail), as the Messages API requires.
"""

from __future__ import annotations

from typing import Any

import msgspec

from subagents.behaviour.fanout import FAN_OUT, FanOutCalls, FanOutError, fan_out_schema
from subagents.behaviour.port import AgentEnv, AgentPort, render_mail
from subagents.behaviour.spawn_policy import spawn_policy_fields
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
from subagents.messages import (
    ChatMessage,
    Checkpoint,
    ChildDone,
    Continue,
    DeliverMail,
    DeliverMails,
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


class ToolCrash(Exception):
    """A tool raised something other than ToolError: the run fails, naming the tool."""


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
        self.schemas = self._offered_tools()

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
        if checkpoint is not None and checkpoint.messages:
            self.messages = list(checkpoint.messages)
            self.turns = checkpoint.step
            last = self.messages[-1]
            if last.role == "assistant":
                uses = [b for b in last.content if isinstance(b, ToolUseBlock)]
                if not uses:  # its last answer was in: it had ended
                    self.ended = True
                    self.port.finish(last.text)
                    return
                answered = {r.tool_use_id: r for r in checkpoint.answered}
                done = {getattr(m, "request_id", None) for m in recovered}
                self.already_spawned = {r for r in done if r and FanOutCalls.owns(r)}
                self._dispatch_all(uses, answered=answered, skip=done)
                for message in recovered:
                    self.on_message(message)
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
            case DeliverMail(mail=mail):
                self.inbox.append(mail)
                self._mail_arrived()
            case DeliverMails(mails=mails):
                self.inbox.extend(mails)
                self._mail_arrived()
            case Wake(key=key):
                if key == self.waiting_mail:
                    self.waiting_mail = None
                    self._answer(key, "no mail arrived before the timeout")
            case _:
                self.port.log.warning("unexpected message", message=type(message).__name__)

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
            system=self.env.system_prompt(port.spec),
            messages=tuple(self.messages),
            tools=self.schemas,
            max_tokens=self.env.max_tokens,
            agent=port.record.agent,
            run_id=port.record.run_id,
        )
        try:
            response = self.env.model.complete(request, deadline=port.deadline, cancel=port.cancel)
        except ModelError as exc:
            if not port.cancel.is_set():
                self._fail(f"model_{exc.kind}", exc.message)
            return
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
        self.ended = True
        port.finish(response.text)

    def _dispatch_all(
        self,
        uses: list[ToolUseBlock],
        answered: dict[str, ToolResultBlock],
        skip: set[str | None] | None = None,
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
        offered = {s.name for s in self.schemas}
        if use.name not in offered:
            self._set(use.id, f"tool {use.name!r} is not available to {record.agent}", True)
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
            else:
                tool: Tool = self.env.tools[use.name]
                try:
                    self._set(use.id, tool.call(args), False)
                except ToolError:
                    raise
                except Exception as exc:
                    raise ToolCrash(f"tool {use.name} raised {type(exc).__name__}: {exc}") from exc
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
        self.port.fail(kind, message)


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
