"""The topic subscriptions of a SQLite store (``supervision/topics.py``): one row per run and
topic, in the order made, kept until the run unsubscribes or ends. Read only when runs are
taken up (``store.snapshot``), written with the decision that subscribes. ``SQLiteStore``
delegates to ``TopicRows``; the transactions stay ``store.sqlite_tx``'s.
"""

from __future__ import annotations

from collections.abc import Collection

from subagents.messages import Subscription
from subagents.store.lone_surrogates import keys_checked
from subagents.store.sqlite_tx import Transactions


class TopicRows:
    """The ``subscriptions`` table of one SQLite store."""

    def __init__(self, tx: Transactions) -> None:
        self.tx = tx

    def save_subscription(self, subscription: Subscription) -> None:
        s = subscription
        keys_checked("subscribing a run to a topic", (s.run_id, s.root_run_id, s.topic))
        self.tx.defer(
            "subscriptions",
            "INSERT INTO subscriptions (run_id, root_run_id, topic) VALUES (?, ?, ?)"
            " ON CONFLICT (run_id, topic) DO NOTHING",
            (s.run_id, s.root_run_id, s.topic),
            f"subscribing run {s.run_id} to topic {s.topic!r}",
        )

    def drop_subscriptions(self, run_id: str, topics: Collection[str] | None = None) -> None:
        keys_checked("unsubscribing a run", (run_id, *(topics or ())))
        params: tuple[str, ...] = (run_id,)
        if topics is None:
            sql = "DELETE FROM subscriptions WHERE run_id = ?"
        else:
            marks = ", ".join("?" * len(topics))
            sql = f"DELETE FROM subscriptions WHERE run_id = ? AND topic IN ({marks})"
            params = (run_id, *topics)
        self.tx.defer("subscriptions", sql, params, f"unsubscribing run {run_id}")

    def subscriptions(self, run_ids: Collection[str] | None = None) -> list[Subscription]:
        rows = self.tx.read(
            "SELECT run_id, root_run_id, topic FROM subscriptions ORDER BY seq",
            (),
            "reading the topic subscriptions",
        )
        wanted = None if run_ids is None else set(run_ids)
        return [
            Subscription(run_id=run_id, root_run_id=root, topic=topic)
            for run_id, root, topic in rows
            if wanted is None or run_id in wanted
        ]
