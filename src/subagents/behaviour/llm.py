"""The LLM loop: one model turn per step; tool calls answered; never blocking on a child.

A step is one model call. Its tool calls are dispatched at once: local ones (user tools,
``check_mailbox``, ``load_skill``) run here; spawns, mail and stops go to the supervisor and
the agent returns to its mailbox. When every pending call has its result, the next step sends
all tool_results in one user message (then any unread mail), as the Messages API requires.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from subagents.behaviour import parent_approvals, request_ids
from subagents.behaviour.approval_flow import ParentApprovalFlow
from subagents.behaviour.failures import BASE_EXCEPTION, raised
from subagents.behaviour.fan_out_tool import FAN_OUT, FanOutCalls, FanOutError
from subagents.behaviour.offer import complete, not_offered, offered_tools, run_tools
from subagents.behaviour.plan_exit import approved_in
from subagents.behaviour.port import AgentEnv, AgentPort, CallSpan, render_mail
from subagents.behaviour.runtime_tool_args import (
    reply_answer,
    required_str,
    send_request,
    spawn_request,
    stop_request,
    subscription,
    to_json,
    wait_timeout,
)
from subagents.behaviour.status_tool import STATUS, status_answer
from subagents.behaviour.store_approvals import StoreApprovalFlow
from subagents.behaviour.tool_calls import StoreAsk, ToolCalls, ToolCrash
from subagents.behaviour.tools import (
    CHECK,
    LOAD_SKILL,
    SEND,
    SPAWN,
    STOP,
    SUBSCRIBE,
    TASK,
    UNSUBSCRIBE,
    WAIT,
    Tool,
    ToolError,
)
from subagents.behaviour.unread import UnreadMail
from subagents.isolation.worktrees import WorktreeError
from subagents.messages import (
    ApprovalAnswered,
    ChatMessage,
    Checkpoint,
    ChildDone,
    Continue,
    DeliverMail,
    Mail,
    MailAck,
    ModelRequest,
    ModelResponse,
    SpawnReply,
    StepTaken,
    StopReply,
    TextBlock,
    ToolAnswered,
    ToolResultBlock,
    ToolSchema,
    ToolUseBlock,
    Wake,
)
from subagents.models.base import ModelError
from subagents.supervision.handdown import first_message_text
from subagents.supervision.requests import as_a_terminal_shows
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
        self.inbox = UnreadMail()
        self.order: list[str] = []
        self.results: dict[str, ToolResultBlock | None] = {}
        self.background: dict[str, bool] = {}
        self.waiting = False
        self.ended = False
        self.fan_outs = FanOutCalls()
        # fan_out children an earlier start already spawned (their answers are recovered)
        self.already_spawned: set[str] = set()
        self.calls: ToolCalls | None = None
        self.setup_error: str | None = None
        """Why this run's tools could not be set up (a bad permissionMode, rule or hook)."""
        self.setup_kind = "bad_definition"
        try:
            self.calls = ToolCalls(env, port)
        except ValueError as exc:
            self.setup_error = str(exc)
        except WorktreeError as exc:  # isolation: worktree outside a git repository...
            self.setup_kind, self.setup_error = "worktree", str(exc)
        self.mcp, self.tools, self.mcp_names = run_tools(env, port, self.calls)
        self.schemas = offered_tools(env, port, self.tools, self.mcp_names)
        self.tool_spans: dict[str, CallSpan] = {}
        """Traced tool calls not answered yet (``env.tracer``), by tool_use id."""
        self.stop_hook_active = False
        self.environment = ""
        """Appended to the system prompt when the agent has file or shell tools."""
        if self.calls is not None and any(s.name in BUILTIN_NAMES for s in self.schemas):
            self.environment = self.calls.environment()
        self._approvals: ParentApprovalFlow | None = None
        self._kept_asks: StoreApprovalFlow | None = None

    # The approval flows are made at first use: each holds this behaviour's bound ``_answer``
    # and ``_fail``, a cycle only the cyclic GC frees, and made at every start it left each
    # run's objects to it (~24 per LLM run and its actor half the time, counted in a fan-out
    # with ``gc.DEBUG_SAVEALL``), for flows most runs never use (a fan-out's child asks none).

    @property
    def approvals(self) -> ParentApprovalFlow:
        """Tool calls waiting for the parent's answer (``ask_parent``), made at first use."""
        if self._approvals is None:
            self._approvals = ParentApprovalFlow(
                self.env, self.port, self.calls, self._answer, self._fail
            )
        return self._approvals

    @property
    def kept_asks(self) -> StoreApprovalFlow:
        """Tool calls waiting for an approval kept in the store, made at first use."""
        if self._kept_asks is None:
            self._kept_asks = StoreApprovalFlow(self.port, self.calls, self._answer, self._fail)
        return self._kept_asks

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
        self.inbox.add(pending_mail)
        if self.setup_error is not None:
            self._fail(self.setup_kind, self.setup_error)
            return
        if checkpoint is not None and checkpoint.messages:
            self.messages = list(checkpoint.messages)
            self.turns = checkpoint.step
            if self.calls is not None and approved_in(self.messages, checkpoint.answered):
                self.calls.leave_plan_mode()  # its plan was approved before the restore
            last = self.messages[-1]
            if last.role == "assistant":
                uses = [b for b in last.content if isinstance(b, ToolUseBlock)]
                if not uses:  # its last answer was in: it had ended
                    self.ended = True
                    self.port.finish(self._closing(last.text))
                    return
                answered = {r.tool_use_id: r for r in checkpoint.answered}
                retries = self.port.record.retries  # (the request ids name the turn)
                recovered, did = request_ids.this_turn(recovered, uses, retries, self.turns)
                done = {getattr(m, "request_id", None) for m in recovered}
                self.already_spawned = {r for r in done if r and FanOutCalls.owns(r)}
                self.approvals.sent = {r for r in done if r and parent_approvals.use_id_of(r)}
                self._dispatch_all(
                    uses, answered=answered, skip=did, started=set(checkpoint.started)
                )
                for message in recovered:
                    self.on_message(message)
                if self.approvals.waiting and self.inbox:  # an answer came before the crash
                    self._take_mail(tuple(self.inbox.take_all()))
                return
        else:
            record = self.port.record
            text = first_message_text(record.task, record.context, record.shared)
            blocks: list[Any] = [TextBlock(text)]
            blocks += [TextBlock(render_mail(m)) for m in self.inbox.take_for_message()]
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
                self.approvals.mailed(message)
            case Wake(key=key) if parent_approvals.use_id_of(key) is not None:
                self.approvals.timed_out(key)
            case ApprovalAnswered():
                self.kept_asks.answered(message)
            case SpawnReply(request_id=rid, run_id=run_id, error=error, queued=queued):
                rid = request_ids.use_id_of(rid)
                if error is not None:
                    self._answer(rid, error, is_error=True)
                elif self.background.get(rid):
                    self._answer(rid, to_json({"run_id": run_id, "queued": queued}))
            case ChildDone() | MailAck() | StopReply():
                self._answer(request_ids.use_id_of(message.request_id), *reply_answer(message))
            case DeliverMail(mails=mails):
                self._take_mail(mails)
            case Wake(key=key):  # (a wait's: its call's request id, ``_runtime_tool``)
                if self.inbox.stop_waiting(key) is not None:
                    self._answer(request_ids.use_id_of(key), "no mail arrived before the timeout")
            case _:
                self.port.log.warning("unexpected message", message=type(message).__name__)

    def _take_mail(self, mails: tuple[Mail, ...]) -> None:
        """New mail: a parent's answer to an approval request is taken here (read, not
        shown as mail); the rest goes to the inbox."""
        kept: list[Mail] = []
        approvals = self._approvals  # (none made: no call waits for the parent's answer)
        for mail in mails:
            if approvals is None or not approvals.answered_by(mail):
                kept.append(mail)
            elif self.ended:
                return
        if kept:
            self.inbox.add(kept)
            self._mail_arrived()

    def _mail_arrived(self) -> None:
        """Answer a ``wait_for_message`` call waiting for mail, with everything unread."""
        key = self.inbox.stop_waiting()
        if key is not None:
            self.port.cancel_wake(key)
            text, is_error, read = self.inbox.render()
            self._answer(request_ids.use_id_of(key), text, is_error, read)

    def unread_mail(self) -> tuple[str, ...]:
        return self.inbox.ids()

    # ---- steps -------------------------------------------------------------------------------

    def _step(self) -> None:
        port = self.port
        run_id, spec, cancel = port.record.run_id, port.spec, port.cancel  # (each read once)
        if cancel.is_set() or self.ended:
            return
        max_turns = self.env.max_turns
        if spec.max_turns is not None:
            max_turns = min(max_turns, spec.max_turns)
        if self.turns >= max_turns:
            self._fail("max_turns", f"{port.record.agent} reached its limit of {max_turns} turns")
            return
        response = self._call_model()
        if response is None or cancel.is_set():
            return
        self.turns += 1
        self.messages.append(ChatMessage("assistant", response.content))
        checkpoint = Checkpoint(run_id=run_id, step=self.turns, messages=tuple(self.messages))
        uses = list(response.tool_uses)
        # A step after which the run may go on is asked, not told: its budget is known
        # before the next model call (a tool call's answer, or a Stop hook that blocks the end)
        may_go_on = bool(uses) or (self.calls is not None and self.calls.has_stop_hooks)
        port.report_step(
            StepTaken(
                run_id=run_id,
                step=self.turns,
                usage=response.usage,
                checkpoint=checkpoint,
                read_mail=self.inbox.recorded(),
            ),
            wait=may_go_on,  # else the run ends here: nothing to hold back
        )
        if cancel.is_set():
            return  # stopped while the step was recorded (over budget): no tool runs
        if uses:
            self._dispatch_all(uses, answered={})
        else:
            self._end_turn(response)

    def _call_model(self) -> ModelResponse | None:
        """The model's answer to the conversation so far; None when the call failed (the run
        failed with it) or was cancelled."""
        port = self.port
        request = _model_request(self.env, port, self.messages, self.schemas, self.environment)
        try:
            return complete(self.env, port, request)
        except ModelError as exc:
            if not port.cancel.is_set():
                self._fail(f"model_{exc.kind}", exc.message)
            return None
        except Exception:
            raise  # a crash: the actor fails the run (error kind ``crash``)
        except BaseException as exc:  # SystemExit...: the run fails at once
            self._fail(BASE_EXCEPTION, raised(f"the model of {port.record.agent}", exc))
            return None

    def _end_turn(self, response: ModelResponse) -> None:
        """A turn without tool calls: the run ends with its text, unless a Stop hook blocks."""
        port = self.port
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
        skip: set[str] | None = None,
        started: set[str] | None = None,
    ) -> None:
        self.order = [u.id for u in uses]
        self.results = {u.id: answered.get(u.id) for u in uses}
        self.background = spawned_in_background(uses)
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
                self._fail(exc.kind, str(exc))
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
            self._set(use.id, not_offered(self.env, port, use.name, why), True)
            return
        try:
            if not _runtime_tool(self, use, args):
                self._user_tool(use)
        except ToolError as exc:
            self._set(use.id, str(exc), True)

    def _user_tool(self, use: ToolUseBlock) -> None:
        """A Tool (user, built-in, MCP): the one path of ``tool_calls.ToolCalls``."""
        tool: Tool = self.tools[use.name]
        assert self.calls is not None
        # what this turn reported so far goes now: an approval handler, a hook or the tool
        # itself may take long, and may wait for what was reported
        self.port.flush_reports()
        decision = self.calls.decide(use, tool, parent_may_answer=True)
        if isinstance(decision, StoreAsk):  # kept in the store for anyone to answer
            self.kept_asks.ask(use, tool, decision.reason, self.turns)
        elif decision.behavior == "ask":  # a child whose asks go to its parent
            self.approvals.ask(use, tool, decision.reason, self.turns)
        elif not decision.allowed:
            self._set(use.id, *self.calls.denied(tool, decision.reason))
        else:
            self._set(use.id, *self.calls.run_allowed(use, tool, self.turns))

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
                traced.end(error=f"tool_error: {content}" if is_error else None)
            shown = self.calls.take_attachments(use_id) if self.calls is not None else ()
            # a tool's output may hold a bad decode's lone surrogate: kept as U+FFFD
            result = ToolResultBlock(use_id, as_a_terminal_shows(content), is_error, shown)
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
        blocks.extend(TextBlock(render_mail(m)) for m in self.inbox.take_for_message())
        self.messages.append(ChatMessage("user", tuple(blocks)))
        self.order, self.results = [], {}
        self._step()

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
        if not self.ended:  # (else ``_closing`` ended it: a run ends only through it)
            self.env.end_workspace(self.port.record)
        spans, self.tool_spans = self.tool_spans, {}
        why = "cancelled" if spans and self.port.cancel.is_set() else "unanswered"
        for span in spans.values():
            span.end(error=f"{why}: the run ended before the call answered")


