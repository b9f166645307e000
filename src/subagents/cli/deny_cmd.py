"""Deny a pending approval: the call is refused, the model told why (`subagents deny ID`).

`--reason TEXT` is what the model reads (for a question, AskUserQuestion: it is declined).
See `subagents approvals`.
"""

from __future__ import annotations

import argparse

from subagents.cli.answer_cmd import add_answer_arguments, answer
from subagents.cli.command import reports_errors

NAME = "deny"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_answer_arguments(parser, allow=False)


@reports_errors(NAME)
def run(args: argparse.Namespace) -> int:
    return answer(args, allow=False)
