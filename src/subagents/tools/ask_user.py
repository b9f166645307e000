"""AskUserQuestion: the model asks its requester questions (Claude Code's tool and schema).

Claude Code shows the questions to the person at the terminal. Here they go where a run's
"ask" goes (``behaviour/tool_calls.py``): to the parent agent as mail when the runtime routes a
child's asks to its parent (``Runtime(ask_parent=True)``), whose reply is the answer; else to
the approval handler, whose ``Approval(True, "the answers")`` is the answer (``False``: the
questions were declined; no handler: no one can answer, the model is told so). The answer
is put in the run's session under the call's id before the tool runs; the tool shapes it as
Claude Code's answer. Deny rules apply as to any tool; it is read-only, so plan mode asks too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

import msgspec

from subagents.tools.base import Tool, decode_input, need_context, struct_schema
from subagents.tools.context import ToolContext

NAME = "AskUserQuestion"
REASON = "the model asks you questions; answer them (your answer is passed on as you write it)"
NO_ANSWER = frozenset({"", "approved"})
"""What the approval handler's plain ``True`` reads as: seen, but nothing answered."""


class Option(msgspec.Struct, frozen=True):
    label: Annotated[str, msgspec.Meta(description="The display text of this option (1-5 words)")]
    description: Annotated[str, msgspec.Meta(description="What this option means")] = ""


class Question(msgspec.Struct, frozen=True):
    question: Annotated[str, msgspec.Meta(min_length=1, description="The complete question")]
    header: Annotated[str, msgspec.Meta(description="A very short label (max 12 chars)")] = ""
    options: Annotated[
        list[Option], msgspec.Meta(max_length=4, description="The available choices (2-4)")
    ] = msgspec.field(default_factory=list)
    multi_select: Annotated[
        bool, msgspec.Meta(description="Whether several options may be chosen")
    ] = msgspec.field(default=False, name="multiSelect")


class AskInput(msgspec.Struct):
    questions: Annotated[
        list[Question],
        msgspec.Meta(min_length=1, max_length=4, description="Questions to ask (1-4)"),
    ]


DESCRIPTION = """Use this tool when you need to ask the user questions during execution: to
gather preferences or requirements, clarify ambiguous instructions, or get decisions on
implementation choices. Each question offers 2-4 options; the user may also answer in their own
words."""


def describe(arguments: Mapping[str, Any]) -> str:
    """The questions as text for a person or a parent agent to answer."""
    try:
        args = msgspec.convert(dict(arguments), AskInput)
    except msgspec.ValidationError:
        return str(arguments)
    lines: list[str] = []
    for i, q in enumerate(args.questions, 1):
        lines.append(f"{i}. {q.question}" + (" (several may be chosen)" if q.multi_select else ""))
        lines += [f"   - {o.label}" + (f": {o.description}" if o.description else "")
                  for o in q.options]  # fmt: skip
    return "\n".join(lines)


def question_mail(arguments: Mapping[str, Any], asker: str, run_id: str) -> str:
    """The mail a parent gets: the questions and how to answer."""
    return (
        f"Questions from {asker} ({run_id}):\n{describe(arguments)}\n"
        f"Answer with send_message to {run_id}, reply_to this mail's id; your content is the"
        f" answer."
    )


def run(arguments: Mapping[str, Any], ctx: ToolContext | None) -> str:
    ctx = need_context(NAME, ctx)
    args = decode_input(NAME, AskInput, arguments)
    answer = ctx.session.answers.pop(ctx.tool_use_id, None)
    if answer is None or answer.strip().lower() in NO_ANSWER:
        return (
            "The user saw your questions and gave no answer. Go on with your best judgement,"
            " and say which choices you made."
        )
    asked = "; ".join(f'"{q.question}"' for q in args.questions)
    return (
        f'User has answered your questions: {asked}="{answer.strip()}". You can now continue'
        f" with the user's answers in mind."
    )


TOOL = Tool(
    name=NAME,
    starts_processes=False,
    description=DESCRIPTION,
    input_schema=struct_schema(AskInput),
    run=run,
    read_only=True,  # changes nothing; asked every time all the same (tool_calls.decide)
    params=AskInput,
)
