"""Everything the store knows about one run (`subagents info RUN`).

Its record (agent, task, status, times, model, limits, usage, outcome), its parent and
children, its todo list (TodoWrite), its mail counts, and the approvals kept in the store it
waits for, with the commands that answer them. RUN is an id, a unique prefix of one, or #N
from `ps`. A row it reads that no longer reads as its record (a child's, an approval's:
hand-edited, ``store.base.DamagedRow``) is left out, the rest shown, and named on stderr
(exit 1), as `ps` does (cli/damaged.py); a damaged row elsewhere in its tree (a grandchild's,
a sibling's) is not in what it shows, and is not named.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from typing import TYPE_CHECKING

import msgspec
from rich.text import Text

from subagents.cli import output
from subagents.cli.command import add_inspect_arguments, emit, inspecting, reports_errors
from subagents.cli.damaged import children_of, said
from subagents.cli.live import STATUS_STYLE
from subagents.cli.output import printable
from subagents.cli.views import duration, stamp
from subagents.cli.waiting_asks import WaitingAsks, marker
from subagents.messages import ApprovalRecord, Mail, RunRecord
from subagents.supervision.ceilings import describe as describe_ceiling
from subagents.tools.todo import TodoItem, checklist, todos_in

if TYPE_CHECKING:
    from subagents.store.base import DamagedRow

NAME = "info"


class ChildRef(msgspec.Struct, frozen=True):
    run_id: str
    agent: str
    status: str
    orphaned: bool = False


class Info(msgspec.Struct, frozen=True, kw_only=True):
    """What `--json` prints: the record, its children, its mail (sent and received), and its
    host: ``orphaned`` when it is unfinished and its host is gone."""

    run: RunRecord
    children: tuple[ChildRef, ...]
    mail: tuple[Mail, ...]
    orphaned: bool = False
    host: str = ""
    restarting: bool = False
    """Its host's process died and Ray is starting it again (a detached tree's)."""
    todos: tuple[TodoItem, ...] | None = None
    """Its todo list (its last TodoWrite call), None if it never wrote one."""
    topics: tuple[str, ...] = ()
    """The topics it is subscribed to (mail to ``topic:NAME`` of its tree reaches it)."""
    approvals: tuple[ApprovalRecord, ...] = ()
    """The approvals kept in the store that it waits for (`subagents approve ID`)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_inspect_arguments(parser)


@reports_errors(NAME)
def run(args: argparse.Namespace) -> int:
    damaged: list[DamagedRow] = []  # (named after the view: exit 1)
    info = gather(args, damaged)
    emit(args, info, lambda: show(info))
    return said(NAME, damaged)


def gather(args: argparse.Namespace, damaged: list[DamagedRow] | None = None) -> Info:
    """What the store knows of ``args.run_ref``; ``damaged``: a child's or an approval's
    row that does not read is left out and named there (else it raises)."""
    met: list[DamagedRow] | None = None if damaged is None else []
    with inspecting(args) as (store, alive, record):
        tree = store.list_runs(root_run_id=record.root_run_id, include_archived=True, damaged=met)
        if damaged is not None:  # (a child's row; one elsewhere in the tree is not shown)
            damaged.extend(children_of(record.run_id, met or [], record.root_run_id))
        mail = store.mail_for(record.run_id)
        todos = todos_in(store.events(record.run_id))
        topics = tuple(s.topic for s in store.subscriptions([record.run_id]))
        listed = store.list_approvals(run_id=record.run_id, damaged=damaged)
        asks = WaitingAsks(listed).of(record.run_id)
    children = tuple(
        ChildRef(r.run_id, r.agent, str(r.status), alive.orphaned(r))
        for r in tree
        if r.parent_run_id == record.run_id
    )
    return Info(
        run=record,
        children=children,
        mail=tuple(mail),
        orphaned=alive.orphaned(record),
        host=alive.describe(record),
        restarting=alive.restarting(record),
        todos=todos,
        topics=topics,
        approvals=asks,
    )


