"""Runtime: the one object an embedding program holds.

    with Runtime(agents=[...], model=ScriptedModel(...)) as rt:
        outcome = rt.run("explore", "find the config loader")

It wires the pieces (timer service, registry actor, store, supervisor actor, model, tools) and
offers blocking and non-blocking entry points. Leaving the ``with`` block stops every run and
every thread the runtime started.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import msgspec
import structlog

from subagents.actors.agent import AgentActor, BehaviourFactory
from subagents.actors.registry import RegistryActor, RegistryClient
from subagents.actors.supervisor import (
    ActorGone,
    LeaseLost,
    Query,
    Restore,
    SpawnAndTell,
    SupervisorClient,
    Sweep,
)
from subagents.actors.threads import ThreadPool
from subagents.actors.timer import TimerService
from subagents.behaviour.function import FunctionAgent, FunctionBehaviour
from subagents.behaviour.llm import LLMBehaviour
from subagents.behaviour.port import AgentEnv, AgentPort
from subagents.behaviour.tools import Tool, as_tools, runtime_tool_names
from subagents.definitions.catalog import Catalog
from subagents.definitions.errors import DefinitionError, LoadIssue
from subagents.definitions.skills import SkillIndex, default_skill_dirs, preload_skills
from subagents.definitions.spec import AgentSpec
from subagents.definitions.validate import check, known_tools, name_problem
from subagents.isolation.worktrees import Worktrees
from subagents.lease_keeper import LeaseKeeper
from subagents.logs import debug_enabled, ensure_configured
from subagents.mcp.hub import McpHub, mcp_start_timeout
from subagents.messages import (
    EXTERNAL_SENDER,
    Event,
    MailAck,
    Outcome,
    PollCommands,
    RunRecord,
    RunStatus,
    SendMail,
    SpawnReply,
    SpawnRequest,
    StopReply,
    StopRequest,
    TreeNode,
    new_id,
)
from subagents.models import default_model
from subagents.models.base import Model
from subagents.store.base import RunStore
from subagents.store.leases import lease_seconds, new_owner
from subagents.store.memory import MemoryStore
from subagents.supervision.core import AdmissionError, RestoreReport, SupervisorCore
from subagents.supervision.limits import LimitError, Limits
from subagents.supervision.requests import request_problem
from subagents.supervision.spawn_rules import SpawnRules
from subagents.supervision.synthesis import Synthesis
from subagents.supervision.totals import Totals, subtree_totals
from subagents.supervision.tree import tree_view
from subagents.telemetry import Telemetry, provider_from_env
from subagents.tools.approval import ApprovalHandler
from subagents.tools.builtin import builtin_tools as builtin_tools_by_name
from subagents.tools.hooks import HookConfigError, Hooks
from subagents.tools.permissions import Permissions
from subagents.tools.processes import ProcessGroups
from subagents.tools.workspace import Workspace

log = structlog.get_logger("subagents.runtime")

RunResult = Outcome
"""What a finished run gives its caller: status, result or error, usage, steps."""

AgentLike = AgentSpec | FunctionAgent | Callable[..., Any]


class RuntimeClosed(RuntimeError):
    """The runtime was closed; it starts nothing more."""


class _Waiter:
    """Where a root run's outcome lands, exactly once."""

    __slots__ = ("event", "outcome", "refused")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.outcome: Outcome | None = None
        self.refused: str | None = None
        """Why the run was not admitted (``run`` hears it here instead of from an ask)."""

    def refuse(self, reason: str) -> None:
        self.refused = reason
        self.event.set()


class RunHandle:
    """A root run started with ``Runtime.spawn``: its id, status, result, stop and mail."""

    def __init__(self, runtime: Runtime, run_id: str, waiter: _Waiter) -> None:
        self._rt = runtime
        self.run_id = run_id
        self._waiter = waiter

    @property
    def status(self) -> RunStatus:
        record = self._rt.store.get_run(self.run_id)
        return record.status if record is not None else RunStatus.QUEUED

    @property
    def done(self) -> bool:
        return self._waiter.event.is_set()

    def result(self, timeout: float | None = None) -> Outcome:
        """Wait for the outcome; ``TimeoutError`` if it is not in within ``timeout`` seconds."""
        if not self._waiter.event.wait(timeout):
            raise TimeoutError(f"run {self.run_id} did not finish within {timeout} s")
        if self._waiter.refused is not None:
            raise AdmissionError(self._waiter.refused)
        assert self._waiter.outcome is not None
        return self._waiter.outcome

    def stop(self) -> tuple[str, ...]:
        """Stop this run and its subtree; the ids stopped."""
        return self._rt.stop(self.run_id)

    def send(self, text: str) -> str:
        """Mail this run from the outside; the mail id."""
        return self._rt.send(self.run_id, text)

    def __repr__(self) -> str:
        return f"RunHandle({self.run_id!r}, status={self.status!s})"


