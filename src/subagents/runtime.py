"""Runtime: the one object an embedding program holds.

    with Runtime(agents=[...], model=ScriptedModel(...)) as rt:
        outcome = rt.run("explore", "find the config loader")

It wires the pieces (timer service, registry actor, store, supervisor actor, model, tools) and
offers blocking and non-blocking entry points. Leaving the ``with`` block stops every run and
every thread the runtime started.
"""

from __future__ import annotations

import inspect
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import msgspec

from subagents.actors.supervisor import ActorGone
from subagents.assembly import (
    AgentLike,
    agent_env,
    behaviours,
    catalog_for,
    check_seconds,
    collect_agents,
    limits_of,
    model_for,
    report_issues,
    skill_index,
    telemetry_for,
    warn_about_hooks,
)
from subagents.behaviour.tools import Tool, as_tools, runtime_tool_names
from subagents.definitions.skills import SkillIndex
from subagents.definitions.spec import AgentSpec
from subagents.endings import Endings
from subagents.hosting import Definitions, Hosting, Subscribers, cluster_store, join_cluster
from subagents.logs import ensure_configured, get_logger
from subagents.messages import (
    EXTERNAL_SENDER,
    Event,
    Inspect,
    MailAck,
    Outcome,
    PollCommands,
    Restore,
    RestoreReport,
    RunRecord,
    RunStatus,
    SendMail,
    SpawnReply,
    SpawnRequest,
    StopReply,
    StopRequest,
    StopRequested,
    SupervisorStats,
    Sweep,
    TreeNode,
    TreeRecords,
    TreeUsage,
    new_id,
)
from subagents.models.base import Model
from subagents.roots import RootWaiters, Waiter
from subagents.store.base import RunStore
from subagents.store.leases import lease_seconds, new_owner
from subagents.store.memory import MemoryStore
from subagents.supervision.core import AdmissionError, SupervisorCore
from subagents.supervision.limits import Limits
from subagents.supervision.requests import request_problem
from subagents.supervision.synthesis import Synthesis, check_strategy
from subagents.supervision.totals import Totals, subtree_totals
from subagents.supervision.tree import tree_view
from subagents.supervision.usage import tree_usage
from subagents.tools.approval import ApprovalHandler
from subagents.tools.builtin import builtin_tools as builtin_tools_by_name
from subagents.tools.permissions import Permissions
from subagents.tools.workspace import Workspace

log = get_logger("subagents.runtime")


class RuntimeClosed(RuntimeError):
    """The runtime was closed; it starts nothing more."""