def show(info: Info) -> None:
    r = info.run
    out = output.console()
    title = Text()
    title.append(f"{printable(r.agent)} ", style="bold")
    title.append(printable(r.run_id))
    title.append("  ")
    if info.restarting:
        title.append(f"restarting ({r.status}; Ray is starting its host again)", style="yellow")
    elif info.orphaned:
        title.append(f"orphaned ({r.status} when its host was lost)", style="bold red")
    else:
        title.append(str(r.status), style=STATUS_STYLE.get(r.status, ""))
        if info.approvals:
            ids = [a.approval_id for a in info.approvals]
            title.append(f" ({marker(ids)})", style="bold yellow")
    out.print(title)
    u = r.usage
    fields: list[tuple[str, str]] = [
        ("task", r.task),
        ("context", r.context or "-"),
        ("label", r.label or "-"),
        ("model", _model(r)),
        ("depth", str(r.depth)),
        ("parent", (r.parent_run_id or "- (root)") + (" (detached: outlives it)" * r.detached)),
        ("root", r.root_run_id),
        *(
            [("continues", f"{r.continues} (its conversation, then the task)")]
            if r.continues
            else []
        ),
        ("host", info.host + ("; `subagents resume` continues it" if info.orphaned else "")),
        *([("node", r.node)] if r.node else []),
        ("created", stamp(r.created_at)),
        ("started", stamp(r.started_at)),
        ("ended", stamp(r.ended_at)),
        ("elapsed", duration(r)),
        ("timeout", f"{r.deadline_s:g}s"),
        ("token budget", str(r.token_budget) if r.token_budget is not None else "-"),
        ("steps", str(r.steps)),
        ("restarts", str(r.restarts)),
        (
            "tokens",
            f"{u.total_tokens} (input {u.input_tokens}, output {u.output_tokens}, cache write"
            f" {u.cache_creation_input_tokens}, cache read {u.cache_read_input_tokens})",
        ),
        ("cost", f"${u.cost_usd:.4f} ({u.model_calls} model calls)"),
    ]
    held = describe_ceiling(r.ceiling)
    if held is not None:  # what its requesters hold it to (permissions narrow down the tree)
        fields.append(("permissions", held))
    if r.outcome is not None:
        if r.outcome.ok:
            fields.append(("result", r.outcome.result or ""))
        else:
            fields.append(("error", f"{r.outcome.error_kind}: {r.outcome.error}"))
    if info.children:
        fields.append(
            (
                "children",
                "\n".join(
                    f"{c.agent} {c.run_id} {'orphaned' if c.orphaned else c.status}"
                    for c in info.children
                ),
            )
        )
    if info.approvals:
        fields.append(("approvals", _asks(info.approvals)))
    if info.todos is not None:
        fields.append(("todos", checklist(info.todos) or "(empty)"))
    if info.topics:
        fields.append(("topics", ", ".join(f"topic:{t}" for t in info.topics)))
    if info.mail:
        sent = sum(1 for m in info.mail if m.sender == r.run_id)
        states = Counter(str(m.state) for m in info.mail if m.recipient == r.run_id)
        received = ", ".join(f"{n} {state}" for state, n in sorted(states.items())) or "none"
        fields.append(("mail", f"{sent} sent; received: {received}"))
    width = max(len(k) for k, _ in fields)
    for key, value in fields:
        lines = printable(value).split("\n") or [""]
        out.print(Text(f"{key:<{width}}  ", style="bold") + Text(lines[0]), soft_wrap=True)
        for line in lines[1:]:
            out.print(Text(" " * (width + 2) + line), soft_wrap=True)
    sys.stdout.flush()


def _model(r: RunRecord) -> str:
    """The model asked for, and what answered when it was not that one (the offline model)."""
    asked = r.model or "-"
    if r.answered_by is None:
        return asked
    return f"{asked} (answered offline by the {r.answered_by} model)"


def _asks(approvals: tuple[ApprovalRecord, ...]) -> str:
    """Each pending approval: its id, the call and why it is asked, and how to answer it."""
    lines: list[str] = []
    for a in approvals:
        call = msgspec.json.encode(a.input).decode()
        lines.append(f"{a.approval_id}  {a.tool} {call[:100]}  ({a.reason})")
        lines.append(
            f"  answer: subagents approve {a.approval_id}  |  subagents deny {a.approval_id}"
        )
    return "\n".join(lines)
