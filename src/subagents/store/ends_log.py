"""The ends a memory store was given by another writer than the runtime, kept for the
runtime's next look (``actors.ends_elsewhere``).

Why: a memory store has one writer, the program holding it. The runtime writes its
decisions through ``write_all`` (``MemoryStore._apply_batch``), never through
``save_run``; an end saved through ``save_run`` is the program's own (a test's, a tool's
holding the store object). Kept here, the runtime's look reads those runs alone, and no
round over every run it holds: its in-memory runs are never read for it."""

from __future__ import annotations

import threading

from subagents.messages import RunRecord

ENDS_KEPT = 100_000
"""The most ends kept between two takes (past it, ``take`` says it lost count)."""


class EndsLog:
    """The ids of the ends saved since the last ``take`` (a lock of its own: ``saved`` may
    be called on any thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ended: list[str] | None = []
        """None: more than ``ENDS_KEPT`` since the last take (or never taken)."""

    def saved(self, record: RunRecord) -> None:
        """``record`` was saved through ``save_run``: kept if it is an end."""
        if record.status.terminal:
            with self._lock:
                ended = self._ended
                if ended is not None:
                    ended.append(record.run_id)
                    if len(ended) > ENDS_KEPT:
                        self._ended = None

    def take(self) -> list[str] | None:
        """The runs ended since the last take, in order (an end of the runtime's own here
        is looked at for nothing); None: more than ``ENDS_KEPT`` were (look at every one)."""
        with self._lock:
            ended, self._ended = self._ended, []
        return ended
