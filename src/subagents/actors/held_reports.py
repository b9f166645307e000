"""The reports an agent holds during one handling, as they are sent when it ends.

Why apart from ``agent.py``: what a handling's held reports become (a growing read receipt a
``MailRead``, a journal being filled in its ``Journal``) is one small concept of its own, and
the agent actor's module is at its size bound.
"""

from __future__ import annotations

from typing import Any

from subagents.messages import Journal, JournalEntry, MailRead


class JournalReport:
    """A journal report being filled in during one handling (a ``Journal`` once sent)."""

    __slots__ = ("entries", "read_mail")

    def __init__(self) -> None:
        self.entries: list[JournalEntry] = []
        self.read_mail: list[str] = []

    def report(self, run_id: str, attempt: int) -> Journal:
        return Journal(
            run_id=run_id,
            entries=tuple(self.entries),
            read_mail=tuple(self.read_mail),
            attempt=attempt,
        )


def reports_of(held: list[Any], run_id: str, attempt: int) -> tuple[Any, ...]:
    """The messages the reports held in one handling become: a growing read receipt (a list
    of mail ids) a ``MailRead``, a ``JournalReport`` its ``Journal``, the rest as made."""
    if {list, JournalReport}.isdisjoint(map(type, held)):  # (in C: most hold neither)
        return tuple(held)
    return tuple(
        MailRead(run_id=run_id, mail_ids=tuple(m), attempt=attempt)
        if isinstance(m, list)
        else m.report(run_id, attempt)
        if isinstance(m, JournalReport)
        else m
        for m in held
    )
