"""RecordFence: a node's senders' records (``RecordMails``) commit only while their node is
the one the supervisor knows its runs on.

Why: with SQLite on the driver, a node's sender asks the driver to record its mail (and the
journal entries it told and does not know committed) before handing it over; the driver
answers from a pool of threads, without the supervisor. A record still in that pool when the
node is declared lost could commit after the supervisor has moved the node's runs (started
each again elsewhere, its journal read for the replay): the old attempt's mail and entries
would land under the keys of the new attempt's, and a later resume could replay the old
attempt's result. So the record's check runs inside its write transaction (``check``, after
``BEGIN IMMEDIATE``: ``SQLiteStore.save_mails_fenced``): it refuses the record of a link
that is closed (``close``: the node's host lost), and counts the records that passed it
until their transaction ends; ``close`` waits for those, so that every record either
committed before the supervisor hears of the loss (``HostLost``) or is refused
(``RecordRefused``: its sender hears so, and its mail goes by the supervisor, which
discards what a lost attempt still sends). One check per record batch, not per mail.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from subagents.logs import get_logger

log = get_logger("subagents.cluster")

CLOSE_WAIT_S = 60.0
"""How long a loss waits for the records already past their check to end (a SQLite write:
its busy timeout bounds it); logged if they did not."""


class RecordRefused(RuntimeError):
    """A node's record of mail refused: its node was declared lost (its runs moved)."""


class RecordFence:
    """Which links' records may commit (see the module). A link is any hashable key: the
    driver uses each set-up's ``LinkEnd``."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._open: set[object] = set()
        self._writing: dict[object, int] = {}

    def open(self, link: object) -> None:
        """``link``'s records may commit (its host was just set up)."""
        with self._changed:
            self._open.add(link)

    def close(self, link: object, timeout: float = CLOSE_WAIT_S) -> bool:
        """No record of ``link`` passes its check from now on; returns once those that
        passed it ended (committed or rolled back); False if some were still writing
        after ``timeout``."""
        with self._changed:
            self._open.discard(link)
            ended = self._changed.wait_for(lambda: not self._writing.get(link), timeout)
        if not ended:
            log.warning("records of a lost node host still writing", timeout_s=timeout)
        return ended

    @contextmanager
    def recording(self, link: object, node: str) -> Iterator[Callable[[], None]]:
        """The check for one record of ``link`` (from ``node``), to run in its transaction;
        the record is counted as writing from its check until this block ends."""
        passed = False

        def check() -> None:
            nonlocal passed
            with self._changed:
                if link not in self._open:
                    raise RecordRefused(
                        f"node {node[:12]} was declared lost and its runs moved:"
                        " a record of its mail is refused"
                    )
                if not passed:  # a transaction retried checks again: counted once
                    passed = True
                    self._writing[link] = self._writing.get(link, 0) + 1

        try:
            yield check
        finally:
            if passed:
                with self._changed:
                    left = self._writing[link] - 1
                    if left:
                        self._writing[link] = left
                    else:
                        del self._writing[link]
                        self._changed.notify_all()
