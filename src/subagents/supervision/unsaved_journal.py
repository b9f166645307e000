"""UnsavedJournal: the journal entries a run told the supervisor and does not know committed,
which a mail it takes straight carries into its own transaction.

Why: a function agent's replay after a crash follows its journal (``behaviour/function.py``),
and the journal must keep a prefix of what the function did: nothing it did after seeing a
result may be durable while that result's entry is not. The supervisor writes the entries,
in its group commit, which may linger (``actors/group_linger.py``); a mail taken straight
is its sender's own commit, made at once (docs/architecture.md, "The mail path"). So a crash
between the two kept the mail and lost the entries before it. For a receive that was not
harmless: its mail was unread again, and a resumed receive takes the first unread mail in
the order the store committed them, which need not be the order they were handed over in
(two senders commit A then B, and hand over B then A). The function had received B and
answered it straight; replayed, it received A, found its answer to B under the answer's key
as if it had answered A, and answered B again later (tests/durability/
test_two_senders_crash.py). Now the sender's transaction appends the entries it told and
does not know committed before its mail (``SQLiteStore.save_mails_fenced``): no crash keeps
the mail without them.

The same holds for anything else a call saw that the store cannot tell again (a mailbox
read, a receive's timeout, a status, which call of a ``wait_any`` came first, an error): a
resumed function that looked again might see something else and send something else under
the mail's key (tests/durability/test_observed_send_crash.py). Those entries used to send the
run's mail by the supervisor until they were committed (a round trip per mail); they are
carried now, as a receive's are. The calls themselves, lost, are made again or found done (a
mail by its ``request_id``, a child by its record). So the entries are carried while one of
them says what a call saw (``JournalEntry.observed``), with all those told before it (a
replay needs the journal's prefix), and otherwise left to the supervisor: a run that only
sends pays nothing. The report told with
the mail is marked ``Journal.recorded`` when carried: the supervisor does not write it
again. One told earlier may be written twice (by the supervisor, and carried by a later
straight mail before that commit was known); a replay reads each entry once
(``resumption.recovered_messages``).

Known committed: once carried by the run's own straight commit, or once the supervisor
acknowledges a mail the run sent through it after them (groups commit in order; the
acknowledgement comes after the commit: ``committed``). A run that hears neither for long
(it never mails, or mails only straight and receives nothing) holds at most
``ENTRIES_MAX`` entries: then they are forgotten, and its mail goes by the supervisor until
one sent after is acknowledged (``MailRoutes``: one round trip per ``ENTRIES_MAX``
entries).

Plain data, no threads: the sending run's actor keeps one (``MailRoutes.unsaved``) where
senders record their own mail; elsewhere the supervisor records the mail after, in order,
and nothing needs carrying (an observation there still sends mail by the supervisor until
it is acknowledged: ``MailRoutes.observed``).
"""

from __future__ import annotations

from subagents.messages import Journal, JournalEntry
from subagents.store.writes import SaveJournal

ENTRIES_MAX = 512
"""Most entries held unsaved (then forgotten: mail goes by the supervisor for a while)."""


class UnsavedJournal:
    """One run's journal reports told and not known committed (see the module)."""

    __slots__ = ("_at_risk", "_entries", "_held", "told")

    def __init__(self) -> None:
        self._held: list[tuple[int, Journal]] = []
        """(the report's number, the report), oldest first."""
        self._entries = 0
        """How many entries ``_held`` holds."""
        self.told = 0
        """How many reports the run has told: the mark of what a mail sent now comes after."""
        self._at_risk = 0
        """The number of the last report with an entry of what a call saw (0: none)."""

    def add(self, journal: Journal) -> None:
        """``journal`` was told to the supervisor."""
        self.told += 1
        if journal.entries or journal.read_mail:  # (a receipt goes with the entries)
            self._held.append((self.told, journal))
            self._entries += len(journal.entries) or len(journal.read_mail)
            if journal.read_mail or _observes(journal.entries):
                self._at_risk = self.told

    def committed(self, mark: int) -> None:
        """The reports told up to ``mark`` (a ``told`` read earlier) are committed."""
        held = self._held
        n = 0
        while n < len(held) and held[n][0] <= mark:
            self._entries -= len(held[n][1].entries) or len(held[n][1].read_mail)
            n += 1
        if n:
            del held[:n]

    def overflowing(self) -> bool:
        """Whether more than ``ENTRIES_MAX`` entries are held."""
        return self._entries > ENTRIES_MAX

    def clear(self) -> None:
        """Nothing held: carried by a commit of the run's own, or forgotten (``overflowing``)."""
        self._held.clear()
        self._entries = 0

    def carried(self) -> SaveJournal | None:
        """The entries held, in the order told, as one write (None: none, or none at risk),
        with the mail they read (``SaveJournal.read_mail``): the record that carries them
        marks it read, so the reports carried (``Journal.recorded``) leave the supervisor no
        receipt to write. An earlier report's receipt may so be written twice (by the
        supervisor too): read is read."""
        held = self._held
        if not held or self._at_risk < held[0][0]:
            return None
        first = held[0][1]
        if len(held) == 1:
            return SaveJournal(first.run_id, first.entries, first.read_mail)
        entries = tuple(e for _, j in held for e in j.entries)
        return SaveJournal(first.run_id, entries, tuple(m for _, j in held for m in j.read_mail))


def _observes(entries: tuple[JournalEntry, ...]) -> bool:
    """Whether one of ``entries`` says what a call saw (a receive's mail or its timeout, a
    mailbox read, a status, which call of a ``wait_any`` came first, an error)."""
    for entry in entries:  # noqa: SIM110 (``any`` of a generator: slower, per journal)
        if entry.observed:
            return True
    return False
