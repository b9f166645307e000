"""AgentPort: what a behaviour may ask of the actor that hosts it, and AgentEnv: its services.

Behaviours (the LLM loop, function agents) never touch pykka: they talk to this port, which
the agent actor implements by telling the supervisor or itself. That keeps the behaviours
plain classes and lets another actor backend host them unchanged.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from subagents.behaviour.plan_exit import held_to_plan
from subagents.definitions.spec import AgentSpec
from subagents.isolation.worktrees import WorktreeReport, Worktrees, isolation_of
from subagents.logs import get_logger
from subagents.mcp.hub import McpHub, RunMcp
from subagents.messages import (
    ApprovalAsked,
    ApprovalTaken,
    JournalEntry,
    Mail,
    ModelRequest,
    ModelResponse,
    RunProgress,
    RunRecord,
    SendMail,
    SpawnRequest,
    StepTaken,
    StopRequest,
    StopRequested,
    Streamed,
    Subscribe,
    ToolAnswered,
    ToolSchema,
    ToolStarting,
)
from subagents.models.base import CancelSignal, Model
from subagents.supervision.admission_checks import Standing
from subagents.supervision.spawn_rules import SpawnRules
from subagents.tools.approval import ApprovalHandler
from subagents.tools.hooks import Hooks
from subagents.tools.permissions import Permissions
from subagents.tools.processes import ProcessGroups
from subagents.tools.sandbox import RunSandbox, Sandbox
from subagents.tools.workspace import Workspace

log = get_logger("subagents.runtime")

NOT_RUN_STOPPING = "not run: the run is stopping"
"""A side-effecting tool call's result when its start could not be recorded because its run
is ending (``AgentPort.journal_start``)."""


class SkillSource(Protocol):
    """What the runtime needs of a skill index (``definitions.skills.SkillIndex`` is one)."""

    def names(self) -> list[str]: ...

    def render(self, name: str) -> str: ...


class AgentPort(Protocol):
    @property
    def record(self) -> RunRecord: ...
    @property
    def spec(self) -> AgentSpec: ...
    @property
    def standing(self) -> Standing:
        """What the supervisor read of its ledger for this run when it started it (its
        ancestors' ``maxDepth``, its tree's runs): what its spawn offer is decided over."""
        ...

    @property
    def cancel(self) -> CancelSignal: ...
    @property
    def deadline(self) -> float: ...
    @property
    def log(self) -> Any: ...

    def request_spawn(self, req: SpawnRequest) -> None:
        """Held like mail reports (below): the spawns of one handling reach the supervisor
        together, so they are all admitted before any of the children can act."""
        ...

    def send_mail(self, msg: SendMail) -> None:
        """Held, with read receipts (``mail_read``) and every other told report, until the
        message being handled is done (or something is asked, or a tool is about to run): a
        burst of mail goes to the supervisor as one message.
        A behaviour that will not come back to its actor soon calls ``flush_reports``."""
        ...

    def flush_reports(self) -> None:
        """Send the held mail reports now."""
        ...

    def request_stop(self, req: StopRequest | StopRequested) -> None: ...
    def subscribe(self, msg: Subscribe) -> None:
        """Subscribe to a topic (or unsubscribe), told with the other held reports."""
        ...

    def report_step(self, step: StepTaken, *, wait: bool = True) -> None:
        """Record a step. ``wait``: return only once it is recorded (and a budget stop it
        caused is known, through ``cancel``), as before any further model call; a step after
        which the run ends passes False."""
        ...

    def report_tool_call(self, tool: str, arguments: Mapping[str, Any]) -> None: ...
    def ask_status(self, run_id: str) -> RunProgress:
        """Where ``run_id`` is, now (``StatusOf`` asked of the supervisor); ``ValueError``
        naming why not (no such run, or one outside this run's tree)."""
        ...

    def later(self, seconds: float, call: Callable[[], None]) -> None:
        """Call ``call`` once after ``seconds``, on the runtime's timer thread (not the
        run's: a streaming model call holds that one)."""
        ...

    def report_streamed(self, streamed: Streamed) -> None:
        """What the model wrote since the last report (``behaviour/streaming.py``): sent at
        once, not held (the model call it comes from is still under way)."""
        ...

    def journal_start(self, starting: ToolStarting) -> str | None:
        """Record that a side-effecting tool call is about to run; return once it is durable
        (None), or why it could not be recorded (``NOT_RUN_STOPPING``: the run is ending; or
        no answer in time), the call's result as the model reads it: then it must not run."""
        ...

    def journal_end(self, ended: ToolStarting) -> None:
        """A journaled call raised: its end is known (told, in order with the failure)."""
        ...

    def report_answer(self, answer: ToolAnswered) -> None: ...
    def ask_approval(self, asked: ApprovalAsked) -> None:
        """Keep a call's ask in the store as a pending approval (durable approvals; told,
        held like mail reports): its answer comes back as ``ApprovalAnswered``."""
        ...

    def approval_taken(self, taken: ApprovalTaken) -> None:
        """The run acts on an answer (told, held like mail reports): its
        ``approval_answered`` event."""
        ...

    def mail_read(self, mail_ids: tuple[str, ...]) -> None: ...
    def journal(self, entry: JournalEntry, read_mail: tuple[str, ...] = ()) -> None:
        """Append to the run's journal (and mark ``read_mail`` read with it). Held like mail
        reports and sent ahead of them, so an entry is never recorded after anything the
        function did once it was made: what a crash keeps of a run is a prefix of what it
        did, its journal included."""
        ...

    def set_waiting(self, waiting: bool) -> None: ...
    def wake_after(self, key: str, seconds: float) -> None: ...
    def cancel_wake(self, key: str) -> None: ...
    def continue_later(self) -> None: ...
    def finish(self, result: str, typed: bool = False) -> None:
        """End the run with ``result`` (``typed``: the JSON text of a returned value)."""
        ...

    def fail(self, kind: str, message: str) -> None: ...


class CallSpan(Protocol):
    """A model or tool call being traced; ended once."""

    def end(self, *, error: str | None = None, response: ModelResponse | None = None) -> None: ...


class CallTracer(Protocol):
    """Where the LLM behaviour reports its model and tool calls for tracing (the runtime's
    OpenTelemetry spans, ``subagents.telemetry``); None in ``AgentEnv``: nothing traced."""

    def model_call(self, record: RunRecord, request: ModelRequest) -> CallSpan: ...
    def tool_call(
        self, record: RunRecord, call_id: str, name: str, arguments: Mapping[str, Any]
    ) -> CallSpan: ...


@dataclass
class AgentEnv:
    """The runtime's services a behaviour uses: the model, tools, agents, skills, limits."""

    model: Model
    agents: Callable[[], list[AgentSpec]]
    tools: Mapping[str, Any] = field(default_factory=dict)
    skills: SkillSource | None = None
    system_prompt: Callable[[AgentSpec], str] = lambda spec: spec.prompt
    spawn_rules: SpawnRules = field(default_factory=SpawnRules)
    """The spawn rules and limits the offer's checks read (``admission_checks.offer``, over
    the run's ``standing``): the runtime's, as admission's."""
    max_turns: int = 50
    stream_interval_s: float | None = 0.25
    """A streaming model's pieces are reported at most once per this many seconds (a
    ``text_delta`` event, the run's preview); None: not streamed to anyone."""
    max_tokens: int = 4096
    workspace: Workspace | None = None
    """Where file tools work and Bash starts (None: the working directory)."""
    permissions: Permissions = field(default_factory=Permissions)
    approve: ApprovalHandler | None = None
    approvals_in_store: bool = False
    """Every run's asks are kept in the store as pending approvals, answered from any process
    (``Runtime(approve="store")``); a run whose record says so asks there whatever this is."""
    remembered: Callable[[str], tuple[str, ...]] | None = None
    """The allow rules remembered for a tree (by its root's id) with approvals answered
    through the store; None: none (a cluster's node)."""
    ask_parent: bool = False
    """A child run's asks go to its parent agent as mail (behaviour.parent_approvals)."""
    approval_wait_s: float = 300.0
    """How long a child waits for its parent's answer before the call is refused."""
    processes: ProcessGroups = field(default_factory=ProcessGroups)
    allow_hooks: bool = False
    sandbox: Sandbox = field(default_factory=Sandbox)
    """How tools' processes start: Landlock, the network per mode, the variables passed on
    (``tools.sandbox``)."""
    tracer: CallTracer | None = None
    """Where model and tool calls are reported for tracing (None: nothing traced)."""
    mcp: McpHub | None = None
    """The runtime's MCP servers (None: no MCP at all)."""
    worktrees: Worktrees | None = None
    """The worktrees of ``isolation: worktree`` runs (made from the workspace's repository)."""
    offers: dict[tuple[Any, ...], tuple[AgentSpec, object, tuple[ToolSchema, ...]]] = field(
        default_factory=dict, repr=False, compare=False
    )
    """The tools offered that depend only on a definition and its ceiling, made once for all
    its runs (``behaviour/offer.py``)."""
    networks: dict[tuple[Any, ...], tuple[AgentSpec, Sandbox, bool]] = field(
        default_factory=dict, repr=False, compare=False
    )
    """Whether a definition's runs may use the network, by its ceiling and mode, answered
    once for all its runs (``ToolCalls._network_for``)."""
    parsed_hooks: dict[int, tuple[AgentSpec, Hooks | None]] = field(
        default_factory=dict, repr=False, compare=False
    )
    """A definition's hooks parsed once for all its runs (``behaviour/tool_calls.py``
    ``hooks_of``), by the definition's id; None: it has none that run."""

    def workspace_for(self, record: RunRecord, spec: AgentSpec) -> Workspace:
        """The workspace of one run: the runtime's, or for a definition with ``isolation:
        worktree`` the run's own git worktree (``ValueError`` for an unknown isolation,
        ``WorktreeError`` when no worktree can be made). A run a requester holds to plan
        mode (a ``plan`` run's child: ``held_to_plan``) gets none: it can never write, so a
        worktree bought it nothing but a branch, a checkout and an ``info/exclude`` line
        (session 26); it reads what its parent reads (``Worktrees.lend``: its parent's
        worktree), else the runtime's workspace."""
        if self.workspace is None:
            self.workspace = Workspace(os.getcwd())
        if isolation_of(spec) != "worktree":
            return self.workspace
        if self.worktrees is None:
            self.worktrees = Worktrees(self.workspace.root)
        if held_to_plan(record.ceiling) is not None:
            lent = self.worktrees.lend(record.run_id, record.parent_run_id)
            return self.workspace if lent is None else Workspace(lent, sealed=self.workspace.sealed)
        tree = self.worktrees.create(record.run_id, spec.name, sandbox=self.sandbox)
        return Workspace(tree.workspace, sealed=self.workspace.sealed)

    def end_workspace(self, record: RunRecord) -> WorktreeReport | None:
        """The run is over: remove its worktree if unchanged, else keep it (the report)."""
        if self.worktrees is None:
            return None
        return self.worktrees.finish(record.run_id)

    def mcp_for(
        self,
        spec: AgentSpec,
        *,
        deadline: float | None,
        cancel: CancelSignal | None,
        sandbox: RunSandbox | None = None,
    ) -> RunMcp | None:
        """The MCP tools of one run (starting the servers it needs, in the run's
        ``sandbox``), or None without any."""
        if self.mcp is None or not self.mcp.uses_servers(spec):
            return None
        return self.mcp.tools_for(spec, deadline=deadline, cancel=cancel, sandbox=sandbox)


def close_tool_services(worktrees: Worktrees | None, mcp: McpHub | None, timeout: float) -> None:
    """A runtime (or a cluster's node) is closing: worktrees of runs that did not end are
    removed if unchanged, else kept and logged; then every MCP server process and the MCP
    event loop thread go."""
    if worktrees is not None:
        for report in worktrees.close():
            if report.kept:
                log.warning("worktree kept at close", **report.as_dict())
    if mcp is not None:
        mcp.close(timeout)


def render_mail(mail: Mail) -> str:
    """Mail as the model sees it (the offline model parses this exact shape)."""
    from html import escape

    attrs = f'id="{escape(mail.mail_id)}" from="{escape(mail.sender)}"'
    attrs += f' agent="{escape(mail.sender_agent or mail.sender)}"'
    if mail.reply_to:
        attrs += f' reply_to="{escape(mail.reply_to)}"'
    if mail.topic is not None:
        attrs += f' topic="{escape(mail.topic)}"'
    return f"<mail {attrs}>{mail.content}</mail>"
