"""What processes sharing a PostgreSQL store exchange through it: commands and leases, and
the row locks that keep several runtimes (several drivers, several machines) apart.

SQLite serialises every writer with one file lock; PostgreSQL lets runtimes write at once
and each lock only the rows it must:

- **The fence** (``check_fence``, first in every write transaction of a runtime) reads its
  own lease row ``FOR KEY SHARE``: held until the commit, it keeps the row from being
  deleted (a takeover releasing the lease) meanwhile, yet lets the lease keeper renew it
  and other runtimes fence on their own rows, so runtimes never wait for each other here.
- **Taking orphaned work** (a restore: the supervisor reads ``leases()`` first inside its
  takeover batch) takes a transaction-level advisory lock (restorers one at a time: the
  second sees what the first re-stamped), then locks the lapsed leases ``FOR UPDATE SKIP
  LOCKED``. Locked, no write of their owner can be under way (its fence would hold the
  row) nor start (its fence waits, then finds the lease gone), and every statement after
  the lock sees everything their owner committed. A lapsed lease whose row another
  transaction holds is a host writing right now, stalled past its lease but not dead: it is
  skipped, not waited for, and reported alive to this restore (its runs stay where they
  are until a later one).
- **Commands** are claimed with ``FOR UPDATE SKIP LOCKED``: runtimes polling at once each
  take a different command and never wait for each other. Posting one notifies
  ``COMMANDS_CHANNEL`` (``NOTIFY``, sent at the commit), which a runtime's command listener
  (``store.postgres_listen``) waits on instead of polling.
- **Epochs** come from a sequence: never the same number twice, and no row lock.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Any

import msgspec

from subagents.messages import Command, Lease
from subagents.store.base import Fenced, command_kind, fenced_message
from subagents.store.leases import alive
from subagents.store.lone_surrogates import refused
from subagents.store.postgres_tx import PgTransactions
from subagents.store.sqlite_tx import encode_row

_lease_decoder = msgspec.json.Decoder(Lease)
_content = msgspec.json.Decoder(str)


def _encoded(content: str | None) -> str | None:
    """A command's text as a JSON string: PostgreSQL's text cannot hold NUL, a mail may."""
    if content is None:
        return None
    try:
        return msgspec.json.encode(content).decode()
    except UnicodeEncodeError as exc:  # (refused by name, at the call)
        raise refused(exc, "posting a command") from exc


def _decoded(raw: str | None) -> str | None:
    return None if raw is None else _content.decode(raw)


COMMANDS_CHANNEL = "subagents_commands"
"""The ``LISTEN``/``NOTIFY`` channel of posted commands (the payload: the run's id)."""

TAKEOVER_LOCK = 0x5A6E_7402
"""The advisory lock key of a takeover (restorers one at a time)."""


def post_in(tx: PgTransactions, kind: str, run_id: str, content: str | None, doing: str) -> int:
    """Post a command inside the open transaction (``writing``), notifying its listeners at
    the commit; its id. Also how an approval's answer is posted with the answer itself."""
    rows, _ = tx.write(
        "INSERT INTO commands (kind, run_id, content, ts) VALUES (%s, %s, %s, %s)"
        " RETURNING command_id",
        (kind, run_id, _encoded(content), time.time()),
        doing,
    )
    tx.defer("SELECT pg_notify(%s, %s)", (COMMANDS_CHANNEL, run_id), doing)
    return int(rows[0][0])


class PgProcessRows:
    """The commands and leases of one PostgreSQL store."""

    def __init__(self, tx: PgTransactions) -> None:
        self.tx = tx

    def post_command(self, kind: str, run_id: str, content: str | None = None) -> int:
        command_kind(kind)
        doing = f"posting a {kind} command for run {run_id}"
        with self.tx.writing():
            return post_in(self.tx, kind, run_id, content, doing)

    def pending_command_runs(self) -> list[str]:
        """The runs with commands not taken yet, each once, oldest first (a read;
        ``RunStore.pending_command_runs``)."""
        with self.tx.lock:
            rows = self.tx.read(
                "SELECT run_id FROM commands WHERE taken_at IS NULL ORDER BY command_id",
                (),
                "reading the pending commands",
            )
        return list(dict.fromkeys(row[0] for row in rows))

    def take_commands(self, run_ids: Collection[str] | None = None) -> list[Command]:
        """Claim pending commands, oldest first, each for exactly one taker: the pending
        rows are read (no lock), those of ``run_ids`` claimed ``FOR UPDATE SKIP LOCKED``
        (a command another taker is claiming right now is not waited for: it is its). An
        empty queue costs one read outside a batch."""
        doing = "taking commands"
        with self.tx.lock:
            pending = self.tx.read(
                "SELECT command_id, run_id FROM commands WHERE taken_at IS NULL"
                " ORDER BY command_id",
                (),
                doing,
            )
            wanted = [cid for cid, run_id in pending if run_ids is None or run_id in run_ids]
            if not wanted:
                return []
            with self.tx.writing():
                rows, _ = self.tx.write(
                    """UPDATE commands SET taken_at = %s WHERE command_id IN (
                           SELECT command_id FROM commands
                           WHERE command_id = ANY(%s) AND taken_at IS NULL
                           FOR UPDATE SKIP LOCKED)
                       RETURNING command_id, kind, run_id, content, ts""",
                    (time.time(), wanted),
                    doing,
                )
        return [
            Command(command_id=cid, kind=kind, run_id=run_id, content=_decoded(raw), ts=ts)
            for cid, kind, run_id, raw, ts in sorted(rows)
        ]

    # ---- leases ----------------------------------------------------------------------------

    def _lease_row(self, lease: Lease) -> tuple[Any, ...]:
        return (
            lease.epoch,
            lease.host,
            lease.pid,
            lease.renewed_at,
            lease.expires_at,
            encode_row(lease, _lease_decoder, f"the lease of {lease.owner}"),
        )

    def acquire_lease(self, lease: Lease) -> int:
        doing = f"writing the lease of {lease.owner}"
        with self.tx.writing():
            ((epoch,),), _ = self.tx.write("SELECT nextval('lease_epochs')", (), doing)
            taken = msgspec.structs.replace(lease, epoch=int(epoch))
            self.tx.write(
                """INSERT INTO leases (epoch, host, pid, renewed_at, expires_at, lease, owner)
                   VALUES (%s, %s, %s, %s, %s, %s, %s)
                   ON CONFLICT (owner) DO UPDATE SET epoch = excluded.epoch,
                       host = excluded.host, pid = excluded.pid,
                       renewed_at = excluded.renewed_at, expires_at = excluded.expires_at,
                       lease = excluded.lease""",
                (*self._lease_row(taken), lease.owner),
                doing,
            )
        return int(epoch)

    def renew_lease(self, lease: Lease) -> bool:
        with self.tx.writing():
            _, count = self.tx.write(
                """UPDATE leases SET epoch = %s, host = %s, pid = %s, renewed_at = %s,
                       expires_at = %s, lease = %s
                   WHERE owner = %s AND epoch = %s""",
                (*self._lease_row(lease), lease.owner, lease.epoch),
                f"renewing the lease of {lease.owner}",
            )
        return count > 0

    def release_lease(self, owner: str, epoch: int | None = None) -> None:
        doing = f"releasing lease {owner}"
        with self.tx.writing():
            if epoch is None:
                self.tx.write("DELETE FROM leases WHERE owner = %s", (owner,), doing)
            else:
                self.tx.write(
                    "DELETE FROM leases WHERE owner = %s AND epoch = %s", (owner, epoch), doing
                )

    def check_fence(self, owner: str, epoch: int) -> None:
        """Inside a batch the lease row is locked ``FOR KEY SHARE`` until the commit: no
        takeover can delete it between this check and the batch's writes."""
        with self.tx.lock:  # in_batch is the batch of this thread only under the lock
            lock = " FOR KEY SHARE" if self.tx.in_batch else ""
            rows = self.tx.read(
                f"SELECT epoch FROM leases WHERE owner = %s{lock}",
                (owner,),
                f"checking the lease of {owner}",
            )
        held = int(rows[0][0]) if rows else None
        if held != epoch:
            raise Fenced(f"{self.tx.where}: {fenced_message(owner, epoch, held)}")

    def leases(self) -> list[Lease]:
        """Inside a batch, the takeover's locks first (module docstring)."""
        with self.tx.lock:  # in_batch is the batch of this thread only under the lock
            if self.tx.in_batch:
                return self._leases_to_take_over()
            return self._read_leases()

    def held_in_transaction(self, owners: Collection[str]) -> dict[str, str]:
        """Of ``owners``, those whose lease row a transaction still open holds (a host
        stalled inside a transaction: a restore leaves its runs to it, as to a host writing
        right now), each with what ``pg_stat_activity`` says of the store's sessions inside
        a transaction. Read with ``FOR UPDATE SKIP LOCKED``, the restore's own lock, in one
        autocommit statement: a row the restore skipped is skipped here (a host stopped inside
        a write holds its row ``FOR KEY SHARE``, its fence's lock, which ``FOR SHARE`` does not
        conflict with: it read as free), and the rows it can lock are let go at once (a live
        host's renewal or fence waits for that one statement, as for a restore's). Only
        lapsed leases are looked at: a host that renewed its own is alive, and its row is
        held now and then by its own writes (its fence), not by a stall."""
        doing = "reading which leases are held inside a transaction"
        now = time.time()
        lapsed = sorted(
            lease.owner
            for lease in self._read_leases()
            if lease.owner in owners and not alive(lease, now)
        )
        if not lapsed:
            return {}
        free = self.tx.read(
            "SELECT owner FROM leases WHERE owner = ANY(%s) FOR UPDATE SKIP LOCKED",
            (lapsed,),
            doing,
        )
        held = set(lapsed) - {o for (o,) in free}
        if not held:
            return {}
        sessions = self.tx.read(
            "SELECT pid, state, application_name, EXTRACT(EPOCH FROM now() - xact_start)"
            " FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid() AND xact_start IS NOT NULL"
            " AND backend_type = 'client backend' ORDER BY xact_start",
            (),
            doing,
        )
        seen = "; ".join(
            f"pid {pid} ({app or 'no application name'}) {state or 'unknown'} for {age:.0f} s"
            for pid, state, app, age in sessions
        )
        said = f"pg_stat_activity: {seen}" if seen else "pg_stat_activity shows no such session"
        return {owner: said for owner in sorted(held)}

    def _read_leases(self) -> list[Lease]:
        rows = self.tx.read("SELECT owner, lease FROM leases ORDER BY owner", (), "reading leases")
        return [self.tx.decode(_lease_decoder, raw, "leases", key) for key, raw in rows]

    def _leases_to_take_over(self) -> list[Lease]:
        doing = "locking the lapsed leases"
        self.tx.read("SELECT pg_advisory_xact_lock(%s)", (TAKEOVER_LOCK,), doing)
        now = time.time()
        lapsed = [lease.owner for lease in self._read_leases() if not alive(lease, now)]
        locked: set[str] = set()
        if lapsed:
            rows = self.tx.read(
                "SELECT owner FROM leases WHERE owner = ANY(%s) ORDER BY owner"
                " FOR UPDATE SKIP LOCKED",
                (lapsed,),
                doing,
            )
            locked = {owner for (owner,) in rows}
        leases = self._read_leases()  # as committed once the locks were taken
        return [
            msgspec.structs.replace(lease, expires_at=float("inf"), expires_boot=float("inf"))
            if lease.owner in lapsed and lease.owner not in locked
            else lease
            for lease in leases
        ]
