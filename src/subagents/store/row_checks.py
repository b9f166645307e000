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
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from subagents.messages import Event, EventKind, Mail, MailState

_isfinite = math.isfinite


def _event_reads_back(event: Event) -> bool:
    parent = event.parent_run_id
    ts = event.ts
    return (
        type(event.kind) is EventKind
        and type(event.run_id) is str
        and type(event.agent) is str
        and type(event.root_run_id) is str
        and (parent is None or type(parent) is str)
        and type(event.depth) is int
        and type(ts) is float
        and _isfinite(ts)
        and type(event.data) is dict  # dict[str, Any]: any key msgspec encodes reads as a str
    )


def _optional_str(value: object) -> bool:
    return value is None or type(value) is str


def _mail_reads_back(mail: Mail) -> bool:
    sent_at = mail.sent_at
    return (
        type(mail.mail_id) is str
        and type(mail.sender) is str
        and type(mail.recipient) is str
        and type(mail.content) is str
        and _optional_str(mail.sender_agent)
        and _optional_str(mail.reply_to)
        and type(sent_at) is float
        and _isfinite(sent_at)
        and type(mail.state) is MailState
        and _optional_str(mail.request_id)
        and _optional_str(mail.topic)
    )


READS_BACK: dict[type, Callable[[Any], bool]] = {
    Event: _event_reads_back,
    Mail: _mail_reads_back,
}
"""Per record type, a check that its JSON surely decodes as that type (see the module)."""

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
