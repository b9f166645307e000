"""The runtime: ``Runtime``, the one object an embedding program holds, and its parts.

Every module of this package is private (``_runtime.py``: the ``Runtime`` and its public
methods; ``_assembly.py``: its arguments checked and turned into agents, a catalog, a model;
``_services.py``: the threads it starts and their orderly end, a cluster's backend if asked;
``_supervisor_asks.py``: every ask of the supervisor; ``_root_runs.py`` and
``_root_waiters.py``: root runs and where their outcomes land; ``_run_handle.py``,
``_run_views.py``, ``_run_waits.py``, ``_run_endings.py``: handles, views, waits;
``_fan_out.py``: ``fan_out``/``synthesize``; ``_lease_keeper.py``: the lease kept alive;
``_cluster_backend.py``: what it asks of a cluster, the one way to ``cluster/``;
``_detached_trees.py``: ``start_detached``, a tree hosted by a detached Ray actor;
``_approvals.py``: ``pending_approvals``/``answer_approval``, durable approvals from any
process that can open the store; ``_store_reach.py``: the store kept out of the runs'
reach, ``StoreInReach``), as
pykka keeps its own behind its ``__init__``: what a program may use is named here (and in
``subagents``), and the modules behind it may be split or renamed without breaking it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from subagents.runtime._approvals import answer_approval, pending_approvals
from subagents.runtime._assembly import AgentLike
from subagents.runtime._run_handle import RunHandle
from subagents.runtime._runtime import Runtime, SpawnOptions
from subagents.runtime._store_reach import StoreInReach
from subagents.runtime._supervisor_asks import RuntimeClosed
from subagents.supervision.admission import AdmissionError

if TYPE_CHECKING:
    from subagents.runtime._detached_trees import DetachedTree, start_detached

__all__ = [
    "AdmissionError",
    "AgentLike",
    "DetachedTree",
    "RunHandle",
    "Runtime",
    "RuntimeClosed",
    "SpawnOptions",
    "StoreInReach",
    "answer_approval",
    "pending_approvals",
    "start_detached",
]


def __getattr__(name: str) -> Any:
    """``start_detached`` and ``DetachedTree``, loaded on first use: they need ``cluster/``,
    which a runtime without a cluster never imports."""
    if name in ("DetachedTree", "start_detached"):
        from subagents.runtime import _detached_trees

        return getattr(_detached_trees, name)
    raise AttributeError(f"module 'subagents.runtime' has no attribute {name!r}")
