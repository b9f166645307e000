"""Catalog: the registry's logic as a plain class (no threads), so it is unit tested directly.

The registry actor (``subagents.actors.registry``) is a thin shell around one ``Catalog``: each
message calls one method here. Keeping the decisions (lookup, groups, teams, type
restrictions, reload bookkeeping) in a plain class is what lets them be tested without threads
and hosted by another actor backend later.

A catalog is built from a definition loader (files on disk plus definitions registered in
code) or from specs given in code. Callers only ever see immutable values: ``AgentSpec`` is
frozen, and every collection handed out is a tuple or a freshly built dict.
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

import msgspec

from subagents.definitions.agent_matching import AgentRanking, in_category
from subagents.definitions.agent_matching import Requirements as Requirements  # re-exported
from subagents.definitions.agent_matching import Scored as Scored  # re-exported
from subagents.definitions.agent_matching import priority_rank as priority_rank  # re-exported
from subagents.definitions.commands_at_start import CommandsAtStart
from subagents.definitions.discovery import Changes as Changes  # re-exported: what subscribers get
from subagents.definitions.errors import DefinitionError, LoadIssue
from subagents.definitions.spawn_grant import SpawnGrant, SpawnSettingError
from subagents.definitions.spec import AgentSpec, Level
from subagents.definitions.validate import validate
from subagents.logs import get_logger

log = get_logger("subagents.registry")


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------


class UnknownAgentError(LookupError):
    """An agent name that no definition has; the message lists close matches (difflib)."""

    def __init__(self, name: str, known: Iterable[str], *, what: str = "agent") -> None:
        known_list = sorted(known)
        self.name = name
        self.suggestions: tuple[str, ...] = tuple(
            difflib.get_close_matches(name, known_list, n=5, cutoff=0.6)
        )
        if self.suggestions:
            hint = "did you mean: " + ", ".join(self.suggestions) + "?"
        elif known_list:
            shown = known_list[:10]
            more = f" (and {len(known_list) - len(shown)} more)" if len(known_list) > 10 else ""
            hint = "known: " + ", ".join(shown) + more
        else:
            hint = f"no {what}s are defined"
        super().__init__(f"unknown {what} {name!r}; {hint}")

    def __str__(self) -> str:  # LookupError would repr() a lone argument
        return str(self.args[0])


class UnknownGroupError(UnknownAgentError):
    """A group name that ``define_group`` never defined."""

    def __init__(self, name: str, known: Iterable[str]) -> None:
        super().__init__(name, known, what="group")


# ---------------------------------------------------------------------------------------------
# Values handed to callers
# ---------------------------------------------------------------------------------------------


class Group(msgspec.Struct, frozen=True):
    """A named set of agents. ``missing`` are members whose definitions have since gone."""

    name: str
    members: tuple[AgentSpec, ...]
    missing: tuple[str, ...] = ()


class Team(msgspec.Struct, frozen=True):
    """A manager and the ``keySubAgents`` it names: those defined, and those that are not."""

    manager: AgentSpec
    members: tuple[AgentSpec, ...]
    missing: tuple[str, ...] = ()


class CatalogStats(msgspec.Struct, frozen=True, kw_only=True):
    """Counts for ``subagents agents`` and for logs; built fresh on every call."""

    total: int
    by_level: dict[str, int]
    by_category: dict[str, int]
    by_type: dict[str, int]
    files_scanned: int = 0
    files_loaded: int = 0
    shadowed: int = 0
    issues: int = 0
    errors: int = 0


# ---------------------------------------------------------------------------------------------
# What the catalog needs from a loader (``subagents.definitions.DefinitionLoader``)
# ---------------------------------------------------------------------------------------------


class LoadResultLike(Protocol):
    @property
    def specs(self) -> Mapping[str, AgentSpec]: ...
    @property
    def issues(self) -> Sequence[LoadIssue]: ...
    @property
    def shadowed(self) -> Sequence[Any]: ...
    @property
    def files_scanned(self) -> int: ...
    @property
    def files_loaded(self) -> int: ...


class LoaderLike(Protocol):
    """The slice of ``DefinitionLoader`` the catalog uses (kept structural on purpose)."""

    def load(self) -> LoadResultLike: ...
    def reload(self) -> tuple[LoadResultLike, Any]: ...
    def register(self, spec: AgentSpec) -> None: ...
    def unregister(self, name: str) -> bool: ...


Subscriber = Callable[[Changes], None]


# ---------------------------------------------------------------------------------------------
# The catalog
# ---------------------------------------------------------------------------------------------


class Catalog:
    """Every agent definition the process knows, with lookup, matching, groups and reload.

    Not thread-safe by design: the registry actor owns one and is its only caller. Subscribers
    are called synchronously by whichever method caused the change (on the actor's thread).
    """

    def __init__(
        self,
        loader: LoaderLike | None = None,
        *,
        specs: Iterable[AgentSpec] = (),
        validator: Callable[[AgentSpec], Sequence[LoadIssue]] = validate,
    ) -> None:
        """Build from ``loader`` (loaded now) and/or ``specs`` given in code.

        Without a loader, ``validator`` checks each spec passed to ``register`` (a loader
        validates its own); an issue of severity ``error`` makes ``register`` raise
        ``DefinitionError`` and changes nothing.
        """
        self._loader = loader
        self._validator = validator
        self._own: list[AgentSpec] = []  # specs given in code when there is no loader
        self._specs: dict[str, AgentSpec] = {}
        self._issues: tuple[LoadIssue, ...] = ()
        self._shadowed: tuple[Any, ...] = ()
        self._duplicates: tuple[Any, ...] = ()
        self._seen_shadowed: set[tuple[str, str, str]] = set()
        self._files_scanned = 0
        self._files_loaded = 0
        self._groups: dict[str, tuple[str, ...]] = {}
        self._subscribers: dict[int, Subscriber] = {}
        self._next_token = 0
        self._ranking = AgentRanking()
        self._commands = CommandsAtStart()
        if loader is not None:
            for spec in specs:
                loader.register(spec)
            self._take(loader.load())
        else:
            self._own.extend(specs)
            self._specs = self._resolve_own()
            self._log_shadowed()  # a loader logs its own

    @classmethod
    def from_specs(cls, specs: Iterable[AgentSpec]) -> Catalog:
        """A catalog of specs built in code (no files): the lowest ``level`` wins a name."""
        return cls(specs=specs)

    # -- lookup --------------------------------------------------------------------------------

    def get(self, name: str) -> AgentSpec:
        """The definition called ``name``; ``UnknownAgentError`` (with close matches) if none."""
        spec = self._specs.get(name)
        if spec is None:
            raise UnknownAgentError(name, self._specs)
        return spec

    def has(self, name: str) -> bool:
        return name in self._specs

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __len__(self) -> int:
        return len(self._specs)

    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self._specs))

    def list(self) -> tuple[AgentSpec, ...]:
        """Every definition, sorted by name."""
        return tuple(self._specs[n] for n in sorted(self._specs))

    def by_type(self, type_: str) -> tuple[AgentSpec, ...]:
        wanted = type_.strip().lower()
        return tuple(s for s in self.list() if (s.type or "").strip().lower() == wanted)

    def by_tier(self, tier: int) -> tuple[AgentSpec, ...]:
        return tuple(s for s in self.list() if s.tier == tier)

    def by_capability(self, capability: str) -> tuple[AgentSpec, ...]:
        wanted = capability.strip().lower()
        return tuple(s for s in self.list() if wanted in {c.lower() for c in s.capability_names})

    def by_category(self, category: str) -> tuple[AgentSpec, ...]:
        """Definitions whose category is ``category`` or nested under it (``"a"`` has ``"a/b"``)."""
        return tuple(s for s in self.list() if in_category(s, category))

    def issues(self) -> tuple[LoadIssue, ...]:
        """The loader's issues from the last load or reload."""
        return self._issues

    def shadowed(self) -> tuple[Any, ...]:
        """The loader's ``Shadowed(name, winner, loser)`` records from the last load."""
        return self._shadowed

    def duplicates(self) -> tuple[Any, ...]:
        """Names defined twice at one level in the last load (``Shadowed`` records: the
        file used and the one ignored; each is also one of ``issues``)."""
        return self._duplicates

    # -- matching ------------------------------------------------------------------------------

    def rank(self, requirements: Requirements, limit: int | None = None) -> tuple[Scored, ...]:
        """Candidates with a positive score, best first (``AgentRanking.rank`` says how a
        definition scores: type, capabilities, category, tier, the words of ``text``)."""
        return self._ranking.rank(self._specs, requirements, limit)

    def find_best_match(self, requirements: Requirements) -> AgentSpec | None:
        """The top of ``rank``, or None when nothing scores above zero."""
        best = self.rank(requirements, limit=1)
        return best[0].spec if best else None

    # -- groups and teams ----------------------------------------------------------------------

    def define_group(self, name: str, members: Iterable[str]) -> Group:
        """Name a set of agents. Every member must exist now (``UnknownAgentError`` if not)."""
        if not name or not name.strip():
            raise ValueError("group name must not be empty")
        listed = tuple(dict.fromkeys(members))  # keep order, drop repeats
        for member in listed:
            if member not in self._specs:
                raise UnknownAgentError(member, self._specs)
        self._groups[name] = listed
        return self.group(name)

    def group(self, name: str) -> Group:
        """The group's members still defined, and those whose definitions have gone."""
        listed = self._groups.get(name)
        if listed is None:
            raise UnknownGroupError(name, self._groups)
        return Group(
            name,
            tuple(self._specs[m] for m in listed if m in self._specs),
            tuple(m for m in listed if m not in self._specs),
        )

    def groups(self) -> tuple[str, ...]:
        return tuple(sorted(self._groups))

    def remove_group(self, name: str) -> bool:
        return self._groups.pop(name, None) is not None

    def team(self, name: str) -> Team:
        """A manager's ``keySubAgents``: those defined (in its order) and those missing."""
        manager = self.get(name)
        return Team(
            manager,
            tuple(self._specs[m] for m in manager.key_sub_agents if m in self._specs),
            tuple(m for m in manager.key_sub_agents if m not in self._specs),
        )

    # -- spawning rules ------------------------------------------------------------------------

    def check_type_restriction(self, parent: str, child: str) -> str | None:
        """None if ``parent`` may spawn ``child``, else the reason it may not.

        Both must exist; then the spawn rules of ``definitions.spawn_grant`` (the same ones the
        runtime applies at admission and when it offers the spawn tool): the spawn tool in
        ``tools`` / ``disallowedTools`` (``Agent(name)`` included), no self-spawn without
        ``allowSelfSpawn``, ``allowedChildTypes``. Depth needs a run, so it is not checked here.
        """
        for name in (parent, child):
            if name not in self._specs:
                return str(UnknownAgentError(name, self._specs))
        try:
            grant = SpawnGrant.of(self._specs[parent])
        except SpawnSettingError as exc:
            return f"spawn rule: {parent}: {exc}"
        return grant.refusal(self._specs[child])

    # -- changes -------------------------------------------------------------------------------

    def register(self, spec: AgentSpec) -> Changes:
        """Add or replace a definition in code (level CODE: it wins over every file).

        ``DefinitionError`` (naming the field and value) if the spec is invalid.
        """
        if spec.level != Level.CODE:
            spec = msgspec.structs.replace(spec, level=Level.CODE)
        if self._loader is not None:
            self._loader.register(spec)  # validates, raises DefinitionError
            return self.reload()
        errors = [i for i in self._validator(spec) if i.severity == "error"]
        if errors:
            reasons = "; ".join(i.reason for i in errors)
            raise DefinitionError(f"agent {spec.name!r} is invalid: {reasons}", file=spec.source)
        self._own = [s for s in self._own if not (s.name == spec.name and s.level == Level.CODE)]
        self._own.append(spec)
        changes = self._apply(self._resolve_own())
        self._log_shadowed()
        return changes

    def unregister(self, name: str) -> bool:
        """Remove a definition registered in code; False if ``name`` was not registered in code.

        File definitions come and go with their files. A file definition the removed one was
        shadowing becomes visible again.
        """
        if self._loader is not None:
            if not self._loader.unregister(name):
                return False
            self.reload()
            return True
        kept = [s for s in self._own if not (s.name == name and s.level == Level.CODE)]
        if len(kept) == len(self._own):
            return False
        self._own = kept
        self._apply(self._resolve_own())
        return True

    def reload(self) -> Changes:
        """Pick up changed files (the loader re-parses only those) and tell subscribers."""
        if self._loader is None:
            return Changes()
        started = time.perf_counter()
        result, _ = self._loader.reload()
        before = self._specs
        self._take(result)
        changes = self._diff(before, self._specs)
        # info only when something changed: hot reload polls this every interval
        (log.info if changes else log.debug)(
            "registry reloaded",
            added=len(changes.added),
            changed=len(changes.changed),
            removed=len(changes.removed),
            total=len(self._specs),
            issues=len(self._issues),
            ms=round((time.perf_counter() - started) * 1000, 2),
        )
        self._notify(changes)
        return changes

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call ``callback(changes)`` after each change; returns a function that unsubscribes.

        A subscriber that raises is logged and does not stop the others.
        """
        token = self._next_token
        self._next_token += 1
        self._subscribers[token] = callback

        def unsubscribe() -> None:
            self._subscribers.pop(token, None)

        return unsubscribe

    @property
    def subscriber_count(self) -> int:
        return len(self._subscribers)

    # -- stats ---------------------------------------------------------------------------------

    def stats(self) -> CatalogStats:
        by_level: dict[str, int] = {}
        by_category: dict[str, int] = {}
        by_type: dict[str, int] = {}
        for spec in self._specs.values():
            by_level[spec.level.label] = by_level.get(spec.level.label, 0) + 1
            by_category[spec.category] = by_category.get(spec.category, 0) + 1
            if spec.type:
                by_type[spec.type] = by_type.get(spec.type, 0) + 1
        return CatalogStats(
            total=len(self._specs),
            by_level=by_level,
            by_category=by_category,
            by_type=by_type,
            files_scanned=self._files_scanned,
            files_loaded=self._files_loaded,
            shadowed=len(self._shadowed),
            issues=len(self._issues),
            errors=sum(1 for i in self._issues if i.severity == "error"),
        )

    # -- internals -----------------------------------------------------------------------------

    def _take(self, result: LoadResultLike) -> None:
        self._set_specs(self._commands.hold(dict(result.specs)))  # (commands_at_start.py)
        self._issues = tuple(result.issues)
        self._shadowed = tuple(result.shadowed)
        self._duplicates = tuple(getattr(result, "duplicates", ()))
        self._files_scanned = result.files_scanned
        self._files_loaded = result.files_loaded

    def _set_specs(self, specs: dict[str, AgentSpec]) -> None:
        self._specs = specs
        self._ranking.keep_only(specs)

    def _resolve_own(self) -> dict[str, AgentSpec]:
        """Specs given in code: per name the lowest level wins; at one level, the latest."""
        winners: dict[str, AgentSpec] = {}
        shadowed: list[tuple[str, str, str]] = []
        for spec in self._own:
            current = winners.get(spec.name)
            if current is None or spec.level <= current.level:
                if current is not None:
                    shadowed.append((spec.name, _where(spec), _where(current)))
                winners[spec.name] = spec
            else:
                shadowed.append((spec.name, _where(current), _where(spec)))
        self._shadowed = tuple(shadowed)
        return winners

    def _apply(self, new: dict[str, AgentSpec]) -> Changes:
        before = self._specs
        self._set_specs(new)
        changes = self._diff(before, new)
        self._notify(changes)
        return changes

    @staticmethod
    def _diff(before: Mapping[str, AgentSpec], after: Mapping[str, AgentSpec]) -> Changes:
        return Changes(
            added=tuple(sorted(n for n in after if n not in before)),
            changed=tuple(sorted(n for n in after if n in before and before[n] != after[n])),
            removed=tuple(sorted(n for n in before if n not in after)),
        )

    def _notify(self, changes: Changes) -> None:
        if not changes:
            return
        for token, callback in list(self._subscribers.items()):
            try:
                callback(changes)
            except Exception:
                log.exception("registry subscriber failed", subscriber=token)

    def _log_shadowed(self) -> None:
        for item in self._shadowed:
            key = _shadow_key(item)
            if key not in self._seen_shadowed:
                self._seen_shadowed.add(key)
                log.info("definition shadowed", name=key[0], winner=key[1], loser=key[2])


def _where(spec: AgentSpec) -> str:
    return spec.source or f"<{spec.level.label}>"


def _shadow_key(item: Any) -> tuple[str, str, str]:
    if isinstance(item, tuple):
        return (str(item[0]), str(item[1]), str(item[2]))
    return (str(item.name), str(item.winner), str(item.loser))
