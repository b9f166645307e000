"""Synthesis: one answer from the outcomes of several runs, with every disagreement reported.

Why pure functions: fan-out is the commonest multi-agent pattern, and how the answers are
combined must be predictable and testable without threads. Each strategy takes ``Item``s (a
source run, its value, its weight) and returns a ``Synthesis``: the combined ``value``, the
``conflicts`` found on the way (never silently resolved), the ``sources`` used and the items
that ``failed`` (a run that did not complete contributes nothing, and is named).

The data types and the value comparison rules live in ``synthesis_values`` (re-exported here,
so callers import from one place). ``collect`` combines nothing: it lists the values in order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, get_args

import msgspec

from subagents.supervision.synthesis_values import (
    Conflict,
    Item,
    Synthesis,
    SynthesisError,
    canonical,
    empty,
    kind,
    outcome_value,
    parse_value,
)

__all__ = [
    "STRATEGIES",
    "Conflict",
    "Item",
    "Strategy",
    "Synthesis",
    "SynthesisError",
    "best_pick",
    "canonical",
    "chain",
    "check_strategy",
    "collect",
    "consensus",
    "merge",
    "outcome_value",
    "parse_value",
    "synthesize",
    "vote",
    "weighted_average",
]

Strategy = Literal[
    "merge", "vote", "consensus", "best_pick", "weighted_average", "chain", "collect"
]
STRATEGIES: tuple[str, ...] = get_args(Strategy)


def check_strategy(strategy: str, scorer: Callable[[Any], float] | None) -> None:
    """``SynthesisError`` for a strategy that cannot run as asked: checked before any run is
    started or waited for, not after."""
    if strategy not in STRATEGIES:
        raise SynthesisError(
            f"unknown synthesis strategy {strategy!r}; known: {', '.join(STRATEGIES)}"
        )
    if strategy == "best_pick" and scorer is None:
        raise SynthesisError("best_pick needs a scorer: a function from a value to a number")


def synthesize(
    strategy: str,
    items: Iterable[Item],
    *,
    threshold: float = 0.5,
    scorer: Callable[[Any], float] | None = None,
    weights: Mapping[str, float] | None = None,
) -> Synthesis:
    """Combine ``items`` by ``strategy`` (one of ``STRATEGIES``); see each strategy's doc."""
    all_items = list(items)
    if strategy not in STRATEGIES:
        raise SynthesisError(
            f"unknown synthesis strategy {strategy!r}; known: {', '.join(STRATEGIES)}"
        )
    if strategy == "chain":
        return chain(all_items)
    if strategy == "collect":
        return collect(all_items)
    good = [i for i in all_items if i.ok]
    failed = tuple((i.source, i.error or "failed") for i in all_items if not i.ok)
    if strategy == "merge":
        result = merge(good)
    elif strategy == "vote":
        result = vote(good)
    elif strategy == "consensus":
        result = consensus(good, threshold=threshold)
    elif strategy == "best_pick":
        if scorer is None:
            raise SynthesisError("best_pick needs a scorer: a function from a value to a number")
        result = best_pick(good, scorer)
    else:
        result = weighted_average(good, weights=weights)
    return msgspec.structs.replace(result, failed=failed)


# ---- merge ------------------------------------------------------------------------------------


def merge(items: Sequence[Item]) -> Synthesis:
    """Deep-merge JSON objects and concatenate lists; differing scalars are conflicts.

    At a conflicting path the first source's value is kept and every value is reported.
    """
    if not items:
        return empty("merge")
    conflicts: list[Conflict] = []
    value = items[0].value
    for item in items[1:]:
        value = _merge_two(value, item.value, "$", items[0].source, item.source, conflicts)
    return Synthesis(
        strategy="merge",
        value=value,
        conflicts=tuple(conflicts),
        sources=tuple(i.source for i in items),
    )


def _merge_two(
    left: Any, right: Any, path: str, lsrc: str, rsrc: str, conflicts: list[Conflict]
) -> Any:
    if isinstance(left, dict) and isinstance(right, dict):
        out = dict(left)
        for key, rvalue in right.items():
            if key in out:
                out[key] = _merge_two(out[key], rvalue, f"{path}.{key}", lsrc, rsrc, conflicts)
            else:
                out[key] = rvalue
        return out
    if isinstance(left, list) and isinstance(right, list):
        return [*left, *right]
    if canonical(left) == canonical(right):
        return left
    reason = (
        "different values"
        if kind(left) == kind(right)
        else f"cannot merge {kind(left)} with {kind(right)}"
    )
    conflicts.append(Conflict(path=path, reason=reason, values=(left, right), sources=(lsrc, rsrc)))
    return left


