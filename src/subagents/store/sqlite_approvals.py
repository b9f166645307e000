"""The approvals of a SQLite store (durable approvals, ``messages.approvals``).

Written by two kinds of process: the runtime hosting the asking run keeps the ask (in its
supervisor's batch, fenced like its other writes); any process that can open the store
answers (``answer``: one transaction that checks the approval is still pending and its run
has not ended, so two people answering at once cannot both win, and posts the answer as an
``approval`` command, which the hosting runtime claims with its other commands).
"""

from __future__ import annotations

import time

import msgspec

from subagents.messages import TERMINAL_STATUSES, ApprovalRecord, RunRecord
from subagents.store.approvals import (
    ApprovalRefused,
    answer_command,
    answered,
    listing_of,
    refusal,
)
from subagents.store.base import DamagedRow
from subagents.store.sqlite_tx import Transactions, encode_row

_decoder = msgspec.json.Decoder(ApprovalRecord)
_run_decoder = msgspec.json.Decoder(RunRecord)
_TERMINAL = tuple(sorted(s.value for s in TERMINAL_STATUSES))

_POST = "INSERT INTO commands (kind, run_id, content, ts) VALUES ('approval', ?, ?, ?)"
"""An answer posted for the runtime hosting the run, claimed with its other commands."""


def _marks(n: int) -> str:
    return ", ".join("?" * n)


class ApprovalRows:
    """The approvals table of one SQLite store."""

    def __init__(self, tx: Transactions) -> None:
        self.tx = tx

    def save(self, approval: ApprovalRecord) -> None:
        """Kept once; asked again (a restarted run), an answered one is posted again."""
        what = f"approval {approval.approval_id}"
        doing = f"keeping {what}"
        with self.tx.writing() as conn:
            found = self.tx.write_sql(
                conn,
                "SELECT approval FROM approvals WHERE approval_id = ?",
                (approval.approval_id,),
                doing,
            ).fetchone()
            if found is None:
                row = (
                    approval.approval_id,
                    approval.run_id,
                    approval.root_run_id,
                    approval.status,
                    approval.asked_at,
                    encode_row(approval, _decoder, what),
                )
                sql = """INSERT INTO approvals
                    (approval_id, run_id, root_run_id, status, asked_at, approval)
                    VALUES (?, ?, ?, ?, ?, ?)"""
                self.tx.write_sql(conn, sql, row, doing)
                return
            kept = self.tx.decode(_decoder, found[0], "approvals", approval.approval_id)
            if not kept.pending:
                post = (kept.run_id, answer_command(kept), time.time())
                self.tx.write_sql(conn, _POST, post, doing)

    def get(self, approval_id: str) -> ApprovalRecord | None:
        rows = self.tx.read(
            "SELECT approval FROM approvals WHERE approval_id = ?",
            (approval_id,),
            f"reading approval {approval_id}",
        )
        return self.tx.decode(_decoder, rows[0][0], "approvals", approval_id) if rows else None

    def listed(
        self,
        pending: bool,
        root_run_id: str | None,
        run_id: str | None,
        damaged: list[DamagedRow] | None = None,
    ) -> list[ApprovalRecord]:
        where: list[str] = []
        params: list[object] = []
        if pending:
            where.append("a.status = 'pending'")
            where.append(f"(r.status IS NULL OR r.status NOT IN ({_marks(len(_TERMINAL))}))")
            params.extend(_TERMINAL)
        if root_run_id is not None:
            where.append("a.root_run_id = ?")
            params.append(root_run_id)
        if run_id is not None:
            where.append("a.run_id = ?")
            params.append(run_id)
        sql = (
            "SELECT a.approval_id, a.approval, r.record, a.run_id FROM approvals a"
            " LEFT JOIN runs r USING (run_id)"
        )
        if where:
            sql += " WHERE " + " AND ".join(where)
        rows = self.tx.read(
            sql + " ORDER BY a.asked_at, a.approval_id", params, "listing approvals"
        )
        return listing_of(self.tx, rows, pending=pending, damaged=damaged)

    def answer(
        self, approval_id: str, allow: bool, answer: str | None, remember: str | None
    ) -> ApprovalRecord:
        doing = f"answering approval {approval_id}"
        with self.tx.writing() as conn:
            found = self.tx.write_sql(
                conn,
                "SELECT a.approval, r.record, a.run_id FROM approvals a"
                " LEFT JOIN runs r USING (run_id) WHERE a.approval_id = ?",
                (approval_id,),
                doing,
            ).fetchone()
            approval = (
                self.tx.decode(_decoder, found[0], "approvals", approval_id) if found else None
            )
            run = (
                self.tx.decode(_run_decoder, found[1], "runs", found[2])
                if found and found[1]
                else None
            )
            why = refusal(approval_id, approval, run)
            if why is not None:
                raise ApprovalRefused(why)
            assert approval is not None
            done = answered(approval, allow, answer, remember, time.time())
            self.tx.write_sql(
                conn,
                "UPDATE approvals SET status = ?, approval = ? WHERE approval_id = ?",
                (done.status, encode_row(done, _decoder, f"approval {approval_id}"), approval_id),
                doing,
            )
            self.tx.write_sql(conn, _POST, (done.run_id, answer_command(done), time.time()), doing)
        return done
