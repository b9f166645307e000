"""RunEntry: a run's one record in the policy books (its policy, its budget, its restarts).

Why one record: the policy book, the budget ledger and the restart window each kept their
own dicts keyed by run id (six in all), so admitting a run filled several and forgetting it
popped every one: about ten calls a run, most of a trivial run's forgetting. One record per
run, in one dict the three share (``PolicyBook``), is one insert at admission and one pop at
the end. Each ledger still reads and writes only its own fields, by run id, and stands alone
(given no dict, it keeps its own: ``BudgetBook()``, ``RestartIntensity(...)``).
"""

from __future__ import annotations

from collections import deque

import msgspec

from subagents.messages import Checkpoint, Usage
from subagents.supervision.policy_settings import Policy


class Budget(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A limit in tokens and/or US dollars; ``None`` means unlimited. Held for every live run:
    out of the cyclic GC (``gc=False``: numbers only, never in a cycle)."""

    tokens: int | None = None
    cost_usd: float | None = None


UNLIMITED = Budget()
"""The budget of most runs (none given, none above): one, shared (it is frozen)."""

NOTHING_SPENT = Usage()
"""What a run just granted has spent: one, shared (``charge`` replaces it, never changes it)."""


class RunEntry(msgspec.Struct, kw_only=True, gc=False):
    """What the policy books hold of one run while the supervisor holds it. Out of the cyclic
    GC (``gc=False``): ``Policy``, ``Checkpoint``, ``Budget`` and ``Usage`` are frozen data,
    the window a deque of floats; none can refer to an entry, so it is never in a cycle."""

    # the policy book's (``PolicyBook``): None until the run's policy is read (a run
    # restored from the store is known to the budget ledger first)
    policy: Policy | None = None
    max_retries: int = 0
    seed: Checkpoint | None = None
    """The conversation a fresh start begins with (inherited messages), if any."""
    restarting: bool = False
    """A restart or retry is scheduled: its ``RestartDue`` will start the run again."""

    # the budget ledger's (``BudgetBook``): None while the run is not in it
    budget: Budget | None = None
    spent: Usage = NOTHING_SPENT
    """What the run's whole subtree has spent while it was known here."""
    budget_parent: str | None = None

    # the restart window's (``RestartIntensity``): made at the first restart decided
    restart_times: deque[float] | None = None
    restart_attempts: int = 0
