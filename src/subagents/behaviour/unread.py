"""UnreadMail: the mail an LLM run has received and its model has not seen yet.

Why apart from ``LLMBehaviour``: mail reaches the model two ways, and each has its own rule
for when it counts as read. Mail shown in the next user message counts as read once that
message is checkpointed (the ids ride on the next ``StepTaken``), so a crash before cannot
lose it; mail given as a ``check_mailbox``/``wait_for_message`` result is read with that
answer. And at most one ``wait_for_message`` call waits for mail at a time. This keeps those
rules; the behaviour decides when the model is shown what.
"""

from __future__ import annotations

from collections.abc import Iterable

from subagents.behaviour.port import render_mail
from subagents.messages import Mail


class UnreadMail:
    """Unread mail, the ids shown in the message being built, and the waiting call."""

    def __init__(self) -> None:
        self.mails: list[Mail] = []
        self.read_in_message: list[str] = []
        """Ids shown in the next user message: read once its step is recorded."""
        self.waiter: str | None = None
        """The request id (``request_ids``: its tool_use id and turn; its wake's key) of the
        ``wait_for_message`` call waiting for mail, if any."""

    def __bool__(self) -> bool:
        return bool(self.mails)

    def add(self, mails: Iterable[Mail]) -> None:
        self.mails.extend(mails)

    def ids(self) -> tuple[str, ...]:
        return tuple([m.mail_id for m in self.mails]) if self.mails else ()

    def take_all(self) -> list[Mail]:
        """Every unread mail, handed over as it is (no read receipt implied)."""
        taken, self.mails = self.mails, []
        return taken

    def take_for_message(self) -> list[Mail]:
        """Unread mail for the next user message; it counts as read once that message is
        checkpointed (``read_in_message``), so a crash before cannot lose it."""
        taken = self.take_all()
        if taken:  # (most runs start with none: no generator made for nothing)
            self.read_in_message.extend(m.mail_id for m in taken)
        return taken

    def recorded(self) -> tuple[str, ...]:
        """The ids shown in the message just checkpointed; the next message starts empty."""
        read, self.read_in_message = tuple(self.read_in_message), []
        return read

    def render(self) -> tuple[str, bool, tuple[str, ...]]:
        """Unread mail as a tool result: (text, is_error, ids read with it)."""
        mails = self.take_all()
        if not mails:
            return "no new mail", False, ()
        return "\n".join(render_mail(m) for m in mails), False, tuple(m.mail_id for m in mails)

    def stop_waiting(self, key: str | None = None) -> str | None:
        """The waiting call's id (None if none, or if it is not ``key``), no longer waiting."""
        waiter = self.waiter
        if waiter is None or (key is not None and key != waiter):
            return None
        self.waiter = None
        return waiter
