"""Runtime: the one object an embedding program holds.

    with Runtime(agents=[...], model=ScriptedModel(...)) as rt:
        outcome = rt.run("explore", "find the config loader")

It wires the pieces (timer service, registry actor, store, supervisor actor, model, tools) and
offers blocking and non-blocking entry points. Leaving the ``with`` block stops every run and
every thread the runtime started.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from pathlib import Path
from typing import Any, Literal, TypedDict, Unpack

from subagents.behaviour.tools import Tool, runtime_tool_names
from subagents.definitions.skills import SkillIndex
from subagents.definitions.spec import AgentSpec
from subagents.logs import ensure_configured, get_logger
from subagents.messages import (
    AgentTask,
    ApprovalRecord,
    Cleanup,
    Event,
    EventKind,
    Job,
    OnFailure,
    Outcome,
    PollCommands,
    RestoreReport,
    RunProgress,
    SpawnRequest,
    StopScope,
    SupervisorStats,
    Sweep,
)
from subagents.models.base import Model
from subagents.runtime._approvals import answer_approval
from subagents.runtime._assembly import (
    AgentLike,
    RuntimeArguments,
    agent_env,
    behaviours,
    catalog_for,
    checked_owner,
    collect_agents,
    limits_of,
    model_for,
    report_issues,
    skill_index,
    store_for,
    supervisor_core,
    telemetry_for,
    tools_for,
    warn_about_hooks,
)
from subagents.runtime._cluster_backend import ClusterBackend, ray_backend
from subagents.runtime._fan_out import Syntheses
from subagents.runtime._root_runs import RootRuns
from subagents.runtime._root_waiters import RootWaiters, Waiter
from subagents.runtime._run_endings import END_KINDS, Endings
from subagents.runtime._run_handle import RunHandle, landed
from subagents.runtime._run_reads import RunReads
from subagents.runtime._run_views import RunViews
from subagents.runtime._run_waits import RunWaits
from subagents.runtime._services import Definitions, Services, Subscribers
from subagents.runtime._store_reach import workspace_of
from subagents.runtime._supervisor_asks import RuntimeClosed, SupervisorRequests
from subagents.store.base import RunStore
from subagents.store.leases import lease_seconds, new_owner
from subagents.supervision.core import AdmissionError
from subagents.supervision.limits import Limits
from subagents.supervision.requests import option_type_problem, refuse_unkeepable_id
from subagents.supervision.synthesis import Synthesis
from subagents.tools.approval import ApprovalHandler
from subagents.tools.permissions import Permissions
from subagents.tools.sandbox import Sandbox
from subagents.tools.shell_limits import ShellLimits

log = get_logger("subagents.runtime")


class SpawnOptions(TypedDict, total=False):
    """``Runtime.spawn``'s keywords, each optional (None: as not given; docs/runtime.md).

    Why a TypedDict (``**options: Unpack[SpawnOptions]``) rather than ten keyword
    parameters: ``spawn`` makes the bare request when none is given (most spawns), and
    with parameters it could tell only by testing each one, a chain a new keyword had to
    be added to by hand; an empty ``options`` says it whatever the keywords are. A type
    checker still checks each keyword and its type at the call."""

    context: str | None
    model: str | None
    timeout: float | None
    token_budget: int | None
    label: str | None
    cost_budget_usd: float | None
    on_failure: OnFailure | None
    max_retries: int | None
    shared: Mapping[str, Any] | None
    cleanup: Cleanup | None


class Runtime(RunReads):
    """Agents, a model, limits and a store, run under one supervisor."""

    def __init__(
        self,
        agents: Iterable[AgentLike] | Mapping[str, AgentLike] | None = None,
        *,
        model: Model | Callable[[list[AgentSpec]], Model] | None = None,
        limits: Limits | Mapping[str, Any] | None = None,
        store: RunStore | str | os.PathLike[str] | None = None,
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
        approve: ApprovalHandler | Literal["store"] | None = None,
        ask_parent: bool = False,
        approval_wait_s: float = 300.0,
        allow_hooks: bool = False,
        builtin_tools: bool = True,
        lease_s: float | None = None,
        tracer_provider: Any = None,
        strict: bool = False,
        mcp_servers: Mapping[str, Any] | None = None,
        agent_threads: str = "shared",
        allow_mcp_commands: bool = False,
        sandbox: bool | Sandbox = True,
        tool_env: Iterable[str] | Mapping[str, str] | None = None,
        mcp_tool_timeout: float | None = None,
        cluster: str | None = None,
        owner: str | None = None,
    ) -> None:
        """``strict``: a definition naming a tool this runtime does not have is an error (the
        runtime does not start) rather than a warning. ``agent_threads``: ``"shared"``, the
        default (a waiting run holds no thread: a few dispatcher threads handle the messages of
        every run, and work that blocks is handed another thread at once) or ``"own"`` (each
        live run holds a thread; docs/architecture.md). ``cluster``: host the runs on a Ray
        cluster (``"auto"``, an address; default ``$SUBAGENTS_RAY_ADDRESS``, else none: this
        process): one node host per node runs their agents, this runtime's supervisor decides
        for all of them, and the store is the cluster's (served on the head node) unless
        ``store`` is given (docs/cluster.md). ``store``: a ``RunStore``, a ``postgresql://``
        URL or a SQLite file's path (opened here, closed with it; docs/store.md). ``owner``:
        the id on its runs and lease (default ``host:pid:nonce``; docs/store.md).
        ``sandbox``: tools' processes under Landlock (``False``: not; ``tools.sandbox.Sandbox``:
        the network per mode); ``tool_env``: variables they get beyond the allowlist (names,
        or ``{name: value}``; docs/tools.md). ``mcp_tool_timeout``: per call, docs/tools.md."""
        given = RuntimeArguments.of(locals())  # first: its locals are its arguments
        ensure_configured()
        backend: ClusterBackend = ray_backend()  # the one way to cluster/ (its protocol)
        address = backend.join(cluster)
        self.lease_s = lease_seconds(lease_s)  # before anything starts: a bad value starts none
        self.owner = new_owner() if owner is None else checked_owner(owner)
        """The id on the runs it hosts; its lease (``store.leases``) says it is alive."""
        self.limits = limits_of(limits)
        self.tools = tools_for(tools, builtin_tools)  # before any definition is checked
        self.store, self._owns_store, self._sandbox = store_for(given, self.tools, backend, address)
        self.strict = strict
        self.tool_names = runtime_tool_names(self.tools)
        """Every tool this runtime has, by name: what definitions' ``tools`` are checked
        against (with Claude Code's names and MCP's ``mcp__`` prefix)."""
        specs, self._functions = collect_agents(agents, self.tool_names, strict)
        self._wire_parts(agent_threads)
        try:
            self._start_services(given, specs)
            self._start_supervisor(given, backend, address)
        except BaseException:
            self.close(5.0)  # a bad argument must not leave threads (nor the store) behind
            raise

    def _wire_parts(self, agent_threads: str) -> None:
        """The runtime's own parts, no thread started yet: what ``close`` needs."""
        self._hosting = hosting = Services(agent_threads)
        self._requests = SupervisorRequests(hosting, self.limits, self.store)
        self.timer = hosting.timer
        self._roots = RootWaiters(self._requests.on_supervisor)
        self._events = Subscribers()
        self._endings = Endings()
        self._events.subscribe(self._endings.on_event, END_KINDS)  # (a run's end only)
        settle = self._roots.window.settle  # a read waits for the spawns told before it
        self._views = RunViews(self.store, self._requests.held, settle, self._owns_store)
        self._starts = RootRuns(self._roots, self._requests, self.limits, self.store, self._agents)
        self._waits = RunWaits(self._endings, self._views.get, settle, self._requests.check)
        self._syntheses = Syntheses(self.spawn, self._waits, self.store.get_run, self.limits)

    def _start_services(self, given: RuntimeArguments, specs: list[AgentSpec]) -> None:
        """The definitions' registry, the model, the tools' services and telemetry: what a
        run's behaviour is given (``self.env``)."""
        hosting = self._hosting
        catalog = catalog_for(specs, given.agent_dirs, given.discover, self.tool_names, self.strict)
        report_issues(catalog.issues(), self.strict)
        self.registry = hosting.start_registry(catalog, given.hot_reload_s)
        self._definitions = Definitions(self.registry)
        self.model = model_for(given.model, list(self._agents().values()))
        self.workspace = workspace_of(given.workspace, self.store)
        self.permissions = Permissions.coerce(given.permissions)
        self.processes, self.mcp, self.worktrees = hosting.start_tool_services(
            self.workspace.root,
            given.mcp_servers,
            given.discover,
            given.allow_mcp_commands,
            given.mcp_tool_timeout,
            ShellLimits(self.limits.background_shells_per_run(), self.limits.max_background_shells),
        )
        self.allow_hooks = bool(given.allow_hooks)
        warn_about_hooks(self._agents().values(), self.allow_hooks)
        self.skills = skill_index(given.skills, given.discover)
        hosting.telemetry = telemetry_for(given.tracer_provider, self.store)
        if hosting.telemetry is not None:
            self._events.subscribe(hosting.telemetry.on_event)
        self.env = agent_env(
            given,
            model=self.model,
            agents=lambda: list(self._agents().values()),
            tools=self.tools,
            skills=self.skills,
            limits=self.limits,
            workspace=self.workspace,
            permissions=self.permissions,
            processes=self.processes,
            allow_hooks=self.allow_hooks,
            tracer=hosting.telemetry,
            mcp=self.mcp,
            worktrees=self.worktrees,
            store=self.store,
            sandbox=self._sandbox,
        )
        self._starts.approvals_in_store = self.env.approvals_in_store

    def _start_supervisor(
        self, given: RuntimeArguments, backend: ClusterBackend, address: str | None
    ) -> None:
        """The supervisor (on a cluster, its node hosts), the lease, the restore, the polls."""
        hosting, wants = self._hosting, self._events.wants  # (wants: whom an event reaches)
        self.core = supervisor_core(
            given, self._agents, self.store, self.limits, self.owner, self.model, self._roots, wants
        )
        behaviour_for = behaviours(self._functions, self.env)
        if address is not None:  # the runs' agents live in the cluster's node hosts
            hosting.start_cluster(backend, self.owner, self._functions, self.env, self.store)
        self._supervisor = hosting.start_supervisor(
            self.core, self.store, behaviour_for, self._roots.told, self._events
        )
        # the lease is written before the restore: a process that takes runs over is
        # seen alive by the next one that looks
        hosting.keep_lease(self.store, self.owner, self.lease_s)
        self.restore_report = RestoreReport()
        if restore := given.restore:
            self.restore_report = self._requests.restore(None if restore is True else restore)
        self._sweep = Sweep(
            archive_after_minutes=given.archive_after_minutes, retention_days=given.retention_days
        )
        hosting.start_polls(id(self), given.command_poll_s, self._sweep, given.sweep_every_s)

    # ---- setup -------------------------------------------------------------------------------

    def _agents(self) -> dict[str, AgentSpec]:
        """The current definitions (re-read from the registry after it changed)."""
        return self._definitions.current()

    def sweep(self) -> Any:
        """Run the sweeper now; the store's report (None for a store that keeps nothing)."""
        return self._requests.ask(self._sweep)

    # ---- events ------------------------------------------------------------------------------

    def subscribe(
        self, callback: Callable[[Event], None], kinds: Set[EventKind] | None = None
    ) -> Callable[[], None]:
        """Call ``callback(event)`` for every event, or only those of ``kinds`` (on the
        supervisor's thread: keep it quick; a callback that takes only some kinds is not
        called for the rest, and events of kinds nobody takes may not be published at all);
        returns a function that unsubscribes. A callback that raises is logged and skipped."""
        return self._events.subscribe(callback, kinds)

    # ---- running -----------------------------------------------------------------------------

    def spawn(self, agent: str, task: str, **options: Unpack[SpawnOptions]) -> RunHandle:
        """Start a root run, not waiting for its admission: ``AdmissionError`` at once for an
        unknown agent or a bad request (``supervision.requests``); a refusal by the runtime's
        state (a full queue, a policy, the store) reaches the handle (docs/runtime.md).
        ``options`` (``SpawnOptions``): ``context``, ``model``, ``timeout``, ``label``;
        ``token_budget``/``cost_budget_usd`` bound the run and everything under it;
        ``on_failure="retry"`` runs it again (up to ``max_retries``) if it fails; ``shared``
        is the shared context its children can be handed (docs/supervision.md); ``cleanup``
        (``keep``/``delete``) is what the sweeper does with the tree once archived (its
        children follow it unless their definition says otherwise; docs/store.md)."""
        if not options:  # (most spawns: the bare request, nothing re-packed)
            return _handle(self, *self._starts.spawn(_root_request(agent, task)), agent)
        return _handle(self, *self._starts.spawn(_spawn_request(agent, task, options)), agent)

    def spawn_many(
        self, jobs: Iterable[Job], **options: Unpack[SpawnOptions]
    ) -> list[RunHandle | AdmissionError]:
        """Start many root runs (``Job``s; ``options``: ``spawn``'s keywords for all) in ONE
        supervisor decision and store commit. Per job, in order: its handle, or the
        ``AdmissionError`` naming it (nothing else refused; docs/runtime.md)."""
        return _handles(self, _job_requests(jobs, options))

    def run(
        self, agent: str, task: str, *, wait: float | None = None, **overrides: Unpack[SpawnOptions]
    ) -> Outcome:
        """Run ``agent`` on ``task`` and wait for its outcome (blocking).

        ``overrides`` are ``spawn``'s keywords; ``AdmissionError`` if the run is refused."""
        unknown = sorted(set(overrides) - _ROOT_FIELDS) if overrides else ()
        if unknown:
            raise TypeError(f"run() got unexpected keyword arguments: {', '.join(unknown)}")
        request = _root_request(agent, task, **overrides)
        run_id, waiter, budget = self._starts.tell(request, wait)
        try:  # (no handle made: nobody else sees it, and ``budget`` is checked already)
            return landed(run_id, waiter, budget, store=self.store)
        except AdmissionError:
            self._starts.forget(run_id)
            raise

    def attach(self, run_id: str) -> RunHandle:
        """A handle on a root run this caller did not start (e.g. one restored after a crash).

        ``LookupError`` for an unknown run or one that is not a root.
        """
        refuse_unkeepable_id(run_id)
        return _handle(self, run_id, *self._starts.attach(run_id))

    def continue_run(self, run_id: str, text: str, **overrides: Unpack[SpawnOptions]) -> RunHandle:
        """A new root run: the ended run's conversation, then ``text`` (docs/runtime.md)."""
        return _handle(self, *self._starts.admit(_continue_request(run_id, text, overrides)), None)

    def approvals(self, run_id: str | None = None) -> list[ApprovalRecord]:
        """The pending approvals in the store (of ``run_id``'s tree), in the order asked."""
        return self._views.approvals(run_id)

    def answer(self, approval_id: str, allow: bool, reason: str | None = None, *,
               remember: str | None = None) -> ApprovalRecord:  # fmt: skip
        """Answer a pending approval (docs/runtime.md, "Durable approvals")."""
        answered = answer_approval(self.store, approval_id, allow, reason, remember=remember)
        self._hosting.poll(PollCommands())  # the run hears it now if hosted here
        return answered

    def stop(self, run_id: str, *, scope: StopScope = "tree") -> tuple[str, ...]:
        """Stop a run and its subtree (deepest first); the ids stopped. ``scope="turn"``:
        the run (and the children that end with it), not its detached children, which go
        on (docs/runtime.md, "Children that outlive their parent")."""
        return self._requests.stop(run_id, scope)

    def stop_all(self, *, requester: str, reason: str = "stopped") -> tuple[str, ...]:
        """Stop every live run ``requester`` requested (a run id: its children; the
        ``EXTERNAL_SENDER`` "external": the root runs this runtime hosts), each with its
        subtree, all with ``reason``, in one decision: none of them starts or reports
        between two of the stops. The ids stopped (none when nothing it requested is live);
        ``LookupError`` for an unknown run, or one another runtime hosts."""
        return self._requests.stop_all(requester, reason)

    def wait_any(
        self, run_ids: Iterable[str | RunHandle], *, timeout: float | None = None
    ) -> Outcome:
        """The outcome of the first of ``run_ids`` to end: root runs and children alike, of
        this runtime or another one on the same store. A run that has already ended is
        returned at once (the first of them in the order given). ``TimeoutError`` when none
        ends within ``timeout`` seconds; ``LookupError`` for an unknown run."""
        return self._waits.wait_any(run_ids, timeout)

    def wait_all(
        self, run_ids: Iterable[str | RunHandle], *, timeout: float | None = None
    ) -> list[Outcome]:
        """The outcomes of ``run_ids``, in the order given, once every one has ended
        (children and roots alike). ``TimeoutError`` naming those still running after
        ``timeout`` seconds; ``LookupError`` for an unknown run."""
        return self._waits.wait_all(run_ids, timeout)

    def wait_ended(self, run_ids: Sequence[str], timeout: float | None) -> dict[str, Outcome]:
        """The outcomes of those of ``run_ids`` that ended within ``timeout`` seconds (all of
        them, as soon as they have), in the order they were found ended."""
        return self._waits.wait_ended(run_ids, timeout)

    def send(self, run_id: str, text: str, *, reply_to: str | None = None) -> str:
        """Mail a run from the outside; the mail id. ``LookupError`` for a dead or unknown run;
        ``TimeoutError``: not taken in 30 s, not sent (unless it says it may still be)."""
        return self._requests.send(run_id, text, reply_to)

    # ---- views -------------------------------------------------------------------------------

    def synthesize(
        self,
        run_ids: Iterable[str | RunHandle],
        strategy: str = "vote",
        *,
        threshold: float = 0.5,
        scorer: Callable[[Any], float] | None = None,
        weights: Mapping[str, float] | None = None,
        wait: float | None = None,
    ) -> Synthesis:
        """Combine the results of runs that already exist (started with ``spawn``, children
        of a run, runs of an earlier process) by ``strategy``, as ``fan_out`` does, once they
        have ended (up to ``wait`` seconds; default: the longest timeout a run may have). A
        run that did not complete, or had not ended, is in ``Synthesis.failed``.
        ``LookupError`` for an unknown run (docs/runtime.md)."""
        return self._syntheses.synthesize(run_ids, strategy, threshold, scorer, weights, wait)

    def fan_out(
        self,
        jobs: Sequence[AgentTask],
        *,
        strategy: str = "vote",
        threshold: float = 0.5,
        scorer: Callable[[Any], float] | None = None,
        weights: Mapping[str, float] | None = None,
        wait: float | None = None,
        **spawn_options: Unpack[SpawnOptions],
    ) -> Synthesis:
        """Run ``(agent, task)`` jobs and combine their results by ``strategy`` (merge, vote,
        consensus, best_pick, weighted_average, chain, or collect: the values in job order);
        conflicts and failures are reported in the Synthesis. See ``subagents.runtime._fan_out`` and
        docs/supervision.md. An unknown keyword is a ``TypeError`` before any job starts
        (each job's ``spawn`` would raise it as that job's refusal)."""
        unknown = sorted(set(spawn_options) - _ROOT_FIELDS)
        if unknown:
            raise TypeError(f"fan_out() got unexpected keyword arguments: {', '.join(unknown)}")
        return self._syntheses.fan_out(
            jobs, strategy, threshold, scorer, weights, wait, spawn_options
        )

    def agents(self) -> list[AgentSpec]:
        return sorted(self._agents().values(), key=lambda s: s.name)

    def status(self, run_id: str) -> RunProgress:
        """Where ``run_id`` is now, without waiting for it (any run of the store): status,
        steps, last tool call, usage, unread mail, what its model is writing (docs/runtime.md,
        "Live progress"). ``LookupError`` when there is no such run."""
        return self._requests.status(run_id)

    def stats(self, run_id: str | None = None) -> SupervisorStats:
        """The supervisor's counters (slots in use, their peak, the queue, live runs); with
        ``run_id``, also what its subtree has spent as its budget ledger counts it."""
        return self._requests.stats(run_id)

    # ---- lifecycle ---------------------------------------------------------------------------

    def placements(self) -> dict[str, list[str]]:
        """On a cluster: run id -> the Ray node ids its starts were placed on, in order
        (more than one: it was started again after its node's host was lost). Empty when
        the runs are hosted in this process."""
        cluster = self._hosting.cluster
        return cluster.placements() if cluster is not None else {}

    def close(self, timeout: float = 10.0) -> None:
        """Stop every run (cancelled) and every thread this runtime started. Not from an
        event subscriber (``RuntimeError``, as every call that waits on the supervisor):
        there it waited on its own thread, and the runtime was left open, marked closed."""
        self._requests.check_caller()
        if self._requests.closed:
            return
        self._requests.closed = True
        left = self._hosting.stop_threads(timeout)
        self._roots.cancel_all("runtime closed")
        self._hosting.release(left)  # after every run was cancelled: nothing left to host
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _handle(rt: Runtime, run_id: str, waiter: Waiter, agent: str | None) -> RunHandle:
    """A root run's handle: it shows its agent, and whether its spawn is decided yet."""
    return RunHandle(rt, run_id, waiter, agent=agent, window=rt._roots.window)


