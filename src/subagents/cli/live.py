"""The live tree: what a person watches while runs work, and the summary after.

``LiveTree`` subscribes to a Runtime's events (on the supervisor thread: it only updates a
dict under a lock) and renders, on the caller's thread, a rich Tree of runs with status,
agent, depth, elapsed time, steps and tokens. On a terminal it redraws in place (rich Live);
on a pipe or with NO_COLOR it prints plain text once at the end.

A waiting run that lent its concurrency slot to a queued run (``parked``, see
``supervision/parking.py``) says so (``waiting (parked)``, and a journal line): without it
the demo showed five children working at once under a limit of 4 (a parked `writer` had lent
its slot) and a newcomer could not see why (session 32).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group, RenderableType
from rich.text import Text
from rich.tree import Tree

from subagents.cli.output import printable
from subagents.cli.state import short_id
from subagents.cli.waiting_asks import marker
from subagents.messages import Event, EventKind, RunRecord, RunStatus
from subagents.tools.todo import progress, todos_of_call

if TYPE_CHECKING:
    from subagents.cli.approvals import TerminalApprovals

STATUS_STYLE = {
    RunStatus.QUEUED: "yellow",
    RunStatus.RUNNING: "cyan",
    RunStatus.WAITING: "blue",
    RunStatus.COMPLETED: "green",
    RunStatus.FAILED: "red",
    RunStatus.CANCELLED: "magenta",
    RunStatus.TIMED_OUT: "red",
    RunStatus.BUDGET_EXCEEDED: "red",
}

_KIND_STATUS = {
    EventKind.QUEUED: RunStatus.QUEUED,
    EventKind.STARTED: RunStatus.RUNNING,
    EventKind.WAITING: RunStatus.WAITING,
    EventKind.COMPLETED: RunStatus.COMPLETED,
    EventKind.FAILED: RunStatus.FAILED,
    EventKind.CANCELLED: RunStatus.CANCELLED,
    EventKind.TIMED_OUT: RunStatus.TIMED_OUT,
    EventKind.BUDGET_EXCEEDED: RunStatus.BUDGET_EXCEEDED,
}

_TERMINAL_KINDS = frozenset(
    {
        EventKind.COMPLETED,
        EventKind.FAILED,
        EventKind.CANCELLED,
        EventKind.TIMED_OUT,
        EventKind.BUDGET_EXCEEDED,
    }
)


_RUNTIME_TOOLS = frozenset(
    {
        "spawn_subagent",
        "Task",
        "send_message",
        "check_mailbox",
        "wait_for_message",
        "stop_subagent",
        "load_skill",
        "fan_out",
        "subscribe",
        "unsubscribe",
        "subagent_status",
    }
)
_PATH_KEYS = ("file_path", "notebook_path", "path")


def tool_summary(data: Mapping[str, Any], width: int = 60) -> str:
    """A tool call in a few words: ``Grep 'def median'``, ``Edit stats.py``, ``Bash sh
    test.sh``."""
    tool = str(data.get("tool", "?"))
    args = data.get("input")
    detail = ""
    if isinstance(args, Mapping):
        if tool == "Bash":
            detail = " ".join(str(args.get("command", "")).split())
        elif tool in ("Grep", "Glob"):
            detail = repr(str(args.get("pattern", "")))
        else:
            path = next((args[k] for k in _PATH_KEYS if isinstance(args.get(k), str)), None)
            if path is not None:
                detail = path.rstrip("/").rsplit("/", 1)[-1] or path
            elif tool == "spawn_subagent":
                detail = str(args.get("agent", ""))
            elif tool == "Task":
                detail = str(args.get("subagent_type", ""))
    text = f"{tool} {detail}".strip()
    return text if len(text) <= width else text[: width - 1] + "…"


@dataclass
class Row:
    run_id: str
    agent: str
    depth: int
    parent: str | None
    status: RunStatus = RunStatus.QUEUED
    steps: int = 0
    tokens: int = 0
    started: float | None = None
    ended: float | None = None
    note: str = ""
    mail: int = 0
    todos: str = ""
    """The run's todo list in one line (``todos 2/5: Running tests``), from TodoWrite."""
    writing: str = ""
    """The end of what its model has streamed in the step under way (``text_delta``)."""
    children: list[str] = field(default_factory=list)
    approvals: list[str] = field(default_factory=list)
    """The approvals kept in the store it waits for (asked, not yet answered)."""
    parked: bool = False
    """It waits without its concurrency slot (lent to a queued run: ``parked``) until it
    gets one again (``unparked``) or ends."""


