"""Splits: a SQLite commit a sender waits behind, cut at the points between its decisions.

Why: a runtime's senders record the mail they take straight to its recipient, one statement
each on the store's one connection and lock (``store.sqlite_record``): the only commit on a
durable mail's path. The supervisor's group holds the record of that mail (its events, read
receipts) and commits it every few milliseconds, the records of dozens of mails in one
transaction (~1 ms, more on a loaded machine): a sender that comes meanwhile waited for all
of it (a durable ping-pong's sender waited ~55-105 us per mail on average, counted by
``benchmarks/durable_mail_work.py``: a third of a mail's time).

So the supervisor marks the points between its decisions in its open group (``split_point``:
after each run of its line's records written, ``actors/records_written.py``), and says when
its group may be committed in parts (``allow_split``: a group that lingers, whose effects,
held until the whole group has committed, only publish events: ``GroupLinger.defer``). At
its commit each decision's held writes are sent in turn (``DeferredWrites.flush``), and at a
point where a sender waits for the lock (``wanted``: set by a sender only while it is
blocked on the lock, ``Transactions.execute_alone``) the commit is cut (``cut``): what was
sent is committed, the lock handed to the sender, and the rest goes in a transaction begun
again, its fence checked again (a lease lost meanwhile refuses the rest, ``Fenced``). A cut
costs a commit only when a sender waits.

What a crash may leave: the decisions before a cut, each whole, as a crash between two
smaller groups would (a group's size is the timing's anyway). Nothing was told of any of
them before the whole group committed. A point inside a savepoint statement already sent is
never cut (``flush`` counts them); a group that began its transaction early (a read in it)
does not linger, so it is not split either.
"""

from __future__ import annotations

import sqlite3
import threading
from typing import Any, Protocol

from subagents.store.deferred import SPLIT, FailedWrite


class Transactions(Protocol):
    """What of ``store.sqlite_tx.Transactions`` a cut uses (a protocol: that module makes
    the ``Splits``; its thread's batch state is ``_Open``)."""

    lock: Any

    def _open(self) -> Any: ...

    def _begin(self, state: Any) -> sqlite3.Connection: ...

    def connection(self) -> sqlite3.Connection: ...

HAND_OVER_S = 0.005
"""How long a cut commit waits for the sender it let go first to take the lock (a lock is not
fair: this thread, holding the GIL, would take it back before the sender woke). A sender not
there by then (descheduled, on a loaded machine) is not waited for again in that commit."""


class Splits:
    """The split points of one SQLite store's commits (see the module)."""

    __slots__ = ("_tx", "taken", "wanted")

    def __init__(self, tx: Transactions) -> None:
        self._tx = tx
        self.wanted = False
        """A sender is blocked on the store's lock (set by it while it waits, cleared once
        it has it)."""
        self.taken = threading.Event()
        """Set by a sender that waited, once it has the lock: what ``cut`` waits for."""

    def split_point(self) -> None:
        """A point between two decisions in this thread's open batch (which has not begun:
        its writes are held) where its commit may be cut. Nothing when nothing is held
        before it (a batch of split points alone begins no transaction)."""
        state = self._tx._open()
        if state.depth and not state.begun:
            items = state.held.items
            if items and items[-1] is not None and items[-1][0] is not None:  # after a write
                items.append(SPLIT)

    def allow_split(self) -> None:
        """This thread's open batch may be committed in parts, at its split points, in
        order, each while a sender waits: the caller says that every prefix of its
        decisions, committed alone, is a state the store may be left in (each decision is
        whole; nothing was told of any yet)."""
        state = self._tx._open()
        if state.depth:
            state.split = True

    def wants_cut(self) -> bool:
        """A sender waits for the lock and this thread's commit may still be cut."""
        return self.wanted and self._tx._open().split

    def cut(self) -> sqlite3.Connection:
        """At a split point of this thread's commit, a sender waiting: what was sent is
        committed, the lock handed to the sender (waited for at most ``HAND_OVER_S``), and
        the transaction begun again, its fence checked again (``Transactions._begin``)."""
        tx = self._tx
        state = tx._open()
        try:
            tx.connection().execute("COMMIT")
        except sqlite3.Error as exc:
            raise FailedWrite(SPLIT[3], exc) from exc
        state.begun = False
        self.taken.clear()
        tx.lock.release()
        if not self.taken.wait(HAND_OVER_S):
            state.split = False
        state.on_begin = state.fence
        return tx._begin(state)
