"""The mail of a SQLite store: every mail a run sent or received, and its delivery state.

Why a module of its own: mail is the busiest table (every send, every read receipt) and has
its own tricks: a read receipt carried by its reader's own row (schema v15: ``receipt``,
written by ``store.sqlite_record``, read by ``mail_for``: nothing written into the read
row), other read receipts written to the ``state`` column alone (schema v11: the
document keeps the state it had before; ``mail_for`` gives the column's), other state
changes in place with SQLite's JSON functions when they exist (one statement, no
read-back), in chunks of ids rather than a statement per mail, and a read-modify-write
fallback for an SQLite without JSON1. ``SQLiteStore`` delegates to ``MailRows``; the
transactions stay ``store.sqlite_tx``'s.

Why READ in the column alone: a receipt is one per mail (the supervisor's, or the reader's
own record's: ``store.sqlite_record``), and ``json_set`` parsed and wrote the document again
for it, ~40% of the receipt's cost. Every other state change is rare (a delivery to a run
that was queued, a dead letter) and keeps the document in step, so a runtime of before v11
still open on an upgraded store, which reads a mail's state from its document, is wrong only
about ``read``: where it prints the document (``subagents info``/``log``: it shows
``delivered``), and in one decision, an orphaned run ended by a console server of before v11
(its unread mail picked by the document: a read one made a dead letter; docs/store.md, v11);
where else it decides, it filters by the column (a restore's inbox, the unread count).
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from subagents.messages import Mail, MailState
from subagents.store.base import StoreError
from subagents.store.lone_surrogates import keys_checked
from subagents.store.sqlite_tx import Transactions, encode_row

_mail_decoder = msgspec.json.Decoder(Mail)

SAVE_MAIL = """INSERT INTO mail (mail_id, sender, recipient, state, sent_at, mail)
    VALUES (?, ?, ?, ?, ?, ?)
    ON CONFLICT (mail_id) DO NOTHING"""
"""A mail id is kept once: a second record of it is nothing (``RunStore.save_mail``)."""

_SET_MAIL_STATE = "UPDATE mail SET state = ?, mail = json_set(mail, '$.state', ?) WHERE mail_id = ?"
"""A mail's new state in its column and its document, without reading it (JSON1)."""

_READ = MailState.READ

_MAIL_OF = """SELECT m.mail_id, m.mail, CASE WHEN m.state <> 'read' AND EXISTS (SELECT 1
        FROM mail AS r WHERE r.sender = m.recipient AND r.receipt = m.mail_id)
        THEN 'read' ELSE m.state END AS shown, m.seq AS seq
    FROM mail AS m WHERE (m.recipient = ?1 OR m.sender = ?2)"""
"""A run's mail with the state each is in: its ``state`` column's, or ``read`` where a row
its recipient sent carries its id in ``receipt`` (schema v15: a receipt carried by its
reader's record is not written into the read row; the ``mail_sender`` index, ``(sender,
receipt)``, answers it in one probe). A receipt is the reader's word that it read the mail,
committed with the journal entries that say which call did: it stands whatever the column
says (v11-v14's trigger set ``read`` over any state too; a mail is made dead only while its
run holds it unread: ``MailRoom.dead_letters``).
"""


_STATE_CHUNK = 500
"""Ids per ``set_mails_state`` statement (SQLite before 3.32 allows 999 parameters)."""


@functools.cache
def _set_mails_state_sql(n: int) -> str:
    """``_SET_MAIL_STATE`` for ``n`` mails at once."""
    return (
        "UPDATE mail SET state = ?, mail = json_set(mail, '$.state', ?)"
        f" WHERE mail_id IN ({_marks(n)})"
    )


@functools.cache
def _read_sql(n: int) -> str:
    """``n`` mails marked read: the column alone (see the module)."""
    if n == 1:
        return "UPDATE mail SET state = 'read' WHERE mail_id = ?"
    return f"UPDATE mail SET state = 'read' WHERE mail_id IN ({_marks(n)})"


def _marks(n: int) -> str:
    return ", ".join("?" * n)


def _has_json1(conn: sqlite3.Connection) -> bool:
    """Whether this SQLite has the JSON functions (built in since 3.38, optional before)."""
    try:
        conn.execute("SELECT json_set('{}', '$.a', 1)").fetchone()
    except sqlite3.OperationalError:
        return False
    return True


def mail_row(mail: Mail) -> tuple[Any, ...]:
    """The parameters of ``SAVE_MAIL`` for ``mail``."""
    return (
        mail.mail_id,
        mail.sender,
        mail.recipient,
        mail.state._value_,  # (the member's own attribute: ``.value`` is 2 Python calls)
        mail.sent_at,
        encode_row(mail, _mail_decoder, f"mail {mail.mail_id}"),
    )


