"""The outcomes of a SQLite store and their delivery: a run's outcome is kept when it ends,
undelivered until its requester has it (``mark_outcome_delivered``), so a runtime restarted
before the delivery delivers it again (``undelivered_outcomes``). ``SQLiteStore`` delegates
to ``OutcomeRows``; the transactions stay ``store.sqlite_tx``'s.
"""

from __future__ import annotations

import msgspec

from subagents.messages import Outcome
from subagents.store.lone_surrogates import keys_checked
from subagents.store.sqlite_tx import Transactions, encode_row

_decoder = msgspec.json.Decoder(Outcome)


class OutcomeRows:
    """The ``outcomes`` table of one SQLite store."""

    def __init__(self, tx: Transactions) -> None:
        self.tx = tx

    def save_outcome(self, outcome: Outcome, delivered: bool = False) -> None:
        self.tx.defer(
            "outcomes",
            """INSERT INTO outcomes (run_id, status, delivered, outcome) VALUES (?, ?, ?, ?)
               ON CONFLICT (run_id) DO UPDATE SET status = excluded.status,
                   delivered = excluded.delivered, outcome = excluded.outcome""",
            (
                outcome.run_id,
                outcome.status.value,
                int(delivered),
                encode_row(outcome, _decoder, f"the outcome of run {outcome.run_id}"),
            ),
            f"saving the outcome of run {outcome.run_id}",
        )

    def mark_outcome_delivered(self, run_id: str) -> None:
        keys_checked("marking an outcome delivered", (run_id,))  # (held raw: refused alone)
        self.tx.defer(
            "outcomes",
            "UPDATE outcomes SET delivered = 1 WHERE run_id = ?",
            (run_id,),
            f"marking the outcome of run {run_id} delivered",
        )

    def undelivered_outcomes(self) -> list[Outcome]:
        rows = self.tx.read(
            "SELECT run_id, outcome FROM outcomes WHERE delivered = 0 ORDER BY seq",
            (),
            "reading undelivered outcomes",
        )
        return [self.tx.decode(_decoder, raw, "outcomes", key) for key, raw in rows]
