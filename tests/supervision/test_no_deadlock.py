"""No deadlock, ever, and never more runs working than the limits: a property test.

The real ``SupervisorCore`` (its writes carried out on a real MemoryStore) is driven without
threads by a small simulation of the agents: random trees of runs (gathers of foreground
children, background children collected as mail, naps on a timer that wake a run on their own),
random limits on every scope (global, per agent, per tier, per parent), and a random
interleaving of every message between the agents and the supervisor (each sender's messages in
order, as actor mailboxes keep them). A simulated agent handles one message at a time and,
while it works, nothing else, like an actor; it parks as ``actors/agent.py`` does.

After every step: the runs working in each scope are within its limit, and each holds a slot.
At the end (no step left to take): every root completed. A deadlock is a state with runs left
and nothing that can happen, which the simulation reports with the state it was in.
"""

from __future__ import annotations

import random
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from subagents.definitions.spec import AgentSpec
from subagents.messages import (
    ChildDone,
    DeliverMail,
    MailRead,
    Outcome,
    Park,
    Parked,
    RunFinished,
    RunStatus,
    SlotWanted,
    SpawnReply,
    SpawnRequest,
    Unpark,
    WaitingChanged,
)
from subagents.store.memory import MemoryStore
from subagents.store.writes import apply_writes
from subagents.supervision.core import Decision, SupervisorCore
from subagents.supervision.effects import Effect, StartRun, StopAgent, Tell, TellOutside
from subagents.supervision.limits import Limits

AGENTS = ("a", "b", "c", "d")


# ---- trees -------------------------------------------------------------------------------------


@dataclass
class Node:
    """A run to be: its agent and its program, steps taken in order once it starts."""

    agent: str
    steps: list[tuple[str, Any]] = field(default_factory=list)
    """("gather", [Node...]) spawn all, wait for all; ("bg", Node) spawn in the background;
    ("collect", n) wait until n background results arrived as mail; ("nap", None) wait
    for a timer; ("work", None) one step of work."""


FOREGROUND = ("gather", "gather", "nap", "work")
MIXED = ("gather", "bg", "bg", "nap", "work")


def tree(rng: random.Random, depth: int, budget: list[int], kinds: tuple[str, ...]) -> Node:
    """A random run and its subtree, at most ``depth`` levels below, ``budget`` runs in all."""
    node = Node(agent=rng.choice(AGENTS))
    backgrounds = 0
    for _ in range(rng.randint(0, 3)):
        kind = rng.choice(kinds)
        if kind in ("gather", "bg") and (depth == 0 or budget[0] <= 0):
            kind = "work"
        if kind == "gather":
            n = rng.randint(1, 3)
            budget[0] -= n
            node.steps.append(("gather", [tree(rng, depth - 1, budget, kinds) for _ in range(n)]))
        elif kind == "bg":
            budget[0] -= 1
            node.steps.append(("bg", tree(rng, depth - 1, budget, kinds)))
            backgrounds += 1
        else:
            node.steps.append((kind, None))
    if backgrounds:
        node.steps.append(("collect", backgrounds))
    return node


@st.composite
def worlds(
    draw: st.DrawFn, kinds: tuple[str, ...]
) -> tuple[list[Node], Limits, list[AgentSpec], int]:
    # Limits and sizes are drawn (and shrunk) by hypothesis; the shapes of the trees and the
    # interleaving come from seeds (drawing every node made hypothesis 3/4 of the time).
    shapes = random.Random(draw(st.integers(0, 2**32)))
    budget = [draw(st.integers(1, 24))]
    depths = draw(st.lists(st.integers(0, 3), min_size=1, max_size=3))
    roots = [tree(shapes, depth, budget, kinds) for depth in depths]
    limits = Limits(
        max_depth=4,
        max_concurrency=draw(st.integers(1, 4)),
        per_agent=draw(st.integers(1, 3)),
        per_tier={1: draw(st.integers(1, 2)), 2: draw(st.integers(1, 3))},
        max_children=draw(st.integers(1, 3)),
        queue_bound=10_000,
    )
    specs = [
        AgentSpec(
            name=a,
            description=a,
            tier=shapes.choice([None, 1, 2]),
            max_children=shapes.choice([None, 1, 2]),
            metadata={"allowSelfSpawn": True},  # trees use any agent at any level
        )
        for a in AGENTS
    ]
    seed = draw(st.integers(0, 2**32))
    return roots, limits, specs, seed


