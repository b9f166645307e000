"""The approvals of a PostgreSQL store (durable approvals, ``messages.approvals``), as
``store.sqlite_approvals`` keeps SQLite's.

Written by two kinds of process: the runtime hosting the asking run keeps the ask (in its
supervisor's batch, fenced like its other writes); any process that can reach the database
answers (``answer``: one transaction that locks the approval's row ``FOR UPDATE`` and its
run's ``FOR SHARE``, checks the approval is still pending and its run has not ended, keeps
the answer and posts it as an ``approval`` command). Where SQLite serialises two answerers
with its file lock, the row lock does it here: the second waits for the first's commit, then
reads the row as answered and is refused. The run's row, held until the commit, keeps the
run from being ended in between (its supervisor's ``save_run`` waits), so an answer is never
posted for a run that had ended.
"""

from __future__ import annotations

import time

import msgspec

from subagents.messages import ApprovalRecord, RunRecord
from subagents.store.approvals import (
    ApprovalRefused,
    answer_command,
    answered,
    listing_of,
    refusal,
)
from subagents.store.base import DamagedRow
from subagents.store.postgres_processes import post_in
from subagents.store.postgres_tx import PgTransactions
from subagents.store.sqlite_tx import encode_row

_decoder = msgspec.json.Decoder(ApprovalRecord)
_run_decoder = msgspec.json.Decoder(RunRecord)


class PgApprovalRows:
    """The approvals table of one PostgreSQL store."""

    def __init__(self, tx: PgTransactions) -> None:
        self.tx = tx

    def save(self, approval: ApprovalRecord) -> None:
        """Kept once; asked again (a restarted run), an answered one is posted again."""
        what = f"approval {approval.approval_id}"
        doing = f"keeping {what}"
        with self.tx.writing():
            rows, _ = self.tx.write(
                """INSERT INTO approvals
                       (approval_id, run_id, root_run_id, status, asked_at, approval)
                   VALUES (%s, %s, %s, %s, %s, %s)
                   ON CONFLICT (approval_id) DO NOTHING RETURNING approval_id""",
                (
                    approval.approval_id,
                    approval.run_id,
                    approval.root_run_id,
                    approval.status,
                    approval.asked_at,
                    encode_row(approval, _decoder, what),
                ),
                doing,
            )
            if rows:
                return
            found, _ = self.tx.write(
                "SELECT approval FROM approvals WHERE approval_id = %s FOR SHARE",
                (approval.approval_id,),
                doing,
            )
            kept = self.tx.decode(_decoder, found[0][0], "approvals", approval.approval_id)
            if not kept.pending:
                post_in(self.tx, "approval", kept.run_id, answer_command(kept), doing)

    def get(self, approval_id: str) -> ApprovalRecord | None:
        rows = self.tx.read(
            "SELECT approval FROM approvals WHERE approval_id = %s",
            (approval_id,),
            f"reading approval {approval_id}",
        )
        return self.tx.decode(_decoder, rows[0][0], "approvals", approval_id) if rows else None

    def listed(
        self,
        *,
        pending: bool,
        root_run_id: str | None,
        run_id: str | None,
        terminal: list[str],
        damaged: list[DamagedRow] | None = None,
    ) -> list[ApprovalRecord]:
        where: list[str] = []
        params: list[object] = []
        if pending:
            where.append("a.status = 'pending'")
            where.append("(r.status IS NULL OR NOT r.status = ANY(%s))")
            params.append(terminal)
        if root_run_id is not None:
            where.append("a.root_run_id = %s")
            params.append(root_run_id)
        if run_id is not None:
            where.append("a.run_id = %s")
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
        with self.tx.writing():
            found, _ = self.tx.write(
                "SELECT approval, run_id FROM approvals WHERE approval_id = %s FOR UPDATE",
                (approval_id,),
                doing,
            )
            approval = (
                self.tx.decode(_decoder, found[0][0], "approvals", approval_id) if found else None
            )
            run = None
            if found:
                runs, _ = self.tx.write(
                    "SELECT record FROM runs WHERE run_id = %s FOR SHARE", (found[0][1],), doing
                )
                if runs:
                    run = self.tx.decode(_run_decoder, runs[0][0], "runs", found[0][1])
            why = refusal(approval_id, approval, run)
            if why is not None:
                raise ApprovalRefused(why)
            assert approval is not None
            done = answered(approval, allow, answer, remember, time.time())
            self.tx.write(
                "UPDATE approvals SET status = %s, approval = %s WHERE approval_id = %s",
                (done.status, encode_row(done, _decoder, f"approval {approval_id}"), approval_id),
                doing,
            )
            post_in(self.tx, "approval", done.run_id, answer_command(done), doing)
        return done
