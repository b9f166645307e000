"""What a run's slot is counted by (``SlotKey``, its scopes) and the queue's bound
(``QueueFull``): the words ``slots.py``'s ``SlotPool`` and its callers share, apart so that
the pool's module holds its counting alone."""

from __future__ import annotations

from typing import Any

import msgspec

Scope = tuple[str, Any]
"""("global", None), ("agent", name), ("tier", tier) or ("parent", run id)."""

GLOBAL: Scope = ("global", None)


class SlotKey(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """What a run counts against: its agent, its tier (None = no tier), its parent (None: a
    root) with that parent's children limit. A frozen Struct: it is hashed at every queue
    operation, in C (a frozen dataclass's hash is computed field by field in Python); and
    held by every live run, so kept out of the cyclic GC (``gc=False``: its fields are
    strings, integers and None, which cannot lead back to it, so it is never in a cycle)."""

    agent: str
    tier: int | None
    agent_limit: int
    parent: str | None = None
    children_limit: int = 0


class QueueFull(Exception):
    """The admission queue is at its bound."""
