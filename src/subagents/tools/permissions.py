"""Permissions: may this call run, must someone be asked, or is it refused? (pure, no I/O
beyond resolving a path.)

``Permissions`` is the runtime-wide configuration (Claude Code's settings: a mode and
allow / ask / deny rules). ``PermissionPolicy.for_agent`` tightens it with what a definition
says: its ``permissionMode`` (never looser than the runtime's), its ``disallowedTools``
patterns (deny rules) and its ``tools`` patterns (a tool listed only as ``Bash(git diff:*)``
may run only such commands). A definition never loosens anything: agent files may come from
anywhere, the runtime's owner decides what runs unasked. Then the run's **ceiling** (its
requesters' grants, kept in its record: ``supervision.ceilings``) tightens it again: the
strictest of their modes, their deny rules, their tool limits. Permissions only narrow down
the tree.

``decide`` answers in this order, the first that applies winning:
1. a deny rule matches -> deny;  2. a requester may not use the tool, or the definition or
a requester restricts it to patterns and none matches -> deny;  3. ``bypassPermissions``
-> allow;  4. ``plan``: read-only calls allowed, anything else denied;  5. an ask rule
matches -> ask;  6. an allow rule matches -> allow;  7. a read-only tool, or a Bash line
that provably only reads -> allow;  8. a tool that does not need approval (user tools,
KillShell) -> allow;  9. ``acceptEdits`` and a file edit -> allow;  10. ``dontAsk`` ->
deny;  11. ask.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from subagents.definitions.spec import AgentSpec
from subagents.definitions.validate import tool_base
from subagents.messages import PermissionGrant
from subagents.tools.base import Tool
from subagents.tools.modes import Mode, parse_mode, stricter
from subagents.tools.read_only_commands import is_read_only, reads_only
from subagents.tools.rules import Rule, call_target, command_matches, parse_rules
from subagents.tools.shellwords import parse

Behavior = Literal["allow", "deny", "ask"]


@dataclass(frozen=True)
class Decision:
    behavior: Behavior
    reason: str = ""

    @property
    def allowed(self) -> bool:
        return self.behavior == "allow"


@dataclass(frozen=True)
class Permissions:
    """The runtime's permission configuration (Claude Code's ``permissions`` settings)."""

    mode: Mode = "default"
    allow: tuple[str, ...] = ()
    ask: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    _rules: tuple[tuple[Rule, ...], tuple[Rule, ...], tuple[Rule, ...]] = field(
        default=((), (), ()), compare=False, repr=False
    )

    def __post_init__(self) -> None:
        parse_mode(self.mode, "Permissions")
        for name in ("allow", "ask", "deny"):
            value = getattr(self, name)
            if isinstance(value, str) or not isinstance(value, tuple | list):
                raise TypeError(f"Permissions.{name} must be a list of rules, got {value!r}")
            object.__setattr__(self, name, tuple(value))
        rules = (
            parse_rules(self.allow, "Permissions.allow"),
            parse_rules(self.ask, "Permissions.ask"),
            parse_rules(self.deny, "Permissions.deny"),
        )
        object.__setattr__(self, "_rules", rules)

    @classmethod
    def coerce(cls, value: Permissions | str | None) -> Permissions:
        """``None`` -> the default; a mode name -> that mode with no rules."""
        if value is None:
            return cls()
        if isinstance(value, str):
            return cls(mode=parse_mode(value, "permissions"))
        if isinstance(value, Permissions):
            return value
        raise TypeError(f"permissions must be a Permissions or a mode name, got {value!r}")


@dataclass(frozen=True)
class ToolLimit:
    """One definition's limit on tools: its bare ``disallowedTools`` (checked for a
    requester's limit; a run's own are applied by what it is offered), and the tools it
    lists only with patterns (``Bash(git diff:*)``: only such calls)."""

    agent: str
    disallowed: tuple[str, ...] = ()
    only: Mapping[str, tuple[Rule, ...]] = field(default_factory=dict)
    by: str | None = None
    """``lead (r1)`` for a requester's limit (inherited), None for the run's own."""

    @classmethod
    def of(
        cls,
        agent: str,
        tools: tuple[str, ...] | None,
        disallowed: tuple[str, ...],
        by: str | None = None,
    ) -> ToolLimit:
        where = f"agent {agent!r}" + (f" (a requester, {by})" if by else "")
        only: dict[str, list[Rule]] = {}
        bare = {t.strip() for t in tools or () if "(" not in t}
        for text in tools or ():
            if "(" in text and tool_base(text) not in bare:
                rule = parse_rules((text,), f"{where}: tools")[0]
                only.setdefault(rule.tool, []).append(rule)
        return cls(
            agent=agent,
            disallowed=tuple(t.strip() for t in disallowed if "(" not in t),
            only={k: tuple(v) for k, v in only.items()},
            by=by,
        )

    def forbids(self, tool: str) -> bool:
        """Whether its bare ``disallowedTools`` name ``tool``: what a requester's limit keeps
        from its subtree. (What its ``tools`` list leaves out is not taken from its
        children: that list says what the agent is offered, and a lead that only delegates,
        ``tools: spawn_subagent``, still has children that edit.)"""
        return any(_covers(entry, tool) for entry in self.disallowed)

    def restriction(self, tool: str) -> tuple[Rule, ...] | None:
        found: list[Rule] = []
        for rules in self.only.values():
            found.extend(r for r in rules if r.names(tool))
        return tuple(found) if found else None


def _covers(entry: str, tool: str) -> bool:
    """Whether a ``tools`` / ``disallowedTools`` entry names ``tool`` (``Bash``,
    ``Bash(git diff:*)``, ``mcp__server``, ``mcp__server__*``, a glob of MCP tools)."""
    entry = entry.strip()
    if entry == tool or tool_base(entry) == tool:
        return True
    if entry.startswith("mcp__") and tool.startswith("mcp__"):
        server = entry.removesuffix("__*")
        if server.count("__") == 1 and tool.startswith(server + "__"):
            return True
        return "*" in entry and fnmatch.fnmatchcase(tool, entry)
    return False


_REQUESTERS = AgentSpec(name="(the requesters)", description="what the requesters may do")

_POLICIES: dict[
    tuple[int, int, Path, tuple[PermissionGrant, ...]],
    tuple[Permissions, AgentSpec, PermissionPolicy, tuple[str, ...]],
] = {}
"""``PermissionPolicy.for_agent``'s answers (the permissions and the spec are kept with each,
so the ids in its key are not reused while it is there)."""
_POLICIES_MAX = 512


@dataclass(frozen=True)
class PermissionPolicy:
    """The effective permissions of one agent: the runtime's, tightened by its definition and
    by every requester above it (its record's ceiling: permissions only narrow down the tree)."""

    mode: Mode
    root: Path
    allow: tuple[Rule, ...] = ()
    ask: tuple[Rule, ...] = ()
    deny: tuple[Rule, ...] = ()
    limits: tuple[ToolLimit, ...] = ()
    """The run's own tool limit, then each requester's."""

    @classmethod
    def for_agent(
        cls,
        permissions: Permissions,
        spec: AgentSpec,
        root: Path,
        ceiling: tuple[PermissionGrant, ...] = (),
    ) -> tuple[PermissionPolicy, list[str]]:
        """The policy for ``spec``'s runs under ``ceiling`` (its requesters' grants), and
        warnings (a mode it may not loosen to, a mode a requester narrowed). Made once per
        (permissions, definition, workspace, ceiling): every run of a fan-out asks with the
        same four, and the rules of each are parsed again otherwise."""
        key = (id(permissions), id(spec), root, ceiling)
        try:
            known = _POLICIES.get(key)
        except TypeError:  # something unhashable in a hand-made grant: made every time
            return cls._for_agent(permissions, spec, root, ceiling)
        if known is not None and known[0] is permissions and known[1] is spec:
            return known[2], list(known[3])
        policy, warnings = cls._for_agent(permissions, spec, root, ceiling)
        if len(_POLICIES) >= _POLICIES_MAX:  # definitions reloaded many times: stay bounded
            _POLICIES.clear()
        _POLICIES[key] = (permissions, spec, policy, tuple(warnings))  # kept: ids not reused
        return policy, warnings

    @classmethod
    def _for_agent(
        cls,
        permissions: Permissions,
        spec: AgentSpec,
        root: Path,
        ceiling: tuple[PermissionGrant, ...],
    ) -> tuple[PermissionPolicy, list[str]]:
        warnings: list[str] = []
        mode = permissions.mode
        if spec.permission_mode is not None:
            wanted = parse_mode(spec.permission_mode, f"agent {spec.name!r}: permissionMode")
            mode = stricter(mode, wanted)
            if mode != wanted:
                warnings.append(
                    f"agent {spec.name!r} asks for permissionMode {wanted!r}; the runtime's"
                    f" mode {permissions.mode!r} is stricter and applies"
                )
        where = f"agent {spec.name!r}"
        denied = tuple(t for t in spec.disallowed_tools if "(" in t)
        deny = permissions._rules[2] + parse_rules(denied, f"{where}: disallowedTools")
        limits = [ToolLimit.of(spec.name, spec.tools, spec.disallowed_tools)]
        for grant in ceiling:
            by = f"{grant.agent} ({grant.run_id})"
            if grant.mode is not None:
                theirs = parse_mode(grant.mode, f"requester {by}: permissionMode")
                if stricter(mode, theirs) != mode:
                    warnings.append(
                        f"agent {spec.name!r} runs in {theirs!r} mode, not {mode!r}: its"
                        f" requester {by} may do no more"
                    )
                    mode = theirs
            patterns = tuple(t for t in grant.disallowed_tools if "(" in t)
            deny += parse_rules(patterns, f"requester {by}: disallowedTools")
            limits.append(ToolLimit.of(grant.agent, grant.tools, grant.disallowed_tools, by))
        policy = cls(
            mode=mode,
            root=root,
            allow=permissions._rules[0],
            ask=permissions._rules[1],
            deny=deny,
            limits=tuple(limits),
        )
        return policy, warnings

    @classmethod
    def of_requester(
        cls, permissions: Permissions, ceiling: tuple[PermissionGrant, ...], root: Path
    ) -> PermissionPolicy:
        """What the requester of a run with ``ceiling`` may do itself (its own effective
        permissions: the runtime's under every grant, its own the last)."""
        return cls.for_agent(permissions, _REQUESTERS, root, ceiling)[0]

    def decide(self, tool: Tool, arguments: Mapping[str, Any]) -> Decision:
        name = tool.name
        try:
            target = call_target(name, arguments, self.root)
        except OSError as exc:  # a symlink on the path changed while it was read: a race
            unresolved = f"{name}: its path could not be resolved ({exc.strerror or exc})"
            return Decision("deny", unresolved)
        for rule in self.deny:
            why = _denial(rule, name, arguments, target, self.root)
            if why is not None:
                return Decision("deny", why)
        for limit in self.limits:
            if limit.by is not None and limit.forbids(name):
                return Decision(
                    "deny",
                    f"{name} is not allowed: the requesting run {limit.by} may not use it"
                    f" (disallowedTools), and a run may do no more than the runs that requested it",
                )
            restricted = limit.restriction(name)
            if restricted is not None and not any(
                r.matches(name, arguments, target, self.root) for r in restricted
            ):
                shown = ", ".join(r.text for r in restricted)
                if limit.by is None:
                    return Decision("deny", f"this agent may use {name} only as: {shown}")
                return Decision(
                    "deny",
                    f"the requesting run {limit.by} may use {name} only as: {shown}, and so"
                    f" may the runs it requested",
                )
        if self.mode == "bypassPermissions":
            return Decision("allow", "bypassPermissions")
        reads_only = tool.read_only or (name == "Bash" and _read_only_command(arguments))
        if self.mode == "plan":
            if reads_only:
                return Decision("allow", "read-only")
            return Decision(
                "deny",
                f"plan mode is read-only: {name} could change something, so it is not run",
            )
        for rule in self.ask:
            if rule.matches(name, arguments, target, self.root):
                return self._ask(f"{name} needs approval (rule {rule.text})")
        for rule in self.allow:
            if rule.matches(name, arguments, target, self.root):
                return Decision("allow", f"rule {rule.text}")
        if name == "Bash" and self._each_command_allowed(arguments):
            return Decision("allow", "every command is allowed by a rule or only reads")
        if reads_only:
            return Decision("allow", "read-only")
        if not tool.needs_approval:
            return Decision("allow", "needs no approval")
        if self.mode == "acceptEdits" and tool.edits_files:
            return Decision("allow", "acceptEdits")
        return self._ask(f"{name} needs approval in {self.mode} mode")

    def _each_command_allowed(self, arguments: Mapping[str, Any]) -> bool:
        """``python -m pytest | tail -1`` with ``Bash(python -m pytest:*)`` allowed: each
        command of the line is allowed by a rule or only reads (``tail``)."""
        command = arguments.get("command")
        if not isinstance(command, str) or arguments.get("run_in_background"):
            return False
        script = parse(command)
        if not script.plain:
            return False
        rules = [r for r in self.allow if r.names("Bash")]
        return all(
            reads_only(part) or any(command_matches(r, part) for r in rules)
            for part in script.commands
        )

    def _ask(self, reason: str) -> Decision:
        if self.mode == "dontAsk":
            return Decision("deny", f"{reason}, and dontAsk mode denies what is not pre-approved")
        return Decision("ask", reason)


def lists(grant: PermissionGrant, tool: str) -> bool:
    """Whether the requester of ``grant`` was offered ``tool`` by its own ``tools`` list (no
    list: every tool): what it could call itself, for approving a child's call."""
    return grant.tools is None or any(_covers(entry, tool) for entry in grant.tools)


def ceiling_allows(ceiling: tuple[PermissionGrant, ...], tool: str) -> bool:
    """Whether no requester in ``ceiling`` disallows ``tool`` (what a run is offered)."""
    return not any(
        ToolLimit(
            agent=g.agent, disallowed=tuple(t.strip() for t in g.disallowed_tools if "(" not in t)
        ).forbids(tool)
        for g in ceiling
    )


def _denial(
    rule: Rule, name: str, arguments: Mapping[str, Any], target: Path | None, root: Path
) -> str | None:
    """Why a deny rule refuses this call, or None. A Bash line is refused when ANY command
    it runs matches, however its program is named (allow needs all, as written)."""
    if name == "Bash" and rule.specifier is not None and rule.names(name):
        command = arguments.get("command")
        if not isinstance(command, str):
            return f"Bash without a command is denied by the rule {rule.text}"
        return rule.denial(command)
    if rule.matches(name, arguments, target, root):
        return f"{name} is denied by the rule {rule.text}"
    return None


def bash_reads_only(arguments: Mapping[str, Any]) -> bool:
    """Whether a Bash call's line is one the judge calls read-only (``read_only_commands``):
    such a call is allowed unasked, and runs held to reading (``RunSandbox.reading``)."""
    return _read_only_command(arguments)


def _read_only_command(arguments: Mapping[str, Any]) -> bool:
    command = arguments.get("command")
    return (
        isinstance(command, str)
        and not arguments.get("run_in_background")
        and is_read_only(command)
    )