class Runtime:
    """Agents, a model, limits and a store, run under one supervisor."""

    def __init__(
        self,
        agents: Iterable[AgentLike] | Mapping[str, AgentLike] | None = None,
        *,
        model: Model | Callable[[list[AgentSpec]], Model] | None = None,
        limits: Limits | Mapping[str, Any] | None = None,
        store: RunStore | None = None,
        tools: Iterable[Tool | Callable[..., Any]] = (),
        agent_dirs: Sequence[str | Path] = (),
        discover: bool = False,
        skills: SkillIndex | Sequence[str | Path] | None = None,
        default_model: str | None = None,
        hot_reload_s: float | None = None,
        restore: bool | Iterable[str] = True,
        command_poll_s: float = 0.5,
        archive_after_minutes: float = 60.0,
        retention_days: float | None = None,
        sweep_every_s: float = 60.0,
        workspace: str | os.PathLike[str] | None = None,
        permissions: Permissions | str | None = None,
        approve: ApprovalHandler | None = None,
        ask_parent: bool = False,
        approval_wait_s: float = 300.0,
        allow_hooks: bool = False,
        builtin_tools: bool = True,
        lease_s: float | None = None,
        tracer_provider: Any = None,
        strict: bool = False,
        mcp_servers: Mapping[str, Any] | None = None,
    ) -> None:
        """``strict``: a definition naming a tool this runtime does not have is an error (the
        runtime does not start) rather than a warning."""
        ensure_configured()
        self.lease_s = lease_seconds(lease_s)  # before anything starts: a bad value starts none
        self.owner = new_owner()
        """The id stamped on the runs this runtime hosts; its lease in the store says it is
        alive (``store.leases``), renewed every ``lease_s / 3`` seconds."""
        self._lease: LeaseKeeper | None = None
        self._telemetry: Telemetry | None = None
        self.limits = limits_of(limits)
        _check_seconds(
            hot_reload_s=hot_reload_s,
            command_poll_s=command_poll_s,
            archive_after_minutes=archive_after_minutes,
            retention_days=retention_days,
            sweep_every_s=sweep_every_s,
        )
        self._closed = False
        self._owns_store = store is None
        self.store: RunStore = store if store is not None else MemoryStore()
        self._functions: dict[str, Callable[..., Any]] = {}
        self._prompts: dict[tuple[str, str, tuple[str, ...]], str] = {}
        self.strict = strict
        # Claude Code's built-in tools, then the user's (a user tool of the same name
        # replaces the built-in one); known before any definition is checked against them
        self.tools = {**(builtin_tools_by_name() if builtin_tools else {}), **as_tools(tools)}
        self.tool_names = runtime_tool_names(self.tools)
        """Every tool this runtime has, by name: what definitions' ``tools`` are checked
        against (with Claude Code's names and MCP's ``mcp__`` prefix)."""
        specs = self._collect(agents)
        # Every thread this runtime starts, joined on close. Weak: an ended thread drops out
        # by itself, so tracking stays O(1) per run (a scan of every thread ever started made
        # each spawn O(n): 10,000 spawns took minutes).
        self._threads: weakref.WeakSet[threading.Thread] = weakref.WeakSet()
        self._threads_lock = threading.Lock()
        self._supervisor_thread: threading.Thread | None = None
        self.timer = TimerService()
        # Agent actors run their loops on pooled threads (actors/threads.py); the pool joins
        # its threads on close.
        self._pool = ThreadPool()
        try:
            catalog = self._catalog(specs, agent_dirs, discover)
            self._report_issues(catalog.issues())
            self.registry = RegistryClient(
                RegistryActor.start(catalog, timer=self.timer, on_thread=self._track_thread)
            )
            self._specs: dict[str, AgentSpec] = {s.name: s for s in self.registry.list()}
            self._specs_stale = False
            self.registry.subscribe(self._mark_stale)
            if hot_reload_s:
                self.registry.start_hot_reload(hot_reload_s)
            self.model = _model_for(model, list(self._specs.values()))
            self.workspace = Workspace(workspace if workspace is not None else os.getcwd())
            self.permissions = Permissions.coerce(permissions)
            if approve is not None and not callable(approve):
                raise TypeError(f"approve must be a callable, got {approve!r}")
            self.processes = ProcessGroups()
            # MCP servers start when a run first needs them; worktrees when a run with
            # `isolation: worktree` starts (docs/tools.md)
            self.mcp = McpHub.from_config(
                mcp_servers,
                discover=discover,
                cwd=self.workspace.root,
                start_timeout=mcp_start_timeout(),
            )
            self.worktrees = Worktrees(self.workspace.root)
            self.allow_hooks = bool(allow_hooks)
            self._warn_hooks(self._specs.values())
            self.skills = _skill_index(skills, discover)
            self._subscribers: tuple[Callable[[Event], None], ...] = ()
            self._waiters: dict[str, _Waiter] = {}
            self._waiters_lock = threading.Lock()
            self._telemetry = _telemetry_for(tracer_provider, self.store)
            if self._telemetry is not None:
                self._subscribers = (self._telemetry.on_event,)
            self.env = AgentEnv(
                model=self.model,
                agents=lambda: list(self._agents().values()),
                tools=self.tools,
                skills=self.skills,
                system_prompt=self._system_prompt,
                spawn_rules=SpawnRules(self.limits),
                max_turns=self.limits.max_turns,
                workspace=self.workspace,
                permissions=self.permissions,
                approve=approve,
                ask_parent=bool(ask_parent),
                approval_wait_s=_positive(approval_wait_s, "approval_wait_s"),
                processes=self.processes,
                allow_hooks=self.allow_hooks,
                tracer=self._telemetry,
                mcp=self.mcp,
                worktrees=self.worktrees,
            )
            self.core = SupervisorCore(
                lookup=lambda name: self._agents().get(name),
                names=lambda: list(self._agents()),
                store=self.store,
                limits=self.limits,
                default_model=default_model or os.environ.get("SUBAGENTS_MODEL", "sonnet"),
                owner=self.owner,
            )
            self._supervisor = SupervisorClient.start(
                core=self.core,
                timer=self.timer,
                behaviour_for=self._behaviour_for,
                on_root_outcome=self._root_outcome,
                on_event=self._publish,
                on_thread=self._track_supervisor_thread,
                pool=self._pool,
            )
            supervisor = self._supervisor
            # the lease is written before the restore: a process that takes runs over is
            # seen alive by the next one that looks
            self._lease = LeaseKeeper(
                self.store,
                self.owner,
                self.lease_s,
                on_lost=lambda reason: supervisor.tell(LeaseLost(reason)),
            )
            self.restore_report = RestoreReport()
            if restore:
                roots = (
                    None
                    if restore is True
                    else frozenset([restore] if isinstance(restore, str) else restore)
                )
                self.restore_report = self._ask(Restore(roots=roots))
                if self.restore_report.orphans:
                    log.info(
                        "restored root runs have no caller; use Runtime.attach(run_id)",
                        orphans=self.restore_report.orphans,
                    )
            self._command_poll_s = command_poll_s
            if command_poll_s > 0:
                self._poll_commands()
            self._sweep = Sweep(archive_after_minutes, retention_days)
            if sweep_every_s > 0:
                self._schedule_sweep(sweep_every_s)
        except BaseException:
            self._abandon()  # a bad argument must not leave threads behind
            raise

    # ---- setup -------------------------------------------------------------------------------

    def _abandon(self) -> None:
        """Undo a construction that failed half way: stop whatever was started."""
        self._closed = True
        supervisor = getattr(self, "_supervisor", None)
        if supervisor is not None:
            supervisor.close(timeout=5.0)
        registry = getattr(self, "registry", None)
        if registry is not None:
            with contextlib.suppress(Exception):
                registry.stop()
        self.timer.stop()
        self._pool.close(timeout=5.0)
        processes = getattr(self, "processes", None)
        if processes is not None:
            processes.kill_all()
        if self._lease is not None:
            self._lease.close()
        if self._telemetry is not None:
            with contextlib.suppress(Exception):
                self._telemetry.close()
        self._close_tools(5.0)
        if self._owns_store:
            self.store.close()

    def _collect(
        self, agents: Iterable[AgentLike] | Mapping[str, AgentLike] | None
    ) -> list[AgentSpec]:
        items: list[tuple[str | None, AgentLike]]
        if agents is None:
            items = []
        elif isinstance(agents, Mapping):
            items = list(agents.items())
        else:
            items = [(None, a) for a in agents]
        specs: list[AgentSpec] = []
        for name, item in items:
            if isinstance(item, AgentSpec):
                specs.append(item)
            elif isinstance(item, FunctionAgent):
                specs.append(item.spec)
                self._functions[item.spec.name] = item.fn
            elif callable(item):
                agent = FunctionAgent.create(name or item.__name__, item)
                specs.append(agent.spec)
                self._functions[agent.spec.name] = agent.fn
            else:
                raise TypeError(
                    f"agent {name or item!r}: expected an AgentSpec, a FunctionAgent or a"
                    f" callable, got {type(item).__name__}"
                )
        seen: dict[str, AgentLike] = {}
        for (_, item), spec in zip(items, specs, strict=True):
            # the same rules as for definition files
            problem = name_problem(spec.name) if isinstance(spec.name, str) else "not text"
            if problem is not None:
                raise ValueError(f"agent name {spec.name!r} cannot be used: {problem}")
            if spec.name in seen:
                raise ValueError(
                    f"two agents are named {spec.name!r}: {_described(seen[spec.name])} and"
                    f" {_described(item)}; give each its own name"
                )
            seen[spec.name] = item
            known = known_tools(self.tool_names)
            for finding in check(spec, known_tools=known, strict=self.strict):
                if finding.issue.severity == "error":
                    raise DefinitionError(f"agent {spec.name!r}: {finding.issue.reason}")
                if finding.field is not None:  # not "no prompt": a function agent needs none
                    log.warning("agent definition", agent=spec.name, problem=finding.issue.reason)
        return specs

    def _catalog(
        self, specs: list[AgentSpec], agent_dirs: Sequence[str | Path], discover: bool
    ) -> Catalog:
        if not agent_dirs and not discover:
            return Catalog.from_specs(specs)
        from subagents.definitions.discovery import DefinitionLoader, Source, default_sources
        from subagents.definitions.spec import Level

        if discover:
            sources = default_sources(dirs=[Path(d) for d in agent_dirs])
        else:
            sources = [Source(path=str(Path(d)), level=Level.DIRS) for d in agent_dirs]
        loader = DefinitionLoader(
            sources, known_tools=known_tools(self.tool_names), strict=self.strict
        )
        return Catalog(loader, specs=specs)

    def _report_issues(self, issues: Sequence[LoadIssue]) -> None:
        """Say what is wrong with the definition files (a file with an error is not loaded);
        in strict mode, refuse to start on any error."""
        errors = [i for i in issues if i.severity == "error"]
        for issue in issues:
            say = log.warning if issue.severity == "error" else log.info
            say("agent definition problem", problem=str(issue))
        if self.strict and errors:
            listing = "; ".join(str(i) for i in errors[:5])
            more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
            raise DefinitionError(
                f"{len(errors)} error(s) in the agent definitions (strict): {listing}{more}"
            )

    def _warn_hooks(self, specs: Iterable[AgentSpec]) -> None:
        """Hooks are shell commands from files: without ``allow_hooks=True`` they do not run,
        and the runtime says so once, naming the definitions that have some."""
        with_hooks = sorted(s.name for s in specs if s.hooks)
        if not with_hooks:
            return
        if not self.allow_hooks:
            log.warning(
                "hooks ignored: create the Runtime with allow_hooks=True to run them",
                agents=with_hooks,
            )
            return
        for spec in specs:
            if spec.hooks:
                try:
                    ignored = Hooks.parse(spec.hooks, f"agent {spec.name!r}").ignored
                except HookConfigError as exc:
                    log.warning("hooks not usable: the agent's runs will fail", reason=str(exc))
                    continue
                if ignored:
                    log.warning(
                        "hook events not supported here are ignored",
                        agent=spec.name,
                        events=list(ignored),
                    )

    def _system_prompt(self, spec: AgentSpec) -> str:
        """The definition's prompt with its ``skills`` preloaded (unknown ones logged once)."""
        if self.skills is None or not spec.skills:
            return spec.prompt
        key = (spec.name, spec.prompt, spec.skills)
        cached = self._prompts.get(key)
        if cached is None:
            cached, issues = preload_skills(spec, self.skills)
            for issue in issues:
                log.warning("skill not preloaded", agent=spec.name, reason=issue.reason)
            self._prompts[key] = cached
        return cached

    def _mark_stale(self, _changes: Any) -> None:
        self._specs_stale = True

    def _agents(self) -> dict[str, AgentSpec]:
        """The current definitions (re-read from the registry after it changed)."""
        if self._specs_stale:
            self._specs_stale = False
            self._specs = {s.name: s for s in self.registry.list()}
        return self._specs

    def _track_supervisor_thread(self, thread: threading.Thread) -> None:
        self._supervisor_thread = thread
        self._track_thread(thread)

    def _track_thread(self, thread: threading.Thread) -> None:
        with self._threads_lock:
            self._threads.add(thread)

    def _behaviour_for(self, spec: AgentSpec) -> BehaviourFactory:
        fn = self._functions.get(spec.name)
        if fn is not None:

            def function_factory(port: AgentPort) -> FunctionBehaviour:
                return FunctionBehaviour(fn, port)

            return function_factory

        env = self.env

        def llm_factory(port: AgentPort) -> LLMBehaviour:
            return LLMBehaviour(env, port)

        return llm_factory

    def _poll_commands(self) -> None:
        """Every ``command_poll_s``, let the supervisor take commands posted by other processes
        (``subagents stop`` / ``send`` write them to the store)."""
        supervisor = self._supervisor

        def tick() -> None:
            if supervisor.tell(PollCommands()):
                self._poll_commands()

        self.timer.schedule_in(("commands", id(self)), self._command_poll_s, tick)

    def _schedule_sweep(self, every_s: float) -> None:
        """The sweeper: archive finished runs after ``archive_after_minutes`` (on the
        supervisor's thread, the store's one writer), every ``every_s`` seconds."""
        supervisor, sweep = self._supervisor, self._sweep

        def tick() -> None:
            if supervisor.tell(sweep):
                self._schedule_sweep(every_s)

        self.timer.schedule_in(("sweep", id(self)), every_s, tick)

    def sweep(self) -> Any:
        """Run the sweeper now; the store's report (None for a store that keeps nothing)."""
        return self._ask(self._sweep)

    # ---- events ------------------------------------------------------------------------------

    def subscribe(self, callback: Callable[[Event], None]) -> Callable[[], None]:
        """Call ``callback(event)`` for every event (on the supervisor's thread: keep it quick).

        Returns a function that unsubscribes. A callback that raises is logged and skipped.
        """
        self._subscribers = (*self._subscribers, callback)

        def unsubscribe() -> None:
            self._subscribers = tuple(c for c in self._subscribers if c is not callback)

        return unsubscribe

    def _publish(self, event: Event) -> None:
        if debug_enabled():  # checked first: a filtered-out debug call still costs ~5 us
            log.debug(
                str(event.kind),
                run_id=event.run_id,
                parent_run_id=event.parent_run_id,
                root_run_id=event.root_run_id,
                agent=event.agent,
                depth=event.depth,
                **{k: v for k, v in event.data.items() if k not in ("input",)},
            )
        for callback in self._subscribers:
            try:
                callback(event)
            except Exception:
                log.exception("event subscriber failed", subscriber=repr(callback))

    def _root_outcome(self, outcome: Outcome) -> None:
        with self._waiters_lock:
            waiter = self._waiters.pop(outcome.run_id, None)
        if waiter is not None and waiter.outcome is None:
            waiter.outcome = outcome
            waiter.event.set()

    # ---- running -----------------------------------------------------------------------------

    def spawn(
        self,
        agent: str,
        task: str,
        *,
        context: str | None = None,
        model: str | None = None,
        timeout: float | None = None,
        token_budget: int | None = None,
        label: str | None = None,
        cost_budget_usd: float | None = None,
        on_failure: Literal["report", "retry", "fail_parent"] | None = None,
        max_retries: int | None = None,
        shared: Mapping[str, Any] | None = None,
        cleanup: Literal["keep", "delete"] | None = None,
    ) -> RunHandle:
        """Start a root run; ``AdmissionError`` if refused (unknown agent, queue full, a bad
        request: the rules of ``supervision.requests``).

        ``token_budget``/``cost_budget_usd`` bound the run and everything under it;
        ``on_failure="retry"`` runs it again (up to ``max_retries``) if it fails; ``shared``
        is the shared context its children can be handed (docs/supervision.md); ``cleanup``
        (``keep``/``delete``) is what the sweeper does with the tree once archived (its
        children follow it unless their definition says otherwise; docs/store.md).
        """
        request = _root_request(
            agent,
            task,
            context=context,
            model=model,
            timeout=timeout,
            token_budget=token_budget,
            label=label,
            cost_budget_usd=cost_budget_usd,
            on_failure=on_failure,
            max_retries=max_retries,
            shared=shared,
            cleanup=cleanup,
        )
        run_id, waiter, request = self._root(request)
        try:
            reply: SpawnReply = self._ask(request)
        except BaseException:  # closed, timed out, the store failed: nothing will land
            self._forget_waiter(run_id)
            raise
        if reply.error is not None:
            self._forget_waiter(run_id)
            raise AdmissionError(reply.error)
        return RunHandle(self, run_id, waiter)

    def _root(self, request: SpawnRequest) -> tuple[str, _Waiter, SpawnRequest]:
        """A root run's id, the waiter its outcome will land in, and its request."""
        self._check_open()
        self._check_caller()  # before the waiter is registered: a refused caller leaves none
        if not isinstance(request.task, str):
            raise TypeError(f"task must be a string, got {type(request.task).__name__}")
        problem = request_problem(request, self.limits)  # the supervisor's rules, at once
        if problem is not None:
            raise AdmissionError(problem)
        run_id = new_id("r")
        waiter = _Waiter()
        with self._waiters_lock:
            self._waiters[run_id] = waiter
        return run_id, waiter, msgspec.structs.replace(request, request_id=run_id, run_id=run_id)

    def _forget_waiter(self, run_id: str) -> None:
        with self._waiters_lock:
            self._waiters.pop(run_id, None)

    def run(self, agent: str, task: str, *, wait: float | None = None, **overrides: Any) -> Outcome:
        """Run ``agent`` on ``task`` and wait for its outcome (blocking).

        ``overrides`` are ``spawn``'s keywords; ``AdmissionError`` if the run is refused."""
        unknown = sorted(set(overrides) - _ROOT_FIELDS)
        if unknown:
            raise TypeError(f"run() got unexpected keyword arguments: {', '.join(unknown)}")
        request = _root_request(agent, task, **overrides)
        run_id, waiter, request = self._root(request)  # refuses a bad request at once
        budget = wait
        if budget is None:
            spec = self._agents().get(agent)
            budget = self.limits.timeout_for(request.timeout, spec.timeout if spec else None) + 30.0
        # Told, not asked: the supervisor's answer to the spawn is not waited for (a thread
        # hand-off and a future less per run); a refusal reaches the waiter instead.
        if not self._supervisor.tell(SpawnAndTell(request, waiter.refuse)):
            self._forget_waiter(run_id)
            raise RuntimeClosed("the runtime is closed")
        try:
            return RunHandle(self, run_id, waiter).result(timeout=budget)
        except AdmissionError:
            self._forget_waiter(run_id)
            raise

    def attach(self, run_id: str) -> RunHandle:
        """A handle on a root run this caller did not start (e.g. one restored after a crash).

        ``LookupError`` for an unknown run or one that is not a root.
        """
        self._check_open()
        record = self.store.get_run(run_id)
        if record is None:
            raise LookupError(f"no run with id {run_id!r}")
        if record.parent_run_id is not None:
            raise LookupError(
                f"run {run_id} is a child of {record.parent_run_id}; its outcome goes to its"
                f" parent: attach to its root {record.root_run_id} instead"
            )
        waiters, lock, store = self._waiters, self._waiters_lock, self.store

        def register(_core: SupervisorCore) -> _Waiter:
            # On the supervisor's thread: no outcome can be delivered between check and set.
            with lock:
                existing = waiters.get(run_id)
                if existing is not None:
                    return existing
                waiter = _Waiter()
                current = store.get_run(run_id)
                if current is not None and current.status.terminal:
                    waiter.outcome = current.outcome or Outcome(
                        run_id=run_id, status=current.status
                    )
                    waiter.event.set()
                else:
                    waiters[run_id] = waiter
                return waiter

        waiter: _Waiter = self._ask(Query(register))
        return RunHandle(self, run_id, waiter)

    def stop(self, run_id: str) -> tuple[str, ...]:
        """Stop a run and its subtree (deepest first); the ids stopped."""
        self._check_open()
        reply: StopReply = self._ask(StopRequest(request_id=new_id("x"), run_id=run_id))
        if reply.error is not None:
            raise LookupError(reply.error)
        return reply.stopped

    def send(self, run_id: str, text: str, *, reply_to: str | None = None) -> str:
        """Mail a run from the outside; the mail id. ``LookupError`` for a dead or unknown run."""
        self._check_open()
        ack: MailAck = self._ask(
            SendMail(
                request_id=new_id("q"),
                sender=EXTERNAL_SENDER,
                to=run_id,
                content=text,
                reply_to=reply_to,
            )
        )
        if ack.error is not None:
            raise LookupError(ack.error)
        assert ack.mail_id is not None
        return ack.mail_id

    # ---- views -------------------------------------------------------------------------------

    def runs(
        self,
        *,
        status: RunStatus | Iterable[RunStatus] | None = None,
        root_run_id: str | None = None,
        agent: str | None = None,
    ) -> list[RunRecord]:
        statuses = [status] if isinstance(status, RunStatus) else status
        return self.store.list_runs(statuses=statuses, root_run_id=root_run_id, agent=agent)

    def get(self, run_id: str) -> RunRecord | None:
        return self.store.get_run(run_id)

    def tree(self, run_id: str) -> TreeNode:
        """The execution tree under ``run_id``: status, steps and usage per node."""
        record = self.store.get_run(run_id)
        if record is None:
            raise LookupError(f"no run with id {run_id!r}")
        return tree_view(record, self.store.list_runs(root_run_id=record.root_run_id))

    def totals(self, run_id: str) -> Totals:
        """Tokens, cost, steps, runs, restarts and statuses of ``run_id``'s whole subtree."""
        record = self.store.get_run(run_id)
        if record is None:
            raise LookupError(f"no run with id {run_id!r}")
        return subtree_totals(run_id, self.store.list_runs(root_run_id=record.root_run_id))

    def fan_out(
        self,
        jobs: Sequence[tuple[str, str]],
        *,
        strategy: str = "vote",
        threshold: float = 0.5,
        scorer: Callable[[Any], float] | None = None,
        weights: Mapping[str, float] | None = None,
        wait: float | None = None,
        **spawn_options: Any,
    ) -> Synthesis:
        """Run ``(agent, task)`` jobs and combine their results by ``strategy`` (merge, vote,
        consensus, best_pick, weighted_average, chain, or collect: the values in job order);
        conflicts and failures are reported in the Synthesis. See ``subagents.fanout`` and
        docs/supervision.md."""
        from subagents.fanout import fan_out

        return fan_out(
            self,
            jobs,
            strategy=strategy,
            threshold=threshold,
            scorer=scorer,
            weights=weights,
            wait=wait,
            **spawn_options,
        )

    def agents(self) -> list[AgentSpec]:
        return sorted(self._agents().values(), key=lambda s: s.name)

    def inspect(self, fn: Callable[[SupervisorCore], Any]) -> Any:
        """Run ``fn(core)`` on the supervisor's thread (for tests and tools)."""
        return self._ask(Query(fn))

    # ---- lifecycle ---------------------------------------------------------------------------

    def _ask(self, message: Any) -> Any:
        self._check_caller()
        try:
            return self._supervisor.ask(message, timeout=30)
        except ActorGone:
            raise RuntimeClosed("the runtime is closed") from None

    def _check_caller(self) -> None:
        if threading.current_thread() is self._supervisor_thread:
            raise RuntimeError(
                "Runtime methods cannot be called from an event subscriber: subscribers run on"
                " the supervisor's thread, which would wait on itself; hand the work to another"
                " thread (a queue, an executor)"
            )

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeClosed("the runtime is closed")

    def close(self, timeout: float = 10.0) -> None:
        """Stop every run (cancelled) and every thread this runtime started."""
        if self._closed:
            return
        self._closed = True
        deadline = time.monotonic() + timeout
        self._supervisor.close(timeout)
        with contextlib.suppress(Exception):
            self.registry.stop()
        self.timer.stop()
        self._pool.close(max(0.0, deadline - time.monotonic()))
        self.processes.kill_all()  # whatever a run's tools left running ends with the runtime
        self._close_tools(max(0.5, deadline - time.monotonic()))
        with self._threads_lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        with self._waiters_lock:
            waiters, self._waiters = self._waiters, {}
        for run_id, waiter in waiters.items():
            if waiter.outcome is None:
                waiter.outcome = Outcome(
                    run_id=run_id,
                    status=RunStatus.CANCELLED,
                    error_kind="cancelled",
                    error="runtime closed",
                )
                waiter.event.set()
        if self._lease is not None:  # after every run was cancelled: nothing left to host
            self._lease.close(max(0.0, deadline - time.monotonic()))
        if self._telemetry is not None:  # every run span has ended: flush them
            try:
                self._telemetry.close()
            except Exception:
                log.exception("closing the tracer provider failed")
        if self._owns_store:
            self.store.close()

    def _close_tools(self, timeout: float) -> None:
        """Worktrees of runs that did not end (removed if unchanged, else kept and logged),
        then every MCP server process and the MCP event loop thread."""
        worktrees = getattr(self, "worktrees", None)
        if worktrees is not None:
            for report in worktrees.close():
                if report.kept:
                    log.warning("worktree kept at close", **report.as_dict())
        hub = getattr(self, "mcp", None)
        if hub is not None:
            hub.close(timeout)

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _root_request(agent: str, task: str, **fields: Any) -> SpawnRequest:
    """The request of a root run from ``spawn``'s keywords (ids are set by ``_root``)."""
    if fields.get("shared") is not None:
        fields["shared"] = dict(fields["shared"])
    return SpawnRequest(request_id="", agent=agent, task=task, **fields)


