"""Commands to a runtime on PostgreSQL: ``LISTEN`` instead of waiting for the next poll.

Posting a command (``subagents stop``, ``send``, another runtime passing a mail on) adds a
row and ``NOTIFY``s ``COMMANDS_CHANNEL`` in the same transaction, so the notification is
sent when, and only if, the command is committed. A runtime on a PostgreSQL store keeps one
more connection that ``LISTEN``s there (``CommandListener``, a thread of its own) and asks
its supervisor to take its commands at once (``on_command``): a command is acted on in
about a round trip instead of up to ``command_poll_s`` later (benchmarks/store_postgres.py
measures both). The poll stays, as the safety net: a notification sent while the listener
was reconnecting (the database restarted) is not sent again, and the poll finds the row.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import psycopg

from subagents.logs import get_logger
from subagents.store.postgres_processes import COMMANDS_CHANNEL

log = get_logger("subagents.store")

WAIT_S = 0.1
"""How long one wait for notifications lasts: how soon ``close`` is noticed."""
RETRY_S = 2.0
"""Between two attempts to connect again after the connection was lost."""


class CommandListener:
    """A thread that calls ``on_command()`` when commands were posted to the store at
    ``url`` (once for the notifications that arrived together), until ``close``."""

    def __init__(self, url: str, where: str, on_command: Callable[[], object]) -> None:
        self.url = url
        self.where = where
        self.on_command = on_command
        self._stop = threading.Event()
        self.thread = threading.Thread(
            target=self._loop, name="subagents-command-listener", daemon=True
        )
        self.thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._listen()
            except psycopg.Error as exc:
                if self._stop.is_set():
                    return
                log.warning("command listener lost its connection", url=self.where, error=str(exc))
                self._stop.wait(RETRY_S)
                self.on_command()  # what was posted meanwhile (a notice missed)

    def _listen(self) -> None:
        with psycopg.connect(self.url, autocommit=True, connect_timeout=10) as conn:
            conn.execute(f"LISTEN {COMMANDS_CHANNEL}")
            # what was posted before this connection listened (at start, or while it was
            # down) was announced to nobody: looked at once, not at the next poll
            self.on_command()
            while not self._stop.is_set():
                if any(True for _ in conn.notifies(timeout=WAIT_S, stop_after=1)):
                    for _ in conn.notifies(timeout=0):  # the rest of a burst: one call
                        pass
                    self.on_command()

    def close(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self.thread is not threading.current_thread():
            self.thread.join(timeout)
