"""A run's setting: the workspace, permission policy, hooks and network its tool calls start
with, which depend only on its definition, its ceiling and the runtime's settings; made once
for all the runs that share them (``setting_of``) and shared, read only.

Why: every LLM run's start made them (``ToolCalls``), each from a cache of its own (the
policy, the hooks, the network), so a fan-out's children, one definition under one ceiling,
paid three lookups, three keys hashed and the workspace's checks each, ~4% of an LLM child's
start and end (``benchmarks/README.md``, session 29). One lookup now serves them all.

What may differ between runs is never shared: a definition with ``isolation: worktree``
works in its run's own worktree (and its policy is rooted there), so its setting is made
for each run; a ceiling that cannot be hashed (built by hand) too. An entry keeps what it was
made from (the definition, the runtime's permissions, workspace and sandbox, whether hooks
run) and is served only to a run with the same objects (compared by identity): a reloaded
definition, or a runtime's setting replaced, is never served a stale one. A failure (a bad
``permissionMode``, rule, hook or network setting) is not kept: each run's start fails
with it, as before. Thread-safe as the other caches of ``AgentEnv``: the worst a race does
is make an entry twice."""

from __future__ import annotations

from dataclasses import dataclass

from subagents.behaviour.port import AgentEnv
from subagents.definitions.spec import AgentSpec
from subagents.isolation.worktrees import isolation_of
from subagents.messages import PermissionGrant, RunRecord
from subagents.supervision.ceilings import network_wanted
from subagents.tools.hooks import Hooks
from subagents.tools.modes import Mode
from subagents.tools.permissions import PermissionPolicy, Permissions
from subagents.tools.sandbox import Sandbox
from subagents.tools.workspace import Workspace

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


SETTINGS_MAX = 256
"""The most settings an ``AgentEnv`` keeps (``AgentEnv.settings``); cleared when full."""


@dataclass(frozen=True, slots=True)
class RunSetting:
    """What a run's tool calls start with, and what it was made from (the definition, the
    runtime's permissions, workspace and sandbox, whether hooks run)."""

    spec: AgentSpec
    permissions: Permissions
    workspace: Workspace
    sandbox: Sandbox
    hooks_run: bool
    policy: PermissionPolicy
    warnings: tuple[str, ...]
    """Why the run's permission mode was tightened: logged by each run (``ToolCalls``)."""
    hooks: Hooks | None
    network: bool


def setting_of(env: AgentEnv, record: RunRecord, spec: AgentSpec) -> RunSetting:
    """The setting of a run of ``spec`` with ``record`` (``ValueError`` for a bad definition,
    ``WorktreeError`` when its worktree cannot be made: the run's set-up fails). A kept one
    is served only if made from the very objects this run would make it from (one read and
    comparison each, inline: this is every LLM run's start)."""
    ceiling = record.ceiling
    settings = env.settings
    try:
        key = (id(spec), ceiling)
        kept: RunSetting | None = settings.get(key)
    except TypeError:  # a ceiling that cannot be hashed (built by hand): made each time
        return _made(env, record, spec, ceiling)
    if (
        kept is not None
        and kept.spec is spec
        and kept.workspace is env.workspace  # (never a worktree's: those are not kept)
        and kept.permissions is env.permissions
        and kept.sandbox is env.sandbox
        and kept.hooks_run is env.allow_hooks
    ):
        return kept
    setting = _made(env, record, spec, ceiling)
    if isolation_of(spec) == "worktree":  # its run's own worktree: made for each run
        return setting
    if len(settings) >= SETTINGS_MAX:  # definitions reloaded many times: stay bounded
        settings.clear()
    settings[key] = setting  # (the spec is kept in it: its id is not reused while there)
    return setting


def _made(
    env: AgentEnv, record: RunRecord, spec: AgentSpec, ceiling: tuple[PermissionGrant, ...]
) -> RunSetting:
    workspace = env.workspace_for(record, spec)
    policy, warnings = PermissionPolicy.for_agent(env.permissions, spec, workspace.root, ceiling)
    hooks = hooks_of(env, spec) if env.allow_hooks and spec.hooks else None
    network = network_of(env, spec, ceiling, policy.mode)  # a bad ``network``: ``ValueError``
    return RunSetting(
        spec=spec,
        permissions=env.permissions,
        workspace=workspace,
        sandbox=env.sandbox,
        hooks_run=env.allow_hooks,
        policy=policy,
        warnings=tuple(warnings),
        hooks=hooks,
        network=network,
    )
