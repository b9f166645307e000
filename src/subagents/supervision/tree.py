"""The run tree: who spawned whom, walked without threads."""

from __future__ import annotations

from collections.abc import Callable, Iterable, KeysView, Mapping
from dataclasses import dataclass
from typing import Protocol

from subagents.messages import RunRecord, TreeNode

Prune = Callable[[str], bool] | None
"""Which runs a walk leaves out with their subtrees (a detached child's); None: none."""


class Node(Protocol):
    """What the tree reads of a run: its place, fixed for its life."""

    parent_id: str | None
    root_id: str
    depth: int


@dataclass(slots=True)
class _Link:
    """A run's place in a tree that keeps its own nodes (``RunTree()``)."""

    parent_id: str | None
    root_id: str
    depth: int


class RunTree:
    """Parent/child links of runs, for stops (deepest first), name lookup and scoping.

    A run's place (its parent, root and depth) is read from ``nodes``: the runs' own records
    when the tree is given them (``RunTable``'s ``RunState``s: a run is in the tree while it
    is held, and forgetting it is the table's one pop), or links it keeps itself
    (``RunTree()``, its runs put in by ``add``). Only the lists of children are the tree's:
    most runs have none, and hold nothing here."""

    def __init__(self, nodes: Mapping[str, Node] | None = None) -> None:
        self._own: dict[str, _Link] | None = None
        if nodes is None:
            nodes = self._own = {}
        self._nodes: Mapping[str, Node] = nodes
        self._children: dict[str, list[str]] = {}
        self.parents: KeysView[str] = self._children.keys()
        """The runs that have children (a live view: ``run_id in tree.parents`` is
        ``has_children`` without its calls)."""

    def add(self, run_id: str, parent_run_id: str | None) -> None:
        """``run_id`` under ``parent_run_id`` (None: a root). Given its nodes, the tree
        reads the run's place from them (it must be there): only a child is linked."""
        own = self._own
        if own is not None:
            above = own.get(parent_run_id) if parent_run_id is not None else None
            if parent_run_id is None:
                own[run_id] = _Link(None, run_id, 0)
            elif above is None:  # (its parent not held: where the tree saw it last)
                own[run_id] = _Link(parent_run_id, parent_run_id, 1)
            else:
                own[run_id] = _Link(parent_run_id, above.root_id, above.depth + 1)
        if parent_run_id is not None:
            # (a run's list of children is made with its first child: most runs have none)
            self._children.setdefault(parent_run_id, []).append(run_id)

    def __contains__(self, run_id: object) -> bool:
        return run_id in self._nodes

    def parent(self, run_id: str) -> str | None:
        node = self._nodes.get(run_id)
        return node.parent_id if node is not None else None

    def children(self, run_id: str) -> list[str]:
        return list(self._children.get(run_id, ()))

    def has_children(self, run_id: str) -> bool:
        return run_id in self._children

    def root(self, run_id: str) -> str:
        node = self._nodes.get(run_id)
        return node.root_id if node is not None else run_id

    def ancestors(self, run_id: str) -> list[str]:
        """Parent first, root last."""
        out: list[str] = []
        nodes = self._nodes
        node = nodes.get(run_id)
        current = node.parent_id if node is not None else None
        while current is not None:
            out.append(current)
            node = nodes.get(current)
            current = node.parent_id if node is not None else None
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
        nodes = self._nodes

        def deeper_first(r: str) -> int:
            node = nodes.get(r)
            return -node.depth if node is not None else 0

        return sorted(self.subtree(run_id, prune), key=deeper_first)

    def in_root(self, root_run_id: str) -> Iterable[str]:
        return self.subtree(root_run_id)

    def forget(self, run_ids: Iterable[str]) -> None:
        """Drop finished subtrees (their records live on in the store). Given its nodes,
        the tree leaves them to their owner to drop, after this (it reads their parents)."""
        nodes, own, children = self._nodes, self._own, self._children
        for run_id in run_ids:
            node = nodes.get(run_id)
            if own is not None:
                own.pop(run_id, None)
            children.pop(run_id, None)
            parent = node.parent_id if node is not None else None
            if parent is None:
                continue
            kids = children.get(parent)
            if kids is not None and run_id in kids:
                kids.remove(run_id)
                if not kids:  # (``parents`` lists only runs with children)
                    del children[parent]


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
