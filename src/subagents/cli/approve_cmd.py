"""Allow a pending approval: the waiting call runs (`subagents approve ID`).

`--reason TEXT` is told to the model (for a question, AskUserQuestion, it is the answer);
`--remember RULE` (`'Bash(pytest:*)'`) answers the later asks of the run's tree that the rule
matches, as this one was: it only answers what would be asked, never what the tree's
permissions deny. See `subagents approvals`.
"""

from __future__ import annotations

import argparse

from subagents.cli.answer_cmd import add_answer_arguments, answer
from subagents.cli.command import reports_errors

NAME = "approve"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_answer_arguments(parser, allow=True)


@reports_errors(NAME)
def run(args: argparse.Namespace) -> int:
    return answer(args, allow=True)
