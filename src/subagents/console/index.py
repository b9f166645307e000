"""The runs the console shows, held in memory: one small row per run, their tree, filters, pages.

Why in memory: the page's tree is the newest trees first, each depth-first, filtered by
status, agent, label or requester; a store of 100,000 runs cannot be read and sorted again
for every page and every update within the 200 ms a watcher expects (benchmarks/console.py).
So the store is read once (``feed.StoreFeed.load``) into rows, and each change the feed sees
replaces one row. Pure: no I/O, no clock, no threads (the feed and the app serialise calls).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Mapping, Sequence

import msgspec

from subagents.console.limits import clipped
from subagents.messages import RunRecord

LIVE = frozenset({"queued", "running", "waiting", "orphaned", "restarting"})
"""The statuses of unfinished runs as shown (``live`` in a status filter names them all)."""
OUTSIDE = "outside"
"""The requester of a root run (a program or a person, not a run)."""
TASK_CHARS = 200
"""How much of a task a row carries (its page shows the whole)."""


class Row(msgspec.Struct, frozen=True, kw_only=True):
    """One run as the tree shows it (JSON for the page; every text is shown as text)."""

    id: str
    parent: str | None
    root: str
    root_created: float
    agent: str
    status: str
    """The status people see: the stored one, or ``orphaned``/``restarting``."""
    depth: int
    created: float
    started: float | None
    ended: float | None
    steps: int
    tokens: int
    cost: float
    label: str | None
    task: str
    node: str | None


def row_of(record: RunRecord, status: str, root_created: float) -> Row:
    return Row(
        id=record.run_id,
        parent=record.parent_run_id,
        root=record.root_run_id,
        root_created=root_created,
        agent=record.agent,
        status=status,
        depth=record.depth,
        created=record.created_at,
        started=record.started_at,
        ended=record.ended_at,
        steps=record.steps,
        tokens=record.usage.total_tokens,
        cost=record.usage.cost_usd,
        label=record.label,
        task=" ".join(record.task[: TASK_CHARS * 2].split())[:TASK_CHARS],
        node=record.node,
    )


class BadFilter(ValueError):
    """A filter the page (or a URL) gave that means nothing; the message names it."""


class RunFilter(msgspec.Struct, frozen=True, kw_only=True):
    """Which runs to show. ``statuses``: shown statuses (``live`` for the unfinished ones,
    ``orphaned`` for those whose host is gone); ``requester``: a run id (its children) or
    ``outside`` (root runs); empty fields filter nothing."""

    statuses: frozenset[str] = frozenset()
    agent: str | None = None
    label: str | None = None
    requester: str | None = None

    @classmethod
    def parse(cls, params: Mapping[str, str]) -> RunFilter:
        """From a URL's query: ``status=running,failed&agent=A&label=L&requester=R``."""
        known = {
            "queued",
            "running",
            "waiting",
            "completed",
            "failed",
            "cancelled",
            "timed_out",
            "budget_exceeded",
            "orphaned",
            "restarting",
            "live",
        }
        statuses = {s.strip() for s in params.get("status", "").split(",") if s.strip()}
        unknown = sorted(statuses - known)
        if unknown:
            raise BadFilter(
                f"status {clipped(', '.join(unknown))}: not a status ({', '.join(sorted(known))})"
            )
        if "live" in statuses:
            statuses = (statuses - {"live"}) | LIVE

        def text(name: str) -> str | None:
            value = params.get(name, "").strip()
            return value or None

        return cls(
            statuses=frozenset(statuses),
            agent=text("agent"),
            label=text("label"),
            requester=text("requester"),
        )

    @property
    def empty(self) -> bool:
        return not (self.statuses or self.agent or self.label or self.requester)

    def matches(self, row: Row) -> bool:
        if self.statuses and row.status not in self.statuses:
            return False
        if self.agent is not None and row.agent != self.agent:
            return False
        if self.label is not None and row.label != self.label:
            return False
        if self.requester is None:
            return True
        if self.requester == OUTSIDE:
            return row.parent is None
        return row.parent is not None and (
            row.parent == self.requester
            or (len(self.requester) >= 6 and row.parent.endswith(self.requester))
        )