def _handles(
    rt: Runtime, requests: list[SpawnRequest | AdmissionError]
) -> list[RunHandle | AdmissionError]:
    """``spawn_many``'s answer: per request, in order, its handle or why it was refused."""
    admitted = zip(rt._starts.admit_many(requests), requests, strict=True)
    return [
        i if isinstance(i, AdmissionError) else _handle(rt, *i, getattr(r, "agent", None))
        for i, r in admitted
    ]


def _spawn_request(agent: str, task: str, options: Mapping[str, Any]) -> SpawnRequest:
    """``Runtime.spawn``'s request when a keyword is given (with none, ``spawn`` makes the
    bare request itself: ``_root_request(agent, task)``); ``TypeError`` naming a keyword
    that is none of ``SpawnOptions``' (the type checker's error, for an unchecked caller)."""
    unknown = sorted(set(options) - _ROOT_FIELDS)
    if unknown:
        raise TypeError(f"spawn() got unexpected keyword arguments: {', '.join(unknown)}")
    return _root_request(agent, task, **options)


def _root_request(agent: str, task: str, **fields: Any) -> SpawnRequest:
    """The request of a root run from ``spawn``'s keywords (ids are set by ``_root``); none
    given (most ``run`` calls, ``spawn_many`` jobs): none re-packed through ``**``."""
    if not fields:
        return SpawnRequest(request_id="", agent=agent, task=task)
    if fields.get("shared") is not None:
        if not isinstance(fields["shared"], Mapping):  # (``dict(5)`` named nothing)
            raise TypeError(f"shared must be a mapping, got {type(fields['shared']).__name__}")
        fields["shared"] = dict(fields["shared"])
    return SpawnRequest(request_id="", agent=agent, task=task, **fields)


