"""The topic subscriptions and live previews of a PostgreSQL store (SQLite's are
``store.sqlite_topics`` and ``SQLiteStore``'s previews): both written with the decision that
makes them (held, sent with the batch's commit), read when runs are taken up
(subscriptions) or by viewers in other processes (previews)."""

from __future__ import annotations

from collections.abc import Collection

import msgspec

from subagents.messages import Preview, Subscription
from subagents.store.lone_surrogates import keys_checked
from subagents.store.postgres_tx import PgTransactions
from subagents.store.sqlite_tx import encode_row

_preview_decoder = msgspec.json.Decoder(Preview)


class PgTopicRows:
    """The ``subscriptions`` and ``previews`` tables of one PostgreSQL store."""

    def __init__(self, tx: PgTransactions) -> None:
        self.tx = tx

    def save_subscription(self, subscription: Subscription) -> None:
        s = subscription
        keys_checked("subscribing a run to a topic", (s.run_id, s.root_run_id, s.topic))
        self.tx.defer(
            "INSERT INTO subscriptions (run_id, root_run_id, topic) VALUES (%s, %s, %s)"
            " ON CONFLICT (run_id, topic) DO NOTHING",
            (s.run_id, s.root_run_id, s.topic),
            f"subscribing run {s.run_id} to topic {s.topic!r}",
        )

    def drop_subscriptions(self, run_id: str, topics: Collection[str] | None = None) -> None:
        keys_checked("unsubscribing a run", (run_id, *(topics or ())))
        doing = f"unsubscribing run {run_id}"
        if topics is None:
            self.tx.defer("DELETE FROM subscriptions WHERE run_id = %s", (run_id,), doing)
            return
        self.tx.defer(
            "DELETE FROM subscriptions WHERE run_id = %s AND topic = ANY(%s)",
            (run_id, list(topics)),
            doing,
        )

    def subscriptions(self, run_ids: Collection[str] | None = None) -> list[Subscription]:
        sql = "SELECT run_id, root_run_id, topic FROM subscriptions"
        params: tuple[object, ...] = ()
        if run_ids is not None:
            sql += " WHERE run_id = ANY(%s)"
            params = (list(run_ids),)
        rows = self.tx.read(sql + " ORDER BY seq", params, "reading the topic subscriptions")
        return [
            Subscription(run_id=run_id, root_run_id=root, topic=topic)
            for run_id, root, topic in rows
        ]

    # ---- live previews: scratch for viewers in other processes ----------------------------

    def save_preview(self, preview: Preview) -> None:
        self.tx.defer(
            "INSERT INTO previews (run_id, preview) VALUES (%s, %s)"
            " ON CONFLICT (run_id) DO UPDATE SET preview = excluded.preview",
            (preview.run_id, encode_row(preview, _preview_decoder, "a preview")),
            f"keeping the preview of run {preview.run_id}",
        )

    def drop_preview(self, run_id: str) -> None:
        keys_checked("dropping a preview", (run_id,))  # (held raw: refused alone)
        self.tx.defer(
            "DELETE FROM previews WHERE run_id = %s",
            (run_id,),
            f"dropping the preview of run {run_id}",
        )

    def previews(self, run_ids: Collection[str]) -> dict[str, Preview]:
        ids = list(run_ids)
        if not ids:
            return {}
        rows = self.tx.read(
            "SELECT run_id, preview FROM previews WHERE run_id = ANY(%s)",
            (ids,),
            "reading previews",
        )
        return {key: self.tx.decode(_preview_decoder, raw, "previews", key) for key, raw in rows}
