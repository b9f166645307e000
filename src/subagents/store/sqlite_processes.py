"""What processes sharing a SQLite store exchange through it: commands and leases.

Commands: another process (``subagents stop``/``send``, another runtime) posts one for a run;
the runtime hosting the run claims it. Leases: each runtime says it is alive
(``store.leases``). Rows written by several processes, unlike the rest of the store, whose one
writer is a runtime's supervisor.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Collection
from typing import Any

import msgspec

from subagents.messages import COMMAND_KINDS, TERMINAL_STATUSES, Command, Lease
from subagents.store import lease_fences
from subagents.store.base import Fenced, fenced_message
from subagents.store.leases import ended_here
from subagents.store.sqlite_tx import Transactions, encode_row

_lease_decoder = msgspec.json.Decoder(Lease)

EPOCH = "epoch"
"""A lease's epoch: its column (schema v10, ``migrations.v9_to_v10``), written with its
document, which says the same. Before, ``json_extract(lease, '$.epoch')``: the document
parsed by every fenced write, each durable mail's sender's among them."""


_IDS_A_STATEMENT = 500
"""Ids a statement of ``ended_among`` (under an old SQLite's 999 values, with the statuses)."""
_TERMINAL = tuple(sorted(s.value for s in TERMINAL_STATUSES))


def _marks(n: int) -> str:
    return ", ".join("?" * n)


class ProcessRows:
    """The commands and leases of one SQLite store."""

    def __init__(self, tx: Transactions) -> None:
        self.tx = tx
        self._version: int | None = None
        """The file's ``data_version`` when ``written_elsewhere`` last read it."""

    def written_elsewhere(self) -> bool:
        """Whether another connection (another process, another store on the file) committed
        to the file since the last call (``PRAGMA data_version``, which this connection's own
        commits leave alone; the first call: True). A runtime alone on its file then reads
        nothing more to know that no run it holds was ended elsewhere
        (``actors.ends_elsewhere``)."""
        rows = self.tx.read("PRAGMA data_version", (), "reading the file's data version")
        version = int(rows[0][0])
        seen, self._version = self._version, version
        return seen != version

    def ended_among(self, run_ids: Collection[str]) -> list[str]:
        """Those of ``run_ids`` the file keeps ended: their ids alone, by the ``status``
        column, no record read or decoded (``actors.ends_elsewhere``'s look at every held
        run a round: ~0.1 us of CPU a run, where ``get_runs`` took ~6 us, its decode)."""
        ids = list(run_ids)
        ended: list[str] = []
        for at in range(0, len(ids), _IDS_A_STATEMENT):
            part = ids[at : at + _IDS_A_STATEMENT]
            sql = (
                f"SELECT run_id FROM runs WHERE run_id IN ({_marks(len(part))})"
                f" AND status IN ({_marks(len(_TERMINAL))})"
            )
            rows = self.tx.read(sql, (*part, *_TERMINAL), f"reading which of {len(part)} ended")
            ended += (row[0] for row in rows)
        return ended

    def post_command(self, kind: str, run_id: str, content: str | None = None) -> int:
        """Queue a command for the runtime that owns ``run_id``; safe from any process."""
        if kind not in COMMAND_KINDS:
            raise ValueError(
                f"unknown command kind {kind!r}: expected one of {', '.join(COMMAND_KINDS)}"
            )
        with self.tx.writing() as conn:
            cursor = self.tx.write_sql(
                conn,
                "INSERT INTO commands (kind, run_id, content, ts) VALUES (?, ?, ?, ?)",
                (kind, run_id, content, time.time()),
                f"posting a {kind} command for run {run_id}",
            )
            command_id = cursor.lastrowid
        assert command_id is not None
        return command_id

    def pending_command_runs(self) -> list[str]:
        """The runs with commands not taken yet, each once, oldest first (a read: no write
        lock; ``RunStore.pending_command_runs``)."""
        rows = self.tx.read(
            "SELECT run_id FROM commands WHERE taken_at IS NULL ORDER BY command_id",
            (),
            "reading the pending commands",
        )
        return list(dict.fromkeys(row[0] for row in rows))

    def take_commands(self, run_ids: Collection[str] | None = None) -> list[Command]:
        """Claim pending commands, oldest first; each is returned to exactly one taker.

        With ``run_ids``, only commands for those runs are claimed: a runtime takes the
        commands of the runs it hosts and leaves the others to their own process.

        Called inside a batch, the claim commits (or rolls back) with the writes that act
        on the commands, so a crash between taking and acting loses no command. Outside a
        batch, polling an empty queue only reads: it never waits for another process's
        write lock.
        """
        doing = "taking commands"
        with self.tx.lock:
            if not self.tx.in_batch and not self.tx.read(
                "SELECT 1 FROM commands WHERE taken_at IS NULL LIMIT 1", (), doing
            ):
                return []  # the common case, without taking the write lock
        with self.tx.writing() as conn:
            rows = self.tx.write_sql(
                conn,
                "SELECT command_id, kind, run_id, content, ts FROM commands "
                "WHERE taken_at IS NULL ORDER BY command_id",
                (),
                doing,
            ).fetchall()
            if run_ids is not None:
                rows = [row for row in rows if row[2] in run_ids]
            if rows:
                self.tx.write_sql(
                    conn,
                    f"UPDATE commands SET taken_at = ? WHERE command_id IN ({_marks(len(rows))})",
                    (time.time(), *(row[0] for row in rows)),
                    doing,
                )
        return [
            Command(command_id=cid, kind=kind, run_id=run_id, content=content, ts=ts)
            for cid, kind, run_id, content, ts in rows
        ]

    # ---- leases: which runtimes are alive (store.leases) ------------------------------------

    def _lease_row(self, lease: Lease) -> tuple[Any, ...]:
        return (
            lease.owner,
            lease.epoch,
            lease.host,
            lease.pid,
            lease.renewed_at,
            lease.expires_at,
            encode_row(lease, _lease_decoder, f"the lease of {lease.owner}"),
        )

    def acquire_lease(self, lease: Lease) -> int:
        """Write ``lease`` with the next epoch of the store (a counter in ``meta`` that only
        grows, so an epoch is never given twice, even to one owner); that epoch."""
        doing = f"writing the lease of {lease.owner}"
        with self.tx.writing() as conn:
            self.tx.write_sql(
                conn,
                """INSERT INTO meta (key, value) VALUES ('lease_epoch', '1')
                   ON CONFLICT (key) DO UPDATE SET value = CAST(value AS INTEGER) + 1""",
                (),
                doing,
            )
            (raw,) = self.tx.write_sql(
                conn, "SELECT value FROM meta WHERE key = 'lease_epoch'", (), doing
            ).fetchone()
            epoch = int(raw)
            self._end_fences(conn, lease.owner, None, doing)  # (a taking of before: over)
            self._drop_lapsed_fences(conn, lease.renewed_at, doing)
            self._drop_ended_leases(conn, lease.renewed_at, doing)
            self.tx.write_sql(conn, lease_fences.create_sql(epoch), (), doing)
            self.tx.write_sql(
                conn,
                """INSERT INTO leases (owner, epoch, host, pid, renewed_at, expires_at, lease)
                   VALUES (?, ?, ?, ?, ?, ?, ?)
                   ON CONFLICT (owner) DO UPDATE SET epoch = excluded.epoch,
                       host = excluded.host, pid = excluded.pid,
                       renewed_at = excluded.renewed_at, expires_at = excluded.expires_at,
                       lease = excluded.lease""",
                self._lease_row(msgspec.structs.replace(lease, epoch=epoch)),
                doing,
            )
        return epoch

    def renew_lease(self, lease: Lease) -> bool:
        """The lease's times written while its taking is held, and its fence's view made
        again if a taking of another dropped it meanwhile (``_drop_lapsed_fences``: this
        owner stalled past its lease, nobody took it): without it, every durable mail of
        the woken runtime would go by the statements for the rest of its life. Made in the
        transaction that found the lease held (no end can come between); a view that stands
        is left alone (``IF NOT EXISTS``: the schema unchanged)."""
        row = self._lease_row(lease)
        doing = f"renewing the lease of {lease.owner}"
        with self.tx.writing() as conn:
            cursor = self.tx.write_sql(
                conn,
                f"""UPDATE leases SET host = ?, pid = ?, renewed_at = ?, expires_at = ?, lease = ?
                   WHERE owner = ? AND {EPOCH} = ?""",
                (*row[2:], lease.owner, lease.epoch),
                doing,
            )
            held = cursor.rowcount > 0
            if held and lease.epoch is not None:
                self.tx.write_sql(conn, lease_fences.create_sql(lease.epoch), (), doing)
            return held

    def release_lease(self, owner: str, epoch: int | None = None) -> None:
        doing = f"releasing lease {owner}"
        with self.tx.writing() as conn:
            self._end_fences(conn, owner, epoch, doing)
            if epoch is None:
                self.tx.write_sql(conn, "DELETE FROM leases WHERE owner = ?", (owner,), doing)
            else:
                sql = f"DELETE FROM leases WHERE owner = ? AND {EPOCH} = ?"
                self.tx.write_sql(conn, sql, (owner, epoch), doing)

    def _end_fences(
        self, conn: sqlite3.Connection, owner: str, epoch: int | None, doing: str
    ) -> None:
        """The fence views of ``owner``'s taking (at ``epoch`` if given) dropped, in the
        transaction that ends it, before its row goes (``store.lease_fences``)."""
        sql = f"SELECT {EPOCH} FROM leases WHERE owner = ?"
        params: tuple[object, ...] = (owner,)
        if epoch is not None:
            sql, params = sql + f" AND {EPOCH} = ?", (owner, epoch)
        found = self.tx.write_sql(conn, sql, params, doing).fetchall()
        for held in lease_fences.epochs(row[0] for row in found):
            self.tx.write_sql(conn, lease_fences.drop_sql(held), (), doing)

    def _drop_lapsed_fences(self, conn: sqlite3.Connection, now: float, doing: str) -> None:
        """The fence views of every lease lapsed by ``now`` dropped, in the transaction of a
        taking (its one schema change). Why: a runtime that crashed without releasing its
        lease, whose runs nobody took over (it had none unfinished), left its view for ever,
        a row of the schema each, which every connection parses when it opens and again
        after each lease taken or ended (10,000 such views: ~0.25 s a connection). Safe
        whether its owner is dead or only stalled: only a view's absence is trusted, and it
        sends such an owner's records by the statements that read its lease
        (``store.lease_fences``) until its renewal makes its view again (``renew_lease``);
        its lease row stays, for its takeover or `subagents stop`, unless its runtime has
        surely ended (``_drop_ended_leases``)."""
        sql = f"SELECT {EPOCH} FROM leases WHERE expires_at < ?"
        found = self.tx.write_sql(conn, sql, (now,), doing).fetchall()
        for lapsed in lease_fences.epochs(row[0] for row in found):
            self.tx.write_sql(conn, lease_fences.drop_sql(lapsed), (), doing)

    def _drop_ended_leases(self, conn: sqlite3.Connection, now: float, doing: str) -> None:
        """The rows of the leases whose runtime has surely ended by ``now`` (``leases.ended_here``:
        lapsed, of this machine, its process gone) deleted, in the transaction of a taking
        (after ``_drop_lapsed_fences``: a row goes only once its view has, ``GUARDS``). Why: a
        runtime that crashed without releasing its lease, with no run to take over (a
        takeover releases the lease of the runs it takes), left its row for ever: a row each
        that every ``leases()`` read decodes (the command poll's, each start's, `ps`). A
        stalled owner's row stays (its process exists): it may renew into it, and a takeover
        still finds it; so does a lease of another machine. A row that does not read is left
        (`subagents stop` names it; a start is not failed for it)."""
        sql = f"SELECT owner, lease FROM leases WHERE expires_at < ? AND {EPOCH} IS NOT NULL"
        found = self.tx.write_sql(conn, sql, (now,), doing).fetchall()
        for owner, raw in found:
            try:
                lease = _lease_decoder.decode(raw)
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue
            if lease.epoch is not None and ended_here(lease, now):
                self.tx.write_sql(
                    conn,
                    f"DELETE FROM leases WHERE owner = ? AND {EPOCH} = ?",
                    (owner, lease.epoch),
                    doing,
                )

    def check_fence(self, owner: str, epoch: int) -> None:
        """Inside a batch (``BEGIN IMMEDIATE``: the write lock is held until its commit), so no
        takeover can commit between this check and the batch's writes."""
        doing = f"checking the lease of {owner}"
        rows = self.tx.read(f"SELECT {EPOCH} FROM leases WHERE owner = ?", (owner,), doing)
        held = int(rows[0][0]) if rows and rows[0][0] is not None else None
        if held != epoch:
            raise Fenced(f"{self.tx.path}: {fenced_message(owner, epoch, held)}")

    def leases(self) -> list[Lease]:
        rows = self.tx.read("SELECT owner, lease FROM leases ORDER BY owner", (), "reading leases")
        return [self.tx.decode(_lease_decoder, raw, "leases", key) for key, raw in rows]
