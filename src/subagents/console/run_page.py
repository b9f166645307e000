"""One run's page as data: its record, conversation, mail, events, children and where it ran.

Why the CLI's transcript: `subagents log` already weaves a run's events, conversation
checkpoint and mail into one ordered list (``cli.transcript``); the page shows the same
entries, so the two never tell a run's story differently.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import msgspec

from subagents.cli.log_cmd import read
from subagents.cli.state import shown_status
from subagents.cli.transcript import Entry
from subagents.console.index import Row
from subagents.messages import Event, Mail, RunRecord
from subagents.store.leases import Liveness

if TYPE_CHECKING:
    from subagents.cli.state import InspectedStore
    from subagents.console.index import RunIndex

WORKTREE_KEPT = re.compile(r"\[worktree kept: (?P<path>.+?) on branch (?P<branch>\S+) ")
"""How a run's result says it kept its worktree (``isolation/worktrees.py``
``WorktreeEnd.report``): the record itself does not name it."""


class Worktree(msgspec.Struct, frozen=True):
    path: str
    branch: str


class RunPage(msgspec.Struct, frozen=True, kw_only=True):
    """What the run's page shows (JSON; every text is shown as text)."""

    run: RunRecord
    status: str
    """As people see it: the stored status, or ``orphaned``/``restarting``."""
    host: str
    """Its host process, as ``subagents info`` says it."""
    tokens: int
    """Its tokens, every kind added (``Usage.total_tokens``)."""
    entries: list[Entry]
    mail_in: list[Mail]
    mail_out: list[Mail]
    events: list[Event]
    children: list[Row]
    worktree: Worktree | None
    can_stop: bool
    can_send: bool
    can_continue: bool


def worktree_of(record: RunRecord) -> Worktree | None:
    """The worktree a run with ``isolation: worktree`` kept, from its result."""
    result = record.outcome.result if record.outcome is not None else None
    match = WORKTREE_KEPT.search(result or "")
    return Worktree(match["path"], match["branch"]) if match else None


def run_page(store: InspectedStore, run_id: str, index: RunIndex, *, continuable: bool) -> RunPage:
    """The page of ``run_id`` as the store has it now (``CliError`` when it is not there).
    ``continuable``: whether this console can continue runs (not on a cluster's store)."""
    alive = Liveness(store.leases(), listed=getattr(store, "host_listed", None))
    record, entries = read(store, run_id, final=True)
    mail = store.mail_for(run_id)
    events = store.events(run_id)
    status = shown_status(record, alive)
    return RunPage(
        run=record,
        status=status,
        host=alive.describe(record),
        tokens=record.usage.total_tokens,
        entries=entries,
        mail_in=[m for m in mail if m.recipient == run_id],
        mail_out=[m for m in mail if m.sender == run_id],
        events=events,
        children=index.children(run_id),
        worktree=worktree_of(record),
        can_stop=not record.status.terminal,
        can_send=not record.status.terminal,
        can_continue=continuable and record.status.terminal,
    )
