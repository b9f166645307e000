"""Which connections hold the console's slots: the owner's, and strangers' (docs/console.md,
"Clients that hold on").

Why two kinds: a connection is a stranger's until one of its requests shows the token
(``guard.Guard.holds_token``), since nothing else tells the owner from anyone who reaches the
port: a stranger on the same machine comes from the same loopback address. With one bound
on every connection, 128 connections opened by a stranger that send nothing (or a byte now
and then) filled it and the owner's own page was answered 503 until they went. Here:

- The owner's connections (a request with the token came on them) are bounded by
  ``owners`` (``--max-connections``): past it, the owner's request is answered 503 naming
  the flag. A stranger's connection never takes one of these slots.
- Strangers' connections (no request with the token yet) are bounded by ``strangers``.
  Past it, a new connection is not refused (it may be the owner's, whose token has not come
  yet): one already open is closed instead, one that has had its chance to send a request
  (the protocol says which may be: nothing of a request waiting to be read, none being
  answered), taken from the peer address holding the most of them, its oldest first; when
  none of that address's may be closed yet (their requests' first bytes not read yet), none
  is, until one may (the protocol asks again as each one's bytes are read). An address
  flooding the port closes only its own connections; on one address (loopback) the oldest
  go, and a browser sends its request as it connects, so its connection is young.
- A stranger's request is answered (401, 403) and its connection closed: it holds no slot
  for a keep-alive.

A plain class, free of the event loop: ``protocol.ConsoleProtocol`` tells it what opens,
closes and shows the token, and asks it whom to close.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

C = TypeVar("C", bound=Hashable)


class Admission(Generic[C]):
    """The open connections of one server, by kind (see the module docstring)."""

    def __init__(self, *, owners: int, strangers: int) -> None:
        self.owners_limit = owners
        self.strangers_limit = strangers
        self.owners: set[C] = set()
        self.strangers: dict[str, dict[C, None]] = {}
        """Peer address -> its strangers' connections, oldest first (a dict keeps order)."""
        self.peer_of: dict[C, str] = {}

    @property
    def stranger_count(self) -> int:
        return len(self.peer_of)

    def opened(self, conn: C, peer: str) -> None:
        """A connection from ``peer``: a stranger's until it shows the token."""
        self.strangers.setdefault(peer, {})[conn] = None
        self.peer_of[conn] = peer

    def closed(self, conn: C) -> None:
        self.owners.discard(conn)
        peer = self.peer_of.pop(conn, None)
        if peer is not None:
            held = self.strangers[peer]
            del held[conn]
            if not held:
                del self.strangers[peer]

    def shows_token(self, conn: C) -> bool:
        """``conn`` sent a request with the token: it is the owner's if a slot is free (or it
        holds one already); False when the owner's slots are all taken (answer 503), or
        ``conn`` is closed already."""
        if conn in self.owners:
            return True
        if conn not in self.peer_of:  # closed before its request was looked at: it would
            return False  # hold an owner's slot for ever
        if len(self.owners) >= self.owners_limit:
            return False
        self.closed(conn)
        self.owners.add(conn)
        return True

    def to_close(self, may_close: Callable[[C], bool]) -> C | None:
        """The stranger's connection to close when there are more than ``strangers`` of
        them: the oldest that ``may_close`` of the peer holding the most (None when there
        are not too many, or none of that peer's may be closed yet: one of another peer is
        never closed for it)."""
        if self.stranger_count <= self.strangers_limit:
            return None
        most = max(len(held) for held in self.strangers.values())
        for held in self.strangers.values():
            if len(held) == most:
                found = next((conn for conn in held if may_close(conn)), None)
                if found is not None:
                    return found
        return None
