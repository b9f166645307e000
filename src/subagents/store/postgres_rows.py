"""Mail, checkpoints and journals of a PostgreSQL store (as ``store.sqlite_mail`` and
``store.sqlite_resume`` are SQLite's).

One difference in how a mail's state is kept: the ``state`` column is the truth, and the
document's ``state`` is overwritten by it when read. So ``set_mail_state`` is one ``UPDATE``
of a column, with no rewrite of the document (SQLite uses ``json_set`` for the same; here
the document is text kept byte for byte, see ``store.postgres_schema``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from subagents.messages import Checkpoint, CheckpointDelta, JournalEntry, Mail, MailState
from subagents.store.lone_surrogates import keys_checked, refused
from subagents.store.postgres_tx import PgTransactions
from subagents.store.sqlite_tx import encode_row

_mail_decoder = msgspec.json.Decoder(Mail)
_checkpoint_decoder = msgspec.json.Decoder(Checkpoint)
_delta_decoder = msgspec.json.Decoder(CheckpointDelta)
_journal_decoder = msgspec.json.Decoder(list[JournalEntry])

_SAVE_MAIL = """INSERT INTO mail (mail_id, sender, recipient, state, sent_at, mail)
    VALUES (%s, %s, %s, %s, %s, %s)
    ON CONFLICT (mail_id) DO NOTHING"""
"""A mail id is kept once: a second record of it is nothing (``RunStore.save_mail``)."""


def _mail_row(mail: Mail) -> tuple[Any, ...]:
    return (
        mail.mail_id,
        mail.sender,
        mail.recipient,
        mail.state.value,
        mail.sent_at,
        encode_row(mail, _mail_decoder, f"mail {mail.mail_id}"),
    )


class PgMailRows:
    """The mail table of one PostgreSQL store."""

    def __init__(self, tx: PgTransactions) -> None:
        self.tx = tx

    def save_mail(self, mail: Mail) -> None:
        self.tx.defer(_SAVE_MAIL, _mail_row(mail), f"saving mail {mail.mail_id}")

    def save_mails(self, mails: Sequence[Mail]) -> None:
        if not mails:
            return
        rows = [_mail_row(mail) for mail in mails]  # all encoded before any is held
        self.tx.defer_rows(_SAVE_MAIL, rows, f"saving mail {mails[0].mail_id}")

    def set_mail_state(self, mail_id: str, state: MailState) -> None:
        self.set_mails_state([mail_id], state)

    def set_mails_state(self, mail_ids: Sequence[str], state: MailState) -> None:
        if not mail_ids:
            return
        value = MailState(state).value
        keys_checked(f"setting mail to {value}", mail_ids)  # (held raw: refused alone)
        more = f" (and {len(mail_ids) - 1} more)" if len(mail_ids) > 1 else ""
        self.tx.defer(
            "UPDATE mail SET state = %s WHERE mail_id = ANY(%s)",
            (value, list(mail_ids)),
            f"setting mail {mail_ids[0]} to {value}{more}",
        )

    def mail_for(self, run_id: str, states: Iterable[MailState] | None = None) -> list[Mail]:
        sql = "SELECT mail_id, state, mail FROM mail WHERE (recipient = %s OR sender = %s)"
        params: list[Any] = [run_id, run_id]
        if states is not None:
            wanted = sorted({MailState(s).value for s in states})
            if not wanted:
                return []
            sql += " AND state = ANY(%s)"
            params.append(wanted)
        rows = self.tx.read(sql + " ORDER BY seq", params, f"reading the mail of run {run_id}")
        found: list[Mail] = []
        for key, state, raw in rows:
            mail: Mail = self.tx.decode(_mail_decoder, raw, "mail", key)
            found.append(
                mail
                if mail.state.value == state
                else msgspec.structs.replace(mail, state=MailState(state))
            )
        return found


class PgResumeRows:
    """The checkpoints, checkpoint deltas and journals of one PostgreSQL store."""

    def __init__(self, tx: PgTransactions) -> None:
        self.tx = tx

    def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        run_id = checkpoint.run_id
        raw = encode_row(checkpoint, _checkpoint_decoder, f"the checkpoint of run {run_id}")
        with self.tx.writing():
            self.tx.defer(
                """INSERT INTO checkpoints (run_id, step, ts, checkpoint)
                   VALUES (%s, %s, %s, %s)
                   ON CONFLICT (run_id) DO UPDATE SET step = excluded.step, ts = excluded.ts,
                       checkpoint = excluded.checkpoint""",
                (run_id, checkpoint.step, checkpoint.ts, raw),
                f"saving the step {checkpoint.step} checkpoint of run {run_id}",
            )
            # the checkpoint holds every change made before it
            self.tx.defer(
                "DELETE FROM checkpoint_deltas WHERE run_id = %s",
                (run_id,),
                f"dropping the checkpoint deltas of run {run_id}",
            )

    def add_to_checkpoint(self, delta: CheckpointDelta) -> None:
        self.tx.defer(
            "INSERT INTO checkpoint_deltas (run_id, delta) VALUES (%s, %s)",
            (
                delta.run_id,
                encode_row(delta, _delta_decoder, f"a checkpoint delta of run {delta.run_id}"),
            ),
            f"adding to the step {delta.step} checkpoint of run {delta.run_id}",
        )

    def load_checkpoint(self, run_id: str) -> Checkpoint | None:
        # one statement, one snapshot: never a checkpoint from before a save with the
        # deltas from after it
        rows = self.tx.read(
            "SELECT -1 AS seq, checkpoint FROM checkpoints WHERE run_id = %(run)s"
            " UNION ALL SELECT seq, delta FROM checkpoint_deltas WHERE run_id = %(run)s"
            " ORDER BY seq",
            {"run": run_id},
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
        doing = f"appending to the journal of run {run_id}"
        try:
            text = msgspec.json.encode(list(entries)).decode("utf-8")
        except UnicodeEncodeError as exc:  # (an entry's text: refused by name, at the call)
            raise refused(exc, doing) from exc
        self.tx.defer(
            "INSERT INTO journal (run_id, entries) VALUES (%s, %s)", (run_id, text), doing
        )

    def journal_of(self, run_id: str) -> list[JournalEntry]:
        rows = self.tx.read(
            "SELECT seq, entries FROM journal WHERE run_id = %s ORDER BY seq",
            (run_id,),
            f"reading the journal of run {run_id}",
        )
        entries: list[JournalEntry] = []
        for seq, raw in rows:
            decoded: list[JournalEntry] = self.tx.decode(_journal_decoder, raw, "journal", seq)
            entries.extend(decoded)
        return entries