# ---- vote -------------------------------------------------------------------------------------


def _tally(items: Sequence[Item]) -> list[tuple[str, Any, list[str]]]:
    """(key, value, sources) per distinct value, most common first, ties in first-seen order."""
    groups: dict[str, tuple[Any, list[str]]] = {}
    for item in items:
        key = canonical(item.value)
        if key not in groups:
            groups[key] = (item.value, [])
        groups[key][1].append(item.source)
    ranked = sorted(groups.items(), key=lambda kv: -len(kv[1][1]))  # stable: first seen wins
    return [(key, value, sources) for key, (value, sources) in ranked]


def vote(items: Sequence[Item]) -> Synthesis:
    """The most common value. A tie for first place is a conflict (the first seen of the tied
    values is returned); the outvoted answers are reported as a conflict too."""
    if not items:
        return empty("vote")
    ranked = _tally(items)
    _, value, sources = ranked[0]
    tied = [r for r in ranked if len(r[2]) == len(sources)]
    conflicts: tuple[Conflict, ...] = ()
    if len(tied) > 1:
        conflicts = (
            Conflict(
                path="$",
                reason=f"tie: {len(tied)} values with {len(sources)} vote(s) each",
                values=tuple(v for _, v, _ in tied),
                sources=tuple(s[0] for _, _, s in tied),
            ),
        )
    elif len(ranked) > 1:
        dissent = [(v, s) for _, v, ss in ranked[1:] for s in ss]
        conflicts = (
            Conflict(
                path="$",
                reason=f"outvoted: {len(sources)}/{len(items)} vote(s) won",
                values=tuple(v for v, _ in dissent),
                sources=tuple(s for _, s in dissent),
            ),
        )
    return Synthesis(strategy="vote", value=value, conflicts=conflicts, sources=tuple(sources))


# ---- consensus --------------------------------------------------------------------------------


def consensus(items: Sequence[Item], *, threshold: float = 0.5) -> Synthesis:
    """Field-by-field agreement: a field is kept when more than ``threshold`` of all inputs
    give it the same value (default 0.5: a strict majority). Other fields are conflicts.

    Objects are compared key by key (a missing key counts as no agreement); any other value
    is one field, ``$``.
    """
    if not 0.0 <= threshold < 1.0:
        raise SynthesisError(f"consensus threshold must be in [0, 1), got {threshold!r}")
    if not items:
        return empty("consensus")
    n = len(items)
    conflicts: list[Conflict] = []
    if all(isinstance(i.value, dict) for i in items):
        keys: list[str] = []
        for item in items:
            keys.extend(k for k in item.value if k not in keys)
        value: dict[str, Any] = {}
        for key in keys:
            present = [Item(source=i.source, value=i.value[key]) for i in items if key in i.value]
            agreed = _agree(present, n, threshold, f"$.{key}", conflicts)
            if agreed is not _NO:
                value[key] = agreed
        return Synthesis(
            strategy="consensus",
            value=value,
            conflicts=tuple(conflicts),
            sources=tuple(i.source for i in items),
        )
    agreed = _agree(list(items), n, threshold, "$", conflicts)
    return Synthesis(
        strategy="consensus",
        value=None if agreed is _NO else agreed,
        conflicts=tuple(conflicts),
        sources=tuple(i.source for i in items),
        error="no agreement above the threshold" if agreed is _NO else None,
    )


_NO: Any = object()


def _agree(
    present: list[Item], n: int, threshold: float, path: str, conflicts: list[Conflict]
) -> Any:
    ranked = _tally(present)
    _, value, sources = ranked[0]
    share = len(sources) / n
    tied = len(ranked) > 1 and len(ranked[1][2]) == len(sources)
    if share > threshold and not tied:
        if len(ranked) > 1:
            dissent = [(v, s) for _, v, ss in ranked[1:] for s in ss]
            conflicts.append(
                Conflict(
                    path=path,
                    reason=f"agreed by {len(sources)}/{n}; dissent kept out",
                    values=tuple(v for v, _ in dissent),
                    sources=tuple(s for _, s in dissent),
                )
            )
        return value
    conflicts.append(
        Conflict(
            path=path,
            reason=f"no agreement: best {len(sources)}/{n} is not above {threshold:g}",
            values=tuple(v for _, v, _ in ranked),
            sources=tuple(ss[0] for _, _, ss in ranked),
        )
    )
    return _NO


