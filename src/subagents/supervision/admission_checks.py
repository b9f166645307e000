"""The admission checks: every rule that may refuse a spawn, in order, each one small function.

Why one pipeline: a spawn used to be refused from an inline sequence in ``Admission.admit``
while what a model is offered was decided apart (``SpawnRules.offer``), blind to the
runtime's state, so a rule depending on the tree could not be in "one rule book". Now a
check is ``check(proposal, ledger) -> Refusal | None``, ``CHECKS`` lists them in the order
they run, and both callers run that same tuple:

- admission (``Admission.admit``) runs it over the supervisor's own state
  (``ledger.TableLedger`` over the ``RunTable``), for every requester;
- the offer of the spawn tools (``offer``, from ``behaviour.offer`` in the agent's thread)
  runs it once per agent it might list, with a hypothetical request, over the run's
  ``Standing``: what the supervisor read of its ledger for that run when it started it
  (its ancestors' ``maxDepth``, its tree's admitted runs). The agent never reads the
  supervisor's tables (they are the supervisor thread's, and on a cluster in another
  process): the standing is a frozen copy, handed with ``StartRun``. It is as old as the
  run's start; the only state it holds that moves is a count that only grows, so a stale
  standing can only offer too much, never too little: a spawn it still lists after the tree
  filled is refused at admission, naming the limit, as any model ignoring its list is.

A new limit is one function here and one entry in ``CHECKS`` (reading what it needs through
``Ledger``; a new kind of state: one method there, on ``TableLedger`` and on ``RunLedger``,
which reads it from a field added to ``Standing``).

What is not a check, and why: the policies and budget (``PolicyBook.admit``) run after the
pipeline because they refuse *and* register (a budget is granted as it is checked); a
concurrency slot never refuses, it queues (``slots``), and only a full queue refuses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import msgspec

from subagents.definitions.spec import AgentSpec
from subagents.messages import RunRecord, SpawnRequest
from subagents.supervision.limits import Limits
from subagents.supervision.requests import request_problem
from subagents.supervision.spawn_rules import DepthBound, SpawnRules


class Refusal(NamedTuple):
    """Why a spawn may not go ahead: the check that said no, and the text the requester gets
    (it names the rule or limit: ``depth limit: ...``, ``max_runs_per_tree: ...``)."""

    check: str
    reason: str


class Requester(Protocol):
    """The run asking for a spawn, as the checks see it (a ``RunState``; an agent's port)."""

    @property
    def record(self) -> RunRecord: ...
    @property
    def spec(self) -> AgentSpec: ...


class Proposal(msgspec.Struct, frozen=True):
    """A spawn request with what it names looked up: the definition (None: not defined) and
    the requesting run (None: a root, or a requester that is not running). A Struct, not a
    ``NamedTuple``: made in C (a named tuple's ``__new__`` was two calls of every spawn)."""

    req: SpawnRequest
    child: AgentSpec | None
    parent: Requester | None


class Ledger(Protocol):
    """What a check may read of the runtime's state; read-only."""

    @property
    def limits(self) -> Limits: ...
    @property
    def rules(self) -> SpawnRules: ...
    def agent_names(self) -> list[str]: ...
    def ancestors(self, run: Requester) -> Sequence[DepthBound]:
        """``run``'s ancestors that set ``maxDepth``, root first."""
        ...

    def tree_runs(self, root_run_id: str) -> int:
        """How many runs the tree of ``root_run_id`` has admitted, ended ones included."""
        ...

    def in_use(self, run_id: str) -> bool: ...


Check = Callable[[Proposal, Ledger], Refusal | None]


def request_fields(p: Proposal, ledger: Ledger) -> Refusal | None:
    """The request alone: types, an empty task, sizes, the timeout (``requests``)."""
    problem = request_problem(p.req, ledger.limits)
    return Refusal("request", problem) if problem is not None else None


def known_agent(p: Proposal, ledger: Ledger) -> Refusal | None:
    if p.child is not None:
        return None
    return Refusal("agent", unknown_agent(p.req.agent, ledger.agent_names()))


def unknown_agent(agent: object, names: Iterable[str]) -> str:
    """The refusal of a spawn naming an agent that is not among ``names`` (said the same by
    ``Runtime.spawn``, which checks it before telling the supervisor)."""
    known = ", ".join(sorted(names)) or "none"
    return f"unknown agent {agent!r}; known agents: {known}"


def live_requester(p: Proposal, ledger: Ledger) -> Refusal | None:
    if p.req.parent_run_id is None or p.parent is not None:
        return None
    return Refusal("requester", f"requesting run {p.req.parent_run_id} is not running")


def spawn_rule(p: Proposal, ledger: Ledger) -> Refusal | None:
    """Which agents the requester's definition may spawn (``SpawnGrant``)."""
    if p.parent is None or p.child is None:
        return None
    refusal = ledger.rules.grant(p.parent.spec).refusal(p.child)
    return Refusal("spawn rule", refusal) if refusal is not None else None


def depth_limit(p: Proposal, ledger: Ledger) -> Refusal | None:
    """``max_depth``, tightened by every ancestor's ``maxDepth`` (``SpawnRules``)."""
    if p.parent is None:
        return None
    record = p.parent.record
    refusal = ledger.rules.depth_refusal(p.parent.spec, record.depth, ledger.ancestors(p.parent))
    return Refusal("depth", refusal) if refusal is not None else None


def runs_per_tree(p: Proposal, ledger: Ledger) -> Refusal | None:
    """``max_runs_per_tree``: a new root starts a tree of its own, so only a child counts."""
    limit = ledger.limits.max_runs_per_tree
    if limit is None or p.parent is None:
        return None
    root = p.parent.record.root_run_id
    admitted = ledger.tree_runs(root)
    if admitted < limit:
        return None
    return Refusal(
        "max_runs_per_tree",
        f"max_runs_per_tree: the tree of {root} has admitted {admitted} runs, the limit is"
        f" {limit} (Limits.max_runs_per_tree; --max-runs-per-tree)",
    )


def free_run_id(p: Proposal, ledger: Ledger) -> Refusal | None:
    run_id = p.req.run_id
    if run_id is None or not ledger.in_use(run_id):
        return None
    return Refusal("run id", f"run id {run_id} is already in use")


CHECKS: tuple[Check, ...] = (
    request_fields,
    known_agent,
    live_requester,
    spawn_rule,
    depth_limit,
    runs_per_tree,
    free_run_id,
)
"""Every check, in the order admission runs them: the first refusal is the answer."""

ROOT_CHECKS: tuple[Check, ...] = (request_fields, known_agent, free_run_id)
"""The checks that can refuse a root's request (no ``parent_run_id``), in ``CHECKS``'s order:
the others read the requester (``live_requester``, ``spawn_rule``, ``depth_limit``,
``runs_per_tree``) and pass a request without one. Most spawns are roots (``Runtime.run``,
``spawn``): they skip four calls that cannot refuse them (``test_admission_checks``'s
``test_root_checks_are_the_checks_that_can_refuse_a_root`` keeps the two lists agreeing)."""


SIBLING_CHECKS: tuple[Check, ...] = (request_fields, runs_per_tree, free_run_id)
"""The checks that can refuse a spawn whose requester and agent passed every check before, in
the same decision (a step's siblings: ``Admission.spawn_all``), in ``CHECKS``'s order. The
others read only the definition and the requester (``known_agent``, ``live_requester``),
the requester's definition (``spawn_rule``) and its line of ancestors (``depth_limit``):
nothing one decision changes, so they are asked once per requester and agent in a batch,
not once per request (a fan-out's 1,000 ``ctx.spawn``s of one agent: ~40% of each
admission). What they leave is the request's own fields, the tree's count (it grows with
each sibling admitted) and the run id."""


def sibling_refusal(p: Proposal, ledger: Ledger) -> Refusal | None:
    """The first of ``SIBLING_CHECKS`` that refuses ``p``, or None: for a proposal whose
    requester and agent are those of a sibling that passed every check in this decision,
    the same answer as ``refusal_of``."""
    for check in SIBLING_CHECKS:
        refusal = check(p, ledger)
        if refusal is not None:
            return refusal
    return None


ROOT_SIBLING_CHECKS: tuple[Check, ...] = (request_fields, free_run_id)
"""The checks that can refuse a root whose agent a root before it in the same decision found
(``spawn_many``'s batch: ``Admission.spawn_all``), in ``ROOT_CHECKS``'s order: ``known_agent``
reads only the definition, found once per agent in a decision (as for a step's siblings)."""


def root_sibling_refusal(p: Proposal, ledger: Ledger, fields_checked: bool) -> Refusal | None:
    """The first of ``ROOT_SIBLING_CHECKS`` that refuses ``p`` (``fields_checked``: not
    ``request_fields``, its first, as ``refusal_of``), or None: for a root whose agent a
    root before it in this decision found, the same answer as ``refusal_of``."""
    for check in ROOT_SIBLING_CHECKS[1:] if fields_checked else ROOT_SIBLING_CHECKS:
        refusal = check(p, ledger)
        if refusal is not None:
            return refusal
    return None


CHECKED_ROOT_CHECKS: tuple[Check, ...] = ROOT_CHECKS[1:]
"""``ROOT_CHECKS`` after ``request_fields``: those of a root request whose fields the runtime
checked already (``requests.CheckedRoots``)."""


def refusal_of(p: Proposal, ledger: Ledger, fields_checked: bool = False) -> Refusal | None:
    """The first check that refuses ``p``, or None: it may be admitted. ``fields_checked``:
    ``p`` is a root request whose ``request_fields`` passed on the runtime's caller's
    thread (``requests.CheckedRoots``), not checked again."""
    if p.req.parent_run_id is None:
        for check in CHECKED_ROOT_CHECKS if fields_checked else ROOT_CHECKS:
            refusal = check(p, ledger)
            if refusal is not None:
                return refusal
        return None
    found = _first_refusal(p, ledger)
    return found[1] if found is not None else None


def _first_refusal(p: Proposal, ledger: Ledger) -> tuple[int, Refusal] | None:
    """The first refusal and the place in ``CHECKS`` of the check that made it."""
    for place, check in enumerate(CHECKS):
        refusal = check(p, ledger)
        if refusal is not None:
            return place, refusal
    return None


# ---- the offer: the same checks, over the standing a run was started with ------------------


class Standing(msgspec.Struct, frozen=True, kw_only=True):
    """What the supervisor read of its ledger for a run when it started it (``StartRun``):
    all the checks need of the state around it to decide its offer. Plain data, copied: the
    agent's thread (or node) reads it, never the supervisor's tables."""

    ancestors: tuple[DepthBound, ...] = ()
    """Its ancestors whose definitions set ``maxDepth``, root first."""
    tree_runs: int = 0
    """The runs its tree had admitted (itself included) when it started."""


@dataclass(frozen=True)
class RunLedger:
    """The ``Ledger`` as a started run sees it: its standing, the runtime's rules and the
    agents defined. It knows one run (the requester) and its tree."""

    run: Requester
    standing: Standing
    rules: SpawnRules
    agents: Sequence[AgentSpec]

    @property
    def limits(self) -> Limits:
        return self.rules.limits

    def agent_names(self) -> list[str]:
        return [a.name for a in self.agents]

    def ancestors(self, run: Requester) -> Sequence[DepthBound]:
        return self.standing.ancestors if run is self.run else ()

    def tree_runs(self, root_run_id: str) -> int:
        return self.standing.tree_runs if root_run_id == self.run.record.root_run_id else 0

    def in_use(self, run_id: str) -> bool:
        return False


@dataclass(frozen=True)
class Offer:
    """What an agent is offered: the agents its spawn tools may name (empty: no spawn tool)."""

    agents: tuple[AgentSpec, ...]
    fan_out: bool
    reason: str | None = None
    """Why nothing is offered, when nothing is: the refusal that came furthest down the
    pipeline (a depth limit over the spawn rule that refused other agents)."""


OFFER_TASK = "(offered)"
"""The task of the hypothetical request an offer checks: any valid task would do."""


def offer(
    run: Requester, standing: Standing, rules: SpawnRules, agents: Iterable[AgentSpec]
) -> Offer:
    """The agents ``run`` may spawn among ``agents``, by ``CHECKS`` run with a hypothetical
    request for each over its ``standing``: what its spawn tools list."""
    ledger = RunLedger(run, standing, rules, tuple(agents))
    if rules.grant(run.spec).disabled is not None:  # e.g. a child without tools
        return _nothing_offered(run, ledger)
    allowed: list[AgentSpec] = []
    furthest: tuple[int, str] | None = None
    for agent in ledger.agents:
        req = SpawnRequest(
            request_id="", agent=agent.name, task=OFFER_TASK, parent_run_id=run.record.run_id
        )
        found = _first_refusal(Proposal(req, agent, run), ledger)
        if found is None:
            allowed.append(agent)
        elif furthest is None or found[0] > furthest[0]:
            furthest = (found[0], found[1].reason)
    if allowed:
        return Offer(agents=tuple(allowed), fan_out=rules.grant(run.spec).fan_out)
    reason = furthest[1] if furthest is not None else f"no agent {run.spec.name} may spawn"
    return Offer(agents=(), fan_out=False, reason=reason)


def _nothing_offered(run: Requester, ledger: RunLedger) -> Offer:
    """The offer of a run whose definition may spawn no agent at all (its grant is
    ``disabled``: e.g. a child without tools), without asking every check about every agent
    defined: ``spawn_rule`` refuses them all with the same reason, and the checks before it
    cannot refuse a hypothetical request (its child and parent are given) but for the
    request's own fields, the first that passes them makes the spawn rule the furthest
    refusal, as the full pipeline finds it."""
    disabled = ledger.rules.grant(run.spec).refusal(run.spec)
    furthest: str | None = None
    for agent in ledger.agents:
        req = SpawnRequest(
            request_id="", agent=agent.name, task=OFFER_TASK, parent_run_id=run.record.run_id
        )
        refusal = request_fields(Proposal(req, agent, run), ledger)
        if refusal is None:
            furthest = disabled
            break
        furthest = furthest or refusal.reason
    reason = furthest if furthest is not None else f"no agent {run.spec.name} may spawn"
    return Offer(agents=(), fan_out=False, reason=reason)