# ---- the simulated agents ----------------------------------------------------------------------


@dataclass
class Agent:
    run_id: str
    attempt: int
    node: Node
    llm_style: bool
    """True: tells "waiting" on every wait and "running" on every resume (the LLM loop);
    False: tells "waiting" once, at its first wait (function agents)."""
    pc: int = 0
    busy: bool = True
    """Working: it handles nothing else until it waits or ends (a started run works)."""
    pending: set[str] = field(default_factory=set)
    mail_results: int = 0
    waiting_on: str | None = None
    """What it waits for while not busy: "gather", "collect" or "nap"."""
    timer: bool = False
    """A nap's timer is armed (it fires on its own, at any point)."""
    told_waiting: bool = False
    parked: list[Any] | None = None
    wanting: bool = False
    park_at_wait: bool = False
    """Its start said runs of its key are queued behind it: it parks at its first wait by
    itself and says so with that report (``AgentActor``'s ``_park_at_wait``)."""
    inbox: deque[Any] = field(default_factory=deque)


class World:
    def __init__(self, roots: list[Node], limits: Limits, specs: list[AgentSpec], seed: int):
        self.rng = random.Random(seed)
        self.limits = limits
        self.specs = {s.name: s for s in specs}
        self.store = MemoryStore()
        self.core = SupervisorCore(
            lookup=self.specs.get,
            names=lambda: list(self.specs),
            read_run=self.store.get_run,
            limits=limits,
        )
        self.nodes: dict[str, Node] = {}
        self.agents: dict[str, Agent] = {}
        self.outbox: dict[str, deque[Any]] = {}
        """Messages to the supervisor, per sender (each sender's order is kept)."""
        self.outcomes: dict[str, Outcome] = {}
        self.roots: list[str] = []
        self.log: list[str] = []
        self.ids = 0
        for root in roots:
            self.outbox.setdefault("outside", deque()).append(self.request(root, None, False))

    def request(self, node: Node, parent: Agent | None, background: bool) -> SpawnRequest:
        self.ids += 1
        key = f"n{self.ids}"
        self.nodes[key] = node
        if parent is None:
            self.roots.append(key)
        return SpawnRequest(
            request_id=key,
            run_id=key if parent is None else None,
            agent=node.agent,
            task=key,
            parent_run_id=parent.run_id if parent else None,
            background=background,
            attempt=parent.attempt if parent else 0,
        )

    # -- effects of the supervisor -------------------------------------------------------------

    def apply(self, effects: list[Effect]) -> None:
        for effect in effects:
            match effect:
                case StartRun(record=record, attempt=attempt, park_at_wait=park_at_wait):
                    node = self.nodes[record.task]
                    style = self.rng.random() < 0.5
                    agent = Agent(record.run_id, attempt, node, style, park_at_wait=park_at_wait)
                    self.agents[record.run_id] = agent
                case Tell(run_id=run_id, message=message):
                    agent = self.agents.get(run_id)
                    if agent is not None:  # no actor (queued, ended): dropped, as in actors/
                        agent.inbox.append(message)
                case StopAgent(run_id=run_id):
                    self.agents.pop(run_id, None)
                case TellOutside(message=ChildDone(outcome=outcome)):
                    self.outcomes[outcome.run_id] = outcome

    def tell_supervisor(self, sender: str, message: Any) -> None:
        self.outbox.setdefault(sender, deque()).append(message)

    def supervisor_handles(self, message: Any) -> None:
        """What the supervisor actor does: decide, carry out the writes, then the effects."""
        core = self.core
        decision: Decision
        match message:
            case SpawnRequest():
                decision = core.spawn(message)
                assert decision.reply.error is None, f"refused: {decision.reply.error}"
            case WaitingChanged():
                decision = core.waiting_changed(message)
            case RunFinished():
                decision = core.finished(message)
            case Parked():
                decision = core.parked(message)
            case SlotWanted():
                decision = core.slot_wanted(message)
            case MailRead():
                decision = core.mail_reads((message,))
            case _:
                raise AssertionError(f"unexpected {message!r}")
        with self.store.batch():
            apply_writes(self.store, decision.writes)
        self.apply(decision.effects)

    # -- an agent's steps ----------------------------------------------------------------------

    def work(self, agent: Agent) -> None:
        """A working agent takes its next step: spawns, waits (goes idle) or ends."""
        steps = agent.node.steps
        if agent.pc >= len(steps):
            self.tell_supervisor(
                agent.run_id,
                RunFinished(run_id=agent.run_id, result="done", attempt=agent.attempt),
            )
            del self.agents[agent.run_id]  # the actor stops once it has reported
            return
        kind, arg = steps[agent.pc]
        agent.pc += 1
        if kind == "gather":
            for child in arg:
                request = self.request(child, agent, False)
                agent.pending.add(request.request_id)
                self.tell_supervisor(agent.run_id, request)
            self.wait(agent, "gather")
        elif kind == "bg":
            self.tell_supervisor(agent.run_id, self.request(arg, agent, True))
        elif kind == "collect":
            if agent.mail_results < arg:
                agent.pc -= 1  # collect again when the next result arrives
                self.wait(agent, "collect")
        elif kind == "nap":
            agent.timer = True
            self.wait(agent, "nap")

    def wait(self, agent: Agent, on: str) -> None:
        agent.busy = False
        agent.waiting_on = on
        if agent.llm_style or not agent.told_waiting:
            agent.told_waiting = True
            parks, agent.park_at_wait = agent.park_at_wait, False  # (its first wait only)
            if parks:
                agent.parked = []
            self.tell_supervisor(
                agent.run_id,
                WaitingChanged(
                    run_id=agent.run_id, waiting=True, attempt=agent.attempt, parked=parks
                ),
            )

    def resume(self, agent: Agent) -> None:
        agent.busy = True
        agent.waiting_on = None
        if agent.llm_style:
            self.tell_supervisor(
                agent.run_id,
                WaitingChanged(run_id=agent.run_id, waiting=False, attempt=agent.attempt),
            )

    def receive(self, agent: Agent, message: Any) -> None:
        """What ``AgentActor._one`` does: parking first, then the behaviour."""
        if agent.parked is None:
            if isinstance(message, Park):
                agent.parked = []
                self.tell_supervisor(
                    agent.run_id, Parked(run_id=agent.run_id, attempt=agent.attempt)
                )
            elif not isinstance(message, Unpark):
                self.behave(agent, message)
        elif isinstance(message, Unpark):
            held, agent.parked, agent.wanting = agent.parked, None, False
            for inner in held:
                if agent.run_id not in self.agents:
                    break
                self.receive(agent, inner)
        else:
            agent.parked.append(message)
            if not agent.wanting:
                agent.wanting = True
                self.tell_supervisor(
                    agent.run_id, SlotWanted(run_id=agent.run_id, attempt=agent.attempt)
                )

    def behave(self, agent: Agent, message: Any) -> None:
        match message:
            case SpawnReply(error=error):
                assert error is None, f"refused: {error}"
            case ChildDone(request_id=rid):
                assert rid in agent.pending, f"{agent.run_id}: unexpected outcome {rid}"
                agent.pending.discard(rid)
                if not agent.pending and agent.waiting_on == "gather":
                    self.resume(agent)
            case DeliverMail(mails=mails):
                agent.mail_results += len(mails)
                self.tell_supervisor(
                    agent.run_id,
                    MailRead(
                        run_id=agent.run_id,
                        mail_ids=tuple(m.mail_id for m in mails),
                        attempt=agent.attempt,
                    ),
                )
                if agent.waiting_on == "collect":
                    self.resume(agent)
            case "wake":
                assert agent.waiting_on == "nap"
                self.resume(agent)
            case _:
                raise AssertionError(f"unexpected {message!r}")

    # -- the scheduler -------------------------------------------------------------------------

    def actions(self) -> list[tuple[str, str]]:
        found: list[tuple[str, str]] = [("sup", s) for s, q in self.outbox.items() if q]
        for run_id, agent in self.agents.items():
            if agent.busy:
                found.append(("work", run_id))
            elif agent.inbox:
                found.append(("deliver", run_id))
            if agent.timer:
                found.append(("wake", run_id))
        return found

    def step(self, kind: str, who: str) -> None:
        if kind == "sup":
            self.supervisor_handles(self.outbox[who].popleft())
        elif kind == "work":
            self.work(self.agents[who])
        elif kind == "deliver":
            agent = self.agents[who]
            self.receive(agent, agent.inbox.popleft())
        else:  # a timer fires: the wake goes through the mailbox like any message
            agent = self.agents[who]
            agent.timer = False
            agent.inbox.append("wake")

    def check_limits(self) -> None:
        working = [a for a in self.agents.values() if a.busy]
        counts: Counter[tuple[str, Any]] = Counter()
        for agent in working:
            assert self.core.slots.holds(agent.run_id), f"{agent.run_id} works without a slot"
            state = self.core.runs.get(agent.run_id)
            assert state is not None
            spec = self.specs[state.record.agent]
            counts[("global", None)] += 1
            counts[("agent", spec.name)] += 1
            if spec.tier is not None and spec.tier in self.limits.per_tier:
                counts[("tier", spec.tier)] += 1
            if state.record.parent_run_id is not None:
                counts[("parent", state.record.parent_run_id)] += 1
        for (kind, name), n in counts.items():
            if kind == "global":
                limit = self.limits.max_concurrency
            elif kind == "agent":
                limit = self.limits.per_agent
            elif kind == "tier":
                limit = self.limits.per_tier[name]
            else:
                parent = self.core.runs.get(name)
                assert parent is not None
                limit = self.limits.children_for(parent.spec.max_children)
            assert n <= limit, f"{n} runs working in {kind} {name}, limit {limit}"

    def run(self, max_steps: int = 20_000) -> int:
        for taken in range(max_steps):
            self.check_limits()
            found = self.actions()
            if not found:
                return taken
            self.step(*self.rng.choice(found))
        raise AssertionError("did not settle (livelock?)")

    def describe(self) -> str:
        lines = [f"limits {self.limits}"]
        for state in self.core.runs:
            run_id = state.run_id
            if not state.record.status.terminal:
                agent = self.agents.get(run_id)
                lines.append(
                    f"{run_id} {state.record.agent} {state.record.status} park={state.park}"
                    f" holds={self.core.slots.holds(run_id)}"
                    + (f" busy={agent.busy} inbox={list(agent.inbox)}" if agent else " no actor")
                )
        lines.append(f"queued {self.core.slots.queued()}")
        return "\n".join(lines)


# Two families of 1,000 trees each (one test of 2,000 would run close to the suite's
# per-test timeout on a loaded machine): gathers of foreground children with naps, and trees
# whose runs also start background children and collect their results as mail.
PROPERTY = settings(
    max_examples=1000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)


def check_world(world: tuple[list[Node], Limits, list[AgentSpec], int]) -> None:
    sim = World(*world)
    sim.run()
    unfinished = [r for r in sim.roots if r not in sim.outcomes]
    assert not unfinished, f"deadlock: roots {unfinished} never ended\n{sim.describe()}"
    assert all(o.status is RunStatus.COMPLETED for o in sim.outcomes.values()), sim.outcomes
    assert sim.core.slots.in_flight == 0 and sim.core.slots.queue_length() == 0


@PROPERTY
@given(worlds(FOREGROUND))
def test_gathering_trees_complete_and_working_runs_stay_within_every_limit(
    world: tuple[list[Node], Limits, list[AgentSpec], int],
) -> None:
    check_world(world)


@PROPERTY
@given(worlds(MIXED))
def test_trees_with_background_children_complete_within_every_limit(
    world: tuple[list[Node], Limits, list[AgentSpec], int],
) -> None:
    check_world(world)