def _continue_request(run_id: str, text: str, overrides: Mapping[str, Any]) -> SpawnRequest:
    """The request of ``continue_run``: no agent named (the continued run's is taken)."""
    if not isinstance(run_id, str) or not run_id:
        raise TypeError(f"run_id must be a run's id, got {run_id!r}")
    refuse_unkeepable_id(run_id)
    unknown = sorted(set(overrides) - _ROOT_FIELDS)
    if unknown:
        raise TypeError(f"continue_run() got unexpected keyword arguments: {', '.join(unknown)}")
    return _root_request("", text, continues=run_id, **overrides)


def _job_requests(
    jobs: Iterable[Any], options: Mapping[str, Any]
) -> list[SpawnRequest | AdmissionError]:
    """``spawn_many``'s jobs as requests; a job that is not one is its ``AdmissionError``."""
    unknown = sorted(set(options) - _ROOT_FIELDS)
    if unknown:
        raise TypeError(f"spawn_many() got unexpected keyword arguments: {', '.join(unknown)}")
    if not isinstance(jobs, Iterable):  # (``enumerate(5)`` named nothing)
        raise TypeError(f"spawn_many() takes an iterable of jobs, got {type(jobs).__name__}")
    requests: list[SpawnRequest | AdmissionError] = []
    for i, job in enumerate(jobs):
        try:
            requests.append(_job_request(job, options))
        except (TypeError, ValueError) as exc:
            requests.append(AdmissionError(f"job {i}: {exc}"))
    return requests


