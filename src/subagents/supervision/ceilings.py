"""Permissions only narrow down the tree: what a child inherits from its requesters.

A trial found a plan-mode lead, Bash disallowed, spawn a child that ran in the runtime's
``bypassPermissions`` and wrote files: a definition tightened its own runs only. Now every
child run carries a **ceiling**, the grants of all its requesters (root first), each what
that requester's definition allowed (``PermissionGrant``: its ``permissionMode``, ``tools``,
``disallowedTools``). The child's effective permissions are its
own (the runtime's, tightened by its definition) intersected with each grant: the strictest
mode, every ``disallowedTools`` entry (bare and with patterns), every tool a requester may use
only in some forms (``tools: Bash(git diff:*)``) (``tools.permissions.PermissionPolicy``).
A requester's ``tools`` list otherwise is not taken from its children: it says what that agent
is offered, and a lead that only delegates (``tools: spawn_subagent``) still has children that
edit; its mode and its disallowed tools are what hold its subtree.

The ceiling is decided here, at admission, from the parent's record (its own ceiling) and its
definition, and kept in the child's record: a run restored after a crash or hosted on another
node has it without asking its parent, and a definition changed later does not widen it.
A root's ceiling holds the mode of the runtime that spawned it (``root_ceiling``), so a
runtime restoring the tree later with a wider mode does not widen it either.
"""

from __future__ import annotations

from collections.abc import Iterable

from subagents.definitions.spec import AgentSpec
from subagents.messages import PermissionGrant, RunRecord
from subagents.tools.modes import MODES as _MODES


def grant_of(spec: AgentSpec, run_id: str) -> PermissionGrant:
    """What a run of ``spec`` may do, as its children inherit it."""
    return PermissionGrant(
        agent=spec.name,
        run_id=run_id,
        mode=spec.permission_mode,
        tools=spec.tools,
        disallowed_tools=spec.disallowed_tools,
        network=spec.network,
    )


def network_wanted(own: str | None, ceiling: Iterable[PermissionGrant]) -> str | None:
    """The network a run's definition asks for, narrowed by its requesters': "off" when it or
    any requester's definition says off (a sandbox no wider than any requester's), else its
    own."""
    if any(grant.network == "off" for grant in ceiling):
        return "off"
    return own


def child_ceiling(parent: RunRecord, parent_spec: AgentSpec) -> tuple[PermissionGrant, ...]:
    """The ceiling of a child of ``parent``: the parent's own, and the parent's grant."""
    return (*parent.ceiling, grant_of(parent_spec, parent.run_id))


RUNTIME = "runtime"
"""The agent name of the grant that records the runtime's own mode in a root's ceiling."""


def root_ceiling(mode: str | None, owner: str) -> tuple[PermissionGrant, ...]:
    """The ceiling of a root run: the mode of the runtime that spawned it (``owner``), so a
    runtime restoring it later with a wider mode (``subagents resume --permission-mode``)
    does not widen it; its children inherit it with the rest of the ceiling."""
    return (PermissionGrant(agent=RUNTIME, run_id=owner, mode=mode),) if mode else ()


def strictest_mode(ceiling: Iterable[PermissionGrant]) -> PermissionGrant | None:
    """The grant with the strictest known mode, or None when none sets one."""
    best: PermissionGrant | None = None
    for grant in ceiling:
        if grant.mode in _MODES and (
            best is None or _MODES.index(grant.mode) < _MODES.index(best.mode or "")
        ):
            best = grant
    return best


def describe(ceiling: tuple[PermissionGrant, ...]) -> str | None:
    """What a run's requesters hold it to, in one line (events, ``subagents info``); None
    when they restrict nothing."""
    parts: list[str] = []
    ceiling = requesters(ceiling)
    if not ceiling:  # a root's (the runtime's grant alone): nothing to read
        return None
    strict = strictest_mode(ceiling)
    if strict is not None:
        parts.append(f"mode at most {strict.mode} ({strict.agent} {strict.run_id})")
    for grant in ceiling:
        bare = {t.strip() for t in grant.tools or () if "(" not in t}
        only = [t for t in grant.tools or () if "(" in t and t.split("(")[0].strip() not in bare]
        if only:
            parts.append(f"only {', '.join(only)} ({grant.agent})")
        if grant.disallowed_tools:
            parts.append(f"not {', '.join(grant.disallowed_tools)} ({grant.agent})")
    return "; ".join(parts) if parts else None


def narrowed(spec: AgentSpec, ceiling: tuple[PermissionGrant, ...]) -> str | None:
    """Why a child of ``spec`` gets less than its definition asks, or None: a requester's
    stricter mode, disallowed tools, or a tool it may use only in some forms."""
    text = describe(ceiling)
    if text is None:
        return None
    strict = strictest_mode(requesters(ceiling))
    wanted = spec.permission_mode
    if strict is not None and (
        wanted not in _MODES or _MODES.index(wanted or "") > _MODES.index(strict.mode or "")
    ):
        return f"{spec.name} asks for {wanted or 'the runtime mode'}; narrowed: {text}"
    return f"narrowed: {text}"


def requesters(ceiling: Iterable[PermissionGrant]) -> tuple[PermissionGrant, ...]:
    """The grants of the runs that requested this one (the runtime's own left out: its mode
    is the one every run starts from, not a narrowing worth reporting)."""
    return tuple(grant for grant in ceiling if grant.agent != RUNTIME)