_ROOT_FIELDS = frozenset(
    name
    for name, parameter in inspect.signature(Runtime.spawn).parameters.items()
    if parameter.kind is inspect.Parameter.KEYWORD_ONLY
)
"""The keywords ``spawn`` takes, and so ``run``: read from ``spawn``, never listed twice."""


def limits_of(limits: Limits | Mapping[str, Any] | None) -> Limits:
    """``limits`` as a ``Limits``: given one, a mapping of its fields, or None (defaults).
    ``LimitError`` names an unknown field (and lists the known ones) or a bad value."""
    if limits is None:
        return Limits()
    if isinstance(limits, Limits):
        return limits
    if isinstance(limits, Mapping):
        known = sorted(f.name for f in msgspec.structs.fields(Limits))
        unknown = sorted(str(k) for k in limits if k not in known)
        if unknown:
            raise LimitError(f"unknown limit(s) {', '.join(unknown)}; known: {', '.join(known)}")
        return Limits(**limits)
    raise TypeError(
        f"limits must be a Limits or a mapping of its fields, got {type(limits).__name__}"
    )


def _check_seconds(**values: float | None) -> None:
    """The runtime's periods: numbers >= 0 (NaN would switch a timer off silently)."""
    for name, value in values.items():
        if value is None:
            continue
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value < 0
        ):
            raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")


