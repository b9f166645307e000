"""How a Runtime is assembled from its arguments: the agents given in code, the catalog of
definitions, the model, the limits, the skills, telemetry; each argument checked, and refused
naming what is wrong, before anything starts.

Why apart from ``_runtime.py``: these are checks and choices made once, at construction; the
Runtime itself is what runs (its threads, its calls, its views).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NamedTuple, Protocol

import msgspec

from subagents.actors.agent import BehaviourFactory
from subagents.behaviour.function import FunctionAgent, FunctionBehaviour
from subagents.behaviour.llm_factory import LLMFactory
from subagents.behaviour.port import AgentEnv
from subagents.behaviour.tools import Tool, as_tools
from subagents.definitions.catalog import Catalog
from subagents.definitions.errors import DefinitionError, LoadIssue
from subagents.definitions.skills import SkillIndex, default_skill_dirs, preload_skills
from subagents.definitions.spec import AgentSpec
from subagents.definitions.validate import check, known_tools, name_problem
from subagents.isolation.worktrees import Worktrees
from subagents.logs import get_logger
from subagents.mcp.hub import McpHub
from subagents.messages import EventKind
from subagents.models import default_model
from subagents.models.base import Model
from subagents.runtime._approvals import remembered_rules
from subagents.runtime._cluster_backend import ClusterBackend
from subagents.runtime._server_reach import check_server_reach
from subagents.runtime._store_reach import (
    check_path_reach,
    check_store_reach,
    hub_starts_commands,
    servers_start_commands,
    starts_processes,
)
from subagents.store.base import PROTOCOL_METHODS, RunStore
from subagents.store.locations import is_database_url, store_location
from subagents.store.memory import MemoryStore
from subagents.supervision.core import SupervisorCore
from subagents.supervision.limits import LimitError, Limits, shown
from subagents.supervision.requests import CheckedRoots
from subagents.supervision.spawn_rules import SpawnRules
from subagents.telemetry import Telemetry, provider_from_env
from subagents.tools.approval import ApprovalHandler
from subagents.tools.builtin import builtin_tools as builtin_tools_by_name
from subagents.tools.hooks import HookConfigError, Hooks
from subagents.tools.permissions import Permissions
from subagents.tools.processes import ProcessGroups
from subagents.tools.sandbox import Sandbox
from subagents.tools.user_results import capped
from subagents.tools.workspace import Workspace

log = get_logger("subagents.runtime")

AgentLike = AgentSpec | FunctionAgent | Callable[..., Any]
"""What ``Runtime(agents=...)`` takes: definitions, function agents, or plain callables."""


@dataclass(frozen=True, kw_only=True)
class RuntimeArguments:
    """What ``Runtime(...)`` was given, as given (``Runtime.__init__`` documents each); its
    periods checked on creation, so a bad one is refused before anything starts.

    Why a record: the runtime's construction is split into steps (``Runtime._wire_parts``,
    ``_start_services``, ``_start_supervisor``), and each reads the arguments it needs from
    here instead of being handed a dozen of them one by one."""

    agents: Iterable[AgentLike] | Mapping[str, AgentLike] | None
    model: Model | Callable[[list[AgentSpec]], Model] | None
    limits: Limits | Mapping[str, Any] | None
    store: RunStore | str | os.PathLike[str] | None
    tools: Iterable[Tool | Callable[..., Any]]
    agent_dirs: Sequence[str | Path]
    discover: bool
    skills: SkillIndex | Sequence[str | Path] | None
    default_model: str | None
    hot_reload_s: float | None
    restore: bool | Iterable[str]
    command_poll_s: float
    archive_after_minutes: float
    retention_days: float | None
    sweep_every_s: float
    workspace: str | os.PathLike[str] | None
    permissions: Permissions | str | None
    approve: ApprovalHandler | Literal["store"] | None
    ask_parent: bool
    approval_wait_s: float
    allow_hooks: bool
    builtin_tools: bool
    lease_s: float | None
    tracer_provider: Any
    strict: bool
    mcp_servers: Mapping[str, Any] | None
    agent_threads: str
    allow_mcp_commands: bool
    sandbox: bool | Sandbox
    tool_env: Iterable[str] | Mapping[str, str] | None
    mcp_tool_timeout: float | None
    cluster: str | None
    owner: str | None

    def __post_init__(self) -> None:
        check_kinds(self)
        check_seconds(
            hot_reload_s=self.hot_reload_s,
            command_poll_s=self.command_poll_s,
            archive_after_minutes=self.archive_after_minutes,
            retention_days=self.retention_days,
            sweep_every_s=self.sweep_every_s,
        )

    @classmethod
    def of(cls, given: Mapping[str, Any]) -> RuntimeArguments:
        """From ``Runtime.__init__``'s ``locals()`` (its parameters and ``self``), so the
        parameters are listed once, in its signature, with their defaults."""
        return cls(**{name: value for name, value in given.items() if name != "self"})


def checked_owner(owner: object) -> str:
    """``owner`` if it can stand for a runtime in the store (a short, printable id)."""
    if not isinstance(owner, str) or not owner or len(owner) > 200 or not owner.isprintable():
        raise ValueError(f"owner must be a printable string of 1-200 characters, got {owner!r}")
    if any(c.isspace() for c in owner):
        raise ValueError(f"owner must not contain spaces, got {owner!r}")
    return owner


def tools_for(tools: Iterable[Tool | Callable[..., Any]], builtin_tools: bool) -> dict[str, Tool]:
    """Claude Code's built-in tools (unless ``builtin_tools=False``), then the user's: a user
    tool of the same name replaces the built-in one. A user's tool's answers are cut at
    ``USER_RESULT_LIMIT`` characters (``tools/user_results.py``), as an MCP server's are."""
    users = {name: capped(tool) for name, tool in as_tools(tools).items()}
    return {**(builtin_tools_by_name() if builtin_tools else {}), **users}


