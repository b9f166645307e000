"""Finding and joining a Ray cluster, and the names this runtime's Ray actors go by.

Why one module: every entry point (``Runtime(cluster=...)``, ``subagents run --ray``, the
inspecting commands) must resolve an address the same way and fail the same way when Ray is
missing or the cluster cannot be reached, with a message that says what to do.

Ray is imported here, lazily (``import_ray``): the base install does not have it.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Any

RAY_ADDRESS_ENV = "SUBAGENTS_RAY_ADDRESS"
"""The cluster to use when none is given: an address (``host:port`` of the head's GCS,
``ray://host:port`` for Ray Client) or ``auto`` (the cluster ``ray start`` started here)."""

NAMESPACE = "subagents"
"""The Ray namespace of every named actor of this runtime: a driver finds them whatever
namespace it was started in."""

HEAD_ACTOR = "subagents-head"
"""The name of the head actor (the store, the membership; one per cluster by default)."""

INSTALL_HINT = "pip install 'subagents[ray]'"


class ClusterError(Exception):
    """Ray is missing, or the cluster cannot be reached or used; the message says which."""


def import_ray() -> ModuleType:
    """The ``ray`` module, or a ``ClusterError`` that says how to install it."""
    try:
        return importlib.import_module("ray")  # typed as a module with or without Ray's stubs
    except ImportError as exc:  # the base install: no Ray
        raise ClusterError(f"Ray is not installed ({exc}); {INSTALL_HINT}") from exc


def resolve_address(address: str | None) -> str | None:
    """The cluster to join: ``address`` if given, else ``$SUBAGENTS_RAY_ADDRESS``, else None
    (no cluster: the runtime stays in this process). An empty string means none as well."""
    chosen = address if address is not None else os.environ.get(RAY_ADDRESS_ENV)
    if chosen is None:
        return None
    if not isinstance(chosen, str):  # (else an AttributeError: no .strip)
        raise ClusterError(f"cluster must be a Ray address or 'auto', got {chosen!r}")
    chosen = chosen.strip()
    if not chosen:
        return None
    if any(c.isspace() for c in chosen):
        raise ClusterError(f"Ray address {chosen!r}: contains whitespace")
    return chosen


def connect(address: str) -> Any:
    """Join the cluster at ``address`` as a driver (nothing is done if this process already
    is one: a test's or a program's own ``ray.init`` wins). Returns the ``ray`` module.

    The driver does not print its workers' logs (``log_to_driver=False``): a subagents
    command's output is its own, and the runtime logs through structlog."""
    ray = import_ray()
    if ray.is_initialized():
        return ray
    try:
        ray.init(
            address=address,
            namespace=NAMESPACE,
            log_to_driver=False,
            logging_level="ERROR",
            configure_logging=False,
        )
    except ConnectionError as exc:
        raise ClusterError(f"cannot reach the Ray cluster at {address!r}: {exc}") from exc
    except (RuntimeError, ValueError) as exc:  # bad address forms, no cluster for "auto"
        raise ClusterError(f"cannot join the Ray cluster at {address!r}: {exc}") from exc
    return ray
