"""Concurrency slots, the admission queue, and parking: over-limit runs wait, never deadlock.

**Scopes.** A run counts against four limits at once: the global one, its agent's
(``per_agent``), its tier's (``per_tier``) and its parent's children (``max_children``, the
parent's ``maxChildren``). A run that does not fit every one of them waits in a FIFO queue;
none of them refuses. Only the queue bound refuses (it protects memory).

**What a slot means.** The limits bound the runs *working*. A run takes a slot when it starts
and keeps it while it waits (for its children, for mail), as long as nobody needs it: a waiting
run that resumes does not have to ask for anything (no round trip on the common path). When a
queued run needs a slot that only waiting runs hold, the supervisor asks one of them to
*park*: the agent, between two messages and so never in the middle of work, gives the slot
back and, from then on, holds back whatever it receives until it gets a slot again. Runs that
want their slot back (``resumes``) go ahead of new admissions.

Why this design (and not "a waiting run keeps its slot, and a deadlock breaker starts queued
runs over the limit"): a run that waits resumes on its own (a child ended, mail, a timer), so
runs started over the limit and runs resuming would then work at once, above the limit; and
the breaker had to recognise every shape of deadlock (every scope, every event). Here the
argument is short: every slot is held by a working run, which will end or wait, or by a waiting
run, which can be parked; so a queued run whose scopes are full of waiting runs always gets a
slot, and the runs working never exceed any limit. A park is a round trip to the agent (none for
a run started with its key queued: ``queued_behind``); here the pure part: counts, whom to park.

Whether a run fits depends only on its ``SlotKey``, and most queued runs share a few keys: the
pool counts queued runs per key and checks each key once (900 queued of one key: one check).
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence

from subagents.supervision.slot_keys import GLOBAL as GLOBAL
from subagents.supervision.slot_keys import QueueFull as QueueFull
from subagents.supervision.slot_keys import Scope as Scope
from subagents.supervision.slot_keys import SlotKey as SlotKey


class SlotPool:
    """Counts slot holders per scope; queues runs that do not fit; picks runs to park."""

    def __init__(self, *, global_limit: int, per_tier: dict[int, int], queue_bound: int) -> None:
        self.global_limit = global_limit
        self.per_tier = dict(per_tier)
        self.queue_bound = queue_bound
        self.in_flight = 0
        self.by_agent: Counter[str] = Counter()
        self.by_tier: Counter[int] = Counter()
        self.by_parent: Counter[str] = Counter()
        self.peak = 0
        self._holders: dict[str, SlotKey] = {}
        self._releasing: set[str] = set()
        """Holders asked to park, not yet confirmed (their slots are spoken for)."""
        self._idle: dict[str, None] = {}
        """Holders the supervisor saw waiting (``set_idle``), in the order they began to: the
        only ones ``park_candidates`` looks at, so its cost does not grow with the holders."""
        self._idle_in: Counter[Scope] = Counter()
        """Per scope, the idle holders not already asked to park: when a queued run needs
        more in some scope than there are, nobody is looked at (one check per queued key)."""
        self._scopes: dict[SlotKey, tuple[tuple[Scope, int], ...]] = {}
        # What changed since ``park_candidates`` last looked (``needs_look``): only a slot
        # given back, an idle holder more or a queued run of a key not already stuck can let
        # it find more. A run ending and the next queued run taking its place, the common case
        # under a limit, changes nothing: counts are compared, not events counted.
        self._touched: dict[Scope, tuple[int, int]] = {}
        """Scope -> (count, idle holders) when first touched since the last look."""
        self._demand = False
        self._stuck: set[SlotKey] = set()
        """Queued keys that no parking could help at the last look."""
        self._resumes: OrderedDict[str, SlotKey] = OrderedDict()
        """Runs that want a slot back (parked, or restored): ahead of new admissions."""
        self._queue: OrderedDict[str, SlotKey] = OrderedDict()
        self.queued_keys: Counter[SlotKey] = Counter()
        """Admissions waiting with each key (only keys with some); read only (``step_tail``)."""
        self._resume_keys: Counter[SlotKey] = Counter()
        self.waiting = (self._resumes, self._queue)  # read only: ``queue_length``, no call

    # ---- fitting ---------------------------------------------------------------------------

    def scopes(self, key: SlotKey) -> tuple[tuple[Scope, int], ...]:
        """The scopes ``key`` counts in, with their limits (worked out once per key)."""
        found = self._scopes.get(key)
        if found is None:
            found = ((GLOBAL, self.global_limit), (("agent", key.agent), key.agent_limit))
            if key.tier is not None and key.tier in self.per_tier:
                found += ((("tier", key.tier), self.per_tier[key.tier]),)
            if key.parent is not None:
                found += ((("parent", key.parent), key.children_limit),)
            if len(self._scopes) >= 4096:  # parents come and go: stay bounded
                self._scopes.clear()
            self._scopes[key] = found
        return found

    def count(self, scope: Scope) -> int:
        kind, name = scope
        if kind == "global":
            return self.in_flight
        if kind == "agent":
            return self.by_agent.get(name, 0)
        if kind == "parent":
            return self.by_parent.get(name, 0)
        return self.by_tier.get(name, 0)

    def fits(self, key: SlotKey) -> bool:
        if self.in_flight >= self.global_limit:
            return False
        if self.by_agent[key.agent] >= key.agent_limit:
            return False
        if key.parent is not None and self.by_parent[key.parent] >= key.children_limit:
            return False
        tier_limit = self.per_tier.get(key.tier) if key.tier is not None else None
        return not (tier_limit is not None and self.by_tier[key.tier or 0] >= tier_limit)

    def _waiting_fits(self) -> bool:
        if not self.queued_keys and not self._resume_keys:
            return False  # the common case: nobody waits
        return any(self.fits(k) for k in self._resume_keys) or any(
            self.fits(k) for k in self.queued_keys
        )

    # ---- taking and giving back --------------------------------------------------------------

    def try_take(self, run_id: str, key: SlotKey) -> bool:
        """Take a slot for ``run_id`` if it fits and nobody earlier is queued for the same."""
        if not self.fits(key):
            return False
        if self._waiting_fits():
            return False  # a queued run could take this slot: it goes first (FIFO)
        self._take(run_id, key)
        return True

    def force_take(self, run_id: str, key: SlotKey) -> None:
        """Take a slot regardless of the limits (tests and tools that rebuild a pool)."""
        self._take(run_id, key)

    def take_each(self, run_ids: Sequence[str], key: SlotKey) -> None:
        """A slot for each of ``run_ids``, counted at once: what as many ``try_take``s leave
        when that many fit (a batch's roots, ``root_batch.room`` read first)."""
        for run_id in run_ids:
            self._holders[run_id] = key
        self._count(key, len(run_ids))

    def _take(self, run_id: str, key: SlotKey) -> None:
        self._holders[run_id] = key
        self._count(key, 1)

    def _count(self, key: SlotKey, taken: int) -> None:
        self.in_flight += taken
        self.by_agent[key.agent] += taken
        if key.tier is not None:
            self.by_tier[key.tier] += taken
        if key.parent is not None:
            self.by_parent[key.parent] += taken
        self.peak = max(self.peak, self.in_flight)

    def release(self, run_id: str) -> bool:
        """Free the slot of ``run_id`` (or drop it from a queue). True if it held one."""
        self._unqueue(run_id)
        if run_id in self._idle:
            self.set_idle(run_id, False)
        self._releasing.discard(run_id)
        key = self._holders.pop(run_id, None)
        if key is None:
            return False
        if self._queue or self._resumes:
            self._touch(key)
        self.in_flight -= 1
        self.by_agent[key.agent] -= 1
        if key.tier is not None:
            self.by_tier[key.tier] -= 1
        if key.parent is not None:
            self.by_parent[key.parent] -= 1
            if self.by_parent[key.parent] <= 0:
                del self.by_parent[key.parent]  # parents come and go: stay bounded
        return True

    def release_all(self) -> None:
        """Every slot freed and both queues emptied at once, as a ``release`` of each run
        would leave the pool (the runtime closes: every run ends, ``closing.close_all``)."""
        self.in_flight = 0
        for counts in (self.by_agent, self.by_tier, self.by_parent, self._idle_in):
            counts.clear()
        for held in (self._holders, self._idle, self._queue, self._resumes):
            held.clear()
        self.queued_keys.clear()
        self._resume_keys.clear()
        self._releasing.clear()
        self._touched, self._demand, self._stuck = {}, False, set()

    # ---- queues ------------------------------------------------------------------------------

    def enqueue(self, run_id: str, key: SlotKey) -> int:
        """Queue a new admission; its 1-based position. Raises QueueFull past the bound."""
        if len(self._queue) >= self.queue_bound:
            raise QueueFull(
                f"queue bound: the admission queue is full ({self.queue_bound} runs waiting);"
                " raise Limits(queue_bound=...) (--queue-bound on the command line)"
            )
        if key not in self._stuck:
            self._demand = True
        self._queue[run_id] = key
        self.queued_keys[key] += 1
        return len(self._queue)

    def want_back(self, run_id: str, key: SlotKey) -> bool:
        """A run that held a slot before (parked, restored) wants one: taken now (True) if it
        fits and no earlier resume could take it, else queued ahead of admissions (False).
        Not bounded: these runs are admitted already, and there are at most as many as were
        ever parked or restored."""
        if self.fits(key) and not any(self.fits(k) for k in self._resume_keys):
            self._take(run_id, key)
            return True
        if key not in self._stuck:
            self._demand = True
        self._resumes[run_id] = key
        self._resume_keys[key] += 1
        return False

    def _unqueue(self, run_id: str) -> None:
        if run_id in self._queue:
            queue, keys = self._queue, self.queued_keys
        elif run_id in self._resumes:
            queue, keys = self._resumes, self._resume_keys
        else:
            return
        key = queue.pop(run_id)
        keys[key] -= 1
        if keys[key] <= 0:
            del keys[key]
            if not (self._queue or self._resumes):  # nobody waits: forget what was looked at
                self._touched, self._demand, self._stuck = {}, False, set()

    def start_queued(self) -> list[str]:
        """Take slots for waiting runs that now fit, resumes first, each queue in FIFO order;
        the run ids that got one."""
        if not self._queue and not self._resumes:
            return []
        started: list[str] = []
        for queue, keys in ((self._resumes, self._resume_keys), (self._queue, self.queued_keys)):
            if not queue:
                continue
            # Slots are only taken during the scan, so a key that did not fit stays blocked
            # until the scan ends: once every queued key is blocked, nothing behind can start.
            blocked: set[SlotKey] = set()
            taken: list[str] = []
            for run_id, key in queue.items():
                if self.in_flight >= self.global_limit or len(blocked) == len(keys):
                    break
                if key in blocked:
                    continue
                if self.fits(key):
                    self._take(run_id, key)
                    taken.append(run_id)
                else:
                    blocked.add(key)
            for run_id in taken:
                self._unqueue(run_id)
            started.extend(taken)
        return started

    # ---- parking -----------------------------------------------------------------------------

    def _touch(self, key: SlotKey) -> None:
        """``key``'s scopes are about to have a slot given back or an idle holder more."""
        if not (self._queue or self._resumes):
            return  # nobody waits: nothing to look for (a run queued later is new demand)
        touched = self._touched
        for scope, _ in self.scopes(key):
            if scope not in touched:
                touched[scope] = (self.count(scope), self._idle_in.get(scope, 0))

    def needs_look(self) -> bool:
        """Whether ``park_candidates`` could answer something new since it last looked."""
        if self._demand:
            return True
        idle_in, count_of = self._idle_in, self.count
        for scope, (count, idle) in self._touched.items():  # a loop: ~2x an any(genexpr)
            if count_of(scope) < count or idle_in.get(scope, 0) > idle:
                return True
        return False

    def _count_idle(self, run_id: str, step: int) -> None:
        for scope, _ in self.scopes(self._holders[run_id]):
            self._idle_in[scope] += step
            if not self._idle_in[scope]:
                del self._idle_in[scope]  # parents come and go: stay bounded

    def set_idle(self, run_id: str, idle: bool) -> None:
        """The supervisor saw ``run_id`` start waiting (True) or working (False)."""
        if idle and run_id in self._holders:
            if run_id not in self._idle:
                self._idle[run_id] = None
                if run_id not in self._releasing:
                    self._touch(self._holders[run_id])
                    self._count_idle(run_id, +1)
        elif run_id in self._idle:
            del self._idle[run_id]
            if run_id not in self._releasing:
                self._count_idle(run_id, -1)

    def has_idle(self, run_id: str) -> bool:
        return run_id in self._idle

    def queued_behind(self, run_id: str) -> bool:
        """Runs of the key ``run_id`` holds wait for a slot: its slot fits each of them."""
        return (key := self._holders.get(run_id)) in self.queued_keys or key in self._resume_keys

    def park_candidates(self, idle: Callable[[str], bool]) -> list[str]:
        """The waiting holders to ask to park so that queued runs get slots (FIFO: the first
        queued runs are served first). Only holders marked idle (``set_idle``) for which
        ``idle(run_id)`` still holds are asked (the agent confirms when it parks; a holder
        that is working is never asked).

        Counts are taken as they will be once the parks already asked for are confirmed; for
        each queued run in order, the scopes it is blocked in are freed by the fewest idle
        holders (oldest first), or, if that cannot be done now, the run is passed over (a run
        blocked only by its own scope does not hold up the others). Cost: a few dict lookups
        per queued key (the per-scope idle counts rule most keys out), plus one step per idle
        holder when some can help; not the number of holders or of queued runs."""
        self._touched, self._demand = {}, False
        stuck = self._stuck = set()
        if not self._idle or not (self._resume_keys or self.queued_keys):
            stuck.update(self._resume_keys, self.queued_keys)
            return []
        # Counts as they will be: minus the slots being given back, plus those promised.
        shift: dict[Scope, int] = {}
        for holder in self._releasing:
            for scope, _ in self.scopes(self._holders[holder]):
                shift[scope] = shift.get(scope, 0) - 1
        used: dict[Scope, int] = {}  # idle holders chosen in this call, per scope
        idle_in = self._idle_in
        candidates: list[str] | None = None  # looked up only if some run can be helped
        chosen: list[str] = []
        for keys in (self._resume_keys, self.queued_keys):
            for key, waiting in keys.items():
                limits = self.scopes(key)
                for _ in range(waiting):
                    needs: dict[Scope, int] = {}
                    for scope, limit in limits:
                        need = self.count(scope) + shift.get(scope, 0) - limit + 1
                        if need > 0:
                            if idle_in.get(scope, 0) - used.get(scope, 0) < need:
                                break  # not enough idle holders in this scope
                            needs[scope] = need
                    else:
                        if needs:
                            if candidates is None:
                                candidates = [
                                    h for h in self._idle if h not in self._releasing and idle(h)
                                ]
                            picks = self._cover(needs, candidates)
                            if picks is None:
                                stuck.add(key)
                                break  # not now: the next key may still be helped
                            for pick in picks:
                                candidates.remove(pick)
                                chosen.append(pick)
                                for scope, _ in self.scopes(self._holders[pick]):
                                    shift[scope] = shift.get(scope, 0) - 1
                                    used[scope] = used.get(scope, 0) + 1
                        for scope, _ in limits:  # this queued run will take the slot
                            shift[scope] = shift.get(scope, 0) + 1
                        continue
                    stuck.add(key)
                    break  # this key cannot be helped now; the next one may
        return chosen

    def _cover(self, needs: dict[Scope, int], candidates: list[str]) -> list[str] | None:
        """The fewest candidates (greedy, oldest first on ties) that free ``needs[s]`` slots
        in each scope ``s``; None if they cannot. One scope short (the common case): each in it
        gains the same, so greedy takes its oldest ``need``, found in one pass, no rounds."""
        if len(needs) != 1:
            return self._cover_greedy(needs, candidates)
        [(scope, need)] = needs.items()
        picks: list[str] = []
        for c in candidates:
            for s, _ in self.scopes(self._holders[c]):  # (a loop: no genexpr call each)
                if s == scope:
                    picks.append(c)
                    if len(picks) == need:
                        return picks
                    break
        return None

    def _cover_greedy(self, needs: dict[Scope, int], candidates: list[str]) -> list[str] | None:
        """``_cover`` for any number of scopes: the one freeing most scopes short, again."""
        left = dict(needs)
        picks: list[str] = []
        pool = list(candidates)
        while any(n > 0 for n in left.values()):
            best, best_gain = None, 0
            for c in pool:
                gain = sum(1 for s, _ in self.scopes(self._holders[c]) if left.get(s, 0) > 0)
                if gain > best_gain:
                    best, best_gain = c, gain
            if best is None:
                return None
            pool.remove(best)
            picks.append(best)
            for s, _ in self.scopes(self._holders[best]):
                if s in left:
                    left[s] -= 1
        return picks

    def parking(self, run_id: str) -> None:
        """``run_id`` was asked to park: its slot is spoken for until it answers."""
        if run_id not in self._releasing:
            if run_id in self._idle:
                self._count_idle(run_id, -1)
            self._releasing.add(run_id)

    def not_parking(self, run_id: str) -> None:
        """The park of ``run_id`` will not happen (it restarted, say): its slot counts again."""
        if run_id in self._releasing:
            self._releasing.discard(run_id)
            if run_id in self._idle:
                self._touch(self._holders[run_id])
                self._count_idle(run_id, +1)

    def is_parking(self, run_id: str) -> bool:
        return run_id in self._releasing

    # ---- views -------------------------------------------------------------------------------

    def holders(self) -> list[str]:
        """The runs holding a slot."""
        return list(self._holders)

    def holds(self, run_id: str) -> bool:
        return run_id in self._holders

    def queued(self) -> list[str]:
        """Runs waiting for a slot: resumes first, then new admissions."""
        return [*self._resumes, *self._queue]

    def queue_length(self) -> int:
        """How many runs wait for a slot (resumes included)."""
        return len(self._queue) + len(self._resumes)
