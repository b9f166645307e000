"""``extends``: a definition inheriting from another one, by name or by path.

A catalogue often has a base agent ("reviewer") and variants that narrow or widen it. The
merge is predictable: the child wins for every field it sets (a field left at its default is
"not set"); mappings are merged key by key; a **list field the child sets replaces the
parent's** (so a child can narrow its parent's ``tools``), and ``+field`` adds to what it
inherits instead (``+tools: Write``: the parent's tools and Write). A child that sets a list
and adds to it gets its own list plus the additions.

The parent is named by its ``name``, or by its path relative to the agents folder it was
found in (``extends: core/coder`` is ``<folder>/core/coder.md``; ``.md`` may be written). A
parent that does not exist, a path that matches several files, or a chain that comes back on
itself is an error for the definitions concerned only: they are dropped, everything else
stays. ``bases`` are parents that may be named without being loaded as agents (the built-in
``explore``, ``code`` and ``plan``, for a team read from one folder): a name or path among the
loaded definitions is looked up first, a base last. Known limit: a boolean the parent sets to
true cannot be reset to false by a child.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any

import msgspec

from subagents.definitions.errors import LoadIssue
from subagents.definitions.spec import AgentSpec

_OWN = {"name", "description", "extends", "source", "category", "level", "additions"}
_DEFAULTS = AgentSpec(name="", description="")
_MERGED_FIELDS = tuple(f.name for f in msgspec.structs.fields(AgentSpec) if f.name not in _OWN)


def merge_values(parent: Any, child: Any) -> Any:
    """Merge of two field values: mappings by key (deeply), anything else the child's (a
    list included: a child's list replaces its parent's)."""
    if isinstance(parent, dict) and isinstance(child, dict):
        merged = dict(parent)
        for key, value in child.items():
            merged[key] = merge_values(parent[key], value) if key in parent else value
        return merged
    return child


def with_additions(spec: AgentSpec) -> AgentSpec:
    """``spec`` with its ``+field`` additions appended to its list fields (without duplicates)
    and then forgotten. An addition to ``tools`` left unset (every tool) changes nothing."""
    if not spec.additions:
        return spec
    changes: dict[str, Any] = {"additions": {}}
    for field, added in spec.additions.items():
        current = getattr(spec, field)
        if current is None:
            continue  # every tool already: nothing to add to
        combined = list(current)
        combined.extend(item for item in added if item not in combined)
        changes[field] = tuple(combined)
    return msgspec.structs.replace(spec, **changes)


def merge(parent: AgentSpec, child: AgentSpec) -> AgentSpec:
    """``child`` completed from ``parent`` (already resolved); the child keeps its own
    identity and provenance; its additions apply last."""
    changes: dict[str, Any] = {}
    for name in _MERGED_FIELDS:
        mine = getattr(child, name)
        theirs = getattr(parent, name)
        default = getattr(_DEFAULTS, name)
        if mine == default:
            changes[name] = theirs
        elif theirs != default:
            changes[name] = merge_values(theirs, mine)
    return with_additions(msgspec.structs.replace(child, **changes))


def _path_key(spec: AgentSpec) -> str | None:
    """A definition's path relative to its agents folder, without ``.md`` (``core/coder``)."""
    if not spec.source or spec.source.startswith("<"):
        return None
    stem = PurePosixPath(spec.source.replace("\\", "/")).stem
    return f"{spec.category}/{stem}" if spec.category else stem


def _as_path(extends: str) -> str:
    text = extends.strip().replace("\\", "/")
    while text.startswith("./"):
        text = text[2:]
    return text[: -len(".md")] if text.lower().endswith(".md") else text


def _by_path(specs: Mapping[str, AgentSpec]) -> dict[str, list[AgentSpec]]:
    by_path: dict[str, list[AgentSpec]] = {}
    for spec in specs.values():
        key = _path_key(spec)
        if key is not None:
            by_path.setdefault(key, []).append(spec)
    return by_path


def _parents(
    specs: Mapping[str, AgentSpec], bases: Mapping[str, AgentSpec]
) -> dict[str, str | LoadIssue]:
    """Each ``extends`` resolved to a parent's name (or the reason it cannot be).

    The index by path is built only when some ``extends`` is not a name: most loads have no
    ``extends`` at all, and a path per definition is most of this function's cost."""
    by_path: dict[str, list[AgentSpec]] | None = None
    found: dict[str, str | LoadIssue] = {}
    for spec in specs.values():
        wanted = spec.extends
        if wanted is None:
            continue
        if wanted in specs:
            found[spec.name] = wanted
            continue
        if by_path is None:
            by_path = _by_path(specs)
        matches = by_path.get(_as_path(wanted), [])
        same_level = [m for m in matches if m.level == spec.level]
        matches = same_level or matches
        if len(matches) == 1:
            found[spec.name] = matches[0].name
        elif not matches and wanted in bases:
            found[spec.name] = wanted
        elif matches:
            where = ", ".join(sorted(str(m.source) for m in matches))
            found[spec.name] = _issue(spec, f"extends: path {wanted!r} matches several: {where}")
        else:
            found[spec.name] = _issue(
                spec,
                f"extends: parent {wanted!r} is not defined (neither a name nor a path"
                " relative to the agents folder)",
            )
    return found


def _issue(spec: AgentSpec, reason: str) -> LoadIssue:
    return LoadIssue(reason=reason, file=spec.source, name=spec.name, severity="error")


def resolve_extends(
    specs: Mapping[str, AgentSpec],
    bases: Mapping[str, AgentSpec] | None = None,
) -> tuple[dict[str, AgentSpec], list[LoadIssue]]:
    """Every spec with its ``extends`` chain applied; broken chains dropped with an error each.
    ``bases`` (each complete, without ``extends``) may be parents but are not returned."""
    bases = {name: base for name, base in (bases or {}).items() if name not in specs}
    resolved: dict[str, AgentSpec] = {name: with_additions(base) for name, base in bases.items()}
    failed: dict[str, str] = {}
    issues: list[LoadIssue] = []
    parents = _parents(specs, bases)

    def fail(spec: AgentSpec, reason: str) -> None:
        failed[spec.name] = reason
        issues.append(_issue(spec, reason))

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
                resolved[current] = with_additions(spec)
                chain.pop()
                break
            parent = parents[current]
            if isinstance(parent, LoadIssue):
                failed[current] = parent.reason
                issues.append(parent)
                chain.pop()
                break
            current = parent
        for child in reversed(chain):
            spec = specs[child]
            parent_name = parents[child]
            if isinstance(parent_name, str) and parent_name in resolved:
                resolved[child] = merge(resolved[parent_name], spec)
            else:
                key = parent_name if isinstance(parent_name, str) else ""
                reason = failed.get(key, "see its error")
                fail(spec, f"extends: parent {spec.extends!r} could not be loaded ({reason})")

    for name in specs:
        resolve(name)
    return {name: resolved[name] for name in specs if name in resolved}, issues
