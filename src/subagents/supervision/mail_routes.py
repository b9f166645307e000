"""MailRoutes: whether a run's mail may go straight to its recipient, decided by its sender.

Why: mail told to the supervisor costs two hand-offs on its way (sender -> supervisor ->
recipient) and a third for the acknowledgement; a run's actor that hands the mail to the
recipient's mailbox itself costs one, as a raw actor's message does (docs/architecture.md,
"The mail path"). The supervisor hears of it after, for the record.

The supervisor's mail room stays the one place that resolves an address (``MailRoom``: a run
id, or an agent name in the sender's tree). A sender takes a mail straight to its recipient
only when the mail room's answer is already known and cannot have changed since:

- the address is a run id the directory lists (a started, live run) in the sender's tree,
  not the sender itself; or a name the mail room resolved for this sender (learnt from its
  acknowledgement) while no run was added or ended since (the run table's ``generation``)
  and whose run the directory lists;
- nothing the sender told the supervisor could change the answer first: none of its spawn
  or stop requests is waiting for its reply (a sibling of the same name being admitted, a
  recipient being stopped);
- none of its earlier mail is still on its way through the supervisor: a mail taken
  straight would overtake it (order per sender). Its acknowledgement says it has arrived:
  the supervisor tells a recipient its mail before it tells the sender
  (``supervision.coalesce``);
- where senders record their mail, the sender's transaction carries the journal entries it
  told and does not know committed while one says what a call saw (``unsaved``,
  ``supervision/unsaved_journal.py``: a receive's mail, a mailbox read, a status, a timeout,
  which call of a ``wait_any`` came first, an error): a mail taken straight is its sender's
  own commit, made before the supervisor's group holding those entries commits (it may
  linger: ``actors/group_linger.py``), and a crash between the two would otherwise keep the
  mail and lose what decided it; the resumed function would look again, see something else
  (a receive's mail, unread again, might not be the first one then), and send something
  else under the mail's key. Elsewhere (the supervisor records the mail) no journal entry it
  told since may have seen such a thing (``observed``), unless the supervisor has
  acknowledged a mail sent after it: through the supervisor, the mail commits in that
  group or after it; its acknowledgement comes after that commit, and groups commit in
  order. A model turn's step whose ask timed out is treated so too (``unsettled``).

Anything else goes by the supervisor, exactly as before. A name is learnt from an
acknowledgement's ``recipient`` as the one run it resolves to: an address that resolves to
several runs (a topic's subscribers) must not be acknowledged with one of them there.

Plain data, no threads: the sender's actor asks it about each report it sends, in order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from subagents.messages import Journal, JournalEntry, MailAck, SendMail, SpawnReply, StopReply
from subagents.supervision.unsaved_journal import UnsavedJournal

_NAMES_MAX = 64
"""Most names remembered per sender (a run writes to a few peers)."""

ANSWERS: frozenset[type] = frozenset({MailAck, SpawnReply, StopReply})
"""The kinds of message ``MailRoutes.answered`` reads; any other says nothing of where mail
may go, so a run's actor hands it none (a delivered mail, one per durable mail, is not)."""


