"""Resource usage of a run's tree, live or ended: tokens, cost, model calls, steps, tool
calls, per run and for the whole subtree (what ``getResourceUsage`` gives in other runtimes).

Why from records: every run's record carries what it has used so far (the supervisor updates
it at each step and tool call), so the usage of any tree is one walk over its records. The
supervisor walks the records it holds in memory (the freshest: a live tree); for a tree it
has forgotten, or one another runtime hosts, the same walk runs over the store's records.
Pure: records in, a ``TreeUsage`` out.
"""

from __future__ import annotations

from collections.abc import Iterable

from subagents.messages import RunRecord, RunUsage, TreeUsage, Usage


def tree_usage(run_id: str, records: Iterable[RunRecord]) -> TreeUsage:
    """The usage of ``run_id`` and its descendants among ``records`` (its tree's records);
    ``LookupError`` when ``run_id`` is not among them."""
    by_id = {r.run_id: r for r in records}
    top = by_id.get(run_id)
    if top is None:
        raise LookupError(f"no run with id {run_id!r}")
    children: dict[str, list[RunRecord]] = {}
    for record in sorted(by_id.values(), key=lambda r: (r.created_at, r.run_id)):
        if record.parent_run_id is not None:
            children.setdefault(record.parent_run_id, []).append(record)
    per_run: list[RunUsage] = []
    usage = Usage()
    steps = tool_calls = live = 0
    level = [top]
    while level:  # breadth first: parents before their children
        following: list[RunRecord] = []
        for record in level:
            per_run.append(
                RunUsage(
                    run_id=record.run_id,
                    agent=record.agent,
                    status=record.status,
                    parent_run_id=record.parent_run_id,
                    depth=record.depth,
                    steps=record.steps,
                    tool_calls=record.tool_calls,
                    usage=record.usage,
                )
            )
            usage = usage + record.usage
            steps += record.steps
            tool_calls += record.tool_calls
            live += not record.status.terminal
            following.extend(children.get(record.run_id, ()))
        level = following
    return TreeUsage(
        run_id=run_id,
        status=top.status,
        runs=len(per_run),
        live=live,
        steps=steps,
        tool_calls=tool_calls,
        usage=usage,
        per_run=tuple(per_run),
    )
