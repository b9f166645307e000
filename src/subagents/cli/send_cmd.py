"""Mail a run from outside: the process hosting it delivers it (`subagents send RUN TEXT`).

The mail is posted as a command through the store; the process hosting that run's tree takes
it within a second and delivers it as mail from `external`. When that process is gone (the run
is orphaned), the mail waits in the store until `subagents resume` takes the run up. TEXT `-`
reads the text from stdin (one trailing newline dropped, as a shell's `echo` adds one).
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
from subagents.cli.state import EXIT_USAGE, CliError
from subagents.cli.text_input import STDIN, text_argument

NAME = "send"


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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_argument(parser)
    parser.add_argument("text", metavar="TEXT", help="the mail's text (- reads stdin)")
    add_inspect_arguments(parser, run=False)


@reports_errors(NAME)
def run(args: argparse.Namespace) -> int:
    posted = _send(args)
    return emit(args, posted, lambda: _say(posted))


def _say(posted: Posted) -> None:
    if posted.orphaned:
        print(
            f"posted mail for {printable(posted.agent)} {posted.run_id} (command"
            f" {posted.command_id}); its host is gone (orphaned): the mail waits until"
            " `subagents resume` takes the run up"
        )
    else:
        print(
            f"posted mail for {printable(posted.agent)} {posted.run_id} (command"
            f" {posted.command_id}); the process hosting it delivers it within a second"
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
    return Posted(
        command_id=command_id,
        kind="send",
        run_id=record.run_id,
        agent=record.agent,
        status=str(record.status),
        content=text,
        orphaned=orphaned,
    )