def _described(item: object) -> str:
    """An agent given in code, as an error naming two of them shows it."""
    if isinstance(item, FunctionAgent):
        return f"the function {getattr(item.fn, '__qualname__', item.fn)!r}"
    if isinstance(item, AgentSpec):
        return f"an AgentSpec ({item.source or 'in code'})"
    return f"the function {getattr(item, '__qualname__', item)!r}"


def _positive(value: float, name: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not value > 0
    ):
        raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
    return float(value)


def _model_for(
    model: Model | Callable[[list[AgentSpec]], Model] | None, specs: list[AgentSpec]
) -> Model:
    """The model to use. ``None``: Claude when ``ANTHROPIC_API_KEY`` is set, else the offline
    model playing the definitions' ``script:``. A callable is given the loaded definitions
    (``model=ScriptedModel.from_specs`` plays their scripts whatever the environment)."""
    if model is None:
        return default_model(specs)
    if isinstance(model, Model):
        return model
    return model(specs)


def _telemetry_for(tracer_provider: Any, store: RunStore) -> Telemetry | None:
    """Traces when asked for: ``tracer_provider`` given, or the OTEL_* environment opts in
    (``subagents.telemetry``); None (and OpenTelemetry never imported) otherwise."""
    if tracer_provider is not None:
        return Telemetry(tracer_provider, store)
    found = provider_from_env()
    if found is None:
        return None
    provider, owned = found
    return Telemetry(provider, store, owned=owned)


def _skill_index(
    skills: SkillIndex | Sequence[str | Path] | None, discover: bool
) -> SkillIndex | None:
    """Skills from an index, from folders, or (with ``discover``) the usual places."""
    if isinstance(skills, SkillIndex):
        return skills
    if skills is not None:
        return SkillIndex([Path(d) for d in skills])
    if discover:
        return SkillIndex(default_skill_dirs())
    return None


__all__ = [
    "AdmissionError",
    "AgentActor",
    "RunHandle",
    "RunResult",
    "Runtime",
    "RuntimeClosed",
    "limits_of",
    "runtime_tool_names",
]
