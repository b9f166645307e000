"""A batch of spawns (``spawn_many``, a step's siblings) answers each spawn as admitting them
one at a time would, over many seeded random states: definitions with ``maxDepth``, spawn
rules (``tools``/``disallowedTools``), ``maxChildren``, tiers, token budgets and shared keys;
limits at their edges (a tree full, a queue of one, a per-agent or per-tier cap); several
trees, requesters that ended, stale or any attempts, run ids in use, empty tasks, unknown
agents, bad settings, and several requesters interleaved in one batch.

Why: ``Admission.spawn_all`` asks a requester's later siblings only ``SIBLING_CHECKS``
(``admission_checks``); a check it skips that could answer differently for a later sibling
(a state one admission changes) shows here as a difference. Without threads: the core alone,
seeded, so every run is the same."""

from __future__ import annotations

import random
from typing import Any

from subagents.definitions.spec import AgentSpec
from subagents.messages import RunFinished, SpawnRequest
from subagents.supervision.limits import Limits

from .test_core import Harness

AGENTS = ("lead", "worker", "critic", "deep")


def _specs(rng: random.Random) -> list[AgentSpec]:
    specs = []
    for name in AGENTS:
        kw: dict[str, Any] = {}
        if rng.random() < 0.4:
            kw["max_depth"] = rng.choice([0, 1, 2])
        if rng.random() < 0.3:
            kw["tools"] = tuple(rng.sample(["Agent(worker)", "Agent(critic)", "Read", "Agent"], 2))
        if rng.random() < 0.2:
            kw["disallowed_tools"] = (rng.choice(["Agent(lead)", "Agent(worker)", "Agent"]),)
        if rng.random() < 0.3:
            kw["max_children"] = rng.choice([1, 2, 3])
        if rng.random() < 0.3:
            kw["token_budget"] = rng.choice([100, 1000])
        if rng.random() < 0.2:
            kw["tier"] = rng.choice([1, 2])
        if rng.random() < 0.2:
            kw["shared_context"] = ("k",)
        specs.append(AgentSpec(name=name, description=name, **kw))
    return specs


def _limits(rng: random.Random) -> Limits:
    return Limits(
        max_runs_per_tree=rng.choice([None, 3, 6, 10]),
        max_depth=rng.choice([1, 2, 3, 5]),
        max_children=rng.choice([2, 5, 50]),
        queue_bound=rng.choice([1, 3, 100]),
        max_concurrency=rng.choice([3, 10, 100]),
        per_agent=rng.choice([2, 5, 100]),
        per_tier=rng.choice([{}, {1: 1}, {2: 2}]),
        token_budget=rng.choice([None, 500]),
    )


def _answers(
    seed: int, batched: bool, roots: bool = False
) -> list[tuple[str | None, str | None, bool]]:
    """Seed ``seed``'s state built, then its requests admitted in one batch or one at a
    time: each reply as (run id, named by its place; error; queued). ``roots``: mostly
    roots (``spawn_many``'s batches, told roots grouped), many naming a run id, a third of
    them filed as the runtime files what it checked (``CheckedRoots``)."""
    rng = random.Random(seed)
    h = Harness(_limits(rng), *_specs(rng))
    runs: list[str] = []
    for _ in range(rng.randint(1, 3)):  # a few trees
        reply = h.spawn(rng.choice(["lead", "worker"]), token_budget=rng.choice([None, 300, 5000]))
        if reply.run_id is not None:
            runs.append(reply.run_id)
    for _ in range(rng.randint(0, 6)):  # and their runs, some deeper
        reply = h.spawn(rng.choice(AGENTS), rng.choice(runs), token_budget=rng.choice([None, 300]))
        if reply.run_id is not None:
            runs.append(reply.run_id)
    for run_id in runs:  # some end (a requester that is not running any more)
        if rng.random() < 0.15:
            h.core.finished(RunFinished(run_id=run_id, result="x", attempt=1))
    # an id a request names is one held here (live or ended: refused as in use) or new: the
    # id of a run whose tree was forgotten, ended in the store, is never given again (ids are
    # ``new_id``'s), and the store refuses a new run saved over it (an end is not undone)
    held = [run_id for run_id in runs if h.core.core.runs.get(run_id) is not None]
    reqs = []
    for i in range(rng.randint(2, 30)):
        kw: dict[str, Any] = {"attempt": rng.choice([0, 1, 1, 1, 2])}  # (2: a stale one)
        if rng.random() < (0.4 if roots else 0.1):
            kw["run_id"] = rng.choice([*held, "fresh", "fresh", "other"])
        if rng.random() < 0.2:
            kw["token_budget"] = rng.choice([50, 200, 10000])
        if rng.random() < 0.1:
            kw["share"] = ("k",)
        if rng.random() < 0.1:
            kw["max_retries"] = rng.choice([-1, 2])
        reqs.append(
            SpawnRequest(
                request_id=f"q{i}",
                agent=rng.choice([*AGENTS, "ghost"]),
                task=rng.choice(["t", "t", "t", "", "  "]),
                parent_run_id=None
                if roots and rng.random() < 0.7
                else rng.choice([*runs, None, "nobody"]),
                **kw,
            )
        )
    checked = h.core.core.admission.checked
    for req in reqs:
        if roots and req.parent_run_id is None and rng.random() < 0.3:
            checked.requests[req.request_id] = req
    if batched:
        replies = list(h.core._do(h.core.core.spawn_many(reqs)).reply)
    else:
        replies = [h.core.spawn(req)[0] for req in reqs]
    named = {run_id: f"R{i}" for i, run_id in enumerate(runs)}  # (new ids differ per harness)
    answers = []
    for reply in replies:
        error = reply.error
        for run_id, name in named.items():
            error = error.replace(run_id, name) if error else error
        given = reply.run_id
        place = named.get(given, "new") if given not in (None, "fresh") else given
        answers.append((place, error, reply.queued))
    return answers


def test_a_batch_of_roots_answers_as_one_spawn_at_a_time_over_random_states() -> None:
    """Roots of one agent after the first are asked only ``ROOT_SIBLING_CHECKS``: what they
    skip must answer no differently (a run id an earlier root of the batch took, one in
    use, a bad field of a root not filed)."""
    kinds: set[str] = set()
    for seed in range(200):
        one_by_one, batched = _answers(seed, False, True), _answers(seed, True, True)
        assert batched == one_by_one, f"seed {seed}"
        kinds.update((e or "started").split(" ")[0] for _, e, _ in batched)
    for kind in ("started", "run", "unknown", "the"):  # (admitted, run id, agent, task)
        assert kind in kinds, (kind, sorted(kinds))


def test_a_batch_answers_as_one_spawn_at_a_time_over_random_states() -> None:
    kinds: set[str] = set()
    for seed in range(200):
        one_by_one, batched = _answers(seed, False), _answers(seed, True)
        assert batched == one_by_one, f"seed {seed}"
        kinds.update(
            (e or ("queued" if q else "started")).split(":")[0][:20] for _, e, q in batched
        )
    # the states reach every way a spawn is answered (else the comparison proves little)
    for kind in (
        *("started", "queued", "spawn rule", "depth limit", "max_runs_per_tree", "shared"),
        *("requesting run", "run id", "queue bound", "unknown agent", "the task for"),
    ):
        assert any(k.startswith(kind) for k in kinds), (kind, sorted(kinds))
