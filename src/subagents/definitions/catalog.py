"""Catalog: the registry's logic as a plain class (no threads), so it is unit tested directly.

The registry actor (``subagents.actors.registry``) is a thin shell around one ``Catalog``: each
message calls one method here. Keeping the decisions (lookup, matching, groups, teams, type
restrictions, reload bookkeeping) in a plain class is what lets them be tested without threads
and hosted by another actor backend later.

A catalog is built from a definition loader (files on disk plus definitions registered in
code) or from specs given in code. Callers only ever see immutable values: ``AgentSpec`` is
frozen, and every collection handed out is a tuple or a freshly built dict.
"""

from __future__ import annotations

import difflib
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

import msgspec

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


class Requirements(msgspec.Struct, frozen=True, kw_only=True):
    """What a caller wants from an agent; every field is optional (see ``Catalog.rank``)."""

    type: str | None = None
    tier: int | None = None
    capabilities: tuple[str, ...] = ()
    category: str | None = None
    text: str | None = None


class Scored(msgspec.Struct, frozen=True):
    """One candidate of ``Catalog.rank``: the spec, its score, and why it scored that."""

    spec: AgentSpec
    score: float
    reasons: tuple[str, ...] = ()


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
# Matching helpers
# ---------------------------------------------------------------------------------------------

_WORD = re.compile(r"[a-z0-9]+")
# fmt: off
_STOPWORDS = frozenset({
    "the", "and", "for", "with", "that", "this", "from", "into", "when", "use", "you", "your",
    "are", "can", "not", "any", "all", "who", "what", "will", "its", "has", "have", "our",
    "should", "must", "may", "also", "then", "than", "them", "they", "agent", "agents", "task",
    "tasks",
})
# fmt: on
_PRIORITY_WORDS = {"critical": 4, "highest": 4, "high": 3, "medium": 2, "normal": 2, "low": 1}

# Weights of ``Catalog.rank`` (documented there).
W_TYPE = 8.0
W_CAPABILITY = 3.0
W_CATEGORY = 3.0
W_TIER = 2.0
W_NAME_WORD = 2.0
W_DESCRIPTION_WORD = 1.0
STEM = 4  # shortest shared prefix that counts as the same word


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) >= 3 and w not in _STOPWORDS}


class _Vocabulary:
    """A text's words plus their prefixes of 4+ letters, so a stem match is a set lookup."""

    __slots__ = ("prefixes", "words")

    def __init__(self, text: str) -> None:
        self.words = _words(text)
        self.prefixes = {w[:i] for w in self.words for i in range(STEM, len(w))}

    def has(self, word: str) -> bool:
        """Exact word, or a shared stem of 4+ letters ("review" ~ "reviewer", "tests" ~ "test")."""
        if word in self.words or word in self.prefixes:
            return True
        return any(word[:i] in self.words for i in range(STEM, len(word)))


def priority_rank(priority: int | str | None) -> int:
    """Priority as a number, higher = preferred: ints as given, words critical>high>medium>low."""
    if priority is None:
        return 0
    if isinstance(priority, int):
        return priority
    text = priority.strip().lower()
    if text.lstrip("-").isdigit():
        return int(text)
    return _PRIORITY_WORDS.get(text, 0)


def _in_category(spec: AgentSpec, category: str) -> bool:
    wanted = category.strip("/").lower()
    have = spec.category.strip("/").lower()
    return have == wanted or have.startswith(wanted + "/")


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
        self._word_cache: dict[str, tuple[AgentSpec, _Vocabulary, _Vocabulary]] = {}
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
        return tuple(s for s in self.list() if _in_category(s, category))

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
        """Candidates with a positive score, best first. The score adds up:

        - ``type`` equal (case-insensitive): +8. The strongest signal: a catalogue's type
          says what an agent is for; a wrong type scores 0 here but is not excluded, so a
          perfect match on everything else can still come up when no agent has the type.
        - each wanted capability the spec has: +3 (capabilities as list or mapping keys).
        - ``category`` equal to, or a parent folder of, the spec's category: +3.
        - ``tier``: +2 minus the distance between tiers (same +2, one off +1, three off -1);
          a spec without a tier gets 0.
        - keywords of ``text`` (words of 3+ letters, minus stop words; stems of 4+ letters
          match "review" to "reviewer"): +2 per keyword found in the name, else +1 if in the
          description.

        Ties go to the higher ``priority`` (ints as given, critical > high > medium > low),
        then to the name in alphabetical order, so the result is deterministic.
        """
        keywords = sorted(_words(requirements.text)) if requirements.text else []
        wanted_type = (requirements.type or "").strip().lower()
        wanted_caps = [c.strip().lower() for c in requirements.capabilities if c.strip()]
        scored: list[Scored] = []
        for name in sorted(self._specs):
            spec, name_words, desc_words = self._words_of(name)
            score = 0.0
            reasons: list[str] = []
            if wanted_type and (spec.type or "").strip().lower() == wanted_type:
                score += W_TYPE
                reasons.append(f"type {spec.type}")
            if wanted_caps:
                have = {c.lower() for c in spec.capability_names}
                hits = [c for c in wanted_caps if c in have]
                if hits:
                    score += W_CAPABILITY * len(hits)
                    reasons.append("capabilities " + ", ".join(hits))
            if requirements.category and _in_category(spec, requirements.category):
                score += W_CATEGORY
                reasons.append(f"category {spec.category}")
            if requirements.tier is not None and spec.tier is not None:
                distance = abs(spec.tier - requirements.tier)
                score += W_TIER - distance
                reasons.append(f"tier {spec.tier} (distance {distance})")
            if keywords:
                in_name = [k for k in keywords if name_words.has(k)]
                in_desc = [k for k in keywords if k not in in_name and desc_words.has(k)]
                if in_name:
                    score += W_NAME_WORD * len(in_name)
                    reasons.append("name matches " + ", ".join(in_name))
                if in_desc:
                    score += W_DESCRIPTION_WORD * len(in_desc)
                    reasons.append("description matches " + ", ".join(in_desc))
            if score > 0:
                scored.append(Scored(spec, score, tuple(reasons)))
        scored.sort(key=lambda s: (-s.score, -priority_rank(s.spec.priority), s.spec.name))
        return tuple(scored if limit is None else scored[:limit])

    def find_best_match(self, requirements: Requirements) -> AgentSpec | None:
        """The top of ``rank``, or None when nothing scores above zero."""
        best = self.rank(requirements, limit=1)
        return best[0].spec if best else None

    def _words_of(self, name: str) -> tuple[AgentSpec, _Vocabulary, _Vocabulary]:
        spec = self._specs[name]
        cached = self._word_cache.get(name)
        if cached is None or cached[0] is not spec:
            cached = (spec, _Vocabulary(spec.name), _Vocabulary(spec.description))
            self._word_cache[name] = cached
        return cached

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
        self._set_specs(dict(result.specs))
        self._issues = tuple(result.issues)
        self._shadowed = tuple(result.shadowed)
        self._duplicates = tuple(getattr(result, "duplicates", ()))
        self._files_scanned = result.files_scanned
        self._files_loaded = result.files_loaded

    def _set_specs(self, specs: dict[str, AgentSpec]) -> None:
        self._specs = specs
        cache = self._word_cache
        self._word_cache = {n: v for n, v in cache.items() if specs.get(n) is v[0]}

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
