"""What a function agent awaits: a ``Pending`` per context call, resolved by a message from
the supervisor, and the two that group others (``ctx.gather``: ``PendingAll``;
``ctx.wait_any``: ``PendingAny``).

Why apart: these are the awaitables the agent's actor drives a coroutine with, without asyncio
(each ``await`` hands the actor a ``Pending``; docs in ``behaviour.function``). They know
nothing of the calls that made them but the key, and ``PendingAny`` the port it journals its
winner through.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from subagents.behaviour.port import AgentPort
from subagents.messages import JournalEntry

_UNSET: Any = object()


class Pending:
    """Something a function agent awaits: resolved by a message from the supervisor."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.value: Any = _UNSET
        self.error: BaseException | None = None
        self.resolved = False
        """Set once, by ``resolve`` (the only writers of ``value`` and ``error``: it, and
        ``FunctionBehaviour.resolve``, which does the same without its frame); a plain
        attribute, not a property: it is read ~5 times per mail of a ping-pong."""

    def resolve(self, value: Any = None, error: BaseException | None = None) -> None:
        if not self.resolved:
            self.value, self.error, self.resolved = value, error, True

    def __await__(self) -> Generator[Pending, Any, Any]:
        return (yield self)


class PendingAll(Pending):
    """Resolved when every part is; its value is the list of values (first error raised)."""

    def __init__(self, key: str, parts: tuple[Pending, ...]) -> None:
        super().__init__(key)
        self.parts = parts
        self._first_open = 0
        self.refresh()

    def refresh(self) -> None:
        """Called whenever a part may have resolved. Parts never unresolve, so a cursor over
        them makes a gather of n parts O(n) in all, not O(n^2)."""
        if self.resolved:
            return
        parts, i = self.parts, self._first_open
        while i < len(parts) and parts[i].resolved:
            i += 1
        self._first_open = i
        if i < len(parts):
            return
        for part in self.parts:
            if part.error is not None:
                self.resolve(error=part.error)
                return
        self.resolve([p.value for p in self.parts])

    def stays_open_without(self, part: Pending) -> bool:
        """Whether this stays unresolved whatever ``part`` comes to: another of its parts is
        an open call (not a group ``part`` could close). Looks from the first open part on:
        parts mostly end in order, so it is a step or two, not a scan."""
        parts = self.parts
        for i in range(self._first_open, len(parts)):
            p = parts[i]
            if p is not part and type(p) is Pending and not p.resolved:
                return True
        return False


class PendingAny(Pending):
    """Resolved when one part is: ``(position, value)`` of the first answered (its error
    raised). ``first``: the position a replayed journal says won, waited for whatever
    resolves before it; otherwise the winner is journaled before the function sees it."""

    def __init__(
        self, key: str, parts: tuple[Pending, ...], first: int | None, port: AgentPort
    ) -> None:
        super().__init__(key)
        self.parts = parts
        self.first = first
        self._port = port
        self.refresh()

    def refresh(self) -> None:
        if self.resolved:
            return
        if self.first is not None:
            if not 0 <= self.first < len(self.parts):
                self.resolve(error=IndexError(f"wait_any(): no call at {self.first}"))
                return
            candidates: list[tuple[int, Pending]] = [(self.first, self.parts[self.first])]
        else:
            candidates = list(enumerate(self.parts))
        for index, part in candidates:
            if part.resolved:
                if self.first is None:
                    self._port.journal(
                        JournalEntry(request_id=self.key, observed=True, result=index)
                    )
                if part.error is not None:
                    self.resolve(error=part.error)
                else:
                    self.resolve((index, part.value))
                return
