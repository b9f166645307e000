"""Parking: a waiting run lends its concurrency slot to a queued run, and gets one back.

Why: the limits bound the runs *working*, and a run keeps its slot while it waits (for its
children, for mail) so that resuming costs nothing. When a queued run needs a slot only
waiting runs hold, nothing would ever move; so the supervisor asks such a holder to *park*
(``Park``): its agent, between two messages and so never mid-work, gives the slot back
(``Parked``) and holds back what it receives meanwhile, asking for a slot again
(``SlotWanted``) as soon as something arrives that would make it work (what it would only
record, as one child's end of a gather still waiting, it takes without one); it is let go on
(``Unpark``) when it has one, ahead of new admissions. ``slots.SlotPool`` holds the counts
and picks whom to park; this part keeps each run's parking state and turns the pool's answers
into effects.

A run's ``park`` state: None (it holds its slot, or is queued), "asked" (told to park, not yet
confirmed: its slot is spoken for), "parked" (gave its slot back) or "wanting" (parked, and
waiting for a slot again). A new start of the run (a restart, a resume) clears it: the new
actor starts with a slot.

A run started while runs of its own slot key are queued (under a limit, every run started
from the queue) is told so with its start (``StartRun.park_at_wait``): at its first wait its
agent parks by itself and says so with its waiting report (``WaitingChanged.parked``,
``parked_at_wait``), so each run that waits lends its slot to the next in one message, not
in a ``Park``/``Parked`` round trip. Its slot fits any of them (every scope the same); if the
queue emptied meanwhile the slot is simply free, and the run gets one back as any parked run
does (``SlotWanted``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from subagents.definitions.spec import AgentSpec
from subagents.logs import enabled, get_logger
from subagents.messages import EventKind, Park, RunStatus, Unpark
from subagents.supervision.effects import Decided, Tell
from subagents.supervision.limits import Limits
from subagents.supervision.policy_book import PolicyBook
from subagents.supervision.runs import RunState, RunTable
from subagents.supervision.slots import SlotKey, SlotPool

log = get_logger("subagents.supervisor")

BRIEF_SLEEP_S = 1.0
"""A function agent awaiting a sleep of at most this long, and nothing else, is not waiting:
it keeps its slot, as a run blocked in a model call does, and is never asked to park for it.
Why: such a run resumes on its own within that time, so it can hold up no queued run for
longer (no deadlock), while lending the slot would cost a park and an unpark round trip (four
messages, two events) for a moment of someone else's work, and the runs working at once
would exceed the limit as soon as the sleepers woke (a fan-out of 1,000 children sleeping
50 ms each, 100 at a time: ~900 parks, up to ~400 at once, measured). A longer sleep, or a
sleep awaited with anything else (``gather``, ``wait_any``), is waiting as before; so is
a brief sleep once the run's brief sleeps add up to more than this (``ctx.sleep``): a loop
of them, polling for a queued child's mail, would otherwise hold its slot for ever."""

BRIEF_SLEEP_FLOOR_S = 0.01
"""What each brief sleep counts against ``BRIEF_SLEEP_S`` at least: a loop of ``sleep(0)``
(polling without pause) is waiting after 100 of them, as a loop of longer ones is after 1 s."""


