"""PROTOTYPE (session 30, e-spawn22; measured, then reverted): the supervisor's turn taken
inline by the thread that tells it a root spawn or a run's end while it is idle.

The supervisor stays an actor: its loop takes ``Turn.lock`` for each message it handles.
A tell of a ``SpawnRequest`` or a ``ReportsDue`` made while nothing is pending in its inbox
(every put counted in ``pending`` until its handling is over) and the lock is free is
handled on the telling thread instead, so neither the caller's spawn nor the agent's end
wakes the supervisor's thread (two wake-ups of the four a trivial run takes)."""

from __future__ import annotations

import collections
import queue
import threading
from typing import Any

from subagents.logs import get_logger

log = get_logger("subagents.supervisor_turn")

INLINE: tuple[type, ...] = ()
"""The message types a tell may handle inline (set by ``supervisor.py``: import order)."""


class TurnInbox(queue.SimpleQueue):  # type: ignore[type-arg]
    """The supervisor's inbox: each put counted pending until handled; a tell of an
    ``INLINE`` type handled on the telling thread when the supervisor is idle."""

    def __init__(self) -> None:
        self.pending: collections.deque[None] = collections.deque()
        self.lock = threading.Lock()
        self.actor: Any = None
        self.owner = 0
        """The supervisor thread's ident (it never handles its own tells inline)."""

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        if (
            item.reply_to is None
            and type(item.message) in INLINE
            and not self.pending
            and self.actor is not None
            and self.actor.late._alone  # (groups do not linger: memory; SQLite's span messages)
            and self.actor._group is None
            and self.lock.acquire(False)
        ):
            try:
                if not self.pending and not self.actor.actor_stopped._flag:
                    self.owner = threading.get_ident()
                    try:
                        self.actor._turn_receive(item.message)
                    except Exception:
                        log.exception("inline handling failed")
                    finally:
                        self.owner = 0
                    return
            finally:
                self.lock.release()
        self.pending.append(None)
        queue.SimpleQueue.put(self, item)
