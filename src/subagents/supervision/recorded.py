"""Recorded: the reports that only record what happened, decided together.

Why: where senders record their mail, what reaches the supervisor of a straight mail is the
record of it: the sender's ``MailPosted`` and the recipient's ``Journal`` (its entries, its
read receipt), put in the line of late reports (``actors/group_linger.py``) and taken tens
at a time. Decided one report at a time, each cost a decision, a nested store batch and
their upkeep (two per mail, ~40% of the supervisor's thread in a durable ping-pong); a run
of them in the line is one decision and one nested batch. A reply's journal, committed
with the reply by its sender, rides in the reply's ``MailPosted`` (``read_mail``, session
32): one report per mail of a ping-pong, not two.

Nothing else changes: each report is decided by the rules it always was, in order (the mail
kept and announced, or a dead letter: ``MailRoom.posted``; the journal kept and its mail
marked read: ``journal``; a receipt: ``MailRoom.read``), so the writes, the events and their
order are the same. A report whose handling fails (a bug) is left out alone, with its error,
as a told message is (``SupervisorActor._told_failed``): what the others decided is kept.

Plain data, no threads: the core's part (``SupervisorCore.recorded``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from subagents.messages import EventKind, Journal, MailPosted, MailRead, MailState
from subagents.store.writes import AppendEvent, SaveJournal, SaveMails, SetMailsState, Write
from subagents.supervision.effects import Decided
from subagents.supervision.isolated import each
from subagents.supervision.mailroom import MailRoom
from subagents.supervision.runs import RunState, RunTable

Record = MailPosted | Journal | MailRead
"""A report that only records what happened."""

Failed = tuple[tuple[Record, Exception], ...]
"""The reports whose handling failed, each with its error."""

_SENT, _DELIVERED = EventKind.MAIL_SENT, EventKind.MAIL_DELIVERED
_READ = MailState.READ
"""Named once: an enum's member read through its class costs Python 3.11's
``EnumType.__getattr__`` slot, ~1.1k instructions (``supervision/starts.py``), a module's
name ~0.1k (a receipt per mail: ``_Receipts.add``)."""


def _everyone(_kind: EventKind) -> bool:
    """Every event is published (a core no runtime told who listens: its tests)."""
    return True


class RecordsDecided:
    """What ``Recorded.all`` tells besides the joined decision: the reports whose handling
    failed (``failed``), and each other report with what it alone came to (``pieces``),
    so that should the joined writes fail to be written (a bug in a store, not a full
    disk), each report's may be written alone and only the failing one left out, as when
    each was decided alone (``actors/records_written.py``); ``writes`` and ``effects``:
    how many of the joined decision's are theirs (the core may add its upkeep after)."""

    __slots__ = ("effects", "failed", "pieces", "writes")

    def __init__(
        self, failed: Failed, pieces: list[tuple[Record, Decided]], writes: int, effects: int
    ) -> None:
        self.failed, self.pieces = failed, pieces
        self.writes, self.effects = writes, effects