class HoldsChecked(Protocol):
    """Where the runtime's root spawns are checked before they are told (``RootWaiters``,
    read by ``RootRuns``): handed the core's ``CheckedRoots``."""

    checked: CheckedRoots | None


def supervisor_core(
    given: RuntimeArguments,
    agents: Callable[[], Mapping[str, AgentSpec]],
    store: RunStore,
    limits: Limits,
    owner: str,
    model: Model,
    roots: HoldsChecked | None = None,
    published: Callable[[EventKind], bool] | None = None,
) -> SupervisorCore:
    """The supervisor's decisions over the current definitions (``agents``, re-read on each
    call: the registry may have reloaded them) and the runs in ``store``; the runtime's
    permission mode is kept in each root's ceiling; a ``model`` that answers every run
    whatever it asks for (the offline one: its ``answers_as``) is recorded as what answered
    (``RunRecord.answered_by``), beside the model asked for. ``roots``: the runtime's root
    waiters, given the core's record of the root requests its caller checked
    (``requests.CheckedRoots``: their admission does not check them again). ``published``:
    whether an event of a kind reaches anyone (``Subscribers.wants``): a straight mail's
    events are published only then (``Recorded.published``; None: always)."""
    core = SupervisorCore(
        lookup=lambda name: agents().get(name),
        names=lambda: list(agents()),
        read_run=store.get_run,
        limits=limits,
        default_model=given.default_model or os.environ.get("SUBAGENTS_MODEL", "sonnet"),
        owner=owner,
        runtime_mode=Permissions.coerce(given.permissions).mode,
        answered_by=getattr(model, "answers_as", None),
        published=published,
    )
    if roots is not None:
        roots.checked = core.admission.checked
    return core


class OpenedStore(NamedTuple):
    """The runtime's store, whether it opened it (and so closes it), and the sandbox the
    store's reach was checked against (resolved once: the runs' commands start in it)."""

    store: RunStore
    owned: bool
    sandbox: Sandbox


