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
    kinds = list(map(type, held))  # (looked in, in C: most hold neither)
    if list not in kinds:
        if JournalReport not in kinds:
            return tuple(held)
        # a function agent's handling: its one journal report (``AgentActor.journal`` makes
        # one per handling), in its place; the scan below cost ~25 bytecodes a mail
        out = list(held)
        i = kinds.index(JournalReport)
        report = held[i]  # (``JournalReport.report``, without its frame)
        entries, read_mail = tuple(report.entries), tuple(report.read_mail)
        out[i] = Journal(run_id=run_id, entries=entries, read_mail=read_mail, attempt=attempt)
        return tuple(out)
    # (replaced in place, by exact type, not a generator of ``isinstance``: a durable mail's
    # step holds its journal report and its send, and the generator's frames and checks were
    # 7 of the sender's calls per mail, on the mail's critical path; mail.py work_by_role)
    out = list(held)
    for i, m in enumerate(held):
        kind = type(m)
        if kind is list:
            out[i] = MailRead(run_id=run_id, mail_ids=tuple(m), attempt=attempt)
        elif kind is JournalReport:
            out[i] = m.report(run_id, attempt)
    return tuple(out)
