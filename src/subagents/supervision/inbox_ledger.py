"""InboxLedger: what the items of an isolated batch changed in the runs' inboxes, so that an
item whose handling raised (a bug: ``isolated.each``) takes its changes out again.

Why: ending a run puts mail in other runs' inboxes (a background child's report to its
parent, a dead letter's notice to its sender: ``MailRoom.notify``) and empties its own (its
unread mail dead). Those are memory changes made before the item's writes are returned: when
the item raises after them, its writes (the mail's ``SaveMails``, the dead letters' state)
are lost with it, yet the inboxes kept the change. A parent held a report the store never
had (and, once the run was ended failed instead, a second one: ``Lifecycle.ended_by_bug``);
a run's unread mail was gone from memory though the store kept it delivered, never dead.

Recorded only while a batch that isolates its items is open (``open``/``close``, nested:
an item's end may cancel the runs below it in a batch of its own); undone to the ``mark``
taken before the item, most recent first. Outside one, nothing is recorded (the mail's hot
path pays one test). Plain data, no threads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from subagents.messages import Mail
    from subagents.supervision.runs import RunState


class InboxLedger:
    """The inbox changes made since the outermost open batch (see the module)."""

    __slots__ = ("_depth", "changes")

    def __init__(self) -> None:
        self._depth = 0
        self.changes: list[tuple[RunState, str | None, Mail | dict[str, Mail] | None]] | None = None
        """(run, mail id, the mail it replaced or None): a mail put in ``run``'s inbox;
        (run, None, inbox): ``run``'s inbox replaced, ``inbox`` the one it had. None: no
        batch open, nothing recorded."""

    def open(self) -> None:
        self._depth += 1
        if self.changes is None:
            self.changes = []

    def close(self) -> None:
        self._depth -= 1
        if not self._depth:
            self.changes = None

    def mark(self) -> int:
        return len(self.changes) if self.changes is not None else 0

    def undo(self, mark: int) -> None:
        """Every change since ``mark`` taken back, most recent first."""
        changes = self.changes
        if not changes:
            return
        for state, mail_id, before in reversed(changes[mark:]):
            if mail_id is None:
                assert isinstance(before, dict)
                state.inbox = before
            elif before is None:
                state.inbox.pop(mail_id, None)
            else:
                assert not isinstance(before, dict)
                state.inbox[mail_id] = before
        del changes[mark:]
