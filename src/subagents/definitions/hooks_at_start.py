"""The hooks of file definitions are those read when the catalog first loaded them: a reload
(``hot_reload_s``, ``registry.reload()``) takes every other change of a definition, never a
change of its hooks.

Why (session 27): hooks are shell commands the runtime runs for every run of an agent, unasked.
With ``allow_hooks=True`` and ``hot_reload_s`` set, a run that could write an agents folder
(``.claude/agents`` in its workspace) planted a definition whose hooks the runtime then ran
for the next runs, or took away a ``PreToolUse`` hook that guarded them. Which folders a run
can write is not the catalog's to know (worktrees, ``Sandbox(writable=...)``, a command let
out of the sandbox), so the rule does not depend on it: hooks are read once, at start, as
Claude Code reads them; a restart takes new ones. A definition given in code (``Level.CODE``,
``registry.register``) is the program's own and is taken as it is, unless it ``extends``
another: then its hooks may come from a file (a run that rewrote the parent's file took the
child's guard away: seen), and are held as they were when it was first seen.
"""

from __future__ import annotations

from typing import Any

import msgspec

from subagents.definitions.spec import AgentSpec, Level
from subagents.logs import get_logger

log = get_logger(__name__)


class HooksAtStart:
    """What each file definition's hooks were at the first load, and the specs of a reload
    with those hooks put back (a plain decision: the catalog calls it on its actor's thread)."""

    def __init__(self) -> None:
        self._read: dict[str, Any] | None = None
        self._warned: set[tuple[str, str]] = set()

    def hold(self, specs: dict[str, AgentSpec]) -> dict[str, AgentSpec]:
        """``specs`` as loaded, the first time (their hooks are kept); after, each file
        definition whose hooks differ from those kept gets them back (none for a definition
        that had none), with a warning once per definition and change."""
        if self._read is None:
            self._read = {n: s.hooks for n, s in specs.items() if _from_files(s)}
            return specs
        return {name: self._held(spec) for name, spec in specs.items()}

    def _held(self, spec: AgentSpec) -> AgentSpec:
        assert self._read is not None
        if spec.level is Level.CODE and spec.extends is None:
            return spec  # the program's own, whole
        if spec.level is Level.CODE and spec.name not in self._read:
            self._read[spec.name] = spec.hooks  # registered since: its hooks as first seen
            return spec
        kept = self._read.get(spec.name)
        if spec.hooks == kept:
            return spec
        key = (spec.name, repr(spec.hooks))
        if key not in self._warned:
            self._warned.add(key)
            log.warning(
                "a definition's hooks changed since the runtime started: the hooks read at"
                " start are kept (hooks are read once, as Claude Code reads them: a run that"
                " may write the agents' folder must not choose the commands run for the"
                " next runs); restart to take the new ones",
                agent=spec.name,
                source=spec.source,
            )
        return msgspec.structs.replace(spec, hooks=kept)


def _from_files(spec: AgentSpec) -> bool:
    """Whether ``spec``'s hooks may come from a file: a file definition, or one given in code
    that ``extends`` another."""
    return spec.level is not Level.CODE or spec.extends is not None
