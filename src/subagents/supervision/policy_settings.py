"""Policy settings of a run: restarts, failure handling, cost budget, context handed down.

Why a separate reader: these settings come from a definition's typed fields (checked when
its file loads: ``definitions.validate``), from the same keys in the metadata of a spec built
in code the old way, and from spawn arguments. Reading them in one place gives one clear
error naming the agent, the key and the bad value, instead of a policy silently not applying.

Definition keys (camelCase or snake_case): ``maxRestarts``, ``restartPeriod``,
``restartBackoff``, ``restartBackoffMax``, ``onFailure``, ``maxRetries``, ``costBudget``,
``sharedContext`` (keys this agent receives from its parent), ``inheritMessages``.
"""

from __future__ import annotations

import functools
from typing import Any

import msgspec

from subagents.definitions.spec import AgentSpec, RestartPolicy
from subagents.definitions.validate import number_problem
from subagents.messages.records import ON_FAILURE, OnFailure


class PolicyError(ValueError):
    """A policy setting with a value that cannot work; names where it came from."""


class Policy(msgspec.Struct, frozen=True, kw_only=True):
    """Everything the supervisor needs to know about how to treat one run's failures."""

    restart: RestartPolicy = "temporary"
    max_restarts: int = 3
    restart_period_s: float = 60.0
    backoff_s: float = 0.05
    backoff_max_s: float = 5.0
    on_failure: OnFailure = "report"
    max_retries: int = 2
    cost_budget_usd: float | None = None
    shared_keys: tuple[str, ...] = ()
    inherit_messages: bool = False


@functools.cache
def _snake(camel: str) -> str:
    """``maxRestarts`` -> ``max_restarts``; cached: ``policy_of`` runs on every admission."""
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)


def _get(meta: dict[str, Any], camel: str) -> Any:
    if camel in meta:
        return meta[camel]
    return meta.get(_snake(camel))


def _where(spec: AgentSpec, key: str) -> str:
    return f"agent {spec.name!r} ({spec.source or 'registered in code'}): {key}"


def on_failure_value(where: str, value: Any) -> OnFailure:
    if value not in ON_FAILURE:
        raise PolicyError(f"{where} must be one of {', '.join(ON_FAILURE)}, got {value!r}")
    return value  # type: ignore[no-any-return]


def shared_keys_value(where: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [k.strip() for k in value.split(",") if k.strip()]
    if not isinstance(value, list | tuple) or not all(isinstance(k, str) for k in value):
        raise PolicyError(f"{where} must be a list of key names, got {value!r}")
    return tuple(value)


_known: dict[int, tuple[AgentSpec, Policy]] = {}
"""Policies read before, by the id of the (immutable) definition they were read from."""


def policy_of(spec: AgentSpec) -> Policy:
    """The policy a definition asks for; ``PolicyError`` naming the key for a bad value.

    Remembered per definition object: every admission asks, and reading it anew is a
    noticeable part of a trivial run's supervisor work. Definitions are immutable; the object
    is kept with its policy, so a new definition at a reused id is never mistaken for it."""
    known = _known.get(id(spec))
    if known is not None and known[0] is spec:
        return known[1]
    policy = _read_policy(spec)
    if len(_known) >= 1024:  # reloads make new definitions: stay bounded
        _known.clear()
    _known[id(spec)] = (spec, policy)
    return policy


def _read_policy(spec: AgentSpec) -> Policy:
    """The typed fields of ``spec`` (files set them; ``validate`` checked them when the file
    loaded), else the same keys in its metadata (a spec built in code the old way)."""
    meta = spec.metadata
    fields: dict[str, Any] = {"restart": spec.restart}
    numbers = (
        ("maxRestarts", spec.max_restarts, "max_restarts", True, 0, True),
        ("restartPeriod", spec.restart_period, "restart_period_s", False, 0, False),
        ("restartBackoff", spec.restart_backoff, "backoff_s", False, 0, True),
        ("restartBackoffMax", spec.restart_backoff_max, "backoff_max_s", False, 0, True),
        ("maxRetries", spec.max_retries, "max_retries", True, 0, True),
        ("costBudget", spec.cost_budget, "cost_budget_usd", False, 0, False),
    )
    for key, typed, field, integer, low, low_ok in numbers:
        value = typed if typed is not None else _get(meta, key)
        if value is None:
            continue
        problem = number_problem(value, integer=integer, low=low, low_ok=low_ok)
        if problem is not None:
            raise PolicyError(f"{_where(spec, key)} {problem}")
        fields[field] = value
    on_failure = spec.on_failure if spec.on_failure is not None else _get(meta, "onFailure")
    if on_failure is not None:
        fields["on_failure"] = on_failure_value(_where(spec, "onFailure"), on_failure)
    shared = spec.shared_context
    if shared is None:
        shared = _get(meta, "sharedContext")
    if shared is not None:
        fields["shared_keys"] = shared_keys_value(_where(spec, "sharedContext"), shared)
    inherit = spec.inherit_messages
    if inherit is None:
        inherit = _get(meta, "inheritMessages")
    if inherit is not None:
        if not isinstance(inherit, bool):
            raise PolicyError(
                f"{_where(spec, 'inheritMessages')} must be true or false, got {inherit!r}"
            )
        fields["inherit_messages"] = inherit
    return Policy(**fields)
