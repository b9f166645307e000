"""GroupLinger: the supervisor's open group, when nobody waits on it, commits a little later.

Why: with mail taken straight from run to run (docs/architecture.md, "The mail path"), what
reaches the supervisor per mail is the record of it (the events, the step's journal and
read receipts), told after the mail was delivered: nothing waits on that group's commit but
the publication of its events. Committing it whenever the supervisor's inbox runs dry costs
a SQLite commit every step or two (a ping-pong is one message at a time); held open for up
to ``LINGER_S`` it is one commit per dozens of mails. A group whose effects tell anyone
anything (an acknowledgement, a start, an outcome: whatever is not a ``Publish``) commits
at once, as before, and so does everything else that commits a group (an ask, a message
outside the grouped kinds, ``GROUP_MAX`` messages, the supervisor stopping), and so does a
group that already holds the store's write lock (with SQLite a group takes it only at its
commit, unless something in it read or wrote directly: a checkpoint, say), so a lingering
group never makes a sender wait.

What a crash may lose is widened, not changed: the records of mail that went straight,
between its sender's commit and the supervisor's (the mail itself is its sender's commit;
a resumed run finds it by its ``request_id``, and re-reads what its lost receipts covered;
a mail decided by what a call saw that the store cannot tell again goes by the supervisor,
in or after the group holding that observation: ``MailRoutes.observed``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import pykka

from subagents.actors.timer import TimerService
from subagents.store.base import MailRecording, RunStore
from subagents.supervision.effects import Effect, Publish

LINGER_S = 0.005
"""How long a group nobody waits on may stay open (events reach watchers that much later)."""


class CommitDue:
    """Told to the supervisor when a lingering group is due: commit it."""

    __slots__ = ()


COMMIT_DUE = CommitDue()


class GroupLinger:
    """Whether the open group may wait, and the timer that ends its wait."""

    __slots__ = ("_begun", "_due", "_key", "_ref", "_timer", "delay")

    def __init__(self, timer: TimerService, ref: pykka.ActorRef[Any], store: RunStore) -> None:
        """Groups linger only on a store whose senders record their own mail (SQLite:
        ``RunStore.mail_recording``): elsewhere the mail itself goes through the supervisor,
        and an in-memory commit costs nothing to save."""
        self._timer = timer
        self._ref = ref
        self._key = ("group linger", id(self))
        """Its timer's key: a tuple, so the timer service counts these apart
        (``TimerService.scheduled_kinds``)."""
        self.delay = LINGER_S if store.mail_recording() is MailRecording.SENDER else 0.0
        self._due = 0.0
        self._begun: Callable[[], bool] | None = getattr(store, "batch_begun", None)
        """Whether the open group holds the store's write lock already (SQLite: a read or a
        direct write in it began its transaction): such a group commits at once."""

    def defer(self, held: Sequence[Effect]) -> bool:
        """True when the group holding ``held`` may commit later (a ``COMMIT_DUE`` is then
        on its way, within ``delay``); False: commit it now."""
        if self.delay <= 0 or (self._begun is not None and self._begun()):
            return False
        for effect in held:
            if type(effect) is not Publish:
                return False
        now = time.monotonic()
        if self._due < now:  # none on its way (a due one already told commits this too)
            self._due = now + self.delay
            self._timer.tell_at(self._key, self._due, self._ref, COMMIT_DUE)
        return True
