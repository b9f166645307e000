"""The one path every Tool call of an LLM agent goes through (user, built-in, MCP tools):

    offered? -> permission (-> approval) -> PreToolUse hooks -> journal (started) -> run
             -> PostToolUse hooks -> result (journaled by the LLM loop as ToolAnswered)

Why one path: a rule that holds for one kind of tool and not another is a hole. The
runtime's own tools (spawn, mail, skills) are not Tools: their effects are journaled by the
supervisor itself, by request id, and they pass through none of this.

The decisions are plain classes in ``subagents.tools`` (``PermissionPolicy``, ``journal``,
``Hooks``); this module only strings them together for one run.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from subagents.behaviour import plan_exit
from subagents.behaviour.failures import BASE_EXCEPTION, raised, shown
from subagents.behaviour.port import NOT_RUN_STOPPING, AgentEnv, AgentPort
from subagents.behaviour.runtime_tool_args import task_arguments
from subagents.behaviour.tools import TASK
from subagents.blocking import about_to_block
from subagents.definitions.spec import AgentSpec
from subagents.messages import (
    Attachment,
    PermissionGrant,
    ToolSchema,
    ToolStarting,
    ToolUseBlock,
)
from subagents.supervision.ceilings import network_wanted
from subagents.supervision.requests import as_a_terminal_shows
from subagents.tools import approval, ask_user, journal, plan_mode
from subagents.tools.base import Tool, ToolError, ToolResult
from subagents.tools.context import RunSession, ToolContext
from subagents.tools.hooks import Event, HookOutcome, Hooks, run_hooks
from subagents.tools.modes import Mode
from subagents.tools.permissions import Decision, PermissionPolicy, bash_reads_only, lists
from subagents.tools.rules import Rule, RuleError, call_target
from subagents.tools.run_starts import RunAttempt
from subagents.tools.sandbox import RunSandbox


@dataclass(frozen=True)
class StoreAsk(Decision):
    """An ask to keep in the store as a pending approval (``Runtime(approve="store")``):
    the caller records it and the call waits for its answer."""


class ToolCrash(Exception):
    """A tool raised something other than ToolError: the run fails, naming the tool.
    ``kind``: the run's error kind (``tool_crashed``; ``base_exception`` for ``SystemExit``
    and the other ``BaseException``s that are not ``Exception``s)."""

    def __init__(self, message: str, kind: str = "tool_crashed") -> None:
        super().__init__(message)
        self.kind = kind


NETWORKS_MAX = 256
"""The most network answers an ``AgentEnv`` keeps (``AgentEnv.networks``); cleared when full."""


def network_of(
    env: AgentEnv, spec: AgentSpec, ceiling: tuple[PermissionGrant, ...], mode: Mode
) -> bool:
    """Whether the processes of a run of ``spec`` under ``ceiling`` may use the network in
    ``mode``, as the owner set it for the mode and the definition narrows it (``ValueError``
    for a bad setting).

    Asked at every run's start and depending only on these and the owner's sandbox:
    answered once for all the runs of a definition (``AgentEnv.networks``; an entry keeps
    the definition and the sandbox it was made for, compared by identity, so a reloaded
    definition or a replaced sandbox is never served a stale answer; a failure is not kept)."""
    sandbox, made_for = env.sandbox, env.networks
    try:
        key = (id(spec), ceiling, mode)
        made = made_for.get(key)
    except TypeError:  # a ceiling that cannot be hashed (built by hand): made each time
        return sandbox.resolve().network_for(mode, network_wanted(spec.network, ceiling))
    if made is not None and made[0] is spec and made[1] is sandbox:
        return made[2]
    network = sandbox.resolve().network_for(mode, network_wanted(spec.network, ceiling))
    if len(made_for) >= NETWORKS_MAX:  # definitions reloaded many times: stay bounded
        made_for.clear()
    made_for[key] = (spec, sandbox, network)  # the spec is kept: its id is not reused
    return network


def hooks_of(env: AgentEnv, spec: AgentSpec) -> Hooks | None:
    """The hooks of ``spec`` (None: none that this runtime runs; ``HookConfigError`` for bad
    ones). Parsed once for all the runs of a definition, not at each run's start: kept in
    ``AgentEnv.parsed_hooks`` with the definition they were parsed from, compared by
    identity, so a reloaded definition (a new object) is parsed anew; a failure is not kept;
    at most ``NETWORKS_MAX`` kept (cleared when full: definitions reloaded many times)."""
    parsed = env.parsed_hooks
    made = parsed.get(id(spec))
    if made is not None and made[0] is spec:
        return made[1]
    hooks: Hooks | None = Hooks.parse(spec.hooks, f"agent {spec.name!r}")
    if not hooks:
        hooks = None
    if len(parsed) >= NETWORKS_MAX:
        parsed.clear()
    parsed[id(spec)] = (spec, hooks)  # the spec is kept: its id is not reused
    return hooks


class ToolCalls:
    """One run's tool calls: its workspace, permissions, hooks and shell state."""

    def __init__(self, env: AgentEnv, port: AgentPort) -> None:
        self.env = env
        self.port = port
        spec, record = port.spec, port.record  # (each a property of the port: read once)
        self.workspace = env.workspace_for(record, spec)
        self.policy, warnings = PermissionPolicy.for_agent(
            env.permissions, spec, self.workspace.root, record.ceiling
        )
        for warning in warnings:
            port.log.warning("permission mode tightened", reason=warning)
        self._requester: PermissionPolicy | None = None
        self.hooks: Hooks | None = None
        if env.allow_hooks and spec.hooks:
            self.hooks = hooks_of(env, spec)
        self._session: RunSession | None = None
        # a bad ``network``: set-up fails (``_network_for``'s answer, without its frame)
        self._network = network_of(env, spec, record.ceiling, self.policy.mode)
        self._sandbox: RunSandbox | None = None
        self._attempt: RunAttempt | None = None  # (``attempt``)
        self.attachments: dict[str, tuple[Attachment, ...]] = {}
        """Tool use id -> the images a call's result shows besides its text, until the LLM
        loop puts them in the call's ToolResultBlock (``take_attachments``)."""

    # ``requester`` and ``session`` are made when first used, not at the run's start: most
    # runs (a fan-out's child without tools) never ask their parent nor call a tool, and
    # both are ~2 us each. Neither can fail where the start would not have: the requester's
    # policy reads the same ceiling the run's own (made at the start) has read.

    @property
    def requester(self) -> PermissionPolicy | None:
        """What this run's parent may do itself: all it may approve (``ask_parent``); None
        for a root (no ceiling)."""
        ceiling = self.port.record.ceiling
        if self._requester is None and ceiling:
            self._requester = PermissionPolicy.of_requester(
                self.env.permissions, ceiling, self.workspace.root
            )
        return self._requester

    @property
    def attempt(self) -> RunAttempt:  # this start of the run, its processes' key (``close``)
        if self._attempt is None:
            self._attempt = RunAttempt(self.port.record.run_id)
        return self._attempt

    @property
    def session(self) -> RunSession:
        """The run's tool state across calls (files read, answers given)."""
        if self._session is None:
            self._session = RunSession(cwd=self.workspace.root)
        return self._session

    @property
    def sandbox(self) -> RunSandbox:
        """How the run's processes start: made at the first (a tool, a hook, an MCP server):
        finding its git directories reads files, and most runs start no process."""
        if self._sandbox is None:
            self._sandbox = self._sandbox_for(self.policy.mode)
        return self._sandbox

    def _network_for(self, mode: Mode) -> bool:
        """Whether the run's processes may use the network in ``mode`` (``network_of``)."""
        return network_of(self.env, self.port.spec, self.port.record.ceiling, mode)

    def _sandbox_for(self, mode: Mode) -> RunSandbox:
        """How the run's processes start in ``mode``: read-only in plan mode (the run's mode,
        not a reading of its commands), the network as the owner set it for the mode."""
        return self.env.sandbox.resolve().for_run(
            workspace=self.workspace.root,
            read_only=mode == "plan",
            network=self._network_for(mode),
            why=f"agent {self.port.spec.name!r} in plan mode",
        )

    def _plan_exit(self) -> Decision:
        """ExitPlanMode: asked of the run's approver when the run may leave plan mode; else
        refused, saying why (not in plan mode; a requester holds it there)."""
        if self.policy.mode != "plan":
            return Decision(
                "deny", f"this run is not in plan mode (it runs in {self.policy.mode} mode)"
            )
        mode, why = plan_exit.target_mode(
            self.env.permissions.mode, self.port.spec, self.port.record.ceiling
        )
        if mode is None:
            return Decision("deny", why)
        return Decision(
            "ask", f"the agent presents its plan and asks to leave plan mode for {mode} mode"
        )

    def leave_plan_mode(self) -> str:
        """The plan was approved (or, on a restore, had been): the run's permissions and its
        processes' sandbox are those of the mode it moves to from now on."""
        mode, why = plan_exit.target_mode(
            self.env.permissions.mode, self.port.spec, self.port.record.ceiling
        )
        if mode is None or self.policy.mode != "plan":  # (decided before it was asked)
            return why or f"this run is not in plan mode (it runs in {self.policy.mode} mode)"
        self.policy = dataclasses.replace(self.policy, mode=mode)
        self._sandbox = self._sandbox_for(mode)
        self.port.log.info("left plan mode", mode=mode)
        return plan_exit.approved(mode)

    def environment(self) -> str:
        """What Claude Code tells a model about where it works (its ``<env>`` block): the
        file tools want absolute paths, so the model must know the workspace."""
        root = self.workspace.root
        git = "Yes" if (root / ".git").exists() else "No"
        worktrees = self.env.worktrees
        tree = worktrees.get(self.port.record.run_id) if worktrees is not None else None
        if tree is not None:  # isolation: worktree
            git = f"Yes (your own git worktree, on branch {tree.branch})"
        return (
            f"\n\n<env>\nWorking directory: {root}\nIs directory a git repo: {git}\n"
            f"Platform: {sys.platform}\n</env>"
        )

    def context(self, use_id: str) -> ToolContext:
        port = self.port
        return ToolContext(
            workspace=self.workspace,
            run_id=port.record.run_id,
            agent=port.record.agent,
            cancel=port.cancel,
            deadline=port.deadline,
            log=port.log,
            processes=self.env.processes,
            session=self.session,
            tool_use_id=use_id,
            sandbox=self.sandbox,
            attempt=self.attempt,
        )

    def execute(self, use: ToolUseBlock, tool: Tool, step: int) -> tuple[str, bool]:
        """Run one call through the whole path; (content, is_error) for the model (an ask goes
        to the handler here; ``decide`` + ``run_allowed`` let the caller route it to the
        parent); ``ToolCrash`` when a tool raises something other than ``ToolError``."""
        decision = self.decide(use, tool, parent_may_answer=False)
        if not decision.allowed:
            return self.denied(tool, decision.reason)
        return self.run_allowed(use, tool, step)

    def request(self, use: ToolUseBlock, tool: Tool, reason: str) -> approval.ApprovalRequest:
        port = self.port
        return approval.ApprovalRequest(
            run_id=port.record.run_id,
            agent=port.record.agent,
            tool=tool.name,
            input=_arguments(use),
            reason=reason,
            tool_use_id=use.id,
            parent_run_id=port.record.parent_run_id,
            workspace=str(self.workspace.root),
        )

    def decide(self, use: ToolUseBlock, tool: Tool, *, parent_may_answer: bool) -> Decision:
        """The permission decision; an "ask" answered by the approval handler, unless the
        runtime routes a child's asks to its parent (then "ask" is returned as it is)."""
        arguments = _arguments(use)
        decision = self.policy.decide(tool, arguments)
        if _outside_sandbox(tool, arguments) and decision.behavior != "deny":
            decision = self._unsandboxed(decision)
        if tool.name == ask_user.NAME and decision.behavior != "deny":
            decision = Decision("ask", ask_user.REASON)  # a question is always asked
        if tool.name == plan_mode.NAME and decision.behavior != "deny":
            decision = self._plan_exit()  # a plan is put to the approver
        if decision.behavior != "ask":
            return decision
        remembered = self._remembered(use, tool)
        if remembered is not None:
            return remembered
        reason = decision.reason
        if self.asks_parent:  # a question or a plan goes to the parent, whatever it may call
            asked = tool.name in (ask_user.NAME, plan_mode.NAME)
            beyond = None if asked else self.beyond_parent(use, tool)
            if beyond is None:
                if parent_may_answer:
                    return decision
            else:  # the parent may not approve it: the runtime's handler decides, or no one
                reason = f"{reason}; {beyond}"
        if self.asks_store and parent_may_answer:  # kept in the store for anyone to answer
            return StoreAsk("ask", reason)
        answered = approval.ask(self.env.approve, self.request(use, tool, reason))
        if tool.name == ask_user.NAME and answered.allowed:
            self.session.answers[use.id] = answered.reason  # the handler's answer
        return answered

    def beyond_parent(self, use: ToolUseBlock, tool: Tool) -> str | None:
        """Why the parent may not approve this call (it could not make it itself), or None
        when it may: a parent approves only what its own permissions allow."""
        grant = self.port.record.ceiling[-1] if self.port.record.ceiling else None
        if self.requester is None or grant is None:
            return None
        if not lists(grant, tool.name):
            shown = ", ".join(grant.tools or ()) or "none"
            return (
                f"the parent ({grant.agent} {grant.run_id}) may not approve it, since it may not"
                f" call {tool.name} itself (its tools: {shown})"
            )
        theirs = self.requester.decide(tool, _arguments(use))
        if theirs.allowed:
            return None
        return (
            f"the parent ({grant.agent} {grant.run_id}) may not approve it, since it could"
            f" not make this call itself ({theirs.reason})"
        )

    def _unsandboxed(self, decision: Decision) -> Decision:
        """A Bash call asking to run outside the sandbox (Claude Code's
        ``dangerouslyDisableSandbox``): asked for, unless nothing is asked in this mode;
        never in a read-only run."""
        if self.sandbox.read_only:
            return Decision(
                "deny",
                "this run is read-only (plan mode): a command may not run outside the sandbox",
            )
        if self.policy.mode == "bypassPermissions" or not self.sandbox.landlock:
            return decision
        return Decision(
            "ask",
            "Bash asks to run outside the sandbox (dangerouslyDisableSandbox): it could write"
            " anywhere and reach the network",
        )

    def _remembered(self, use: ToolUseBlock, tool: Tool) -> Decision | None:
        """An ask answered by an allow rule remembered for the run's tree (``approve
        --remember``), or None: only what a person would have been asked (what is denied
        stays denied), never a question, a plan or a command leaving the sandbox."""
        arguments = _arguments(use)
        remembered = self.env.remembered
        if remembered is None or tool.name in (ask_user.NAME, plan_mode.NAME):
            return None
        if _outside_sandbox(tool, arguments):
            return None
        root = self.workspace.root
        for text in remembered(self.port.record.root_run_id):
            try:
                rule = Rule.parse(text)
            except RuleError:
                continue
            if rule.matches(tool.name, arguments, call_target(tool.name, arguments, root), root):
                return Decision("allow", f"rule {rule.text}, remembered for this tree")
        return None

    @property
    def asks_store(self) -> bool:
        """Whether this run's asks are kept in the store as pending approvals (its tree's
        route, kept in its record, or this runtime's ``approve="store"``)."""
        return self.env.approvals_in_store or self.port.record.approvals_in_store

    @property
    def asks_parent(self) -> bool:
        """Whether this run's asks go up to its parent (as mail) rather than the handler."""
        return self.env.ask_parent and self.port.record.parent_run_id is not None

    def denied(self, tool: Tool, reason: str) -> tuple[str, bool]:
        self.port.log.info("tool call denied", tool=tool.name, reason=reason)
        return f"Permission to use {tool.name} was denied: {reason}", True

    def run_allowed(self, use: ToolUseBlock, tool: Tool, step: int) -> tuple[str, bool]:
        """The rest of the path for an allowed call: hooks, journal, run, hooks (an approved
        ExitPlanMode then leaves plan mode)."""
        content, is_error = self._run_hooked(use, tool, step)
        if tool.name == plan_mode.NAME and not is_error:
            return self.leave_plan_mode(), False
        return content, is_error

    def _run_hooked(self, use: ToolUseBlock, tool: Tool, step: int) -> tuple[str, bool]:
        port = self.port
        args = _arguments(use)
        if self.hooks is not None:
            pre = self._hooks(self.hooks, "PreToolUse", self._payload(tool, args), tool.name)
            if pre.blocked:
                return f"PreToolUse hook blocked this call: {pre.reason}", True
        starting = ToolStarting(
            run_id=port.record.run_id, step=step, tool_use_id=use.id, tool=tool.name
        )
        journaled = journal.record_before_run(tool)
        refused = port.journal_start(starting) if journaled else None
        if refused is not None or (journaled and port.cancel.is_set()):
            return refused or NOT_RUN_STOPPING, True
        port.flush_reports()  # what this turn reported so far goes now, not after the tool
        about_to_block()  # files, subprocesses, MCP servers, a user's function: may wait
        content, is_error = self._run(use, tool, args, starting if journaled else None)
        if self.hooks is not None:
            # as the model is shown it (a lone surrogate, which JSON cannot carry, as U+FFFD)
            response = {"content": as_a_terminal_shows(content), "is_error": is_error}
            payload = {**self._payload(tool, args), "tool_response": response}
            post = self._hooks(self.hooks, "PostToolUse", payload, tool.name)
            if post.blocked:
                content = f"{content}\n\nPostToolUse hook feedback: {post.reason}"
        return content, is_error

    def _run(
        self, use: ToolUseBlock, tool: Tool, args: dict[str, Any], journaled: ToolStarting | None
    ) -> tuple[str, bool]:
        """The tool itself: its answer, or its ``ToolError`` as an error answer; anything else
        it raises fails the run (``ToolCrash``), its journal entry ended first (``journaled``:
        the entry made before it ran, if any), since a restart may run it again."""
        try:
            ctx = self.context(use.id)
            if _outside_sandbox(tool, args):  # allowed: decided (asked) above
                ctx = dataclasses.replace(ctx, sandbox=self.sandbox.unconfined())
            elif _held_to_reading(self.policy.mode, tool, args):  # runs as it was judged
                ctx = dataclasses.replace(ctx, sandbox=self.sandbox.reading())
            out = tool.run(args, ctx)
        except ToolError as exc:
            return shown(exc), True
        except Exception as exc:
            if journaled is not None:  # it ended (by raising): a restart may run it again
                self.port.journal_end(journaled)
            crash = f"tool {tool.name} raised {type(exc).__name__}: {shown(exc)}"
            raise ToolCrash(crash) from exc
        except BaseException as exc:  # SystemExit...: the run fails at once
            if journaled is not None:
                self.port.journal_end(journaled)
            raise ToolCrash(raised(f"tool {tool.name}", exc), BASE_EXCEPTION) from exc
        if isinstance(out, ToolResult):
            if out.attachments:
                self.attachments[use.id] = out.attachments
            return out.content, out.is_error
        return out, False

    def _hooks(
        self, hooks: Hooks, event: Event, payload: dict[str, Any], tool: str | None
    ) -> HookOutcome:
        """The run's hooks of ``event``, run in its workspace and sandbox."""
        return run_hooks(
            hooks,
            event,
            payload,
            tool=tool,
            cwd=self.workspace.root,
            cancel=self.port.cancel,
            log=self.port.log,
            sandbox=self.sandbox,
            temp_dir=self.temp_dir(),
            lease_env=self.env.processes.lease_env,
        )

    def spawn_arguments(
        self, use: ToolUseBlock, args: dict[str, Any], offered: Iterable[ToolSchema]
    ) -> dict[str, Any]:
        """A ``spawn_subagent`` or ``Task`` call's arguments as ``spawn_subagent``'s, once the
        PreToolUse hooks let it through: spawning passes no permission (the spawn rules decide),
        but a hook matcher written for Claude Code's ``Task`` sees its calls. ``ToolError``
        when a hook blocks it."""
        if self.hooks is not None:
            payload = {
                "session_id": self.port.record.run_id,
                "transcript_path": "",
                "tool_name": use.name,
                "tool_input": args,
            }
            # in the run's sandbox, as every hook (before session 26 this one had none)
            pre = self._hooks(self.hooks, "PreToolUse", payload, use.name)
            if pre.blocked:
                raise ToolError(f"PreToolUse hook blocked this call: {pre.reason}")
        return task_arguments(args, offered) if use.name == TASK else args

    def take_attachments(self, use_id: str) -> tuple[Attachment, ...]:
        return self.attachments.pop(use_id, ())

    @property
    def has_stop_hooks(self) -> bool:
        """Whether a Stop hook may keep the run going after a step with no tool call."""
        return self.hooks is not None and bool(self.hooks.commands("Stop"))

    def stop_hook(self, active: bool) -> str | None:
        """Run the Stop hooks as the agent is about to end; the reason to go on, or None."""
        if self.hooks is None or not self.has_stop_hooks:
            return None
        payload = {"session_id": self.port.record.run_id, "stop_hook_active": active}
        try:  # (its temp dir refused, the scratch home's: not run, as a hook that fails)
            outcome = self._hooks(self.hooks, "Stop", payload, None)
        except ToolError as exc:
            self.port.log.warning("stop hooks not run", error=str(exc))
            return None
        return outcome.reason if outcome.blocked else None

    def temp_dir(self) -> Path:
        """The run's own temporary directory (its processes' TMPDIR, writable in its sandbox)."""
        return self.env.processes.run_dir(self.attempt.key)

    def _payload(self, tool: Tool, args: dict[str, Any]) -> dict[str, Any]:
        return {
            "session_id": self.port.record.run_id,
            "transcript_path": "",
            "tool_name": tool.name,
            "tool_input": args,
        }

    def close(self) -> None:
        """This start ended: kill what it left, refuse its later starts (none made: none ran)."""
        if self._attempt is not None and (killed := self.env.processes.end_attempt(self._attempt)):
            self.port.log.info("killed the run's processes", count=killed)


def _held_to_reading(mode: Mode, tool: Tool, args: dict[str, Any]) -> bool:
    """A Bash line allowed unasked because it only reads, in a mode where another line
    would be asked (not ``bypassPermissions``: there every line runs unasked, so holding one
    buys nothing, and a partial clone's ``git show`` could not fetch its blob)."""
    return tool.name == "Bash" and mode != "bypassPermissions" and bash_reads_only(args)


def _outside_sandbox(tool: Tool, arguments: dict[str, Any]) -> bool:
    return tool.name == "Bash" and arguments.get("dangerouslyDisableSandbox") is True


def _arguments(use: ToolUseBlock) -> dict[str, Any]:
    return use.input if isinstance(use.input, dict) else {}