def store_for(
    given: RuntimeArguments, tools: Mapping[str, Tool], backend: ClusterBackend, address: str | None
) -> OpenedStore:
    """The runtime's store (``given_store``), one named by its path checked before it is
    opened (``check_unopened_store``): a store refused leaves no file behind."""
    sandbox = Sandbox.coerce(given.sandbox, given.tool_env)
    check_unopened_store(given, tools, sandbox)
    owned = given.store is None or isinstance(given.store, str | os.PathLike)
    return OpenedStore(given_store(given.store, backend, address), owned, sandbox)


def check_unopened_store(
    given: RuntimeArguments, tools: Mapping[str, Tool], sandbox: Sandbox
) -> None:
    """``StoreInReach`` for a SQLite store named by its path (``store=``) that the runs'
    commands could write, before ``given_store`` opens it: a refused start makes no file
    (``runtime._store_reach``; a store given opened, or a server's, is checked later)."""
    if not isinstance(given.store, str | os.PathLike):
        return
    location = store_location(os.fspath(given.store))
    if is_database_url(location):
        return
    root = given.workspace if given.workspace is not None else os.getcwd()
    mcp = servers_start_commands(given.mcp_servers, bool(given.allow_mcp_commands))
    processes = starts_processes(tools, bool(given.allow_hooks), mcp)
    path = Path(location).expanduser()  # as SQLiteStore names it
    check_path_reach(sandbox, path, Workspace(root).root, processes=processes)


def given_store(
    store: RunStore | str | os.PathLike[str] | None, backend: ClusterBackend, address: str | None
) -> RunStore:
    """The store given (a ``postgresql://`` URL or a SQLite file's path: opened here,
    ``store.locations``); else on a cluster the cluster's (the one every node and the CLI
    reach), else one in memory."""
    if isinstance(store, str | os.PathLike):
        from subagents.store.opening import open_location

        return open_location(store_location(os.fspath(store)))
    if store is not None:
        if not callable(getattr(store, "get_run", None)):  # (else an AttributeError, later)
            raise TypeError(
                "store must be a RunStore, a postgresql:// URL or a SQLite file's path,"
                f" got {type(store).__name__}"
            )
        lacking = [name for name in PROTOCOL_METHODS if not callable(getattr(store, name, None))]
        if lacking:  # (a store of one's own of the protocol's shape, written before them)
            raise TypeError(
                f"store {type(store).__name__} lacks the RunStore methods {', '.join(lacking)}:"
                " define them, or subclass subagents.store.base.RunStore, whose"
                " ended_by_others and ended_among have defaults a subclass inherits"
                " (docs/store.md, 'Upgrading a store of one's own')"
            )
        return store
    if address is not None:
        return backend.store(address)
    return MemoryStore()


def collect_agents(
    agents: Iterable[AgentLike] | Mapping[str, AgentLike] | None,
    tool_names: Collection[str],
    strict: bool,
) -> tuple[list[AgentSpec], dict[str, Callable[..., Any]]]:
    """The definitions of the agents given in code, and the functions of the function agents
    among them by name; an agent given twice, a bad name or (``strict``) a definition error
    is refused naming it."""
    functions: dict[str, Callable[..., Any]] = {}
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
            functions[item.spec.name] = item.fn
        elif callable(item):
            agent = FunctionAgent.create(name or item.__name__, item)
            specs.append(agent.spec)
            functions[agent.spec.name] = agent.fn
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
                f"two agents are named {spec.name!r}: {described(seen[spec.name])} and"
                f" {described(item)}; give each its own name"
            )
        seen[spec.name] = item
        known = known_tools(tool_names)
        for finding in check(spec, known_tools=known, strict=strict):
            if finding.issue.severity == "error":
                raise DefinitionError(f"agent {spec.name!r}: {finding.issue.reason}")
            if finding.field is not None:  # not "no prompt": a function agent needs none
                log.warning("agent definition", agent=spec.name, problem=finding.issue.reason)
    return specs, functions