class MailRoutes:
    """One sending run's knowledge of where its mail may go straight (see the module)."""

    __slots__ = (
        "_asked",
        "_named",
        "_on_the_way",
        "_settler",
        "_unsettled",
        "root_run_id",
        "run_id",
        "unsaved",
    )

    def __init__(
        self, run_id: str, root_run_id: str, unsaved: UnsavedJournal | None = None
    ) -> None:
        """``unsaved``: where the sender records its mail, its journal told and not known
        committed, for its straight mail to carry (None: the supervisor records the mail)."""
        self.run_id = run_id
        self.root_run_id = root_run_id
        self.unsaved = unsaved
        self._named: dict[str, tuple[str, int]] | None = None
        """Address as written -> (the run the mail room resolved it to, the generation then)."""
        self._on_the_way: dict[str, tuple[str, int, int]] | None = None
        """Mail sent by the supervisor, not yet acknowledged: request id -> (its address,
        the generation when it was sent, the journal reports told before it)."""
        self._asked: set[str] | None = None
        """Spawn and stop requests told, waiting for their reply (by request id)."""
        self._unsettled = False
        """An observation was told that may not be committed yet (``observed``)."""
        self._settler: str | None = None
        """The first mail sent by the supervisor since that observation: its acknowledgement
        says the observation is committed."""

    def route(
        self, msg: SendMail, root_of: Callable[[str], str | None], generation: int
    ) -> str | None:
        """The run ``msg`` may be taken straight to, or None: it goes by the supervisor.
        ``root_of(run_id)``: the root of a run the directory lists, None if it lists none
        (not started, ended, hosted elsewhere); ``generation``: the run table's now."""
        if self._on_the_way or self._asked or self._unsettled:
            return None
        to = msg.to
        root = root_of(to)
        if root is None:
            named = self._named.get(to) if self._named is not None else None
            if named is None or named[1] != generation:
                return None
            to = named[0]
            root = root_of(to)
        if root != self.root_run_id or to == self.run_id:
            return None
        return to

    def by_supervisor(self, msg: SendMail, generation: int, told: int | None = None) -> None:
        """``msg`` goes by the supervisor: until it is acknowledged, so does every later mail.
        ``told``: the journal reports told before it, committed once it is acknowledged
        (None: every one told so far)."""
        if self._on_the_way is None:
            self._on_the_way = {}
        if told is None:
            told = self.unsaved.told if self.unsaved is not None else 0
        self._on_the_way[msg.request_id] = (msg.to, generation, told)
        if self._unsettled and self._settler is None:
            self._settler = msg.request_id

    def journal(self, journal: Journal) -> None:
        """A journal report was told: where the sender records its mail, its entries are held
        unsaved until known committed, for its straight mail to carry (what a call saw among
        them: ``UnsavedJournal``); elsewhere, what it observed (``observed``)."""
        if self.unsaved is not None:
            self.unsaved.add(journal)
        else:
            self.observed(journal.entries)

    def bounded(self) -> None:
        """Before a report is sent: too many unsaved entries are forgotten, and mail goes by
        the supervisor until it acknowledges one sent after (as after an observation)."""
        unsaved = self.unsaved
        if unsaved is not None and unsaved.overflowing():
            unsaved.clear()
            self._unsettled = True
            self._settler = None

    def observed(self, entries: tuple[JournalEntry, ...]) -> None:
        """Journal entries were told that no straight mail will carry (the supervisor records
        the mail, or the record that went with them failed): if one says what a call saw that
        the store cannot tell again (anything observed but a receive's mail), mail goes by
        the supervisor until it acknowledges one sent after this (see the module)."""
        for entry in entries:
            if entry.observed and (entry.kind != "receive" or entry.result is None):
                self._unsettled = True
                self._settler = None
                return

    def unsettled(self) -> None:
        """Something the run told that decides its mail is not known committed (a model
        turn's step whose ask timed out): mail goes by the supervisor until it acknowledges
        one sent after it (as after an observation)."""
        self._unsettled = True
        self._settler = None

    def asked(self, request_id: str) -> None:
        """A spawn or stop request was told: mail goes by the supervisor until its reply."""
        if self._asked is None:
            self._asked = set()
        self._asked.add(request_id)

    def answered(self, message: Any) -> None:
        """What the run was told: an acknowledgement of mail sent by the supervisor (and the
        name it resolved), or the reply to a spawn or stop request (``ANSWERS``: any other
        kind is nothing to it)."""
        kind = type(message)
        if kind is MailAck:
            if self._on_the_way is None:
                return
            sent = self._on_the_way.pop(message.request_id, None)
            if sent is not None and message.request_id == self._settler:
                self._settler = None  # a refusal may come before the commit: the next one
                if message.error is None:  # came after the group holding what was seen
                    self._unsettled = False
            if sent is None or message.error is not None:
                return
            address, generation, told = sent
            if self.unsaved is not None:  # what was told before it is committed
                self.unsaved.committed(told)
            if message.recipient is None:
                return
            if address != message.recipient:  # a name: remembered for this generation
                if self._named is None or len(self._named) >= _NAMES_MAX:
                    self._named = {}
                self._named[address] = (message.recipient, generation)
        elif (kind is SpawnReply or kind is StopReply) and self._asked:
            self._asked.discard(message.request_id)
