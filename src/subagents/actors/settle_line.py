"""SettleLine: the reports that only settle their runs, held to be decided together.

Why: every run's first handling (a function agent up to its first ``receive``, say) ends with
one report of its own: its journal and that it now waits (``Journal``, ``WaitingChanged``).
Decided one by one, a start of many runs (``spawn_many``: a thousand runs come up at once)
paid the supervisor's per-decision work once per run (the core's decision begun and closed,
its writes in a store batch of their own, the group's bookkeeping). Held here while more
messages are already queued, consecutive ones, of any runs, go to the core in ONE call
(``SupervisorCore.settled``, which takes them in order, as it took one run's journals and
waiting reports).

Order: nothing else is handled while some are held: every other message the supervisor
takes (an ask, a report of another kind, a timer's, a commit due, its stop) first has the
held ones decided (``SupervisorActor._settle``), so each is decided in the order it came, as
before; only the decisions' boundaries moved. They are decided at the latest when the
supervisor's inbox runs dry (when its open group would commit anyway: their effects wait
for that commit in any case) or at ``SETTLE_MOST`` messages (a group's bound,
``GROUP_MAX``). A report whose handling fails (a bug) is left out alone and logged, the
others' kept (``SupervisorCore.settled``); nobody waits on an answer to any of them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from subagents.messages import Journal, WaitingChanged

SETTLING = frozenset({Journal, WaitingChanged})
"""The reports held: they only record what a run did and whether it waits; nobody waits on
their answer (none is owed: ``told_answers``)."""

SETTLE_MOST = 100
"""Most messages held (and so decided in one call): the open group's bound (``GROUP_MAX``)."""


class SettleLine:
    """The held settling reports, in the order they came (the supervisor's thread only)."""

    __slots__ = ("_idle", "_settle", "held")

    def __init__(self, settle: Callable[[], None], idle: Callable[[], bool]) -> None:
        """``settle``: the supervisor's decision of what is held (``take``); ``idle``:
        whether its inbox is empty (nothing more on its way)."""
        self._settle = settle
        self._idle = idle
        self.held: list[Any] = []

    def hold(self, messages: tuple[Any, ...], more: bool) -> bool:
        """Hold ``messages`` (one report of a run; none: an empty ``Batch``, the nothing a
        wake-up for the reports in line leaves) when every one of them settles (True), and
        have what is held decided when it is full or, unless ``more`` (the rest of a
        ``Batch`` or of the reports in line follows), nothing more is queued; else hold
        nothing and have what is held decided (False: the caller handles them after)."""
        for message in messages:
            if type(message) not in SETTLING:
                if self.held:
                    self._settle()
                return False
        held = self.held
        if len(held) + len(messages) > SETTLE_MOST:  # (a report is not split: it waits)
            self._settle()
            held = self.held
        held.extend(messages)
        if held and (len(held) >= SETTLE_MOST or (not more and self._idle())):
            self._settle()
        return True

    def take(self) -> tuple[Any, ...]:
        """The held reports, in order; none held after."""
        held, self.held = self.held, []
        return tuple(held)