class MailRows:
    """The mail table of one SQLite store."""

    def __init__(self, tx: Transactions, conn: sqlite3.Connection) -> None:
        self.tx = tx
        self.json1 = _has_json1(conn)

    def save_mail(self, mail: Mail) -> None:
        self.tx.defer("mail", SAVE_MAIL, mail_row(mail), f"saving mail {mail.mail_id}")

    def save_mails(self, mails: Sequence[Mail]) -> None:
        if not mails:
            return
        # every row encoded before any is held: a mail that cannot be stored holds none
        rows = [mail_row(mail) for mail in mails]
        self.tx.defer_rows("mail", SAVE_MAIL, rows, f"saving mail {mails[0].mail_id}")

    def set_mails_state(self, mail_ids: Sequence[str], state: MailState) -> None:
        state = MailState(state)
        keys_checked(f"setting mail to {state.value}", mail_ids)  # (held raw: refused alone)
        if state is _READ:
            self._read(mail_ids)
            return
        if not self.json1:
            for mail_id in mail_ids:
                self.set_mail_state(mail_id, state)
            return
        # one UPDATE per chunk of ids (``mail_id IN (...)``), not one row each: cheaper for
        # SQLite than executemany's step per id, and no params tuple per id
        value = state.value
        for start in range(0, len(mail_ids), _STATE_CHUNK):
            chunk = mail_ids[start : start + _STATE_CHUNK]
            self.tx.defer(
                "mail",
                _set_mails_state_sql(len(chunk)),
                (value, value, *chunk),
                f"setting mail {chunk[0]} to {value}"
                + (f" (and {len(chunk) - 1} more)" if len(chunk) > 1 else ""),
            )

    def _read(self, mail_ids: Sequence[str]) -> None:
        """``mail_ids`` marked read: their ``state`` column alone, a statement per chunk."""
        for start in range(0, len(mail_ids), _STATE_CHUNK):
            chunk = mail_ids[start : start + _STATE_CHUNK]
            self.tx.defer(
                "mail",
                _read_sql(len(chunk)),
                tuple(chunk),
                f"setting mail {chunk[0]} to read"
                + (f" (and {len(chunk) - 1} more)" if len(chunk) > 1 else ""),
            )

    def set_mail_state(self, mail_id: str, state: MailState) -> None:
        state = MailState(state)
        keys_checked(f"setting mail to {state.value}", (mail_id,))  # (held raw: refused alone)
        if state is _READ:
            self._read((mail_id,))
            return
        if self.json1:  # one statement; the column and the document stay in step
            self.tx.defer(
                "mail",
                _SET_MAIL_STATE,
                (state.value, state.value, mail_id),
                f"setting mail {mail_id} to {state.value}",
            )
            return
        with self.tx.writing() as conn:
            doing = f"setting mail {mail_id} to {state.value}"
            row = self.tx.write_sql(
                conn, "SELECT mail FROM mail WHERE mail_id = ?", (mail_id,), doing
            ).fetchone()
            if row is None:
                return
            mail = msgspec.structs.replace(
                self.tx.decode(_mail_decoder, row[0], "mail", mail_id), state=state
            )
            self.tx.write_sql(
                conn,
                "UPDATE mail SET state = ?, mail = ? WHERE mail_id = ?",
                (state.value, encode_row(mail, _mail_decoder, f"mail {mail_id}"), mail_id),
                doing,
            )

    def mail_for(self, run_id: str, states: Iterable[MailState] | None = None) -> list[Mail]:
        sql = _MAIL_OF
        params: list[Any] = [run_id, run_id]
        if states is not None:
            wanted = sorted({MailState(s).value for s in states})
            if not wanted:
                return []
            sql = f"SELECT * FROM ({_MAIL_OF}) WHERE shown IN ({_marks(len(wanted))})"
            params.extend(wanted)
        rows = self.tx.read(sql + " ORDER BY seq", params, f"reading the mail of run {run_id}")
        return [self._loaded(key, raw, state) for key, raw, state, _ in rows]

    def _loaded(self, mail_id: str, raw: str, state: str) -> Mail:
        """A mail's row as a ``Mail``: its document, with the state its column says (a read
        receipt writes the column alone: see the module)."""
        mail = self.tx.decode(_mail_decoder, raw, "mail", mail_id)
        if mail.state._value_ == state:
            return mail
        try:
            return msgspec.structs.replace(mail, state=MailState(state))
        except ValueError:
            raise StoreError(
                f"{self.tx.path}: cannot read mail row {mail_id!r}: state {state!r}"
            ) from None