class LiveTree:
    """Keeps the state of every run it hears of, for display."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.rows: dict[str, Row] = {}
        self.roots: list[str] = []
        self.journal: list[str] = []
        self._t0: float | None = None

    def seed(self, records: Iterable[RunRecord]) -> None:
        """Rows for runs that began before this tree heard of them (a resumed tree)."""
        with self._lock:
            for r in sorted(records, key=lambda r: (r.depth, r.created_at)):
                if r.run_id in self.rows:
                    continue
                row = Row(
                    r.run_id,
                    r.agent,
                    r.depth,
                    r.parent_run_id,
                    status=r.status,
                    steps=r.steps,
                    tokens=r.usage.total_tokens,
                    started=r.started_at,
                    ended=r.ended_at,
                )
                self.rows[r.run_id] = row
                parent = self.rows.get(r.parent_run_id or "")
                if parent is not None:
                    parent.children.append(r.run_id)
                else:
                    self.roots.append(r.run_id)

    def on_event(self, event: Event) -> None:
        with self._lock:
            row = self.rows.get(event.run_id)
            if row is None:
                row = Row(event.run_id, event.agent, event.depth, event.parent_run_id)
                self.rows[event.run_id] = row
                parent = self.rows.get(event.parent_run_id or "")
                if parent is not None:
                    parent.children.append(event.run_id)
                else:
                    self.roots.append(event.run_id)
            self._journal(event)
            status = _KIND_STATUS.get(event.kind)
            if event.kind is EventKind.TEXT_DELTA:
                row.writing = writing_after(row.writing, event.data)
                return
            if event.kind is EventKind.STEP:
                row.writing = ""
                row.steps = int(event.data.get("step", row.steps + 1))
                row.tokens += int(event.data.get("input_tokens", 0)) + int(
                    event.data.get("output_tokens", 0)
                )
                if row.status is RunStatus.WAITING:
                    row.status = RunStatus.RUNNING
            elif event.kind is EventKind.MAIL_SENT:
                row.mail += int(event.data.get("count", 1))  # one event per step and recipient
            elif event.kind is EventKind.QUEUED:
                row.note = f"queued #{event.data.get('position', '?')}"
            elif event.kind in (EventKind.PARKED, EventKind.UNPARKED):
                row.parked = event.kind is EventKind.PARKED and not row.status.terminal
            elif event.kind is EventKind.APPROVAL_ASKED:
                row.approvals.append(str(event.data.get("approval_id", "?")))
            elif event.kind is EventKind.APPROVAL_ANSWERED:
                answered = str(event.data.get("approval_id", "?"))
                row.approvals = [a for a in row.approvals if a != answered]
            elif event.kind is EventKind.TOOL_CALL and not row.status.terminal:
                row.note = tool_summary(event.data)
                listed = todos_of_call(event)
                if listed is not None:
                    row.todos = progress(listed)
            if status is not None and not row.status.terminal:
                row.status = status
                if event.kind is EventKind.STARTED or status.terminal:
                    row.parked = False  # (a new start has its slot; an end holds none)
                if status is RunStatus.RUNNING:
                    row.started = event.ts
                    row.note = ""
                if status.terminal:
                    row.ended = event.ts
                    row.note = str(event.data["error"]) if event.data.get("error") else ""

    def _journal(self, event: Event) -> None:
        """A plain line for transitions worth reading in a log (pipes, CI)."""
        if self._t0 is None:
            self._t0 = event.ts
        who = f"{'  ' * event.depth}{event.agent} {short_id(event.run_id)}"
        kind, data = event.kind, event.data
        if kind is EventKind.QUEUED:
            what = f"queued (position {data.get('position', '?')}, concurrency limit reached)"
        elif kind is EventKind.MAIL_SENT:
            recipient = str(data.get("recipient", "?"))
            target = self.rows.get(recipient)
            name = target.agent if target else short_id(recipient)
            count = int(data.get("count", 1))
            what = f"sent {count} mails to {name}" if count > 1 else f"mailed {name}"
        elif kind is EventKind.RESTARTED:
            what = (
                f"{data.get('mode', 'restart')} #{data.get('attempt', '?')} in"
                f" {data.get('delay_s', 0):.2f}s after {data.get('error_kind')}:"
                f" {data.get('error')}"
            )
        elif kind is EventKind.TOOL_CALL and str(data.get("tool", "")) not in _RUNTIME_TOOLS:
            what = tool_summary(data)  # what the agent does with its hands (Read, Bash...)
        elif kind is EventKind.APPROVAL_ASKED:
            ask = data.get("approval_id", "?")
            what = f"waits for approval {ask} ({data.get('tool', '?')}): `subagents approve {ask}`"
        elif kind is EventKind.APPROVAL_ANSWERED:
            what = f"approval {data.get('approval_id', '?')} answered: " + (
                "allowed" if data.get("allow") else "denied"
            )
        elif kind is EventKind.PARKED:
            what = "parked: waits without its slot, lent to a queued run"
        elif kind is EventKind.UNPARKED:
            what = "unparked: has a slot again"
        elif kind is EventKind.STARTED and data.get("resumed"):
            what = "resumed from its checkpoint"
        elif kind is EventKind.STARTED or kind in _TERMINAL_KINDS:
            what = str(kind)
            if data.get("error"):
                what += f": {data['error']}"
        else:
            return
        self.journal.append(printable(f"{event.ts - self._t0:6.2f}s  {who}  {what}"))

    def drain(self) -> list[str]:
        with self._lock:
            lines, self.journal = self.journal, []
            return lines

    def render(self, now: float | None = None) -> RenderableType:
        now = time.time() if now is None else now
        with self._lock:
            trees = [self._tree(self.rows[r], now) for r in self.roots]
        return Group(*trees) if trees else Text("(no runs yet)")

    def _tree(self, row: Row, now: float) -> Tree:
        node = Tree(self._label(row, now), guide_style="dim")
        for child in row.children:
            node.add(self._tree(self.rows[child], now))
        return node

    @staticmethod
    def _label(row: Row, now: float) -> Text:
        elapsed = 0.0
        if row.started is not None:
            elapsed = (row.ended or now) - row.started
        text = Text()
        text.append(printable(row.agent), style="bold")
        text.append(f" {short_id(row.run_id)} ", style="dim")
        text.append(f"{row.status}", style=STATUS_STYLE.get(row.status, ""))
        if row.parked and not row.status.terminal:
            text.append(" (parked)", style="dim")  # its slot lent to a queued run
        if row.approvals and not row.status.terminal:
            text.append(f" ({marker(row.approvals)})", style="bold yellow")
        text.append(f"  depth {row.depth}  {elapsed:5.1f}s  steps {row.steps}  tok {row.tokens}")
        if row.mail:
            text.append(f"  mail {row.mail}")
        if row.todos:
            text.append(f"  {printable(row.todos)[:60]}", style="italic")
        if row.note:
            note = " ".join(printable(row.note).split())
            text.append(f"  {note[:70]}", style="dim")
        if row.writing and not row.status.terminal:
            text.append(f"  ✎ {writing_tail(row.writing)}", style="green dim")
        return text


def writing_after(before: str, data: Mapping[str, Any], keep: int = 200) -> str:
    """What a run's model has written so far in its step, after one ``text_delta``: emptied
    by a void (the attempt broke off and is tried again), else the new pieces added (the end
    kept)."""
    if data.get("void"):
        return ""
    added = "".join(str(p.get("text", "")) for p in data.get("parts") or ())
    return (before + added)[-keep:]


def writing_tail(text: str, width: int = 60) -> str:
    """The end of ``text`` on one line, printable, at most ``width`` characters."""
    line = " ".join(printable(text).split())
    return line if len(line) <= width else "…" + line[-(width - 1) :]


def watch(
    tree: LiveTree,
    done: threading.Event,
    console: Console,
    *,
    fps: float = 8.0,
    approvals: TerminalApprovals | None = None,
) -> None:
    """Redraw ``tree`` until ``done`` is set (terminal), or print it once at the end. With
    ``approvals``, a tool call waiting for the person pauses the tree while it is asked."""
    if console.is_terminal:
        from rich.live import Live

        with Live(tree.render(), console=console, refresh_per_second=fps, transient=False) as live:
            while not done.wait(1.0 / fps):
                if approvals is not None and approvals.pending():
                    live.stop()
                    approvals.ask_pending(console)
                    live.start()
                live.update(tree.render())
            live.update(tree.render())
    else:
        while True:
            finished = done.wait(1.0 / fps)
            for line in tree.drain():  # a model's Bash command, brackets and all: not markup
                console.print(line, markup=False, highlight=False, soft_wrap=True)
            if finished:
                break
        console.print()
        console.print(tree.render())
