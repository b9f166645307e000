"""Mail a run from outside: the process hosting it delivers it (`subagents send RUN TEXT`).

The mail is posted as a command through the store; the process hosting that run's tree takes
it within a second and delivers it as mail from `external`. When that process is gone (the run
is orphaned), the mail waits in the store until `subagents resume` takes the run up. TEXT `-`
reads the text from stdin (one trailing newline dropped, as a shell's `echo` adds one).
"""

from __future__ import annotations

import argparse

import msgspec

from subagents.cli import output
from subagents.cli.output import printable
from subagents.cli.state import (
    EXIT_USAGE,
    CliError,
    add_json_argument,
    add_store_arguments,
    fail,
    liveness,
    open_inspected_store,
    resolve,
)
from subagents.cli.text_input import STDIN, text_argument
from subagents.store.base import StoreError

NAME = "send"


class Posted(msgspec.Struct, frozen=True, kw_only=True):
    """A command posted for a running runtime (what `send` and `stop` print with --json)."""

    command_id: int
    kind: str
    run_id: str
    agent: str
    status: str
    content: str | None = None
    orphaned: bool = False
    """The run's host is gone: the command waits for `subagents resume`."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_ref", metavar="RUN", help="run id, unique prefix, or #N")
    parser.add_argument("text", metavar="TEXT", help="the mail's text (- reads stdin)")
    add_json_argument(parser)
    add_store_arguments(parser)


def run(args: argparse.Namespace) -> int:
    try:
        posted = _send(args)
    except CliError as exc:
        return fail(NAME, exc)
    if args.json:
        output.print_json(posted)
    elif posted.orphaned:
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
    return 0


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
    with open_inspected_store(args) as store:
        alive = liveness(store)  # before the run (state.liveness says why)
        record = resolve(store, args.run_ref)
        if record.status.terminal:
            raise CliError(
                f"run {record.run_id} ({record.agent}) has already ended ({record.status});"
                " mail to it would never be read"
            )
        try:
            command_id = store.post_command("send", record.run_id, text)
        except StoreError as exc:
            raise CliError(str(exc)) from exc
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
