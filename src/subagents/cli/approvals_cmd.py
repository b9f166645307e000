"""List the approvals waiting for an answer in the store (`subagents approvals`).

A run of a tree whose asks go to the store (`subagents run --detach`, `Runtime(approve=
"store")`) waits, holding no thread, until someone answers its call: `subagents approve ID`
or `subagents deny ID`, from any terminal that can open the store. Each row: the approval's
id (any unique prefix of it works), the run and agent asking, the tool and its input, why it
is asked, and how long ago. A run whose host is gone shows `orphaned`: the answer is kept and
acted on once `subagents resume` takes the run up. RUN limits the list to that run's tree;
`--all` lists the answered ones too (allowed or denied, the answer, a remembered rule), and
those `superseded`: asked again under another id by a newer subagents (a run resumed after an
upgrade: ids now include the turn), which nothing waits for and which cannot be answered,
and those `void`: answered, but the run ended (stopped, timed out) before the answer reached
it, so the call was never run (nor its denial read; a read-only or idempotent tool's, not
journaled, may have started as the stop landed: docs/runtime.md).
`--json`: a list of the pending approvals, each with its `id`, `run_id`, `root_run_id`,
`agent`, `tool`, `input`, `reason`, `requester`, `asked_at` and `orphaned` (and `status`,
`answer`, `answered_at`, `remember`).
"""

from __future__ import annotations

import argparse

import msgspec

from subagents.cli import output
from subagents.cli.command import (
    add_inspect_arguments,
    add_run_argument,
    emit,
    reports_errors,
    store_errors,
)
from subagents.cli.damaged import read_sparing, said
from subagents.cli.state import (
    EXIT_USAGE,
    CliError,
    liveness,
    open_inspected_store,
    resolve,
    utf8_text,
)
from subagents.cli.views import age, one_line
from subagents.messages import ApprovalRecord, RunRecord
from subagents.store.base import DamagedRow, RunStore
from subagents.store.leases import Liveness
from subagents.store.unacted_approvals import VOID, void_ids

NAME = "approvals"


class PendingRow(msgspec.Struct, frozen=True, kw_only=True):
    """One approval as `--json` prints it (with `--all`, answered ones too: their
    `status`, `answer`, `answered_at` and `remember`)."""

    id: str
    run_id: str
    root_run_id: str
    agent: str
    tool: str
    input: dict[str, object]
    reason: str
    requester: str
    asked_at: float
    orphaned: bool
    status: str = "pending"
    answer: str | None = None
    answered_at: float | None = None
    remember: str | None = None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_argument(parser, optional=True)
    parser.add_argument(
        "--all",
        action="store_true",
        help="answered approvals too (allowed, denied: with the answer and a remembered rule),"
        " and those of ended runs",
    )
    add_inspect_arguments(parser, run=False)


@reports_errors(NAME)
def run(args: argparse.Namespace) -> int:
    from subagents.store.superseded_approvals import live

    with open_inspected_store(args) as store, store_errors(store):
        alive = liveness(store)
        root = resolve(store, args.run_ref).root_run_id if args.run_ref else None
        damaged: list[DamagedRow] = []  # (left out, or a run's: its approvals shown; named after)
        listed = store.list_approvals(pending=not args.all, root_run_id=root, damaged=damaged)
        kept = {a.approval_id for a in live(store, listed, damaged)}  # (not those replaced)
        if not args.all:
            listed = [a for a in listed if a.approval_id in kept]
        records = {a.run_id: read_sparing(store, a.run_id, damaged) for a in listed}
        void = void_ids(store, listed, records.__getitem__, damaged)
        rows = [_row(a, alive, records[a.run_id], _status(a, kept, void)) for a in listed]
    code = emit(args, rows, lambda: _show(rows, every=args.all))
    return code or said(NAME, damaged)


def _status(approval: ApprovalRecord, kept: set[str], void: set[str]) -> str:
    """As stored, but ``superseded`` (a later ask replaced it) and ``void`` (answered, never
    acted on: ``unacted_approvals``)."""
    if approval.approval_id not in kept:
        return "superseded"
    return VOID if approval.approval_id in void else approval.status


def _row(
    approval: ApprovalRecord, alive: Liveness, record: RunRecord | None, status: str
) -> PendingRow:
    orphaned = record is not None and alive.orphaned(record)
    return PendingRow(
        id=approval.approval_id,
        run_id=approval.run_id,
        root_run_id=approval.root_run_id,
        agent=approval.agent,
        tool=approval.tool,
        input=approval.input,
        reason=approval.reason,
        requester=approval.requester,
        asked_at=approval.asked_at,
        orphaned=orphaned,
        status=status,
        answer=approval.answer,
        answered_at=approval.answered_at,
        remember=approval.remember,
    )


def _show(rows: list[PendingRow], *, every: bool) -> None:
    if not rows:
        print("no approvals" if every else "no approvals waiting")
        return
    headers = ["ID", "RUN", "AGENT", "TOOL", "ASKED", "INPUT", "WHY"]
    table = [
        [
            r.id,
            r.run_id + (" (orphaned)" if r.orphaned else ""),
            r.agent,
            r.tool,
            age(r.asked_at),
            one_line(_shown_input(r), 60),
            one_line(r.reason, 60),
        ]
        for r in rows
    ]
    if every:  # what each was answered, and a rule kept for its tree
        headers += ["STATUS", "ANSWER"]
        for line, r in zip(table, rows, strict=True):
            kept = f" (remember {r.remember})" if r.remember else ""
            line += [r.status, one_line((r.answer or "") + kept, 40) or "-"]
    output.print_table(headers, table, wide=("INPUT", "WHY", "ANSWER"))
    if any(r.status == "pending" for r in rows):
        print("answer with `subagents approve ID` or `subagents deny ID` (--reason TEXT)")


def _shown_input(row: PendingRow) -> str:
    """The call's input for a person: a question's text, else its JSON."""
    if row.tool == "AskUserQuestion":
        from subagents.tools import ask_user

        return ask_user.describe(row.input)
    return msgspec.json.encode(row.input).decode()


def resolve_approval(store: RunStore, ref: str) -> str:
    """The approval id ``ref`` names: an id, or a unique prefix of one (a prefix shared by
    several is an error listing them). An empty one is bad usage: it is a prefix of every id,
    and `approve "$ID"` with ID unset answered the one approval of the store, unseen; so is
    one that is not UTF-8 (argv's bad bytes: no approval holds it, and the store's look-up
    raised a bare ``UnicodeEncodeError``)."""
    ref = utf8_text(ref, "ID").strip()
    if not ref:
        raise CliError(
            "empty approval id: give an approval id, or a unique prefix of one"
            " (subagents approvals lists them)",
            EXIT_USAGE,
        )
    if store.get_approval(ref) is not None:
        return ref
    damaged: list[DamagedRow] = []  # (a damaged row's id still matches: answering it names it)
    listed = store.list_approvals(pending=False, damaged=damaged)
    matches = [a.approval_id for a in listed] + [str(d.key) for d in damaged if d.key]
    matches = [m for m in matches if m.startswith(ref)]
    if len(matches) > 1:
        raise CliError(f"{ref!r} names {len(matches)} approvals: {', '.join(matches[:10])}")
    return matches[0] if matches else ref
