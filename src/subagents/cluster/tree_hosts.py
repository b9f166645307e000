"""The names of detached trees' hosts in Ray, and whether Ray still lists one.

Why in ``cluster/``: the store's readers (``ClusterStore.host_listed``, through
``store.leases.Liveness``) ask whether a tree's host is being started again, and they sit
below the runtime, which starts the hosts (``runtime/_detached_trees.py``).
"""

from __future__ import annotations

from subagents.cluster.connect import NAMESPACE, import_ray

TREE_HOST_PREFIX = "subagents-tree-"
"""The names of the tree hosts (``ray list actors`` shows them; one per detached tree)."""


def tree_host_listed(name: str) -> bool:
    """Whether the tree host ``name`` still exists in Ray: alive, or being started again
    after its process died (Ray keeps a detached actor's name until it is dead for good:
    ended on purpose, or its restarts given up). A name not of a tree host: False."""
    if not name.startswith(TREE_HOST_PREFIX):
        return False
    ray = import_ray()
    try:
        ray.get_actor(name, namespace=NAMESPACE)
    except ValueError:  # no such actor (any more)
        return False
    return True
