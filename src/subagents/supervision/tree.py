"""The run tree: who spawned whom, walked without threads."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable

from subagents.messages import RunRecord, TreeNode

Prune = Callable[[str], bool] | None
"""Which runs a walk leaves out with their subtrees (a detached child's); None: none."""


class RunTree:
    """Parent/child links of runs, for stops (deepest first), name lookup and scoping."""

    def __init__(self) -> None:
        self._parent: dict[str, str | None] = {}
        self._children: dict[str, list[str]] = {}
        self._root: dict[str, str] = {}
        self._depth: dict[str, int] = {}

    def add(self, run_id: str, parent_run_id: str | None) -> None:
        self._parent[run_id] = parent_run_id
        # (a run's list of children is made with its first child: most runs have none)
        if parent_run_id is None:
            self._root[run_id] = run_id
            self._depth[run_id] = 0
        else:
            self._children.setdefault(parent_run_id, []).append(run_id)
            self._root[run_id] = self._root.get(parent_run_id, parent_run_id)
            self._depth[run_id] = self._depth.get(parent_run_id, 0) + 1

    def __contains__(self, run_id: object) -> bool:
        return run_id in self._parent

    def parent(self, run_id: str) -> str | None:
        return self._parent.get(run_id)

    def children(self, run_id: str) -> list[str]:
        return list(self._children.get(run_id, ()))

    def has_children(self, run_id: str) -> bool:
        return bool(self._children.get(run_id))

    def root(self, run_id: str) -> str:
        return self._root.get(run_id, run_id)

    def ancestors(self, run_id: str) -> list[str]:
        """Parent first, root last."""
        out: list[str] = []
        current = self._parent.get(run_id)
        while current is not None:
            out.append(current)
            current = self._parent.get(current)
        return out

    def is_descendant(self, run_id: str, of: str) -> bool:
        return of in self.ancestors(run_id)

    def subtree(self, run_id: str, prune: Prune = None) -> list[str]:
        """``run_id`` and every descendant, breadth first; without the descendants for
        which ``prune`` is true, nor theirs (a detached child's subtree, for a walk that
        leaves it alone)."""
        out = [run_id]
        i = 0
        while i < len(out):
            below = self._children.get(out[i], ())
            out.extend(below if prune is None else (c for c in below if not prune(c)))
            i += 1
        return out

    def deepest_first(self, run_id: str, prune: Prune = None) -> list[str]:
        """The subtree (``subtree``) ordered so that every run comes before its parent."""
        return sorted(self.subtree(run_id, prune), key=lambda r: -self._depth.get(r, 0))

    def in_root(self, root_run_id: str) -> Iterable[str]:
        return self.subtree(root_run_id)

    def forget(self, run_ids: Iterable[str]) -> None:
        """Drop finished subtrees (their records live on in the store)."""
        for run_id in run_ids:
            parent = self._parent.pop(run_id, None)
            self._children.pop(run_id, None)
            self._root.pop(run_id, None)
            self._depth.pop(run_id, None)
            if parent is not None and parent in self._children:
                with contextlib.suppress(ValueError):
                    self._children[parent].remove(run_id)


def tree_view(root: RunRecord, records: Iterable[RunRecord]) -> TreeNode:
    """The execution tree under ``root`` from stored records, with subtree usage totals.

    Pure, so that both the Runtime and the command line (which reads the store without
    starting a runtime) show the same tree.
    """
    children: dict[str | None, list[RunRecord]] = {}
    for r in sorted(records, key=lambda r: (r.created_at, r.run_id)):
        children.setdefault(r.parent_run_id, []).append(r)

    def build(r: RunRecord) -> TreeNode:
        kids = tuple(build(c) for c in children.get(r.run_id, ()))
        total = r.usage
        for kid in kids:
            total = total + kid.subtree_usage
        return TreeNode(
            run_id=r.run_id,
            agent=r.agent,
            status=r.status,
            depth=r.depth,
            steps=r.steps,
            usage=r.usage,
            subtree_usage=total,
            task=r.task,
            result=r.outcome.result if r.outcome else None,
            error=r.outcome.error if r.outcome else None,
            started_at=r.started_at,
            ended_at=r.ended_at,
            children=kids,
        )

    return build(root)