def _job_request(job: Any, options: Mapping[str, Any]) -> SpawnRequest:
    """The request of one ``spawn_many`` job: ``(agent, task)`` or ``(agent, task,
    keywords)``; ``TypeError``/``ValueError`` naming what is wrong with it."""
    if not options and type(job) is tuple and len(job) == 2:  # (most jobs: nothing to copy)
        agent, task = job
        if type(agent) is str and type(task) is str:  # (so no option of a wrong type)
            return SpawnRequest(request_id="", agent=agent, task=task)
    if not isinstance(job, tuple | list) or len(job) not in (2, 3):
        raise TypeError(
            f"a job is (agent, task) or (agent, task, {{keyword: value}}), got {job!r:.200}"
        )
    fields = dict(options)
    if len(job) == 3:
        own = job[2]
        if not isinstance(own, Mapping):
            raise TypeError(f"a job's keywords must be a mapping, got {type(own).__name__}")
        unknown = sorted(set(own) - _ROOT_FIELDS)
        if unknown:
            raise TypeError(f"unexpected keyword arguments: {', '.join(map(str, unknown))}")
        fields.update(own)
    request = _root_request(job[0], job[1], **fields)
    wrong = option_type_problem(request)  # (refused alone: ``spawn_many`` raises for none)
    if wrong is not None:
        raise TypeError(wrong)
    return request


_ROOT_FIELDS = SpawnOptions.__optional_keys__
"""The keywords ``spawn`` takes, and so ``run``: read from ``SpawnOptions``, never listed twice."""


__all__ = [
    "AdmissionError",
    "AgentLike",
    "RunHandle",
    "Runtime",
    "RuntimeClosed",
    "SpawnOptions",
    "limits_of",
    "runtime_tool_names",
]
