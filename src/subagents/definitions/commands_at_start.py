"""The commands a file definition names, its ``hooks`` and its ``mcpServers``, are those read
when the catalog first loaded it: a reload (``hot_reload_s``, ``registry.reload()``) takes
every other change of a definition, never a change of these.

Why (session 27): hooks are shell commands the runtime runs for every run of an agent,
unasked, and an inline stdio MCP server in ``mcpServers`` is a command it starts for them.
With ``allow_hooks=True`` (or ``allow_mcp_commands=True``) and ``hot_reload_s`` set, a run
that could write an agents folder (``.claude/agents`` in its workspace) planted a definition
whose hooks the runtime then ran for the next runs, or took away a ``PreToolUse`` hook that
guarded them. Which folders a run can write is not the catalog's to know (worktrees,
``Sandbox(writable=...)``, a command let out of the sandbox), so the rule does not depend on
it: these are read once, at start, as Claude Code reads hooks; a restart takes new ones. A
definition given in code (``Level.CODE``, ``registry.register``) is the program's own and is
taken as it is, unless it ``extends`` another: then its hooks may come from a file (a run
that rewrote the parent's file took the child's guard away: seen), and are held as they were
when it was first seen.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from subagents.definitions.spec import AgentSpec, Level
from subagents.logs import get_logger

log = get_logger(__name__)

Commands = tuple[Any, Any]
"""A definition's ``(hooks, mcp_servers)``."""


class CommandsAtStart:
    """What each file definition's commands were at the first load, and the specs of a
    reload with those put back (a plain decision: the catalog calls it on its actor's
    thread)."""

    def __init__(self) -> None:
        self._read: dict[str, Commands] | None = None
        self._warned: set[tuple[str, str]] = set()
        self._put_back: dict[str, tuple[AgentSpec, AgentSpec]] = {}
        """By name: the spec as loaded and the one given for it with its commands put back
        (a reload that changed nothing gives the very same object: caches keyed on the
        definition object, ``AgentRanking``'s and ``AgentEnv``'s, keep holding)."""

    def hold(self, specs: dict[str, AgentSpec]) -> dict[str, AgentSpec]:
        """``specs`` as loaded, the first time (their commands are kept); after, each file
        definition whose commands differ from those kept gets them back (none for a
        definition that had none), with a warning once per definition and change."""
        if self._read is None:
            self._read = {n: _commands(s) for n, s in specs.items() if _from_files(s)}
            return specs
        return {name: self._held(spec) for name, spec in specs.items()}

    def _held(self, spec: AgentSpec) -> AgentSpec:
        assert self._read is not None
        if not _from_files(spec):
            return spec  # the program's own, whole
        if spec.level is Level.CODE and spec.name not in self._read:
            self._read[spec.name] = _commands(spec)  # registered since: as first seen
            return spec
        kept = self._read.get(spec.name)
        if kept is None:  # new since the start: no hooks, and its servers by name only
            kept = (None, _names_only(spec.mcp_servers))
        if _commands(spec) == kept:
            return spec
        last = self._put_back.get(spec.name)
        if last is not None and last[0] is spec:
            return last[1]
        key = (spec.name, repr(_commands(spec)))
        if key not in self._warned:
            self._warned.add(key)
            log.warning(
                "a definition's hooks or mcpServers changed since the runtime started: those"
                " read at start are kept (commands are read once, as Claude Code reads hooks:"
                " a run that may write the agents' folder must not choose the commands run"
                " for the next runs); restart to take the new ones",
                agent=spec.name,
                source=spec.source,
            )
        held = msgspec.structs.replace(spec, hooks=kept[0], mcp_servers=kept[1])
        self._put_back[spec.name] = (spec, held)
        return held


def _commands(spec: AgentSpec) -> Commands:
    return (spec.hooks, spec.mcp_servers)


def _names_only(servers: Any) -> Any:
    """``mcpServers`` without its inline servers (a mapping entry: a command): the names of
    the runtime's servers it lists (which the owner gave, trusted) are kept."""
    if isinstance(servers, Mapping):
        return [name for name, config in servers.items() if config is None]
    if isinstance(servers, (list, tuple)):
        return [entry for entry in servers if not isinstance(entry, Mapping)]
    return servers  # None (every runtime server), or a comma string of names


def _from_files(spec: AgentSpec) -> bool:
    """Whether ``spec``'s commands may come from a file: a file definition, or one given in
    code that ``extends`` another."""
    return spec.level is not Level.CODE or spec.extends is not None
