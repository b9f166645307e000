"""What a SQLite store keeps for resuming a run: its conversation checkpoint and its journal.

Why a module of its own: both are read only when a run resumes (after a crash, a restart, a
``resume``) and both are written on every step, so both are shaped for cheap appends. A
checkpoint is one row per run, replaced at each step, plus ``checkpoint_deltas`` appended
between steps (a tool call started or finished) so a step does not rewrite the whole
conversation; loading applies the deltas in order. A function agent's journal is appended in
chunks and read back whole. ``SQLiteStore`` delegates to ``ResumeRows``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import msgspec

from subagents.messages import Checkpoint, CheckpointDelta, JournalEntry
from subagents.store.lone_surrogates import refused
from subagents.store.sqlite_tx import Rows, Transactions, encode_row

_checkpoint_decoder = msgspec.json.Decoder(Checkpoint)
_delta_decoder = msgspec.json.Decoder(CheckpointDelta)
_journal_decoder = msgspec.json.Decoder(list[JournalEntry])

_SAVE_JOURNAL = "INSERT INTO journal (run_id, entries) VALUES (?, ?)"


def journal_text(entries: Sequence[JournalEntry]) -> str:
    """``entries`` as the journal keeps them (a row's ``entries``, a mail's ``journal``)."""
    # made by the runtime (ids, digests, finite numbers): no read-back check needed
    return msgspec.json.encode(list(entries)).decode("utf-8")


def _journal_row(run_id: str, entries: Sequence[JournalEntry]) -> tuple[str, str]:
    return (run_id, journal_text(entries))


_JOURNAL_OF = """SELECT 'journal', seq, entries, seq AS place, 0 AS carried FROM journal
        WHERE run_id = ?1
    UNION ALL SELECT 'mail', seq, journal, coalesce(journal_after, 0), 1 FROM mail
        WHERE sender = ?1 AND journal IS NOT NULL
    ORDER BY place, carried, seq"""
"""A run's journal rows and the entries its mail carried, in the order committed (a mail's
after the journal row it was committed after, mails among themselves in their order)."""


def fold_journal(tx: Transactions, conn: sqlite3.Connection, run_id: str, doing: str) -> None:
    """The run's journal made one journal row, in the order committed (``journal_of``), the
    entries its mail carried (``mail.journal``) included and taken out of the mail: inside
    a transaction about to delete some of that mail (a deleted recipient's, the sweep), so
    what the mail carried stays the run's journal, in its place, without the mail."""
    rows = tx.write_sql(conn, _JOURNAL_OF, (run_id,), doing).fetchall()
    entries: list[JournalEntry] = []
    for table, seq, raw, _place, _carried in rows:
        decoded: list[JournalEntry] = tx.decode(_journal_decoder, raw, table, seq)
        entries.extend(decoded)
    tx.write_sql(conn, "DELETE FROM journal WHERE run_id = ?", (run_id,), doing)
    tx.write_sql(
        conn,
        "UPDATE mail SET journal = NULL, journal_after = NULL"
        " WHERE sender = ? AND journal IS NOT NULL",
        (run_id,),
        doing,
    )
    if entries:
        tx.write_sql(conn, _SAVE_JOURNAL, _journal_row(run_id, entries), doing)


def _appending(run_id: str) -> str:
    return f"appending to the journal of run {run_id}"


class ResumeRows:
    """The checkpoints, checkpoint deltas and journals of one SQLite store."""

    def __init__(self, tx: Transactions) -> None:
        self.tx = tx

    def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        with self.tx.writing() as conn:
            self.tx.write_sql(
                conn,
                """INSERT INTO checkpoints (run_id, step, ts, checkpoint) VALUES (?, ?, ?, ?)
                   ON CONFLICT (run_id) DO UPDATE SET step = excluded.step, ts = excluded.ts,
                       checkpoint = excluded.checkpoint""",
                (
                    checkpoint.run_id,
                    checkpoint.step,
                    checkpoint.ts,
                    encode_row(
                        checkpoint,
                        _checkpoint_decoder,
                        f"the checkpoint of run {checkpoint.run_id}",
                    ),
                ),
                f"saving the step {checkpoint.step} checkpoint of run {checkpoint.run_id}",
            )
            # the checkpoint holds every change made before it (the supervisor's copy)
            self.tx.write_sql(
                conn,
                "DELETE FROM checkpoint_deltas WHERE run_id = ?",
                (checkpoint.run_id,),
                f"dropping the checkpoint deltas of run {checkpoint.run_id}",
            )

    def add_to_checkpoint(self, delta: CheckpointDelta) -> None:
        self.tx.defer(
            "checkpoint_deltas",
            "INSERT INTO checkpoint_deltas (run_id, delta) VALUES (?, ?)",
            (
                delta.run_id,
                encode_row(delta, _delta_decoder, f"a checkpoint delta of run {delta.run_id}"),
            ),
            f"adding to the step {delta.step} checkpoint of run {delta.run_id}",
        )

    def load_checkpoint(self, run_id: str) -> Checkpoint | None:
        # one statement, so one snapshot: the checkpoint and the deltas added since, never a
        # checkpoint from before a save and the deltas from after it (which the save cleared)
        rows = self.tx.read(
            "SELECT -1 AS seq, checkpoint FROM checkpoints WHERE run_id = ?1"
            " UNION ALL SELECT seq, delta FROM checkpoint_deltas WHERE run_id = ?1"
            " ORDER BY seq",
            (run_id,),
            f"reading the checkpoint of run {run_id}",
        )
        if not rows or rows[0][0] != -1:
            return None
        checkpoint: Checkpoint = self.tx.decode(
            _checkpoint_decoder, rows[0][1], "checkpoints", run_id
        )
        for seq, raw in rows[1:]:
            delta: CheckpointDelta = self.tx.decode(_delta_decoder, raw, "checkpoint_deltas", seq)
            checkpoint = checkpoint.with_delta(delta)
        return checkpoint

    def save_journal(self, run_id: str, entries: Sequence[JournalEntry]) -> None:
        if not entries:
            return
        try:
            row = _journal_row(run_id, entries)
        except UnicodeEncodeError as exc:  # (an entry's text: refused by name, at the call)
            raise refused(exc, _appending(run_id)) from exc
        self.tx.defer("journal", _SAVE_JOURNAL, row, _appending(run_id))

    def journal_rows(self, run_id: str, entries: Sequence[JournalEntry]) -> Rows:
        """``save_journal``'s row, for a transaction of its own (``Transactions.commit_rows``:
        a sender's straight mail and the entries it told before it,
        ``SQLiteStore.save_mails_fenced``)."""
        return ("journal", _SAVE_JOURNAL, [_journal_row(run_id, entries)], _appending(run_id))

    def journal_of(self, run_id: str) -> list[JournalEntry]:
        """The run's journal in the order committed: its rows, and the entries its straight
        mail carried (``mail.journal``, ``store.sqlite_record``), each after the journal's
        row ``journal_after`` and before the next (one statement: one snapshot)."""
        rows = self.tx.read(_JOURNAL_OF, (run_id,), f"reading the journal of run {run_id}")
        entries: list[JournalEntry] = []
        for table, seq, raw, _place, _carried in rows:
            decoded: list[JournalEntry] = self.tx.decode(_journal_decoder, raw, table, seq)
            entries.extend(decoded)
        return entries
