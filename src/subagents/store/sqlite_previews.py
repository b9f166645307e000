"""The live previews of a SQLite store: scratch for viewers in other processes, one row per
streaming run (the text its model is writing now), replaced as the run streams and dropped
when its step ends. Nothing is resumed from them. ``SQLiteStore`` delegates to
``PreviewRows``; the transactions stay ``store.sqlite_tx``'s.
"""

from __future__ import annotations

from collections.abc import Collection

import msgspec

from subagents.messages import Preview
from subagents.store.lone_surrogates import keys_checked
from subagents.store.sqlite_tx import Transactions, encode_row

_decoder = msgspec.json.Decoder(Preview)


class PreviewRows:
    """The ``previews`` table of one SQLite store."""

    def __init__(self, tx: Transactions) -> None:
        self.tx = tx

    def save_preview(self, preview: Preview) -> None:
        self.tx.defer(
            "previews",
            "INSERT OR REPLACE INTO previews (run_id, preview) VALUES (?, ?)",
            (preview.run_id, encode_row(preview, _decoder, "a preview")),
            f"keeping the preview of run {preview.run_id}",
        )

    def drop_preview(self, run_id: str) -> None:
        keys_checked("dropping a preview", (run_id,))  # (held raw: refused alone)
        self.tx.defer(
            "previews",
            "DELETE FROM previews WHERE run_id = ?",
            (run_id,),
            f"dropping the preview of run {run_id}",
        )

    def previews(self, run_ids: Collection[str]) -> dict[str, Preview]:
        ids = list(run_ids)
        if not ids:
            return {}
        marks = ", ".join("?" * len(ids))
        rows = self.tx.read(
            f"SELECT run_id, preview FROM previews WHERE run_id IN ({marks})",
            tuple(ids),
            "reading previews",
        )
        return {key: self.tx.decode(_decoder, raw, "previews", key) for key, raw in rows}
