"""AskClaims: whether the supervisor took an ask or its caller gave up on it, agreed once.

Why: an ask that times out leaves its message in the supervisor's inbox, and the supervisor
decides it when it comes to it. For most asks that is harmless (a status read, a stop the
caller may repeat), but an ask that STARTS runs (``Runtime.spawn_many``, ``continue_run``)
would start runs whose caller was told the call failed, with nobody waiting for them.

So such an ask carries a claim (``Ask.claim``), opened by its caller before it is sent.
The supervisor claims it before deciding anything; a caller whose wait ran out revokes it.
Both happen under one lock, so exactly one of them wins: a revoked ask is dropped by the
supervisor with nothing decided or recorded, and a claimed one is being decided, so its
caller waits for the answer (``SupervisorClient.ask_claimed``). Plain data and a lock, no
thread of its own: tested without actors.
"""

from __future__ import annotations

import itertools
import threading

_OPEN = False
_CLAIMED = True


class AskClaims:
    """The open claims of one supervisor's asks, by key (unique in the process)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._claims: dict[int, bool] = {}  # key -> claimed by the supervisor
        self._keys = itertools.count(1)

    def open(self) -> int:
        """A new claim's key, open (neither claimed nor revoked): the caller's, before it
        sends the ask that carries it."""
        key = next(self._keys)
        with self._lock:
            self._claims[key] = _OPEN
        return key

    def claim(self, key: int) -> bool:
        """The supervisor's, before it decides the ask: True: decide it (its caller waits
        for the answer); False: its caller gave up (or closed it): drop it unanswered."""
        with self._lock:
            if self._claims.get(key) is not _OPEN:
                return False
            self._claims[key] = _CLAIMED
            return True

    def revoke(self, key: int) -> bool:
        """The caller's, when its wait ran out: True: revoked (the supervisor had not
        claimed it, and now never will: nothing of it is done); False: the supervisor
        claimed it first (it is deciding it: its answer is coming)."""
        with self._lock:
            if self._claims.get(key) is _CLAIMED:
                return False
            self._claims.pop(key, None)
            return True

    def close(self, key: int) -> None:
        """The caller's, once it has its answer (or gave up): the claim is forgotten."""
        with self._lock:
            self._claims.pop(key, None)

    def __len__(self) -> int:
        """How many claims are open or claimed (none once every caller is answered)."""
        with self._lock:
            return len(self._claims)