def catalog_for(
    specs: list[AgentSpec],
    agent_dirs: Sequence[str | Path],
    discover: bool,
    tool_names: Collection[str],
    strict: bool,
) -> Catalog:
    """The catalog of the agents given in code and, when asked, of definition files."""
    if not agent_dirs and not discover:
        return Catalog.from_specs(specs)
    from subagents.definitions.discovery import DefinitionLoader, Source, default_sources
    from subagents.definitions.spec import Level

    if discover:
        sources = default_sources(dirs=[Path(d) for d in agent_dirs])
    else:
        sources = [Source(path=str(Path(d)), level=Level.DIRS) for d in agent_dirs]
    loader = DefinitionLoader(sources, known_tools=known_tools(tool_names), strict=strict)
    return Catalog(loader, specs=specs)


def report_issues(issues: Sequence[LoadIssue], strict: bool) -> None:
    """Say what is wrong with the definition files (a file with an error is not loaded);
    in strict mode, refuse to start on any error."""
    errors = [i for i in issues if i.severity == "error"]
    for issue in issues:
        say = log.warning if issue.severity == "error" else log.info
        say("agent definition problem", problem=str(issue))
    if strict and errors:
        listing = "; ".join(str(i) for i in errors[:5])
        more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
        raise DefinitionError(
            f"{len(errors)} error(s) in the agent definitions (strict): {listing}{more}"
        )


def warn_about_hooks(specs: Iterable[AgentSpec], allow_hooks: bool) -> None:
    """Hooks are shell commands from files: without ``allow_hooks=True`` they do not run,
    and the runtime says so once, naming the definitions that have some."""
    with_hooks = sorted(s.name for s in specs if s.hooks)
    if not with_hooks:
        return
    if not allow_hooks:
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


class SystemPrompts:
    """Each definition's prompt with its ``skills`` preloaded (unknown ones logged once),
    made once per definition."""

    def __init__(self, skills: SkillIndex | None) -> None:
        self.skills = skills
        self._made: dict[tuple[str, str, tuple[str, ...]], str] = {}

    def __call__(self, spec: AgentSpec) -> str:
        if self.skills is None or not spec.skills:
            return spec.prompt
        key = (spec.name, spec.prompt, spec.skills)
        made = self._made.get(key)
        if made is None:
            made, issues = preload_skills(spec, self.skills)
            for issue in issues:
                log.warning("skill not preloaded", agent=spec.name, reason=issue.reason)
            self._made[key] = made
        return made


def agent_env(
    given: RuntimeArguments,
    *,
    model: Model,
    agents: Callable[[], list[AgentSpec]],
    tools: Mapping[str, Any],
    skills: SkillIndex | None,
    limits: Limits,
    workspace: Workspace,
    permissions: Permissions,
    processes: ProcessGroups,
    allow_hooks: bool,
    tracer: Telemetry | None,
    mcp: McpHub | None,
    worktrees: Worktrees | None,
    store: RunStore,
    sandbox: Sandbox,
) -> AgentEnv:
    """The services a run's behaviour uses: the parts the runtime made, and its arguments
    about approvals and the sandbox (checked; ``StoreInReach`` when the runs could write
    the store). ``approve="store"``: asks are kept in the store as pending approvals
    (``runtime._approvals``), not put to a callable."""
    in_store = given.approve == "store"
    if given.approve is not None and not in_store and not callable(given.approve):
        raise TypeError(f"approve must be a callable or 'store', got {given.approve!r}")
    commands = starts_processes(tools, allow_hooks, hub_starts_commands(mcp))
    if not isinstance(given.store, str | os.PathLike):  # a file named was checked unopened
        check_store_reach(sandbox, store, workspace, processes=commands)
    check_server_reach(sandbox, store, workspace.root, processes=commands)
    sandbox = sandbox.hiding(workspace.sealed)  # nor read it
    return AgentEnv(
        model=model,
        agents=agents,
        tools=tools,
        skills=skills,
        system_prompt=SystemPrompts(skills),
        spawn_rules=SpawnRules(limits),
        max_turns=limits.max_turns,
        workspace=workspace,
        permissions=permissions,
        approve=given.approve if callable(given.approve) else None,
        approvals_in_store=in_store,
        remembered=lambda root_run_id: remembered_rules(store, root_run_id),
        ask_parent=bool(given.ask_parent),
        approval_wait_s=positive_seconds(given.approval_wait_s, "approval_wait_s"),
        processes=processes,
        allow_hooks=allow_hooks,
        sandbox=sandbox,
        tracer=tracer,
        mcp=mcp,
        worktrees=worktrees,
    )


