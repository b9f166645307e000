"""What `subagents approve` and `deny` share: an approval answered through the store.

The answer is one transaction of the store (``subagents.answer_approval``): refused, naming
why, for an unknown id, one already answered, or one whose run has ended; else kept, and
posted for the process hosting the run, which runs or refuses the call within a second (or,
when that process is gone, once `subagents resume` takes the run up). A run that ends first
(stopped, timed out at that moment) never acts on it: `subagents approvals --all` then shows
it `void` (``store/unacted_approvals.py``), so the message says "unless the run ends first".
"""

from __future__ import annotations

import argparse

import msgspec

from subagents.cli.command import add_inspect_arguments, emit, store_errors
from subagents.cli.output import printable
from subagents.cli.state import CliError, liveness, open_inspected_store
from subagents.messages import ApprovalRecord


class Answered(msgspec.Struct, frozen=True, kw_only=True):
    """What `approve` and `deny` print with --json."""

    approval: ApprovalRecord
    orphaned: bool
    """The run's host is gone: the answer waits for `subagents resume`."""


def add_answer_arguments(parser: argparse.ArgumentParser, *, allow: bool) -> None:
    parser.add_argument("approval_ref", metavar="ID", help="the approval's id, or a unique prefix")
    told = "the answer to a question (AskUserQuestion), or why" if allow else "why"
    parser.add_argument("--reason", help=f"{told}: the model reads it")
    if allow:
        parser.add_argument(
            "--remember",
            metavar="RULE",
            help="a permission rule ('Bash(pytest:*)') that answers the later asks of the"
            " run's tree it matches, as this one was (never what the tree's permissions deny)",
        )
    add_inspect_arguments(parser, run=False)


def answer(args: argparse.Namespace, allow: bool) -> int:
    from subagents.cli.approvals_cmd import resolve_approval
    from subagents.cli.state import utf8_text
    from subagents.runtime._approvals import answer_approval
    from subagents.store.approvals import ApprovalRefused

    reason = None if args.reason is None else utf8_text(args.reason, "--reason")
    remember = getattr(args, "remember", None)
    remember = None if remember is None else utf8_text(remember, "--remember")
    with open_inspected_store(args) as store, store_errors(store):
        alive = liveness(store)
        approval_id = resolve_approval(store, args.approval_ref)
        try:
            done = answer_approval(store, approval_id, allow, reason, remember=remember)
        except ApprovalRefused as exc:
            raise CliError(str(exc)) from exc
        record = store.get_run(done.run_id)
        orphaned = record is not None and alive.orphaned(record)
    answered = Answered(approval=done, orphaned=orphaned)
    return emit(args, answered, lambda: _say(answered))


def _say(answered: Answered) -> None:
    a = answered.approval
    what = printable(f"{a.status} {a.approval_id} ({a.tool} of {a.agent} {a.run_id})")
    if a.remember:
        what += f", and remembered {printable(a.remember)} for its tree"
    if answered.orphaned:
        print(
            f"{what}; its host is gone: the answer is acted on once `subagents resume` takes"
            " the run up"
        )
    else:
        print(
            f"{what}; the process hosting it acts on the answer within a second, unless the"
            " run ends first (then `subagents approvals --all` shows it void)"
        )
