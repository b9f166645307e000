"""Matching an agent to what a caller wants: ``Requirements`` in, candidates scored out.

Why apart from the catalog: scoring (the weights, the words and their stems, priorities) is a
concept of its own, read and tuned without the catalog's lookup, groups and reloads;
``Catalog.rank`` hands it the current definitions. Plain functions and one small cache, no
threads, so it is tested directly (tests/registry/test_catalog.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import msgspec

from subagents.definitions.spec import AgentSpec


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

# Weights of ``AgentRanking.rank`` (documented there).
W_TYPE = 8.0
W_CAPABILITY = 3.0
W_CATEGORY = 3.0
W_TIER = 2.0
W_NAME_WORD = 2.0
W_DESCRIPTION_WORD = 1.0
STEM = 4  # shortest shared prefix that counts as the same word


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) >= 3 and w not in _STOPWORDS}


class Vocabulary:
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


def in_category(spec: AgentSpec, category: str) -> bool:
    wanted = category.strip("/").lower()
    have = spec.category.strip("/").lower()
    return have == wanted or have.startswith(wanted + "/")


class AgentRanking:
    """``Catalog.rank``'s scoring, with each definition's words kept while it is unchanged
    (cut into words once, not on every call). Not thread-safe: the catalog's one caller owns it."""

    def __init__(self) -> None:
        self._cache: dict[str, tuple[AgentSpec, Vocabulary, Vocabulary]] = {}

    def rank(
        self,
        specs: Mapping[str, AgentSpec],
        requirements: Requirements,
        limit: int | None = None,
    ) -> tuple[Scored, ...]:
        """The candidates among ``specs`` with a positive score, best first. The score adds up:

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
        for name in sorted(specs):
            spec, name_words, desc_words = self._words_of(name, specs[name])
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
            if requirements.category and in_category(spec, requirements.category):
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

    def _words_of(self, name: str, spec: AgentSpec) -> tuple[AgentSpec, Vocabulary, Vocabulary]:
        cached = self._cache.get(name)
        if cached is None or cached[0] is not spec:
            cached = (spec, Vocabulary(spec.name), Vocabulary(spec.description))
            self._cache[name] = cached
        return cached

    def keep_only(self, specs: Mapping[str, AgentSpec]) -> None:
        """Forget the words of definitions that are gone or replaced."""
        self._cache = {n: v for n, v in self._cache.items() if specs.get(n) is v[0]}