# ---- best_pick --------------------------------------------------------------------------------


def best_pick(items: Sequence[Item], scorer: Callable[[Any], float]) -> Synthesis:
    """The value with the highest ``scorer(value)``. A tie or a scorer error is a conflict."""
    if not items:
        return empty("best_pick")
    conflicts: list[Conflict] = []
    scored: list[tuple[float, Item]] = []
    for item in items:
        try:
            score = float(scorer(item.value))
        except Exception as exc:
            conflicts.append(
                Conflict(
                    path="$",
                    reason=f"scorer failed: {type(exc).__name__}: {exc}",
                    values=(item.value,),
                    sources=(item.source,),
                )
            )
            continue
        scored.append((score, item))
    if not scored:
        return Synthesis(
            strategy="best_pick",
            conflicts=tuple(conflicts),
            error="the scorer failed on every input",
        )
    top = max(score for score, _ in scored)
    best = [item for score, item in scored if score == top]
    if len(best) > 1 and len({canonical(i.value) for i in best}) > 1:
        conflicts.append(
            Conflict(
                path="$",
                reason=f"tie: {len(best)} values score {top:g}",
                values=tuple(i.value for i in best),
                sources=tuple(i.source for i in best),
            )
        )
    return Synthesis(
        strategy="best_pick",
        value=best[0].value,
        conflicts=tuple(conflicts),
        sources=(best[0].source,),
    )


# ---- weighted_average -------------------------------------------------------------------------


def weighted_average(
    items: Sequence[Item], *, weights: Mapping[str, float] | None = None
) -> Synthesis:
    """The average of numeric values, each weighted by ``weights[agent]`` (else its item's
    ``weight``). Values that are not numbers are left out and reported as conflicts."""
    if not items:
        return empty("weighted_average")
    conflicts: list[Conflict] = []
    total = 0.0
    weight_sum = 0.0
    used: list[str] = []
    for item in items:
        value = item.value
        if isinstance(value, bool) or not isinstance(value, int | float):
            conflicts.append(
                Conflict(
                    path="$",
                    reason=f"not a number ({kind(value)}): left out of the average",
                    values=(value,),
                    sources=(item.source,),
                )
            )
            continue
        weight = weights.get(item.agent, item.weight) if weights else item.weight
        if weight < 0:
            raise SynthesisError(f"weight of {item.agent or item.source} is negative: {weight}")
        total += float(value) * weight
        weight_sum += weight
        used.append(item.source)
    if not used:
        return Synthesis(
            strategy="weighted_average",
            conflicts=tuple(conflicts),
            error="no numeric inputs to average",
        )
    if weight_sum == 0:
        return Synthesis(
            strategy="weighted_average",
            conflicts=tuple(conflicts),
            sources=tuple(used),
            error="the weights of the numeric inputs add up to 0",
        )
    return Synthesis(
        strategy="weighted_average",
        value=total / weight_sum,
        conflicts=tuple(conflicts),
        sources=tuple(used),
    )


# ---- chain ------------------------------------------------------------------------------------


def chain(items: Sequence[Item]) -> Synthesis:
    """The last link's value (each run's output was the next one's input). A failed link ends
    the chain: the links after it never ran, and the error names it."""
    if not items:
        return empty("chain")
    for index, item in enumerate(items):
        if not item.ok:
            return Synthesis(
                strategy="chain",
                value=None,
                sources=tuple(i.source for i in items[:index]),
                failed=((item.source, item.error or "failed"),),
                error=f"link {index} ({item.agent or item.source}) failed: {item.error}",
            )
    return Synthesis(
        strategy="chain", value=items[-1].value, sources=tuple(i.source for i in items)
    )


# ---- collect ----------------------------------------------------------------------------------


def collect(items: Sequence[Item]) -> Synthesis:
    """Every value, in the order of the inputs, nothing combined: ``value[i]`` is input
    ``i``'s value, None for an input that failed (each failure is listed in ``failed``, so a
    None value and a failed input are never confused)."""
    if not items:
        return empty("collect")
    return Synthesis(
        strategy="collect",
        value=[item.value if item.ok else None for item in items],
        sources=tuple(item.source for item in items if item.ok),
        failed=tuple((i.source, i.error or "failed") for i in items if not i.ok),
    )
