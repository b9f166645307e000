"""Mail a run from outside: the process hosting it delivers it (`subagents send RUN TEXT`).

The mail is posted as a command through the store; the process hosting that run's tree takes
it within a second and delivers it as mail from `external`. When that process is gone (the run
is orphaned), the mail waits in the store until `subagents resume` takes the run up. TEXT `-`
reads the text from stdin (one trailing newline dropped, as a shell's `echo` adds one).

With `--wait`, it waits (at most `--timeout` seconds) until a runtime has taken the mail and
says what became of it: delivered (or kept for a queued run: exit 0), refused by the host or
kept as a dead letter (exit 1, with the reason), or not taken in time (exit 124, as `wait`).
"""

from __future__ import annotations

import argparse

import msgspec

from subagents.cli.command import (
    add_inspect_arguments,
    add_run_argument,
    emit,
    inspecting,
    reports_errors,
)
from subagents.cli.output import printable
from subagents.cli.send_wait import SendOutcome, wait_for
from subagents.cli.state import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CliError
from subagents.cli.text_input import STDIN, text_argument

NAME = "send"
WAIT_S = 60.0
"""How long `send --wait` waits for a runtime to take the mail, unless --timeout says."""
EXIT_NOT_TAKEN = 124
"""As `timeout(1)` and `subagents wait`: no runtime took the mail within --timeout."""


class Posted(msgspec.Struct, frozen=True, kw_only=True):
    """A command posted for a running runtime (what `send` and `stop` print with --json)."""

    command_id: int | None
    """None: nothing was posted; the stop was carried out here (``ended``)."""
    kind: str
    run_id: str
    agent: str
    status: str
    content: str | None = None
    orphaned: bool = False
    """The run's host is gone: the command waits for `subagents resume` (a stop of an
    orphaned run on a local store is carried out at once instead: ``ended``)."""
    ended: tuple[str, ...] = ()
    """A stop of an orphaned run carried out by the command itself: the runs it ended (the
    run and its unfinished subtree, cancelled in the store, nothing resumed)."""
    outcome: SendOutcome | None = None
    """With `send --wait`: what became of the mail once a runtime took it."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_argument(parser)
    parser.add_argument("text", metavar="TEXT", help="the mail's text (- reads stdin)")
    parser.add_argument(
        "--wait",
        action="store_true",
        help="wait until the run's host has taken the mail and say what became of it"
        " (exit 1 if it was refused or kept as a dead letter)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="S",
        help=f"with --wait: give up after S seconds (exit {EXIT_NOT_TAKEN}); default {WAIT_S:g}",
    )
    add_inspect_arguments(parser, run=False)


@reports_errors(NAME)
def run(args: argparse.Namespace) -> int:
    if args.timeout is not None and not args.wait:
        raise CliError("--timeout is for --wait: without it, send does not wait", EXIT_USAGE)
    if args.timeout is not None and not args.timeout >= 0:
        raise CliError(f"--timeout must be >= 0 seconds, got {args.timeout:g}", EXIT_USAGE)
    posted = _send(args)
    emit(args, posted, lambda: _say(posted))
    if posted.outcome is None or posted.outcome.delivered:
        return EXIT_OK
    return EXIT_FAILED


def _say(posted: Posted) -> None:
    if posted.outcome is not None:
        print(printable(_said(posted, posted.outcome)))
    elif posted.orphaned:
        print(
            printable(
                f"posted mail for {posted.agent} {posted.run_id} (command"
                f" {posted.command_id}); its host is gone (orphaned): the mail waits until"
                " `subagents resume` takes the run up"
            )
        )
    else:
        print(
            printable(
                f"posted mail for {posted.agent} {posted.run_id} (command"
                f" {posted.command_id}); the process hosting it delivers it within a second"
            )
        )


def _said(posted: Posted, outcome: SendOutcome) -> str:
    """The line `send --wait` prints once the mail was taken."""
    run = f"{printable(posted.agent)} {posted.run_id}"
    why = printable(outcome.error or "")
    if outcome.state == "delivered":
        if outcome.unread_at_end:
            return (
                f"delivered mail {outcome.mail_id} to {run}; the run has since ended without"
                " reading it (a dead letter)"
            )
        return f"delivered mail {outcome.mail_id} to {run}"
    if outcome.state == "kept":
        return (
            f"mail {outcome.mail_id} kept for {run}: it is queued, handed the mail when it starts"
        )
    if outcome.state == "refused":
        return f"the host of {run} refused the mail (command {posted.command_id}): {why}"
    if outcome.state == "dead_letter":
        return (
            f"mail {outcome.mail_id} to {run} was kept as a dead letter and will not be read:"
            f" {why or 'the run ended before its host took the mail'}"
        )
    return (
        f"a runtime took the mail (command {posted.command_id}) but kept no mail for {run}"
        " under its request id: it did not hold the run (see that runtime's log), or it is"
        f" of an older version (`subagents log {posted.run_id}` shows whether it came)"
    )


def _one_newline_less(text: str) -> str:
    """Stdin without the one newline ``echo`` (or an editor) ends it with."""
    for end in ("\r\n", "\n"):
        if text.endswith(end):
            return text[: -len(end)]
    return text


def _send(args: argparse.Namespace) -> Posted:
    text = text_argument(args.text, "TEXT")
    if args.text == STDIN:
        text = _one_newline_less(text)
    if not text.strip():
        raise CliError("TEXT is empty; nothing to send", EXIT_USAGE)
    with inspecting(args) as (store, alive, record):
        if record.status.terminal:
            raise CliError(
                f"run {record.run_id} ({record.agent}) has already ended ({record.status});"
                " mail to it would never be read"
            )
        command_id = store.post_command("send", record.run_id, text)
        orphaned = alive.orphaned(record)
        outcome = None
        if args.wait:
            timeout = WAIT_S if args.timeout is None else args.timeout
            outcome = wait_for(store, record.run_id, command_id, timeout)
            if outcome is None:
                raise CliError(
                    _not_taken(record.run_id, command_id, timeout, orphaned), EXIT_NOT_TAKEN
                )
    return Posted(
        command_id=command_id,
        kind="send",
        run_id=record.run_id,
        agent=record.agent,
        status=str(record.status),
        content=text,
        orphaned=orphaned,
        outcome=outcome,
    )


def _not_taken(run_id: str, command_id: int, timeout: float, orphaned: bool) -> str:
    """The error of a `send --wait` whose mail no runtime took in time."""
    where = (
        "its host is gone (orphaned): `subagents resume` takes the run up with it"
        if orphaned
        else "its host has not taken it yet (stalled, or busy)"
    )
    return (
        f"no runtime took the mail for run {run_id} within {timeout:g} s (command"
        f" {command_id}, still posted: it is delivered when taken); {where}"
    )