class Parking:
    """Asks waiting runs to park when queued runs need their slots; lets them go on."""

    def __init__(
        self,
        runs: RunTable,
        now: Callable[[], float],
        slots: SlotPool,
        policies: PolicyBook,
        limits: Limits,
    ) -> None:
        self.runs = runs
        self.now = now
        """Wall time: events."""
        self.slots = slots
        self.policies = policies
        self.limits = limits
        self._root_keys: dict[str, tuple[AgentSpec, SlotKey]] = {}
        """The slot key of each agent's root runs, with the definition it was made from."""

    def slot_key(self, spec: AgentSpec, parent: RunState | None) -> SlotKey:
        """The scopes a run of ``spec`` counts in: global, its agent, its tier, and its
        parent's children (the parent's ``maxChildren`` up to the cap, else
        ``max_children``)."""
        limits = self.limits
        if parent is None:  # the same for every root of ``spec``: made once (frozen)
            known = self._root_keys.get(spec.name)
            if known is not None and known[0] is spec:
                return known[1]
            key = SlotKey(agent=spec.name, tier=spec.tier, agent_limit=limits.per_agent)
            self._root_keys[spec.name] = (spec, key)  # (by name: as many as agents defined)
            return key
        return SlotKey(
            agent=spec.name,
            tier=spec.tier,
            agent_limit=limits.per_agent,
            parent=parent.run_id,
            children_limit=limits.children_for(parent.spec.max_children),
        )

    def key_of(self, state: RunState) -> SlotKey:
        return self.slot_key(state.spec, self.runs.get(state.record.parent_run_id))

    def _idle(self, run_id: str) -> bool:
        """A slot holder that may be asked to park: waiting, with an actor to ask (not between
        a failure and its restart)."""
        state = self.runs.get(run_id)
        return (
            state is not None
            and state.record.status is RunStatus.WAITING
            and state.park is None
            and not self.policies.restarting(run_id)
        )

    def make_room(self) -> Decided:
        """Ask the waiting runs whose slots queued runs need to park (FIFO order). Called at
        the end of every decision while runs are queued; looks only when something changed
        that could let it find more (``SlotPool.needs_look``)."""
        asked = Decided()
        if not self.slots.needs_look():
            return asked
        for run_id in self.slots.park_candidates(self._idle):
            self.slots.parking(run_id)
            state = self.runs.get(run_id)
            assert state is not None
            state.park = "asked"
            asked.effects.append(Tell(run_id, Park()))
        return asked

    def waiting(self, state: RunState, waiting: bool) -> None:
        """The run said it waits (it may be parked) or works (it may not)."""
        self.slots.set_idle(state.run_id, waiting)

    def parked(self, state: RunState, data: dict[str, Any] | None = None) -> Decided | None:
        """``state``'s agent gave its slot back: its ``parked`` event (with ``data``), if it
        was asked to (queued runs may take the slot now); else None."""
        if state.park != "asked":
            return None
        state.park = "parked"
        self.slots.release(state.run_id)
        parked = Decided()
        parked.event(EventKind.PARKED, state.record, self.now(), data or {})
        if enabled(logging.INFO):  # asked first: a line filtered out still costs (logs.py),
            log.info(  # and under the default limits every run past the first few parks
                "a waiting run lent its slot to a queued run",  # (expected: not a warning)
                run_id=state.run_id,
                agent=state.record.agent,
                queued=self.slots.queue_length(),
                limit=self.limits.max_concurrency,
            )
        return parked

    def parked_at_wait(self, state: RunState) -> Decided | None:
        """``state``'s agent parked by itself at its wait, as its start was told to
        (``StartRun.park_at_wait``), and said so with its waiting report: its slot is given
        back as if it had been asked (``Park``) and had answered (``Parked``), without the
        round trip. None if the run is parked already (nothing to give back)."""
        if state.park not in (None, "asked"):
            return None
        # ("asked" is not reached today: the supervisor asks only runs it saw waiting, and a
        # self-park rides on a start's FIRST waiting report; were it, the Park in flight would
        # find the agent parked already and be a no-op there: the slot is given back here)
        state.park = "asked"
        return self.parked(state, {"at_wait": True})

    def slot_wanted(self, state: RunState) -> Decided | None:
        """A parked run received something: it gets a slot again, ahead of new admissions
        (at once if one is free: its unpark; else when one frees: ``granted``)."""
        if state.park != "parked":
            return None
        state.park = "wanting"
        if self.slots.want_back(state.run_id, self.key_of(state)):
            return self.granted(state)
        return None

    def granted(self, state: RunState) -> Decided | None:
        """``state`` got a slot from the queue: a parked run is let go on (what that comes
        to: its ``unparked`` event, ``Unpark`` told); None for any other run, which is to be
        started."""
        if state.park != "wanting":
            return None
        state.park = None
        # still waiting as far as the supervisor knows (a function agent says so once): it
        # may be asked to park again, and answers once it is done with what woke it
        self.slots.set_idle(state.run_id, state.record.status is RunStatus.WAITING)
        unparked = Decided()
        unparked.event(EventKind.UNPARKED, state.record, self.now(), {})
        unparked.effects.append(Tell(state.run_id, Unpark()))
        return unparked

    def starting(self, state: RunState) -> None:
        """A new actor starts for ``state`` (with the slot): no park is pending any more,
        and it works until it says it waits."""
        run_id = state.run_id
        if state.park is not None:
            state.park = None
            self.slots.not_parking(run_id)
        if self.slots.has_idle(run_id):
            self.slots.set_idle(run_id, False)

    def restarting(self, state: RunState) -> bool:
        """A run goes again (a restart or retry after a failure, or moved off a lost
        host): True if it may start now (it still holds its slot, or gets one), else it
        starts when one frees (it had parked: a ``fail_parent`` child failed it, or its
        host was lost while it had lent its slot)."""
        run_id = state.run_id
        queued = state.park == "wanting"  # already queued for a slot back
        state.park = None
        self.slots.not_parking(run_id)
        if self.slots.holds(run_id):
            return True
        # Queued once: asking again would count it twice in the pool (a slot taken twice,
        # or a queued key that never empties). It starts when the queue grants it.
        return not queued and self.slots.want_back(run_id, self.key_of(state))

    def ended(self, state: RunState) -> None:
        state.park = None