class RunHandle:
    """A root run started with ``Runtime.spawn``: its id, status, result, stop and mail."""

    def __init__(self, runtime: Runtime, run_id: str, waiter: Waiter) -> None:
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

    def usage(self) -> TreeUsage:
        """What this run and its subtree have used so far (``Runtime.usage``)."""
        return self._rt.usage(self.run_id)

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
        agent_threads: str = "shared",
        allow_mcp_commands: bool = False,
        cluster: str | None = None,
    ) -> None:
        """``strict``: a definition naming a tool this runtime does not have is an error (the
        runtime does not start) rather than a warning. ``agent_threads``: ``"shared"`` (a waiting
        run holds no thread: a few dispatcher threads handle the messages of every run) or
        ``"own"`` (each live run holds a thread; docs/architecture.md).

        ``cluster``: host the runs on a Ray cluster (``"auto"``, an address; default
        ``$SUBAGENTS_RAY_ADDRESS``, else none: this process): one node host per node runs
        their agents, this runtime's supervisor decides for all of them, and the store is the
        cluster's (served on the head node) unless ``store`` is given (docs/cluster.md)."""
        ensure_configured()
        address = join_cluster(cluster)
        self.lease_s = lease_seconds(lease_s)  # before anything starts: a bad value starts none
        self.owner = new_owner()
        """The id stamped on the runs this runtime hosts; its lease in the store says it is
        alive (``store.leases``), renewed every ``lease_s / 3`` seconds."""
        self.limits = limits_of(limits)
        check_seconds(
            hot_reload_s=hot_reload_s,
            command_poll_s=command_poll_s,
            archive_after_minutes=archive_after_minutes,
            retention_days=retention_days,
            sweep_every_s=sweep_every_s,
        )
        self._closed = False
        self._owns_store = store is None
        if store is None and address is not None:
            store = cluster_store(address)  # the one every node and the CLI reach
        self.store: RunStore = store if store is not None else MemoryStore()
        self.strict = strict
        # Claude Code's built-in tools, then the user's (a user tool of the same name
        # replaces the built-in one); known before any definition is checked against them
        self.tools = {**(builtin_tools_by_name() if builtin_tools else {}), **as_tools(tools)}
        self.tool_names = runtime_tool_names(self.tools)
        """Every tool this runtime has, by name: what definitions' ``tools`` are checked
        against (with Claude Code's names and MCP's ``mcp__`` prefix)."""
        specs, self._functions = collect_agents(agents, self.tool_names, strict)
        self._hosting = hosting = Hosting(agent_threads)
        self.timer = hosting.timer
        self._roots = RootWaiters()
        self._events = Subscribers()
        self._endings = Endings()
        self._events.subscribe(self._endings.on_event)
        try:
            catalog = catalog_for(specs, agent_dirs, discover, self.tool_names, strict)
            report_issues(catalog.issues(), strict)
            self.registry = hosting.start_registry(catalog, hot_reload_s)
            self._definitions = Definitions(self.registry)
            self.model = model_for(model, list(self._agents().values()))
            self.workspace = Workspace(workspace if workspace is not None else os.getcwd())
            self.permissions = Permissions.coerce(permissions)
            self.processes, self.mcp, self.worktrees = hosting.start_tool_services(
                self.workspace.root, mcp_servers, discover, bool(allow_mcp_commands)
            )
            self.allow_hooks = bool(allow_hooks)
            warn_about_hooks(self._agents().values(), self.allow_hooks)
            self.skills = skill_index(skills, discover)
            hosting.telemetry = telemetry_for(tracer_provider, self.store)
            if hosting.telemetry is not None:
                self._events.subscribe(hosting.telemetry.on_event)
            self.env = agent_env(
                model=self.model,
                agents=lambda: list(self._agents().values()),
                tools=self.tools,
                skills=self.skills,
                limits=self.limits,
                workspace=self.workspace,
                permissions=self.permissions,
                approve=approve,
                ask_parent=ask_parent,
                approval_wait_s=approval_wait_s,
                processes=self.processes,
                allow_hooks=self.allow_hooks,
                tracer=hosting.telemetry,
                mcp=self.mcp,
                worktrees=self.worktrees,
            )
            self.core = SupervisorCore(
                lookup=lambda name: self._agents().get(name),
                names=lambda: list(self._agents()),
                read_run=self.store.get_run,
                limits=self.limits,
                default_model=default_model or os.environ.get("SUBAGENTS_MODEL", "sonnet"),
                owner=self.owner,
            )
            behaviour_for = behaviours(self._functions, self.env)
            if address is not None:  # the runs' agents live in the cluster's node hosts
                hosting.start_cluster(self.owner, self._functions, self.env)
            self._supervisor = hosting.start_supervisor(
                self.core, self.store, behaviour_for, self._roots.told, self._events.publish
            )
            # the lease is written before the restore: a process that takes runs over is
            # seen alive by the next one that looks
            hosting.keep_lease(self.store, self.owner, self.lease_s)
            self.restore_report = RestoreReport()
            if restore:
                self.restore_report = self._restore(restore)
            if command_poll_s > 0:  # other processes' stop/send commands, through the store
                hosting.every(("commands", id(self)), command_poll_s, PollCommands())
            self._sweep = Sweep(
                archive_after_minutes=archive_after_minutes, retention_days=retention_days
            )
            if sweep_every_s > 0:  # archive finished runs (on the supervisor, the one writer)
                hosting.every(("sweep", id(self)), sweep_every_s, self._sweep)
        except BaseException:
            self._abandon()  # a bad argument must not leave threads behind
            raise

    # ---- setup -------------------------------------------------------------------------------

    def _abandon(self) -> None:
        """Undo a construction that failed half way: stop whatever was started."""
        self._closed = True
        self._hosting.stop_threads(5.0)
        self._hosting.release(5.0)
        if self._owns_store:
            self.store.close()

    def _restore(self, restore: Literal[True] | Iterable[str]) -> RestoreReport:
        """Take up the orphaned runs of the store (``restore``: all, or these root trees)."""
        roots = (
            None
            if restore is True
            else frozenset([restore] if isinstance(restore, str) else restore)
        )
        report: RestoreReport = self._ask(Restore(roots=roots))
        if report.orphans:
            log.info(
                "restored root runs have no caller; use Runtime.attach(run_id)",
                orphans=report.orphans,
            )
        return report

    def _agents(self) -> dict[str, AgentSpec]:
        """The current definitions (re-read from the registry after it changed)."""
        return self._definitions.current()

    def sweep(self) -> Any:
        """Run the sweeper now; the store's report (None for a store that keeps nothing)."""
        return self._ask(self._sweep)

    # ---- events ------------------------------------------------------------------------------

    def subscribe(self, callback: Callable[[Event], None]) -> Callable[[], None]:
        """Call ``callback(event)`` for every event (on the supervisor's thread: keep it quick).

        Returns a function that unsubscribes. A callback that raises is logged and skipped.
        """
        return self._events.subscribe(callback)

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

    def _root(self, request: SpawnRequest) -> tuple[str, Waiter, SpawnRequest]:
        """A root run's id, the waiter its outcome will land in, and its request."""
        self._check_open()
        self._check_caller()  # before the waiter is registered: a refused caller leaves none
        if not isinstance(request.task, str):
            raise TypeError(f"task must be a string, got {type(request.task).__name__}")
        problem = request_problem(request, self.limits)  # the supervisor's rules, at once
        if problem is not None:
            raise AdmissionError(problem)
        run_id = new_id("r")
        waiter = self._roots.expect(run_id)
        return run_id, waiter, msgspec.structs.replace(request, request_id=run_id, run_id=run_id)

    def _forget_waiter(self, run_id: str) -> None:
        self._roots.forget(run_id)

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
        # Told, not asked: the admission is not waited for (the outcome is, anyway); a
        # refusal reaches the waiter as the supervisor's message to the outside.
        if not self._supervisor.tell(request):
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
        # The waiter is registered before the store is read: an outcome delivered after the
        # registration lands in it; one delivered before is already committed, so read here.
        waiter = self._roots.attach(run_id)
        current = self.store.get_run(run_id)
        if current is not None and current.status.terminal:
            self._roots.landed(current.outcome or Outcome(run_id=run_id, status=current.status))
        return RunHandle(self, run_id, waiter)

    def stop(self, run_id: str) -> tuple[str, ...]:
        """Stop a run and its subtree (deepest first); the ids stopped."""
        self._check_open()
        reply: StopReply = self._ask(StopRequest(request_id=new_id("x"), run_id=run_id))
        if reply.error is not None:
            raise LookupError(reply.error)
        return reply.stopped

    def stop_all(self, *, requester: str, reason: str = "stopped") -> tuple[str, ...]:
        """Stop every live run ``requester`` requested (a run id: its children; the
        ``EXTERNAL_SENDER`` "external": the root runs this runtime hosts), each with its
        subtree, all with ``reason``, in one decision: none of them starts or reports
        between two of the stops. The ids stopped (none when nothing it requested is live);
        ``LookupError`` for an unknown run, or one another runtime hosts."""
        self._check_open()
        if not isinstance(requester, str) or not requester:
            raise TypeError(f"requester must be a run id or {EXTERNAL_SENDER!r}, got {requester!r}")
        if not isinstance(reason, str):
            raise TypeError(f"reason must be a string, got {type(reason).__name__}")
        request = StopRequested(request_id=new_id("x"), requested_by=requester, reason=reason)
        reply: StopReply = self._ask(request)
        if reply.error is not None:
            raise LookupError(reply.error)
        return reply.stopped

    def wait_any(
        self, run_ids: Iterable[str | RunHandle], *, timeout: float | None = None
    ) -> Outcome:
        """The outcome of the first of ``run_ids`` to end: root runs and children alike, of
        this runtime or another one on the same store. A run that has already ended is
        returned at once (the first of them in the order given). ``TimeoutError`` when none
        ends within ``timeout`` seconds; ``LookupError`` for an unknown run."""
        ids = self._run_ids(run_ids, "wait_any")
        ended = self._endings.wait(ids, _timeout(timeout), self.store.get_run, every=False)
        if not ended:
            raise TimeoutError(f"none of {', '.join(ids)} ended within {timeout} s")
        return next(iter(ended.values()))

    def wait_all(
        self, run_ids: Iterable[str | RunHandle], *, timeout: float | None = None
    ) -> list[Outcome]:
        """The outcomes of ``run_ids``, in the order given, once every one has ended
        (children and roots alike). ``TimeoutError`` naming those still running after
        ``timeout`` seconds; ``LookupError`` for an unknown run."""
        ids = self._run_ids(run_ids, "wait_all")
        ended = self.wait_ended(ids, _timeout(timeout))
        missing = [r for r in ids if r not in ended]
        if missing:
            raise TimeoutError(f"{', '.join(missing)} did not end within {timeout} s")
        return [ended[r] for r in ids]

    def wait_ended(self, run_ids: Sequence[str], timeout: float | None) -> dict[str, Outcome]:
        """The outcomes of those of ``run_ids`` that ended within ``timeout`` seconds (all of
        them, as soon as they have), in the order they were found ended."""
        return self._endings.wait(run_ids, timeout, self.store.get_run, every=True)

    def _run_ids(self, run_ids: Iterable[str | RunHandle], call: str) -> list[str]:
        """The run ids a wait is given (ids or handles), checked, without duplicates, in
        order."""
        self._check_open()
        self._check_caller()
        if isinstance(run_ids, str | RunHandle):
            run_ids = [run_ids]
        ids = list(dict.fromkeys(r.run_id if isinstance(r, RunHandle) else r for r in run_ids))
        if not ids:
            raise ValueError(f"{call}() needs at least one run id")
        for run_id in ids:
            if not isinstance(run_id, str):
                raise TypeError(f"{call}(): run ids are strings, got {run_id!r}")
        return ids

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
        requester: str | None = None,
    ) -> list[RunRecord]:
        """Runs in creation order, filtered by status(es), tree, agent and ``requester``:
        a run id (the runs it spawned, its children) or ``EXTERNAL_SENDER`` "external" (the
        root runs). ``LookupError`` for a requester that is not a known run."""
        statuses = [status] if isinstance(status, RunStatus) else status
        if requester is None:
            return self.store.list_runs(statuses=statuses, root_run_id=root_run_id, agent=agent)
        if requester == EXTERNAL_SENDER:
            parent = None
        else:
            asking = self.store.get_run(requester)
            if asking is None:
                raise LookupError(f"no run with id {requester!r}")
            if root_run_id is not None and root_run_id != asking.root_run_id:
                return []
            root_run_id, parent = asking.root_run_id, requester
        found = self.store.list_runs(statuses=statuses, root_run_id=root_run_id, agent=agent)
        return [r for r in found if r.parent_run_id == parent]

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

    def usage(self, run_id: str) -> TreeUsage:
        """What ``run_id`` and every run under it have used so far, live or ended: tokens,
        cost, model calls, steps and tool calls, for the subtree and per run (``per_run``),
        and how many of its runs are still live. The supervisor's records (the freshest)
        are laid over the store's, so a live tree is seen as it is now."""
        self._check_open()
        held: tuple[RunRecord, ...] = self._ask(TreeRecords(run_id=run_id))
        record = self.store.get_run(run_id)
        if record is None and not held:
            raise LookupError(f"no run with id {run_id!r}")
        root = record.root_run_id if record is not None else held[0].root_run_id
        records = {r.run_id: r for r in self.store.list_runs(root_run_id=root)}
        records.update((r.run_id, r) for r in held)
        return tree_usage(run_id, records.values())

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
        from subagents.fanout import synthesize_runs

        check_strategy(strategy, scorer)
        return synthesize_runs(
            self,
            self._run_ids(run_ids, "synthesize"),
            strategy,
            threshold=threshold,
            scorer=scorer,
            weights=weights,
            wait=_timeout(wait),
        )

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

    def stats(self, run_id: str | None = None) -> SupervisorStats:
        """The supervisor's counters (slots in use, their peak, the queue, live runs); with
        ``run_id``, also what its subtree has spent as its budget ledger counts it."""
        self._check_open()
        stats: SupervisorStats = self._ask(Inspect(run_id=run_id))
        return stats

    # ---- lifecycle ---------------------------------------------------------------------------

    def _ask(self, message: Any) -> Any:
        self._check_caller()
        try:
            return self._supervisor.ask(message, timeout=30)
        except ActorGone:
            raise RuntimeClosed("the runtime is closed") from None

    def _check_caller(self) -> None:
        if threading.current_thread() is self._hosting.supervisor_thread:
            raise RuntimeError(
                "Runtime methods cannot be called from an event subscriber: subscribers run on"
                " the supervisor's thread, which would wait on itself; hand the work to another"
                " thread (a queue, an executor)"
            )

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeClosed("the runtime is closed")

    def placements(self) -> dict[str, list[str]]:
        """On a cluster: run id -> the Ray node ids its starts were placed on, in order
        (more than one: it was started again after its node's host was lost). Empty when
        the runs are hosted in this process."""
        cluster = self._hosting.cluster
        return cluster.placements() if cluster is not None else {}

    def close(self, timeout: float = 10.0) -> None:
        """Stop every run (cancelled) and every thread this runtime started."""
        if self._closed:
            return
        self._closed = True
        left = self._hosting.stop_threads(timeout)
        self._roots.cancel_all("runtime closed")
        self._hosting.release(left)  # after every run was cancelled: nothing left to host
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _timeout(timeout: float | None) -> float | None:
    """A wait's timeout, checked: None (no limit) or a number of seconds, not NaN."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout != timeout:
        raise TypeError(f"timeout must be a number of seconds or None, got {timeout!r}")
    return max(0.0, float(timeout))


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


__all__ = [
    "AdmissionError",
    "AgentLike",
    "RunHandle",
    "Runtime",
    "RuntimeClosed",
    "limits_of",
    "runtime_tool_names",
]
