"""Runs as people read them: ages, durations, token counts, trees built from the store.

Why a module of its own: `ps`, `info`, `tree` and `log` show the same facts the same way,
and they read them from the durable store only (another process owns the runtime), so the
tree view here is built from stored records, not from a live Runtime.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import msgspec
from rich.text import Text
from rich.tree import Tree

from subagents.cli.live import STATUS_STYLE
from subagents.cli.output import printable
from subagents.cli.waiting_asks import WaitingAsks, marker
from subagents.messages import RunRecord, TreeNode
from subagents.store.leases import Liveness
from subagents.supervision.tree import tree_view


def age(since: float | None, now: float | None = None) -> str:
    """``since`` as a compact age: ``42s``, ``7m``, ``3h``, ``2d`` (``-`` when unknown)."""
    if not since:
        return "-"
    seconds = max(0.0, (time.time() if now is None else now) - since)
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds // 60:.0f}m"
    if seconds < 86400:
        return f"{seconds // 3600:.0f}h"
    return f"{seconds // 86400:.0f}d"


def duration(record: RunRecord | TreeNode, now: float | None = None) -> str:
    """How long the run has been (or was) running, ``12.3s``; ``-`` before it started."""
    if record.started_at is None:
        return "-"
    end = record.ended_at or (time.time() if now is None else now)
    return f"{max(0.0, end - record.started_at):.1f}s"


def stamp(ts: float | None) -> str:
    """A UTC wall-clock time, ``2026-11-22 03:18:57Z``."""
    if not ts:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(ts))


def build_tree(
    root: RunRecord,
    records: Sequence[RunRecord],
    alive: Liveness | None = None,
    asks: WaitingAsks | None = None,
) -> TreeNode:
    """The execution tree under ``root`` from the records of its root tree, with totals
    (and, given the store's leases, which unfinished nodes are orphaned; given the pending
    approvals, which approvals each node waits for)."""
    tree = tree_view(root, records)
    if alive is None:
        return tree
    by_id = {r.run_id: r for r in records}
    return _mark(tree, by_id, alive, asks or WaitingAsks())


def _mark(
    node: TreeNode, by_id: dict[str, RunRecord], alive: Liveness, asks: WaitingAsks
) -> TreeNode:
    record = by_id.get(node.run_id)
    return msgspec.structs.replace(
        node,
        orphaned=record is not None and alive.orphaned(record),
        approvals=asks.ids(node.run_id),
        children=tuple(_mark(c, by_id, alive, asks) for c in node.children),
    )


def clock(ts: float) -> str:
    """``HH:MM:SS.mmm`` (UTC) of a Unix time: how `log` and `events` stamp their lines."""
    return time.strftime("%H:%M:%S", time.gmtime(ts)) + f".{int(ts * 1000) % 1000:03d}"


def one_line(text: str | None, width: int) -> str:
    """``text`` printable, on one line, cut to ``width`` with an ellipsis."""
    line = " ".join(printable(text or "").split())
    return line if len(line) <= width else line[: max(width - 1, 0)].rstrip() + "…"


def node_label(
    node: TreeNode, short: str, now: float | None = None, writing: str | None = None
) -> Text:
    """One run of a tree on one line; ``writing``: the end of what its model is writing."""
    text = Text()
    text.append(printable(node.agent), style="bold")
    text.append(f" {short} ", style="dim")
    if node.orphaned:
        text.append("orphaned", style="bold red")
    else:
        text.append(str(node.status), style=STATUS_STYLE.get(node.status, ""))
        if node.approvals:
            text.append(f" ({marker(node.approvals)})", style="bold yellow")
    text.append(
        f"  depth {node.depth}  {duration(node, now)}  steps {node.steps}"
        f"  tok {node.usage.total_tokens}"
    )
    if node.children:
        text.append(f" (subtree {node.subtree_usage.total_tokens})")
    detail = node.error if node.error else node.result
    if detail:
        text.append(f"  {one_line(detail, 70)}", style="dim")
    if writing and not node.status.terminal:
        line = " ".join(printable(writing).split())
        text.append(f"  ✎ {'…' + line[-59:] if len(line) > 60 else line}", style="green dim")
    return text


def render_tree(
    node: TreeNode,
    shorts: dict[str, str],
    now: float | None = None,
    writing: Mapping[str, str] | None = None,
) -> Tree:
    """``writing``: by run id, what each run's model is writing (its store preview)."""
    said = (writing or {}).get(node.run_id)
    label = node_label(node, shorts.get(node.run_id, node.run_id), now, said)
    tree = Tree(label, guide_style="dim")
    for child in node.children:
        tree.add(render_tree(child, shorts, now, writing))
    return tree


def walk(node: TreeNode) -> list[TreeNode]:
    """The nodes of a tree, parents before children."""
    out = [node]
    for child in node.children:
        out.extend(walk(child))
    return out
