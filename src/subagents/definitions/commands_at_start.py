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

Fail closed (the lead's mend after review): a definition whose commands changed since is kept
*whole* as it was (not its new prompt or tools beside its old hooks: a guard added with the
Bash it guards would otherwise reload the Bash without the guard), and a definition added
since the start that names hooks or inline MCP servers is left out until a restart (run
without them, its guards would not hold). Both are said once in a warning.

Session 28: a definition whose commands did not change is also kept whole as it was last
given when its other fields widen what its runs may do (``reload_widening.py``: only its
words and a narrowing of its tools are taken). One deleted, then written again, is held to
what it was when deleted (``_returned``): it came back as the deleted definition.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from subagents.definitions.reload_widening import widened
from subagents.definitions.spec import AgentSpec, Level
from subagents.logs import get_logger

log = get_logger(__name__)

Commands = tuple[Any, Any]
"""A definition's ``(hooks, mcp_servers)``."""


class CommandsAtStart:
    """What each file definition's commands were at the first load, and the specs of a
    reload with those held (a plain decision: the catalog calls it on its actor's thread)."""

    def __init__(self) -> None:
        self._read: dict[str, Commands] | None = None
        self._warned: set[tuple[str, str]] = set()
        self._given: dict[str, AgentSpec] = {}
        """By name: the spec last given out (a held definition is given as this very object
        again: caches keyed on the definition object, ``AgentRanking``'s and ``AgentEnv``'s,
        keep holding)."""
        self._removed: dict[str, AgentSpec] = {}
        """By name: a file definition given out, then removed (its file deleted), as it was
        last given: its return is held to it (``_returned``)."""

    def hold(self, specs: dict[str, AgentSpec]) -> dict[str, AgentSpec]:
        """``specs`` as loaded, the first time (their commands are kept); after, each file
        definition whose commands differ from those kept is given as it was last given, and
        one added since that names commands is left out (a warning once per definition and
        change)."""
        if self._read is None:
            self._read = {n: _commands(s) for n, s in specs.items() if _from_files(s)}
            self._given = dict(specs)
            return specs
        for name in [n for n, s in self._given.items() if n not in specs and _deleted(s)]:
            self._removed[name] = self._given.pop(name)  # (never given back as it was)
        held: dict[str, AgentSpec] = {}
        for name, spec in specs.items():
            given = self._held(spec)
            if given is not None:
                held[name] = given
        self._given.update(held)
        return held

    def _held(self, spec: AgentSpec) -> AgentSpec | None:
        assert self._read is not None
        if not _from_files(spec):
            return spec  # the program's own, whole
        kept = self._read.get(spec.name)
        if kept is None:  # new since the start
            if spec.level is not Level.CODE and _names_commands(spec):
                self._warn(spec, "it was added since the start: left out until a restart")
                return None
            self._read[spec.name] = _commands(spec)  # (a code one: as first seen)
            return spec
        if spec.name in self._removed:
            return self._returned(spec, kept)
        last = self._given.get(spec.name)
        if _commands(spec) == kept:
            wider = () if last is None else widened(last, spec)
            if not wider:
                return spec
            self._warn_widened(spec, wider)
            return last
        if last is None or _commands(last) != kept:
            self._warn(spec, "left out until a restart")
            return None
        self._warn(spec, "the definition is kept whole as it was until a restart")
        return last

    def _returned(self, spec: AgentSpec, kept: Commands) -> AgentSpec | None:
        """A definition removed since it was given, back: taken as it is now where it keeps
        the commands read at start and widens nothing of what it was when removed (an
        editor's save that deletes, then writes); else left out until a restart. Not given
        back as it was (its owner deleted it: session 28), and not taken as new either: the
        name was the lead's to grant (``Agent(a, b)``), so deleting, then writing it wider
        would widen a granted agent in two reloads."""
        removed = self._removed[spec.name]
        wider = widened(removed, spec)
        if _commands(spec) != kept or wider:
            self._warn_widened(spec, wider or ("hooks", "mcp_servers"), returned=True)
            return None
        del self._removed[spec.name]
        return spec

    def _warn_widened(
        self, spec: AgentSpec, fields: tuple[str, ...], *, returned: bool = False
    ) -> None:
        key = (spec.name, repr((returned, *(getattr(spec, f) for f in fields))))
        if key in self._warned:
            return
        self._warned.add(key)
        log.warning(
            "a definition's change widens what its runs may do: a reload takes only its"
            " words (prompt, description...) and a narrowing of its tools (a run that may"
            " write the agents' folder must not widen its own); "
            + (
                "it was removed, and is back wider than it was (or with other hooks or"
                " mcpServers): left out until a restart"
                if returned
                else "the definition is kept whole as it was until a restart"
            ),
            agent=spec.name,
            source=spec.source,
            fields=list(fields),
        )

    def _warn(self, spec: AgentSpec, what: str) -> None:
        key = (spec.name, repr(_commands(spec)))
        if key in self._warned:
            return
        self._warned.add(key)
        log.warning(
            "a definition's hooks or mcpServers are not those read at start: commands are read"
            " once, as Claude Code reads hooks (a run that may write the agents' folder must"
            " not choose the commands run for the next runs); " + what,
            agent=spec.name,
            source=spec.source,
        )


def _commands(spec: AgentSpec) -> Commands:
    return (spec.hooks, spec.mcp_servers)


def _names_commands(spec: AgentSpec) -> bool:
    """Whether ``spec`` names a command: hooks, or an inline server in ``mcpServers`` (a
    mapping entry; the names of the runtime's servers, which the owner gave, are none)."""
    if spec.hooks:
        return True
    servers: Any = spec.mcp_servers
    if isinstance(servers, Mapping):
        return any(config is not None for config in servers.values())
    if isinstance(servers, (list, tuple)):
        return any(isinstance(entry, Mapping) for entry in servers)
    return False  # None (every runtime server), or a comma string of names


def _deleted(spec: AgentSpec) -> bool:
    """Whether ``spec``, a definition given out and missing from a reload, was deleted: a
    file definition whose file is gone. One whose file is still there failed to load (caught
    half written: an editor, or ``cat >``, writing it in place): not removed, so its next
    version is held to the one given out, as any change is (it was counted deleted, and a
    wider next version was left out until a restart: the agent gone for a write's window)."""
    if not _from_files(spec):
        return False
    return spec.source is None or not os.path.lexists(spec.source)


def _from_files(spec: AgentSpec) -> bool:
    """Whether ``spec``'s commands may come from a file: a file definition, or one given in
    code that ``extends`` another."""
    return spec.level is not Level.CODE or spec.extends is not None
