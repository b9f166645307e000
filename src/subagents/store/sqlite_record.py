"""A sender's record of the mail it takes straight to its recipient, in a SQLite store: one
statement where it can be (docs/architecture.md, "The mail path").

Why a module of its own: this is the only commit on a durable mail's path, made by the
sender's thread for every straight mail, so its cost is the mail's. What it must check and
keep is fixed (``SQLiteStore.save_mails_fenced``): the runtime's lease still held at its
epoch (``store.fencing``), the sender's start still its run's (``store.writes.AttemptFence``),
the mail, and the journal entries the sender told and does not know committed
(``supervision/unsaved_journal.py``), all in one transaction. As separate statements that
was ``BEGIN IMMEDIATE``, a read of the lease, a read and a decode of the run's whole record
(its size the task's), an insert of the mail, one of the journal entries, ``COMMIT``.

One mail (the common case: a step's one mail) is one statement instead, in autocommit:
``INSERT OR IGNORE INTO mail ... VALUES``, its id NULL unless the lease (since v17 its
fence's view, named, not read: ``store.lease_fences``) and the run's counts (columns of
their own since schema v9, read alone) are as the record expects, the journal
entries in the mail's row (``mail.journal``, with ``journal_after``: the journal's last row
then, so a replay reads them in their place: ``ResumeRows.journal_of``). A write statement
takes SQLite's write lock before it reads, so its checks and its insert are one transaction,
as ``BEGIN IMMEDIATE``'s were. When it inserts nothing (the lease or the start is over, or
the mail is kept already), the statements of old run once more in a transaction of their
own, and say which (``Fenced``, ``AttemptOver``) or keep what must be kept; so do several
mails, a record with a further check (a cluster node's, ``cluster.record_fence``), and an
SQLite without JSON1.

Read receipts ride on it (schema v11): the mail the carried entries say the sender read
(``SaveJournal.read_mail``) is marked read in the same transaction, so a ping-pong's reply
commits the receipt of the mail it answers and the supervisor's group writes none
(``Recorded.journal``: a ``recorded`` journal's receipts are committed). One receipt goes in
the one statement as the new row's ``mail.receipt`` (since v15 read from there by
``MailRows.mail_for``, not written into the read mail's row: that trigger's ``UPDATE`` was
~15.7k of the statement's ~129k instructions), more as an ``UPDATE`` among the statements.
Only mail sent to the sender is marked, and nothing when the record is refused: a receipt
is never committed without the entries that say which call read the mail, nor by a start
that is over.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

from subagents.messages import TERMINAL_STATUSES, JournalEntry, Mail, RunStatus
from subagents.store import lease_fences
from subagents.store.base import StoreError
from subagents.store.fencing import AttemptOver
from subagents.store.sqlite_mail import SAVE_MAIL, MailRows, mail_row
from subagents.store.sqlite_processes import ProcessRows
from subagents.store.sqlite_resume import ResumeRows, journal_text
from subagents.store.sqlite_tx import Rows, Transactions
from subagents.store.writes import AttemptFence

_LIVE = " AND ".join(
    f"status <> '{s.value}'" for s in sorted(TERMINAL_STATUSES, key=lambda s: s.value)
)
"""The run is not over: its status none of the terminal ones, each compared on its own.
Not ``status NOT IN (...)``: SQLite builds a temporary b-tree of an ``IN`` list each time the
statement runs (``OpenEphemeral`` and an insert per value), which cost the sender's statement
a fifth of its instructions (~28,000 of ~147,000, callgrind); ``status`` is never NULL, so the
two mean the same."""


@functools.lru_cache(maxsize=64)
def _record_one(attempt: bool, receipt: bool, epoch: int) -> str:
    """One mail's record as one statement: its row (``?1``-``?6``), the journal entries it
    carries (``?7``, or NULL), inserted only while the lease taken at ``epoch`` is held (its
    fence's view names it: ``store.lease_fences``, schema v17) and (``attempt``) the run
    ``?8`` is live with restarts ``?9`` and retries ``?10``; (``receipt``) the mail its
    sender read, the last parameter, kept in the row's ``receipt`` (read as that mail's
    read receipt: ``sqlite_mail._MAIL_OF``, schema v15).

    ``VALUES``, its id NULL unless the checks hold, which ``OR IGNORE`` skips as it skips an
    id kept already (a NOT NULL column; nothing inserted, nothing marked read): an
    ``INSERT ... SELECT ... WHERE`` into a table with a trigger copies its row through a
    temporary b-tree first (``OpenEphemeral``, each time it runs). The lease's check is a
    constant once compiled: it reads no table (until v17 a probe of ``leases`` by owner and
    epoch, two more parameters: with them 4.5k of the statement's 115.5k instructions);
    a lease ended since makes the statement fail to compile again (``lease_fences.missing``),
    before it writes."""
    where = f"EXISTS (SELECT 1 FROM {lease_fences.view_of(epoch)})"
    if attempt:
        where += (
            " AND EXISTS (SELECT 1 FROM runs WHERE run_id = ?8 AND restarts = ?9"
            f" AND retries = ?10 AND {_LIVE})"
        )
    column, value = (", receipt", f", ?{11 if attempt else 8}") if receipt else ("", "")
    return (
        "INSERT OR IGNORE INTO mail (mail_id, sender, recipient, state, sent_at, mail, journal,"
        f" journal_after{column}) VALUES (CASE WHEN {where} THEN ?1 END, ?2, ?3, ?4, ?5, ?6, ?7,"
        f" CASE WHEN ?7 IS NULL THEN NULL ELSE (SELECT max(seq) FROM journal) END{value})"
    )


_READ_ONE = "UPDATE mail SET state = 'read' WHERE mail_id = ? AND recipient = ?"
"""A receipt the sender carries, in a record of statements: only mail sent to it."""


class SenderRecords:
    """The senders' records of one SQLite store (see the module)."""

    def __init__(
        self,
        tx: Transactions,
        mail: MailRows,
        processes: ProcessRows,
        resume: ResumeRows,
    ) -> None:
        self.tx = tx
        self.mail = mail
        self.processes = processes
        self.resume = resume

    def record(
        self,
        mails: Sequence[Mail],
        owner: str,
        epoch: int,
        journal: Sequence[JournalEntry],
        also: Callable[[], None] | None = None,
        attempt: tuple[str, int, int] | None = None,
        read: Sequence[str] = (),
    ) -> None:
        """``mails`` and their sender's ``journal`` entries in one transaction, while
        ``owner`` holds its lease at ``epoch``, ``also`` passes and ``attempt`` (an
        ``AttemptFence``'s run, restarts and retries, as ``FencedStore`` hands them: its
        struct is made again only where a refusal is said, in ``_checked``) is still its
        run's start, and the mail those entries say it ``read`` (sent to it) marked read in
        it (see the module)."""
        if not mails:
            return
        if len(mails) == 1 and len(read) < 2 and also is None and self.mail.json1:
            # one statement (the one-mail path inline: this runs per durable mail)
            mail = mails[0]
            carried = journal_text(journal) if journal else None
            if attempt is None:
                row = (*mail_row(mail), carried, *read)
            else:
                row = (*mail_row(mail), carried, *attempt, *read)
            sql = _record_one(attempt is not None, bool(read), epoch)
            try:
                if self.tx.execute_alone(sql, row, f"saving mail {mail.mail_id}") == 1:
                    return  # (0: nothing inserted; None: a batch is open on this thread)
            except StoreError as exc:
                if not lease_fences.missing(exc.__cause__):
                    raise  # (else the lease ended, or has no view: the statements say)
        self._checked(mails, owner, epoch, journal, also, attempt, read)

    def _checked(
        self,
        mails: Sequence[Mail],
        owner: str,
        epoch: int,
        journal: Sequence[JournalEntry],
        also: Callable[[], None] | None,
        attempt: tuple[str, int, int] | None,
        read: Sequence[str],
    ) -> None:
        """The record as a transaction of statements, each check raising what it found."""
        processes = self.processes
        start = AttemptFence(*attempt) if attempt is not None else None

        def check() -> None:
            processes.check_fence(owner, epoch)
            if also is not None:
                also()
            if start is not None:
                refusal = start.refusal_of(self._counts(start.run_id))
                if refusal is not None:
                    raise AttemptOver(refusal)

        rows = [mail_row(mail) for mail in mails]
        writes: list[Rows] = [("mail", SAVE_MAIL, rows, f"saving mail {mails[0].mail_id}")]
        sender = mails[0].sender
        if journal:
            writes.append(self.resume.journal_rows(sender, journal))
        if read:
            rows = [(mail_id, sender) for mail_id in read]
            writes.append(("mail", _READ_ONE, rows, f"setting mail {read[0]} to read"))
        self.tx.commit_rows(writes, check)

    def _counts(self, run_id: str) -> tuple[RunStatus, int, int] | None:
        """The run's status, restarts and retries, read from their columns."""
        rows = self.tx.read(
            "SELECT status, restarts, retries FROM runs WHERE run_id = ?",
            (run_id,),
            f"reading run {run_id}",
        )
        if not rows:
            return None
        status, restarts, retries = rows[0]
        return RunStatus(status), int(restarts), int(retries)