def spawned_in_background(uses: Sequence[ToolUseBlock]) -> dict[str, bool]:
    """Tool use id -> whether that spawn of the turn runs in the background
    (``spawn_subagent``'s ``background`` or ``detach``, ``Task``'s ``run_in_background``)."""
    return {
        u.id: bool(
            u.input.get("background") or u.input.get("detach")
            if u.name == SPAWN
            else u.input.get("run_in_background")
        )
        for u in uses
        if u.name in (SPAWN, TASK) and isinstance(u.input, dict)
    }


def _runtime_tool(run: LLMBehaviour, use: ToolUseBlock, args: dict[str, Any]) -> bool:
    """A call of one of the runtime's own tools (spawn, fan out, mail, stop, skills),
    handed to the supervisor or answered here; False for any other tool. (Apart from the
    class: one tool's call each, it reads the run's parts and sets a call's answer.)"""
    port, record = run.port, run.port.record
    rid = request_ids.of_call(use.id, record.retries, run.turns)  # (``request_ids``: why)
    if use.name in (SPAWN, TASK):
        assert run.calls is not None  # (None only when the run failed to set up)
        args = run.calls.spawn_arguments(use, args, run.schemas)
        request = spawn_request(rid, args, record.run_id)
        run.background[use.id] = request.background
        port.request_spawn(request)
    elif use.name == FAN_OUT:
        try:
            requests = run.fan_outs.start(rid, args, record.run_id)
        except FanOutError as exc:
            raise ToolError(str(exc)) from None
        for request in requests:
            if request.request_id not in run.already_spawned:  # else: recovered
                port.request_spawn(request)
    elif use.name == SEND:
        port.send_mail(send_request(rid, args, record.run_id))
    elif use.name == STOP:
        port.request_stop(stop_request(rid, args, record))
    elif use.name == CHECK:
        run._set(use.id, *run.inbox.render())
    elif use.name == WAIT:
        timeout = wait_timeout(args)
        if run.inbox:
            run._set(use.id, *run.inbox.render())
        elif run.inbox.waiter is not None:
            # one waiter per turn: a second would overwrite the first, never answered
            raise ToolError("already waiting for mail in this turn; wait once per turn")
        else:
            run.inbox.waiter = rid  # (the wake's key: never read as an approval's)
            port.wake_after(rid, timeout)
    elif use.name in (SUBSCRIBE, UNSUBSCRIBE):
        run._set(use.id, subscription(port, record.run_id, use.name == SUBSCRIBE, args), False)
    elif use.name == LOAD_SKILL:
        run._set(use.id, _skill_text(run.env, required_str(args, "name")), False)
    elif use.name == STATUS:
        run._set(use.id, *status_answer(port, args))
    else:
        return False
    return True


def _model_request(
    env: AgentEnv,
    port: AgentPort,
    messages: list[ChatMessage],
    schemas: tuple[ToolSchema, ...],
    environment: str,
) -> ModelRequest:
    """The model call of a step: the conversation so far, the tools offered, the system
    prompt (with the environment note of an agent that has file or shell tools)."""
    record = port.record  # (a property of the run's start: read once)
    return ModelRequest(
        model=record.model or "",
        system=env.system_prompt(port.spec) + environment,
        messages=tuple(messages),
        tools=schemas,
        max_tokens=env.max_tokens,
        agent=record.agent,
        run_id=record.run_id,
    )


def _skill_text(env: AgentEnv, name: str) -> str:
    """What ``load_skill`` answers: the skill's text, or an error naming the known skills."""
    assert env.skills is not None
    try:
        return env.skills.render(name)
    except KeyError:
        known = ", ".join(env.skills.names()) or "none"
        raise ToolError(f"unknown skill {name!r}; known skills: {known}") from None
