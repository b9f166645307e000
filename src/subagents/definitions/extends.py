"""``extends``: a definition inheriting from another one by name.

A catalogue often has a base agent ("reviewer") and variants that add tools or tighten
limits. The merge is deep and predictable: the child wins for every field it sets (a field
left at its default is "not set"); mappings are merged key by key; lists are concatenated,
parent first, without duplicates. A parent that does not exist, or a chain that comes back on
itself, is an error for the definitions concerned only: they are dropped, everything else
stays. Known limit: a boolean the parent sets to true cannot be reset to false by a child.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from subagents.definitions.errors import LoadIssue
from subagents.definitions.spec import AgentSpec

_OWN = {"name", "description", "extends", "source", "category", "level"}
_DEFAULTS = AgentSpec(name="", description="")
_MERGED_FIELDS = tuple(f.name for f in msgspec.structs.fields(AgentSpec) if f.name not in _OWN)


def merge_values(parent: Any, child: Any) -> Any:
    """Deep merge of two field values: mappings by key, sequences concatenated, else child."""
    if isinstance(parent, dict) and isinstance(child, dict):
        merged = dict(parent)
        for key, value in child.items():
            merged[key] = merge_values(parent[key], value) if key in parent else value
        return merged
    if isinstance(parent, list | tuple) and isinstance(child, list | tuple):
        combined = list(parent)
        for item in child:
            if item not in combined:
                combined.append(item)
        return tuple(combined) if isinstance(child, tuple) else combined
    return child


def merge(parent: AgentSpec, child: AgentSpec) -> AgentSpec:
    """``child`` completed from ``parent``; the child keeps its own identity and provenance."""
    changes: dict[str, Any] = {}
    for name in _MERGED_FIELDS:
        mine = getattr(child, name)
        theirs = getattr(parent, name)
        default = getattr(_DEFAULTS, name)
        if mine == default:
            changes[name] = theirs
        elif theirs != default:
            changes[name] = merge_values(theirs, mine)
    return msgspec.structs.replace(child, **changes)


def resolve_extends(
    specs: Mapping[str, AgentSpec],
) -> tuple[dict[str, AgentSpec], list[LoadIssue]]:
    """Every spec with its ``extends`` chain applied; broken chains dropped with an error each."""
    resolved: dict[str, AgentSpec] = {}
    failed: dict[str, str] = {}
    issues: list[LoadIssue] = []

    def fail(spec: AgentSpec, reason: str) -> None:
        failed[spec.name] = reason
        issues.append(LoadIssue(reason=reason, file=spec.source, name=spec.name, severity="error"))

    def resolve(name: str) -> None:
        # Walk up the chain iteratively (no recursion limit on long chains), then merge down.
        chain: list[str] = []
        current = name
        while current not in resolved and current not in failed:
            if current in chain:
                loop = [*chain[chain.index(current) :], current]
                for member in loop[:-1]:
                    fail(specs[member], f"extends: cycle {' -> '.join(loop)}")
                chain = chain[: chain.index(current)]
                break
            chain.append(current)
            spec = specs[current]
            if spec.extends is None:
                resolved[current] = spec
                chain.pop()
                break
            if spec.extends not in specs:
                fail(spec, f"extends: parent {spec.extends!r} is not defined")
                chain.pop()
                break
            current = spec.extends
        for child in reversed(chain):
            spec = specs[child]
            parent_name = spec.extends or ""
            if parent_name in resolved:
                resolved[child] = merge(resolved[parent_name], spec)
            else:
                reason = failed.get(parent_name, "see its error")
                fail(spec, f"extends: parent {parent_name!r} could not be loaded ({reason})")

    for name in specs:
        resolve(name)
    return {name: resolved[name] for name in specs if name in resolved}, issues
