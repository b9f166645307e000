"""Mail: one message from one run (or the outside) to another, and the states it goes through."""

from __future__ import annotations

import enum
import re

import msgspec


class MailState(enum.StrEnum):
    ACCEPTED = "accepted"
    DELIVERED = "delivered"
    READ = "read"
    DEAD = "dead"


EXTERNAL_SENDER = "external"
"""The sender id of mail sent from outside any run (the Runtime caller, the command)."""

TOPIC_PREFIX = "topic:"
"""What starts a topic address (``topic:reviews``: ``supervision/topics.py``)."""

_TOPIC_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,99}")


def topic_problem(name: object) -> str | None:
    """Why ``name`` cannot be a topic (1 to 100 letters, digits and ``. _ - /``, starting
    with a letter or a digit), or None. Here, beside the mail it addresses, so that the
    definitions (``topics:``) and the mail room check names by the one rule."""
    if not isinstance(name, str):
        return f"a topic must be a string, got {type(name).__name__}"
    if _TOPIC_NAME.fullmatch(name) is None:
        return (
            f"bad topic name {name!r}: 1 to 100 letters, digits and . _ - /, starting with a"
            " letter or a digit"
        )
    return None


class Mail(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One message from one run (or the outside) to another run.

    ``gc=False`` (also on Event and DeliverMail): not tracked by the cyclic garbage
    collector. They cannot be part of a reference cycle (frozen, plain data) and a mail
    stream makes several per mail (benchmarks/README.md, "Findings").
    """

    mail_id: str
    sender: str
    recipient: str
    content: str
    sender_agent: str | None = None
    reply_to: str | None = None
    sent_at: float = 0.0
    state: MailState = MailState.ACCEPTED
    request_id: str | None = None
    """The sender's tool_use id, so a resumed sender does not send the same mail twice."""
    topic: str | None = None
    """The topic it was sent to (``topic:NAME``: one mail to each subscriber, all with the
    sender's one ``request_id``), else None."""

    @property
    def address(self) -> str:
        """What the sender wrote: ``topic:NAME`` for a topic's mail, else the recipient."""
        return self.recipient if self.topic is None else f"topic:{self.topic}"


class Subscription(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A run subscribed to a topic of its tree (``supervision/topics.py``): mail to
    ``topic:NAME`` from a run of the tree reaches it. Kept by the store until the run
    unsubscribes or ends."""

    run_id: str
    root_run_id: str
    topic: str
