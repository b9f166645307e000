"""Approvals at the terminal: the person running `subagents run` answers a tool call's "ask".

The agent that asks waits on its own thread; the question is put to the person by the
command's main thread, which owns the terminal: the live tree pauses, the request is shown,
the answer is read, the tree goes on. On a pipe or in CI there is no one to ask, so the
command passes no handler and every "ask" is denied (with the reason the model sees).
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass, field

from rich.console import Console
from rich.panel import Panel
from rich.text import Text

from subagents.cli.output import printable
from subagents.tools import ask_user
from subagents.tools.approval import Approval, ApprovalRequest

ANSWER_WAIT_S = 600.0


@dataclass
class _Question:
    request: ApprovalRequest
    done: threading.Event = field(default_factory=threading.Event)
    answer: Approval = field(default_factory=lambda: Approval(False, "no answer"))


class TerminalApprovals:
    """An approval handler whose questions the main thread puts to the person."""

    def __init__(self, wait_s: float = ANSWER_WAIT_S) -> None:
        self._questions: queue.SimpleQueue[_Question] = queue.SimpleQueue()
        self._wait_s = wait_s
        self._closed = threading.Event()

    def __call__(self, request: ApprovalRequest) -> Approval:
        """On the asking agent's thread: wait for the person's answer."""
        if self._closed.is_set():
            return Approval(False, "the command is ending")
        question = _Question(request)
        self._questions.put(question)
        if not question.done.wait(self._wait_s):
            return Approval(False, f"no answer at the terminal within {self._wait_s:g} s")
        return question.answer

    def pending(self) -> bool:
        return not self._questions.empty()

    def ask_pending(self, console: Console) -> None:
        """On the main thread: put every waiting question to the person."""
        while True:
            try:
                question = self._questions.get_nowait()
            except queue.Empty:
                return
            if question.request.tool == ask_user.NAME:  # questions: the reply is the answer
                question.answer = _answer(console, question.request)
                question.done.set()
                continue
            # a model's tool input: shown as text (no markup), control characters escaped
            shown = Text(printable(question.request.describe()))
            console.print(Panel(shown, title="approval needed"))
            try:
                reply = console.input(Text("Allow this call? [y/N] "))  # (not markup)
            except (EOFError, KeyboardInterrupt):
                reply = ""
            if reply.strip().lower() in ("y", "yes"):
                question.answer = Approval(True, "approved at the terminal")
            else:
                question.answer = Approval(False, "the person at the terminal said no")
            question.done.set()

    def close(self) -> None:
        """Deny whatever still waits: the command is ending."""
        self._closed.set()
        while True:
            try:
                question = self._questions.get_nowait()
            except queue.Empty:
                return
            question.answer = Approval(False, "the command is ending")
            question.done.set()


def _answer(console: Console, request: ApprovalRequest) -> Approval:
    """AskUserQuestion at the terminal: the questions, and what the person types."""
    asked = printable(
        f"{request.agent} ({request.run_id}) asks:\n{ask_user.describe(request.input)}"
    )
    console.print(Panel(Text(asked), title="question"))
    try:
        reply = console.input("Your answer (empty to decline): ")
    except (EOFError, KeyboardInterrupt):
        reply = ""
    if not reply.strip():
        return Approval(False, "the person at the terminal did not answer")
    return Approval(True, reply.strip())