class Page(msgspec.Struct, frozen=True, kw_only=True):
    """A page of the tree: whole groups (one root's tree each, newest root first), and the
    cursor of the next page (``None``: none older)."""

    rows: list[Row]
    more: str | None
    total: int
    """Runs in the store (all, not only the matching ones)."""
    cut: dict[str, int] = msgspec.field(default_factory=dict)
    """Root id -> runs of its tree that match but were left out (past ``per_tree``)."""
    version: int = 0
    """The last batch of changes the page holds (the app's count; a stream's batches up to
    it are already in the page)."""
    damaged: dict[str, str] = msgspec.field(default_factory=dict)
    """Runs whose record does not read, left out of the listing: run id -> what is wrong
    (``feed.StoreFeed.damaged``)."""


class RunIndex:
    """Every run of the store as a ``Row``, with its tree (parent -> children, in order of
    creation) and its roots in order of creation."""

    def __init__(self) -> None:
        self.rows: dict[str, Row] = {}
        self._children: dict[str, list[tuple[float, str]]] = {}
        self._roots: list[tuple[float, str]] = []

    def __len__(self) -> int:
        return len(self.rows)

    def put(self, record: RunRecord, status: str) -> Row:
        """Add or replace the run's row; the row as the page shows it."""
        root = self.rows.get(record.root_run_id)
        root_created = (
            record.created_at if record.parent_run_id is None else root.created if root else 0.0
        )
        row = row_of(record, status, root_created)
        if record.run_id not in self.rows:
            key = (record.created_at, record.run_id)
            if record.parent_run_id is None:
                bisect.insort(self._roots, key)
            else:
                bisect.insort(self._children.setdefault(record.parent_run_id, []), key)
        self.rows[record.run_id] = row
        return row

    def children(self, run_id: str) -> list[Row]:
        """The rows of the run's children, oldest first."""
        return [self.rows[c] for _, c in self._children.get(run_id, ()) if c in self.rows]

    def tree(self, root: str) -> Iterator[Row]:
        """The rows of ``root``'s tree, depth-first, each run's children oldest first."""
        stack = [root]
        while stack:
            run_id = stack.pop()
            row = self.rows.get(run_id)
            if row is None:
                continue
            yield row
            stack.extend(child for _, child in reversed(self._children.get(run_id, ())))

    def page(
        self,
        keep: RunFilter,
        *,
        before: str | None = None,
        trees: int = 25,
        per_tree: int = 500,
    ) -> Page:
        """Up to ``trees`` trees with a run that ``keep`` matches, newest root first, older
        than the root ``before`` (the previous page's cursor); at most ``per_tree`` rows of
        each (the rest counted in ``cut``)."""
        end = len(self._roots)
        if before is not None:
            row = self.rows.get(before)
            if row is not None:
                end = bisect.bisect_left(self._roots, (row.created, row.id))
        rows: list[Row] = []
        cut: dict[str, int] = {}
        found = 0
        position = end
        while position > 0 and found < trees:
            position -= 1
            root = self._roots[position][1]
            matched = [r for r in self.tree(root) if keep.matches(r)]
            if not matched:
                continue
            found += 1
            rows.extend(matched[:per_tree])
            if len(matched) > per_tree:
                cut[root] = len(matched) - per_tree
        more = self._roots[position][1] if found == trees and position > 0 else None
        return Page(rows=rows, more=more, total=len(self.rows), cut=cut)

    def changed(self, rows: Sequence[Row], keep: RunFilter) -> tuple[list[Row], list[str]]:
        """Of rows that changed: those ``keep`` matches (to show or update), and the ids of
        those it no longer matches (to take off the page if there)."""
        shown = [row for row in rows if keep.matches(row)]
        kept = {row.id for row in shown}
        return shown, [row.id for row in rows if row.id not in kept]