def behaviours(
    functions: Mapping[str, Callable[..., Any]], env: AgentEnv
) -> Callable[[AgentSpec], BehaviourFactory]:
    """What runs an agent's runs: its function for a function agent, else the LLM loop."""

    llm_factory = LLMFactory(env)

    made: dict[str, functools.partial[FunctionBehaviour]] = {}
    """One factory per function agent, made again only if its function is replaced: a run's
    actor holds its factory, and a closure per run was two objects more per live run."""

    def behaviour_for(spec: AgentSpec) -> BehaviourFactory:
        fn = functions.get(spec.name)
        if fn is None:
            return llm_factory
        factory = made.get(spec.name)
        if factory is None or factory.args[0] is not fn:
            factory = made[spec.name] = FunctionBehaviour.factory(fn)
        return factory

    return behaviour_for


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


def check_kinds(given: RuntimeArguments) -> None:
    """A ``TypeError`` naming the argument given something of the wrong kind (each raised
    from inside, naming nothing: ``'int' object is not iterable``, ``... is not callable``)."""
    for name in ("agents", "tools", "agent_dirs", "tool_env", "skills"):
        value = getattr(given, name)
        if value is not None and not isinstance(value, Iterable | SkillIndex):
            raise TypeError(f"{name} must be a collection, got {type(value).__name__}")
    if not isinstance(given.restore, bool | Iterable):
        raise TypeError(f"restore must be True, False or run ids, got {given.restore!r}")
    if given.model is not None and not isinstance(given.model, Model) and not callable(given.model):
        raise TypeError(f"model must be a Model or a callable making one, got {given.model!r}")
    if given.workspace is not None and not isinstance(given.workspace, str | os.PathLike):
        raise TypeError(f"workspace must be a folder's path, got {given.workspace!r}")
    provider = given.tracer_provider  # (else an AttributeError from OpenTelemetry's side)
    if provider is not None and not callable(getattr(provider, "get_tracer", None)):
        raise TypeError(
            f"tracer_provider must be an OpenTelemetry TracerProvider, got {provider!r}"
        )
    if given.default_model is not None and not isinstance(given.default_model, str):
        raise TypeError(f"default_model must be a model's name, got {given.default_model!r}")


def check_seconds(**values: float | None) -> None:
    """The runtime's periods: numbers >= 0 (NaN would switch a timer off silently)."""
    for name, value in values.items():
        if value is None:
            continue
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not 0 <= value <= sys.float_info.max  # (NaN, infinity, an int past every float)
        ):
            raise ValueError(f"{name} must be a finite number >= 0, got {shown(value)}")


def described(item: object) -> str:
    """An agent given in code, as an error naming two of them shows it."""
    if isinstance(item, FunctionAgent):
        return f"the function {getattr(item.fn, '__qualname__', item.fn)!r}"
    if isinstance(item, AgentSpec):
        return f"an AgentSpec ({item.source or 'in code'})"
    return f"the function {getattr(item, '__qualname__', item)!r}"


def positive_seconds(value: float, name: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 < value <= sys.float_info.max  # (NaN, infinity, an int past every float)
    ):
        raise ValueError(f"{name} must be a positive number of seconds, got {shown(value)}")
    return float(value)


def model_for(
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


def telemetry_for(tracer_provider: Any, store: RunStore) -> Telemetry | None:
    """Traces when asked for: ``tracer_provider`` given, or the OTEL_* environment opts in
    (``subagents.telemetry``); None (and OpenTelemetry never imported) otherwise."""
    if tracer_provider is not None:
        return Telemetry(tracer_provider, store)
    found = provider_from_env()
    if found is None:
        return None
    provider, owned = found
    return Telemetry(provider, store, owned=owned)


def skill_index(
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
