"""Records that surely read back, told without decoding them (``sqlite_tx.encode_row``).

A record is written as JSON only once it is known to read back: JSON has no NaN or infinity
(msgspec writes ``null``, which a float field then refuses) and msgspec does not check a
Struct's field types when it is built, only when it is decoded. ``encode_row`` decodes what
it encoded to know it; for the records written per mail (a ``Mail`` by its sender, two
``Event`` rows by the supervisor) that decode was ~1-2 us each, ~3 per durable mail.

``READS_BACK`` holds, per record type, a check that is SUFFICIENT for the decode to succeed:
every field of the exact type its annotation asks for, every float finite. Where it says
False (a str subclass, an int for a float, a NaN, ...), ``encode_row`` decodes as before and
says what was wrong, so nothing that read back is refused and nothing that would not is
written (tests/store/test_row_checks.py holds both, and fails when a record gains a field
its check does not know: ``FIELDS``).

An event's ``data`` is any JSON, nested as deep as its writer made it (a model's tool input,
in a ``tool_call`` event): msgspec's decoder gives up a few levels sooner than its encoder
(Python's recursion limit, 1000: a document nested ~997 deep is written and never read
back, every read of the run's events failing on it). Nesting ``n`` deep takes at least
``2n`` bytes, so an event's JSON of at most ``SURE_EVENT_BYTES`` is surely shallow enough;
a longer one is decoded as before.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from subagents.messages import Event, EventKind, Mail, MailState

_isfinite = math.isfinite

SURE_EVENT_BYTES = 1024
"""An event's JSON up to this long is nested at most 512 deep: far from the decoder's limit
(~997 levels at Python's default recursion limit of 1000, fewer on a deeper stack)."""


def _event_reads_back(event: Event, raw: bytes) -> bool:
    parent = event.parent_run_id
    ts = event.ts
    return (
        len(raw) <= SURE_EVENT_BYTES
        and type(event.kind) is EventKind
        and type(event.run_id) is str
        and type(event.agent) is str
        and type(event.root_run_id) is str
        and (parent is None or type(parent) is str)
        and type(event.depth) is int
        and type(ts) is float
        and _isfinite(ts)
        and type(event.data) is dict  # dict[str, Any]: any key msgspec encodes reads as a str
    )


FLAT_CHARS = (SURE_EVENT_BYTES - 64) // 6
"""The most characters a flat event's data holds (each key and value, and one per item):
an ASCII character encodes to at most 6 bytes (``\\u00XX``), an item's quotes, colon and
comma to 6, and the event's kind (at most 17) and time (at most 24) with their brackets to
under 64: so a flat event encodes to at most ``SURE_EVENT_BYTES``, as a held one must (a
longer event is a row of its own: its failure, a full disk, named alone)."""


def flat_event_reads_back(event: Event) -> bool:
    """Whether ``event`` surely encodes and reads back without being encoded to tell: its
    fields as ``_event_reads_back`` asks, and its ``data`` flat and short, every key and
    value an ASCII ``str`` (one level deep, and nothing msgspec cannot encode: not a lone
    surrogate, which ``UnicodeEncodeError``s), ``FLAT_CHARS`` at most in all. A straight
    mail's two events are so (``mail_sent``, ``mail_delivered``: ids, ~80 characters), and
    are encoded once, when their batch is sent (``sqlite_event_groups``), not once to be
    checked and again to be written."""
    parent = event.parent_run_id
    ts = event.ts
    data = event.data
    if not (
        type(event.kind) is EventKind
        and type(event.run_id) is str
        and type(event.agent) is str
        and type(event.root_run_id) is str
        and (parent is None or type(parent) is str)
        and type(event.depth) is int
        and type(ts) is float
        and _isfinite(ts)
        and type(data) is dict
    ):
        return False
    size = 0
    for key, value in data.items():  # (a loop: no call per item)
        if type(key) is not str or type(value) is not str:
            return False
        if not (key.isascii() and value.isascii()):
            return False
        size += len(key) + len(value) + 1
    return size <= FLAT_CHARS


def _mail_reads_back(mail: Mail, raw: bytes) -> bool:  # (no nesting: every field flat)
    # (the optional strings checked inline: a call each was 4 of a durable mail's ~210 calls
    # on its sender's thread; benchmarks/mail.py work_by_role)
    sent_at = mail.sent_at
    agent, reply_to, request_id, topic = (
        mail.sender_agent,
        mail.reply_to,
        mail.request_id,
        mail.topic,
    )
    return (
        type(mail.mail_id) is str
        and type(mail.sender) is str
        and type(mail.recipient) is str
        and type(mail.content) is str
        and (agent is None or type(agent) is str)
        and (reply_to is None or type(reply_to) is str)
        and type(sent_at) is float
        and _isfinite(sent_at)
        and type(mail.state) is MailState
        and (request_id is None or type(request_id) is str)
        and (topic is None or type(topic) is str)
    )


READS_BACK: dict[type, Callable[[Any, bytes], bool]] = {
    Event: _event_reads_back,
    Mail: _mail_reads_back,
}
"""Per record type, a check that its JSON (``raw``, as encoded) surely decodes as that type
(see the module)."""

FIELDS: dict[type, frozenset[str]] = {
    Event: frozenset(
        {"kind", "run_id", "agent", "root_run_id", "parent_run_id", "depth", "ts", "data"}
    ),
    Mail: frozenset(
        {
            "mail_id",
            "sender",
            "recipient",
            "content",
            "sender_agent",
            "reply_to",
            "sent_at",
            "state",
            "request_id",
            "topic",
        }
    ),
}
"""The fields each check of ``READS_BACK`` looks at: a record type's fields must be these."""