class Recorded:
    """The reports that only record what happened, decided in order (see the module)."""

    __slots__ = ("_mail", "_runs", "published")

    def __init__(
        self,
        runs: RunTable,
        mail: MailRoom,
        published: Callable[[EventKind], bool] | None = None,
    ) -> None:
        self._runs = runs
        self._mail = mail
        self.published: Callable[[EventKind], bool] = published or _everyone
        """Whether an event of a kind published now reaches anyone (the runtime's
        ``Subscribers.wants``, given to ``SupervisorCore``: a callback takes it, or the
        debug log is on; None: everyone, a core no runtime told who listens). A straight
        mail's two events are kept by the store whatever it says, and published only when
        someone is handed them: in a ping-pong nobody subscribed to, two ``Publish``
        effects per mail that went nowhere. Asked once per line (``all``)."""

    def all(self, reports: Sequence[Record]) -> tuple[RecordsDecided, Decided]:
        """``reports`` decided in order: what they come to, and those that failed (left out)
        and what each other one alone came to (``RecordsDecided``). Their read receipts are
        one write (``_Receipts``)."""
        out = Decided()
        receipts = _Receipts(out.writes)
        failed: list[tuple[Record, Exception]] = []
        pieces: list[tuple[Record, Decided]] = []
        wanted, effects = self.published, out.effects  # (asked once per line, not per mail)
        publish = wanted(_SENT) or wanted(_DELIVERED)
        posted, journal = self._mail.posted, self.journal
        for report in reports:
            try:
                if type(report) is MailPosted:  # (``one`` written out: one a mail)
                    if report.read_mail:  # (a reply's: its journal folded in)
                        decided = self._read_then_posted(report, publish)
                    else:
                        decided = posted(report, publish)
                elif type(report) is Journal:
                    decided = journal(report)
                else:
                    decided = self.one(report)
            except Exception as exc:  # a bug: this report alone is left out
                failed.append((report, exc))
                continue
            pieces.append((report, decided))
            receipts.add(decided.writes)
            if decided.effects:  # (a journal has none; nor a mail's events nobody is handed)
                effects += decided.effects
        receipts.flush()
        return RecordsDecided(tuple(failed), pieces, len(out.writes), len(out.effects)), out

    def one(self, report: Record) -> Decided:
        """What ``report`` alone comes to."""
        if type(report) is MailPosted:
            return self.posted(report)
        if type(report) is Journal:
            return self.journal(report)
        if type(report) is MailRead:
            return self._mail.read(report.run_id, report.mail_ids, report.attempt)
        raise TypeError(f"not a report that only records: {type(report).__name__}")

    def posted(self, report: MailPosted) -> Decided:
        """Straight mail decided alone (not in a line: ``SupervisorCore.mails_posted``, or
        one report of a line written again alone): its events published only if someone is
        handed them, as in a line (``all``); before, such a mail's were always published."""
        wanted = self.published
        publish = wanted(_SENT) or wanted(_DELIVERED)
        if report.read_mail:
            return self._read_then_posted(report, publish)
        return self._mail.posted(report, publish)

    def _read_then_posted(self, report: MailPosted, publish: bool) -> Decided:
        """``report``'s folded journal (``MailPosted.read_mail``) decided as that
        ``Journal(recorded=True)`` was (``_read_recorded``), then its mail."""
        state = self._runs.reporting(report.run_id, report.attempt)
        if state is None:  # (rare: an ended run's, a start's that is over)
            out = Decided()
            self._read_recorded(None, report.run_id, report.read_mail, report.attempt, out)
            return out.add(self._mail.posted(report, publish))
        inbox = state.inbox  # (``_read_recorded`` of a live run written out: every reply)
        for mail_id in report.read_mail:
            inbox.pop(mail_id, None)
        return self._mail.posted(report, publish)

    def _read_recorded(
        self,
        state: RunState | None,
        run_id: str,
        read_mail: tuple[str, ...],
        attempt: int,
        out: Decided,
    ) -> None:
        """The mail a journal its sender committed said it read (``Journal.recorded``, or
        folded into its ``MailPosted``: ``read_mail``), ``state`` its run as
        ``RunTable.reporting`` found it: out of the run's inbox, the receipt committed
        already; None (an ended run, a start that is over): as ``MailRoom.read`` decides (void
        for a start that is over)."""
        if state is None:
            if read_mail:  # (an earlier start's receipt is void: MailRoom.read)
                out.add(self._mail.read(run_id, read_mail, attempt))
            return
        inbox = state.inbox
        for mail_id in read_mail:
            inbox.pop(mail_id, None)

    def reads(self, receipts: Sequence[MailRead]) -> Decided:
        """Read receipts (one, or a run of consecutive ones) in order, each alone: one whose
        handling raises (a bug) is left out, logged, the others kept (``isolated``)."""
        out = Decided()
        read = self._mail.read
        each(receipts, lambda msg: read(msg.run_id, msg.mail_ids, msg.attempt), out)
        return out

    def journal(self, msg: Journal) -> Decided:
        """A function agent's journal entries of one handling, kept for its replay after a
        crash (unless its sender committed them with its straight mail, and the mail they
        read marked read with them: ``recorded``, ``SaveJournal.read_mail``; or the start
        that made them is over), and the mail they say it read, marked read in the same
        transaction (so the store never says a mail was read without saying which call
        read it)."""
        out = Decided()
        state = self._runs.reporting(msg.run_id, msg.attempt)
        if state is None or msg.recorded:  # (an ended run's, or a start's that is over: no
            # entry kept; or entries and receipts committed by its sender's straight mail)
            self._read_recorded(state, msg.run_id, msg.read_mail, msg.attempt, out)
            return out
        if msg.entries:
            out.writes.append(SaveJournal(msg.run_id, msg.entries))
        if msg.read_mail:  # (most journals read none: no receipt to make)
            self._mail.read_now(state, msg.read_mail, out.writes)  # (the current start's)
        return out


_ELSEWHERE = (AppendEvent, SaveJournal)
"""Writes to tables other than the mail's (events, the journal), whatever their order (by
exact type: no write type is subclassed)."""


class _Receipts:
    """The read receipts of a run of reports (in a ping-pong, one per mail, between the
    events of the next) joined into one write, made after the writes they come among: an
    ``UPDATE`` per line, not per mail. Only writes to other tables (``_ELSEWHERE``) and
    mails kept that none of the receipts held names (``SaveMails``: where the supervisor
    records mail, every mail of a ping-pong, each new) go ahead of a receipt: any other
    write (a dead letter, a mail a held receipt names) waits for the receipts made before
    it, so each mail's row is written in the order decided (writes to different mails'
    rows leave the same table in either order); and the whole run is one transaction's,
    so no reader sees the difference."""

    __slots__ = ("_ids", "_writes")

    def __init__(self, writes: list[Write]) -> None:
        self._writes = writes
        self._ids: list[str] = []

    def add(self, writes: list[Write]) -> None:
        """``writes`` after those added before, their receipts held."""
        out, ids = self._writes, self._ids
        for write in writes:
            if type(write) is SetMailsState and write.state is _READ:
                ids += write.mail_ids
                continue
            if ids and type(write) not in _ELSEWHERE:  # (``in`` a tuple: no call per write)
                if type(write) is not SaveMails:
                    self.flush()
                else:
                    for mail in write.mails:  # (a loop: ``in``, no call per mail)
                        if mail.mail_id in ids:
                            self.flush()
                            break
            out.append(write)

    def flush(self) -> None:
        """The receipts held, as one write, now."""
        ids = self._ids
        if ids:
            self._writes.append(SetMailsState(tuple(ids), _READ))
            ids.clear()
